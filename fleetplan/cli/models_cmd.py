"""``fleetplan models``: inspect model configs, their weight and KV sizes, and a GPU's KV budget.

Also defines ``parallelism_options``: the vLLM-spelled sharding flags (declared in ``options``) as one
``Parallelism`` argument.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from fleetplan.cli.errors import FleetplanGroup
from fleetplan.cli.options import (
    KV_CACHE_DTYPES,
    block_size_option,
    data_parallel_option,
    enable_expert_parallel_option,
    format_option,
    gpu_memory_utilization_option,
    gpu_option,
    gpu_profiles_option,
    kv_cache_dtype_option,
    max_num_batched_tokens_option,
    max_num_seqs_option,
    pipeline_parallel_option,
    tensor_parallel_option,
    weight_dtype_option,
)
from fleetplan.cli.tables import emit_table, emit_tables
from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, ModelConfig, WeightScaling, dtype, list_models, load_model
from fleetplan.perf.kv_budget import (
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    KvBudget,
    kv_budget,
    weight_bytes_per_gpu,
)
from fleetplan.perf.parallelism import Parallelism
from fleetplan.units import BYTES_PER_GIB

__all__ = ["models", "parallelism_options"]


def parallelism_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add vLLM's sharding flags; the command receives one ``parallelism: Parallelism`` argument.

    ``--enable-expert-parallel`` sets the expert-parallel size to TP x DP, as vLLM does.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, tensor_parallel_size: int, pipeline_parallel_size: int, data_parallel_size: int,
                enable_expert_parallel: bool, **kwargs: Any) -> Any:
        par = Parallelism.vllm(tensor_parallel_size, pipeline_parallel_size, data_parallel_size,
                               enable_expert_parallel)
        return func(*args, parallelism=par, **kwargs)

    for decorator in reversed((
        tensor_parallel_option(help="GPUs sharing each layer (attention heads split), as in vLLM."),
        pipeline_parallel_option,
        data_parallel_option,
        enable_expert_parallel_option,
    )):
        wrapper = decorator(wrapper)
    return wrapper


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / BYTES_PER_GIB:,.1f}"


def _billions(n: int) -> str:
    return f"{n / 1e9:,.1f}B"


def _experts(m: ModelConfig) -> str:
    if not m.is_moe:
        return "-"
    shared = f" + {m.n_shared_experts} shared" if m.n_shared_experts else ""
    return f"{m.n_experts_per_token} of {m.n_experts}{shared}"


_GROUP_EXAMPLES = """\b
Examples:
  fleetplan models list
  fleetplan models show llama-3.1-70b
  fleetplan models show llama-3.1-70b --gpu a100-80gb --tensor-parallel-size 4
"""
_LIST_EXAMPLES = """\b
Examples:
  fleetplan models list
  fleetplan models list --format markdown
"""
_SHOW_EXAMPLES = """\b
Examples:
  fleetplan models show qwen3-30b-a3b
  fleetplan models show llama-3.1-70b --gpu h100 --tensor-parallel-size 2 --kv-cache-dtype fp8
  fleetplan models show deepseek-v3 --gpu h200 -tp 8 --weight-dtype fp8 --enable-expert-parallel
  fleetplan models show ./my-model/config.json --gpu l40s
  fleetplan models show llama-3.1-8b --gpu h100 --format json
