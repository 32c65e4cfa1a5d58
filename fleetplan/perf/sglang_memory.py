"""SGLang's memory accounting: what ``mem_fraction_static`` means and the value SGLang picks when it is not given.

vLLM budgets its KV cache as ``gpu_memory_utilization`` of the GPU minus everything it profiles (weights, the
activation peak, non-torch memory; ``fleetplan.perf.kv_budget``).  SGLang's fraction means something else:
``mem_fraction_static`` is the share of the GPU for the weights *and* the KV pool, and the rest, ``1 -
mem_fraction_static``, is left for activations and CUDA graphs.  Its model runner sizes the pool from the memory
still free once the weights are loaded (``ModelRunner.profile_max_num_token``, sgl-project/sglang
``python/sglang/srt/model_executor/model_runner.py``):

    rest_bytes     = available_after_weights - total_bytes * (1 - mem_fraction_static)
    kv_pool_bytes  = total_bytes * mem_fraction_static - weight_bytes - buffers allocated before it (NCCL, ...)

so neither the activation peak nor the graph pool comes off the KV pool (they live in the reserve).

When ``mem_fraction_static`` is not given, ``ServerArgs`` derives it from the GPU's memory ``M`` (MiB, as the
driver reports it) and the parallel sizes, ``mem_fraction_static = round((M - reserved) / M, 3)``, with
``reserved`` (MiB) by release:

* v0.5.3 and later (sgl-project/sglang PR #10975, general heuristics for the default of ``mem_fraction_static``,
  opened 2025-09-27; ``ServerArgs._handle_gpu_memory_settings``)::

      reserved = 512 + 1.5 max(chunked_prefill_size, 2048) + 2 cuda_graph_max_bs + 1024 tp_size pp_size / 8
                 [+ 3 cuda_graph_max_bs dp_size (+ 1.5 cuda_graph_max_bs dp_size above 300) with DP attention]
      reserved = max(reserved, 10240) when M > 60 GiB;   + 2048 with EAGLE / MTP drafts

  where ``chunked_prefill_size`` is the server's (before DP attention divides it among its ranks) and
  ``cuda_graph_max_bs`` is set by the GPU's memory in the same chain as the chunk (``SGLANG_MEMORY_TIERS``: under
  35 GiB 2,048 tokens and 24 / 80 graphs below / from TP 4, under 60 GiB 4,096 and 32 / 160, under 160 GiB
  8,192 and 256 / 512, else 16,384 and 512).  H100 (80 GiB) at TP 1: 512 + 12,288 + 512 + 128 = 13,440 MiB,
  ``mem_fraction_static`` 0.836; H200 (141 GiB) at TP 8: 14,848 MiB, 0.897; at TP 8 with ``dp_size`` 8 and DP
  attention 33,280 MiB, 0.770.  Releases from v0.5.10 on also reserve 8 MiB per piecewise-graph capture size
  when piecewise CUDA graphs are on (at most about 0.5 GiB); not added here.
* v0.4.7 through v0.5.2 (PR #7054, simplified heuristics for ``mem_fraction_static``, merged 2025-06-10, taken as
  first in v0.4.7, released that month; ``ServerArgs.__post_init__``, "_handle_mem_fraction_static")::

      reserved = (2.8 + tp pp / 10) GiB under 35 GiB,  (9.5 + tp pp / 2) GiB under 90 GiB,
                 (12 + tp pp / 2) GiB under 160 GiB,   32 GiB above;   + 4 GiB with DP attention, + 2 GiB with drafts

* earlier releases: a table by TP alone, ``mem_fraction_static`` 0.79 from TP 16, 0.81 from TP 8, 0.85 from TP 4,
  0.87 from TP 2, else 0.88 (``ServerArgs.__post_init__`` of the v0.4.4-v0.4.6 line, "Set mem fraction static,
  which depends on the tensor parallelism size").  The release boundaries come from the PRs' merge dates and the
  releases that followed them, so a build cut from main between releases may sit on the other side.

``M`` is the catalog's HBM in GiB x 1024 (the driver reports slightly less: 81,559 MiB on an H100 SXM against
81,920, 0.4 %).  SGLang's default chunk is also where the scheduler's token budget comes from
(``sglang_chunked_prefill_tokens``; ``fleetplan.bench.instance``).
"""