"""


@click.group(cls=FleetplanGroup, epilog=_GROUP_EXAMPLES)
def models() -> None:
    """Inspect model configs: shape, parameters, weight and KV-cache sizes, KV budget on a GPU."""


@models.command("list", epilog=_LIST_EXAMPLES)
@format_option
def list_cmd(fmt: str) -> None:
    """One row per bundled model (config.json under models/)."""
    table = Table(title="Bundled models (weights in the checkpoint's dtype; KV bytes per token over all layers, "
                  "bf16, unsharded)")
    headers = ("name", "attn", "layers", "hidden", "heads/kv", "experts", "params", "active", "dtype", "GiB",
               "KV B/tok")
    for header in headers:
        table.add_column(header, justify="left" if header in ("name", "attn", "dtype") else "right", no_wrap=True)
    for key in list_models():
        m = load_model(key)
        experts = f"{m.n_experts_per_token}/{m.n_experts}" + (f"+{m.n_shared_experts}" if m.n_shared_experts
                                                                 else "") if m.is_moe else "-"
        table.add_row(
            key, _attention(m), str(m.n_layers), str(m.hidden_size), f"{m.n_heads}/{m.n_kv_heads}", experts,
            _billions(m.n_params()), _billions(m.n_active_params()), _weights(m), _gib(m.weight_bytes()),
            f"{m.kv_bytes_per_token():,}",
        )
    emit_table(table, fmt)


def _attention(m: ModelConfig) -> str:
    """``gqa``/``mla`` plus the hybrid layers: ``gqa+swa``, ``gqa+linear``."""
    mix = m.layers
    return m.attention.value + ("+linear" if mix.n_linear_layers else "+swa" if mix.n_window_layers else "")


def _weights(m: ModelConfig) -> str:
    """The checkpoint's weight type and scaling: ``fp8 block 128x128``, ``mxfp4 group 32``, ``bf16``."""
    if m.weight_block_size is not None:
        return f"{m.default_weight_dtype.value} block {m.weight_block_size[0]}x{m.weight_block_size[1]}"
    if m.weight_group_size:
        return f"{m.default_weight_dtype.value} group {m.weight_group_size}"
    extra = "" if m.weight_scaling is WeightScaling.NONE else f" {m.weight_scaling.value}"
    return m.default_weight_dtype.value + extra


def _shape_table(m: ModelConfig) -> Table:
    table = Table(title=f"{m.name} ({m.attention.value.upper()}{', MoE' if m.is_moe else ''})")
    table.add_column("field")
    table.add_column("value", justify="right")
    rows = [("layers", m.n_layers), ("hidden size", m.hidden_size), ("attention heads", m.n_heads),
            ("KV heads", m.n_kv_heads), ("head dim", m.head_dim), ("vocab", m.vocab_size)]
    if m.attention.value == "mla":
        rows += [("kv_lora_rank", m.kv_lora_rank), ("qk_rope_head_dim", m.qk_rope_head_dim),
                 ("q_lora_rank", m.q_lora_rank), ("v_head_dim", m.v_head_dim)]
    if m.index_head_dim:
        rows.append(("sparse-attention indexer", f"{m.index_n_heads} heads x {m.index_head_dim}, top {m.index_topk:,}"))
    mix = m.layers
    if mix.n_window_layers:
        sized = "sized as full" if mix.window_counts_as_full else "not in KV/token"
        rows.append(("windowed layers", f"{mix.n_window_layers} x {mix.attention_window_tokens:,} tokens ({sized})"))
    if mix.n_linear_layers:
        rows.append(("linear-attention layers", f"{mix.n_linear_layers} (state {_gib(m.linear_state_bytes_per_seq())} "
                                                f"GiB/seq)"))
    if m.is_moe:
        rows += [("experts", _experts(m)), ("expert width", m.moe_intermediate_size),
                 ("dense layers", f"{m.n_dense_layers} x width {m.intermediate_size}")]
    else:
        rows.append(("FFN width", m.intermediate_size))
    rows += [("tied embeddings", "yes" if m.tie_word_embeddings else "no"),
             ("checkpoint weights", _weights(m) + (f" ({m.quant_method})" if m.quant_method else "")),
             ("params total", f"{m.n_params():,}"), ("params active / token", f"{m.n_active_params():,}"),
             ("matmul GFLOP / token", f"{m.flops_per_token_dense() / 1e9:,.1f}")]
    if m.n_mtp_layers:
        rows.append(("MTP layers (not in total)", f"{m.n_mtp_layers} ({_billions(m.mtp_params())} params)"))
    rows.append(("chat template tokens", "not known" if m.chat_template_tokens is None else m.chat_template_tokens))
    for name, value in rows:
        table.add_row(name, str(value))
    return table


def _sizes_table(m: ModelConfig, par: Parallelism) -> Table:
    sharded = par.gpus_per_replica > 1
    table = Table(title="Weights and KV cache per dtype")
    for header in ("dtype", "weights GiB", *((f"per GPU at {par.flags()}",) if sharded else ()), "KV B/token"):
        table.add_column(header, justify="left" if header == "dtype" else "right")
    for d in Dtype:
        per_gpu = (_gib(max(weight_bytes_per_gpu(m, par, d))),) if sharded else ()
        kv = f"{m.kv_bytes_per_token(d):,}" if d.value in KV_CACHE_DTYPES.values() else "-"  # no int4/mxfp4 KV cache
        table.add_row(d.value, _gib(m.weight_bytes(d)), *per_gpu, kv)
    return table


def _budget_table(b: KvBudget) -> Table:
    table = Table(title=f"KV-cache budget: {b.model_name} on {b.gpu_name} at {b.parallelism.flags()} "
                  f"(weights {b.weight_dtype.value}, KV {b.kv_dtype.value})")
    table.add_column("per GPU")
    table.add_column("value", justify="right")
    rows = [
        ("HBM", f"{_gib(b.hbm_bytes)} GiB"),
        (f"usable (x {b.gpu_memory_utilization:g})", f"{_gib(b.usable_bytes)} GiB"),
        (f"weights ({b.stage_layers} layers{', MXFP4 as ' + b.mxfp4_backend + ' loads it' if b.mxfp4_backend else ''})",
         f"-{_gib(b.weight_bytes)} GiB"),
        ("activation peak", f"-{_gib(b.activation_peak_bytes)} GiB"),
        ("CUDA graph pool", f"-{_gib(b.cudagraph_pool_bytes)} GiB"),
        ("comm workspace", f"-{_gib(b.comm_workspace_bytes)} GiB"),
        *([(f"per-sequence state ({b.state_reserved_bytes // b.state_bytes_per_seq} sequences)",
            f"-{_gib(b.state_reserved_bytes)} GiB")] if b.state_reserved_bytes else []),
        *([("sliding-window KV per running request", f"{b.window_tokens_per_seq} tokens")]
          if b.window_tokens_per_seq else []),
        ("KV cache available", f"{_gib(b.kv_available_bytes)} GiB"),
        ("KV bytes / token", f"{b.kv_bytes_per_token:,}"),
        (f"KV blocks ({b.block_size_tokens} tokens)", f"{b.kv_blocks_per_gpu:,}"),
        ("max tokens per DP rank", f"{b.max_tokens_per_rank:,}"),
        (f"KV blocks per replica ({b.parallelism.gpus_per_replica} GPUs)", f"{b.kv_blocks_per_replica:,}"),
        ("max tokens per replica", f"{b.max_tokens:,}"),
    ]
    for row in rows:
        table.add_row(*row)
    return table


@models.command("show", epilog=_SHOW_EXAMPLES)
@click.argument("name")
@gpu_option(help="GPU name or alias (see `fleetplan gpus list`): print the KV budget.")
@parallelism_options
@weight_dtype_option(default=None, show_default=False,
                     help="Weight storage type for the budget [default: the checkpoint's, from quantization_config].")
@kv_cache_dtype_option
@gpu_memory_utilization_option
@block_size_option
@max_num_batched_tokens_option(default=DEFAULT_MAX_NUM_BATCHED_TOKENS, show_default=True,
                               help="Tokens per step in the profiling run (sizes the activation peak).")
@max_num_seqs_option(default=DEFAULT_MAX_NUM_SEQS, show_default=True,
                     help="Sequences per step (sizes the logits buffer).")
@gpu_profiles_option
@format_option
def show_cmd(name: str, gpu: str | None, parallelism: Parallelism, weight_dtype: str | None, kv_cache_dtype: str,
             gpu_memory_utilization: float, block_size: int, max_num_batched_tokens: int, max_num_seqs: int,
             gpu_profiles: Path | None, fmt: str) -> None:
    """Shape, parameter counts, weight and KV sizes of one model (bundled NAME or a config.json path);
    with --gpu, the per-GPU memory split and KV-cache capacity at the given sharding."""
    model = load_model(name)
    parallelism.check_model(model)
    budget = None
    weights = dtype(weight_dtype) if weight_dtype else model.default_weight_dtype
    if gpu is not None:
        profile = load_catalog(gpu_profiles).get(gpu)
        budget = kv_budget(
            model, profile, parallelism, weight_dtype=weights,
            kv_dtype=dtype(KV_CACHE_DTYPES[kv_cache_dtype]),
            gpu_memory_utilization=gpu_memory_utilization, block_size_tokens=block_size,
            max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
        )
    tables = [_shape_table(model), _sizes_table(model, parallelism)]
    if budget is not None:
        tables.append(_budget_table(budget))
    emit_tables(tables, fmt)