from __future__ import annotations

import math

from fleetplan.errors import ConfigError
from fleetplan.hardware import GpuProfile
from fleetplan.perf.engine_version import release_of
from fleetplan.perf.parallelism import Parallelism

__all__ = [
    "SGLANG_GENERAL_RESERVE_SINCE",
    "SGLANG_MEMORY_RESERVE_SINCE",
    "SGLANG_MEMORY_TIERS",
    "SGLANG_TP_FRACTIONS",
    "sglang_chunked_prefill_tokens",
    "sglang_cuda_graph_max_bs",
    "sglang_mem_fraction_static",
    "sglang_reserved_mib",
]

#: The first release that derives the reserve from the chunk and the graph batch (PR #10975); earlier releases use
#: the per-memory table of PR #7054 (module docstring).
SGLANG_GENERAL_RESERVE_SINCE = (0, 5, 3)
#: The first release with PR #7054's per-memory reserve; earlier releases take ``SGLANG_TP_FRACTIONS``.
SGLANG_MEMORY_RESERVE_SINCE = (0, 4, 7)
#: ``(from TP, mem_fraction_static)`` of the releases before ``SGLANG_MEMORY_RESERVE_SINCE`` (module docstring).
SGLANG_TP_FRACTIONS = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))

#: ``(below GiB, chunked_prefill_size, cuda_graph_max_bs below TP 4, from TP 4)``: ServerArgs' chain by GPU memory
#: (sgl-project/sglang python/sglang/srt/server_args.py ``_handle_gpu_memory_settings``, v0.5: "< 35 GB: A10, L40,
#: 4090", "< 60 GB: A100 (40GB), L40", "< 90 GB: H100, A100", "< 160 GB: H20, H200", else "B200, MI300").
SGLANG_MEMORY_TIERS = ((35.0, 2048, 24, 80), (60.0, 4096, 32, 160), (90.0, 8192, 256, 512),
                       (160.0, 8192, 256, 512), (math.inf, 16384, 512, 512))

_MIB_PER_GIB = 1024


def _tier(gpu: GpuProfile) -> tuple[float, int, int, int]:
    return next(t for t in SGLANG_MEMORY_TIERS if gpu.hbm_gib < t[0])


def _check_ranks(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name}={value!r} must be an integer >= 1", param=name, value=value)


def sglang_chunked_prefill_tokens(gpu: GpuProfile, dp_attention_ranks: int = 1) -> int:
    """SGLang's default ``chunked_prefill_size`` of one scheduler on ``gpu``: the server's
    (``SGLANG_MEMORY_TIERS``) floor-divided by ``dp_attention_ranks`` under ``enable_dp_attention``.

    With data-parallel attention every one of the ``dp_size`` ranks runs its own scheduler, and ``ServerArgs``
    divides the server's budget among them after setting its default from the GPU's memory
    (``chunked_prefill_size = chunked_prefill_size // dp_size``, logged as "DP attention is enabled. The chunked
    prefill size is adjusted to ..."; sgl-project/sglang ``python/sglang/srt/server_args.py``,
    ``ServerArgs._handle_data_parallelism``, the same rule from v0.4 through v0.5): 8,192 // 8 = 1,024 tokens a
    rank on an H200 at ``dp_size`` 8.  A given ``chunked_prefill_size`` is the server's too, divided alike."""
    _check_ranks("dp_attention_ranks", dp_attention_ranks)
    return max(_tier(gpu)[1] // dp_attention_ranks, 1)


def sglang_cuda_graph_max_bs(gpu: GpuProfile, tp_size: int) -> int:
    """SGLang's default ``cuda_graph_max_bs`` on ``gpu`` at ``tp_size`` GPUs a server (``SGLANG_MEMORY_TIERS``)."""
    _check_ranks("tp_size", tp_size)
    _, _, small_tp, large_tp = _tier(gpu)
    return small_tp if tp_size < 4 else large_tp


def sglang_reserved_mib(gpu: GpuProfile, par: Parallelism, *, version: str | None = None,
                        chunked_prefill_tokens: int | None = None, speculative: bool = False) -> float:
    """MiB SGLang leaves outside ``mem_fraction_static`` by default (module docstring) for a server sharded as
    ``par`` on ``gpu`` at release ``version`` (None: a current one; from ``SGLANG_MEMORY_RESERVE_SINCE``, the
    releases that derive a reserve), with the server's ``chunked_prefill_tokens`` (None: its default by memory)
    and EAGLE / MTP drafts or not."""
    tp_pp = par.gpus_per_replica
    dp_attention = par.attn_dp > 1
    gpu_mib = gpu.hbm_gib * _MIB_PER_GIB
    if version is not None and release_of(version) < SGLANG_GENERAL_RESERVE_SINCE:
        gib = gpu.hbm_gib
        base = (2.8 + tp_pp / 10) if gib < 35 else (9.5 + tp_pp / 2) if gib < 90 else \
            (12 + tp_pp / 2) if gib < 160 else 32.0
        return (base + (4.0 if dp_attention else 0.0) + (2.0 if speculative else 0.0)) * _MIB_PER_GIB
    chunk = chunked_prefill_tokens if chunked_prefill_tokens is not None else _tier(gpu)[1]
    _check_ranks("chunked_prefill_tokens", chunk)
    graphs = sglang_cuda_graph_max_bs(gpu, par.gpus_per_replica // par.pp)
    reserved = 512 + 1.5 * max(chunk, 2048) + 2 * graphs + tp_pp / 8 * _MIB_PER_GIB
    if dp_attention:
        reserved += 3 * graphs * par.attn_dp + (1.5 * graphs * par.attn_dp if graphs > 300 else 0.0)
    if gpu_mib > 60 * _MIB_PER_GIB:
        reserved = max(reserved, 10 * _MIB_PER_GIB)
    return reserved + (2 * _MIB_PER_GIB if speculative else 0.0)


def sglang_mem_fraction_static(gpu: GpuProfile, par: Parallelism, *, version: str | None = None,
                               chunked_prefill_tokens: int | None = None, speculative: bool = False) -> float:
    """SGLang's default ``mem_fraction_static``: ``round((M - reserved) / M, 3)``, or the TP table of releases
    before ``SGLANG_MEMORY_RESERVE_SINCE`` (module docstring)."""
    if version is not None and release_of(version) < SGLANG_MEMORY_RESERVE_SINCE:
        tp_size = par.gpus_per_replica // par.pp
        return next(fraction for from_tp, fraction in SGLANG_TP_FRACTIONS if tp_size >= from_tp)
    gpu_mib = gpu.hbm_gib * _MIB_PER_GIB
    reserved = sglang_reserved_mib(gpu, par, version=version, chunked_prefill_tokens=chunked_prefill_tokens,
                                   speculative=speculative)
    fraction = round((gpu_mib - reserved) / gpu_mib, 3)
    if not 0 < fraction <= 1:
        raise ConfigError(f"SGLang's default mem_fraction_static on {gpu.name} at {par.flags()} is {fraction:g}: "
                          f"its reserve ({reserved:.0f} MiB) leaves nothing of {gpu_mib:.0f} MiB; give "
                          "`gpu_memory_utilization` (SGLang's mem_fraction_static) explicitly",
                          param="gpu_memory_utilization", value=fraction)
    return fraction
