"""Which pools ``aiconfigurator-core``'s measured tables cover, as a ``MeasuredKey``.

A pool is covered when every one of these has a measured counterpart (else ``coverage`` returns the
reason, which the roofline fallback's label carries):

* GPU -> AIConfigurator system (``SYSTEM_OF_GPU``): the systems with per-operator data in
  aiconfigurator-core 0.12.0 (``aiconfigurator_core/systems/data/<system>/``).  ``l4`` is listed by
  AIConfigurator but ships no data; MI300X, A10G, H20, H800 and A100-40GB have no system;
* engine -> AIConfigurator backend (``BACKEND_OF_ENGINE``): vLLM, SGLang, TensorRT-LLM (no LMDeploy);
* model -> an AIConfigurator model config of the same shape (``match_model``: layers, hidden size, heads,
  KV heads, FFN and expert sizes, experts, top-k, vocabulary), read from
  ``aiconfigurator_core/model_configs/*_config.json`` (HuggingFace ``config.json`` files);
* parallelism: every sharding of ``fleetplan.perf.parallelism`` -- tensor parallel, pipeline stages
  (AIConfigurator ``pp_size``: the step's latency through every stage plus the activation sends, as
  ``fleetplan.perf.predictor`` times it) and, for MoE models, attention data parallelism
  (``attention_dp_size``: each rank's step for its own batch, the experts seeing every rank's tokens, as
  the predictor's rank step), with the routed experts split ``moe_tp`` ways and spread over ``moe_ep``
  GPUs (``Parallelism.ffn_tp``, ``ffn_ep``: vLLM `enable_expert_parallel`, SGLang `ep_size`);
  attention data parallelism of a dense model is not covered (vLLM runs it as independent replicas);
* weights BF16 or FP8 (``Fp8Scheme``: per-tensor W8A8 ``fp8`` or 128x128 block-scaled ``fp8_block``,
  AIConfigurator's GEMM quant modes), KV cache BF16 or FP8; INT4 is not covered.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from pathlib import Path

from fleetplan.models import Dtype, ModelConfig
from fleetplan.names import lookup

__all__ = ["BACKEND_OF_ENGINE", "SYSTEM_OF_GPU", "Fp8Scheme", "MeasuredKey", "coverage", "fp8_scheme",
           "match_model"]

#: fleetplan GPU name (``gpu_profiles/``) -> AIConfigurator system (``systems/<system>.yaml``).
SYSTEM_OF_GPU = {"H100-SXM": "h100_sxm", "H100-PCIe": "h100_pcie", "H200": "h200_sxm", "B200": "b200_sxm",
                 "A100-80GB": "a100_sxm", "L40S": "l40s"}
#: fleetplan engine profile name -> AIConfigurator backend.
BACKEND_OF_ENGINE = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm"}
_KV_QUANT = {Dtype.BF16: "bfloat16", Dtype.FP8: "fp8"}
#: Model-shape fields compared with an AIConfigurator config: fleetplan field -> HuggingFace keys (first present).
_SHAPE_KEYS = {
    "n_layers": ("num_hidden_layers",),
    "hidden_size": ("hidden_size",),
    "n_heads": ("num_attention_heads",),
    "n_kv_heads": ("num_key_value_heads", "num_attention_heads"),
    "intermediate_size": ("intermediate_size",),
    "vocab_size": ("vocab_size",),
    "n_experts": ("n_routed_experts", "num_experts", "num_local_experts"),
    "n_experts_per_token": ("num_experts_per_tok",),
    "moe_intermediate_size": ("moe_intermediate_size",),
}
_VARIANT_MARKS = ("fp8", "nvfp4", "instruct", "-vl-", "perTensor")  # prefer the plain checkpoint of a shape


class Fp8Scheme(enum.Enum):
    """How FP8 weights are scaled (AIConfigurator GEMM quant mode)."""

    PER_TENSOR = "fp8"  # W8A8, one scale per tensor (e.g. nvidia/Llama-3.1-70B-Instruct-FP8)
    BLOCK = "fp8_block"  # 128x128 weight blocks (e.g. Qwen/Qwen3-32B-FP8, deepseek-ai/DeepSeek-V3)


def fp8_scheme(name: str | Fp8Scheme) -> Fp8Scheme:
    """``Fp8Scheme`` by value (``"fp8"``, ``"fp8_block"``); an unknown name lists the known ones."""
    return lookup(Fp8Scheme, "FP8 scheme", name)


@dataclass(frozen=True)
class MeasuredKey:
    """One covered pool in AIConfigurator's terms (the arguments of its engine compile)."""

    aic_model: str  # HuggingFace id of the AIConfigurator model config
    system: str
    backend: str
    tp: int  # attention tensor-parallel size (``Parallelism.attn_tp``)
    moe_tp: int | None  # None for a dense model
    moe_ep: int | None
    gemm_quant: str
    kv_quant: str
    pp: int = 1  # pipeline stages
    attention_dp: int = 1  # attention data-parallel ranks (``Parallelism.attn_dp``; MoE models only)

    @property
    def is_moe(self) -> bool:
        return self.moe_tp is not None

    def slug(self) -> str:
        """A file-name-safe identity (the disk cache's key, with the package version)."""
        moe = "" if not self.is_moe else f"-moetp{self.moe_tp}-ep{self.moe_ep}"
        stages = "".join(f"-{name}{n}" for name, n in (("pp", self.pp), ("dp", self.attention_dp)) if n > 1)
        return (f"{self.system}-{self.backend}-{self.aic_model.replace('/', '--')}-tp{self.tp}{stages}{moe}-"
                f"{self.gemm_quant}-kv{self.kv_quant}")


def _shape_of_config(doc: dict) -> dict[str, int]:
    text = doc.get("text_config") if isinstance(doc.get("text_config"), dict) else doc
    out = {}
    for name, keys in _SHAPE_KEYS.items():
        value = next((text[k] for k in keys if isinstance(text.get(k), int)), 0)
        out[name] = int(value)
    if out["n_experts"] and not out["moe_intermediate_size"]:  # Mixtral: experts of the dense FFN's size
        out["moe_intermediate_size"] = out["intermediate_size"]
    return out


def _model_shape(model: ModelConfig) -> dict[str, int]:
    return {name: int(getattr(model, name)) for name in _SHAPE_KEYS}


def _unused_fields(model: ModelConfig) -> tuple[str, ...]:
    """Fields a config may state but ``model`` does not use: the expert fields of a dense model, the dense FFN
    size of a MoE model without dense layers (HuggingFace configs keep a value there)."""
    if not model.is_moe:
        return ("n_experts", "n_experts_per_token", "moe_intermediate_size")
    return ("intermediate_size",) if model.n_dense_layers == 0 else ()


def match_model(model: ModelConfig, configs_dir: Path) -> str | None:
    """The HuggingFace id of the AIConfigurator config in ``configs_dir`` with ``model``'s shape (module
    docstring; fields the model does not use are not compared), the plain checkpoint preferred over
    quantised/instruct variants, then an id containing ``model.name``; None when none matches."""
    want = _model_shape(model)
    unused = _unused_fields(model)
    found = []
    for path in sorted(configs_dir.glob("*_config.json")):
        if path.name.endswith("_hf_quant_config.json"):
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        shape = _shape_of_config(doc)
        if all(shape[k] == v for k, v in want.items() if k not in unused):
            found.append(path.name.removesuffix("_config.json").replace("--", "/", 1))
    if not found:
        return None
    name = model.name.lower()
    return min(found, key=lambda hf: (any(m.lower() in hf.lower() for m in _VARIANT_MARKS),
                                      name not in hf.lower(), hf))


def coverage(model: ModelConfig, gpu_name: str, engine: str, par, weight_dtype: Dtype, kv_dtype: Dtype,
             scheme: Fp8Scheme, configs_dir: Path) -> MeasuredKey | str:
    """The ``MeasuredKey`` of a pool, or the reason the measured tables do not cover it (module docstring).
    ``par`` is a ``fleetplan.perf.parallelism.Parallelism``."""
    system = SYSTEM_OF_GPU.get(gpu_name)
    if system is None:
        return f"no measured system for {gpu_name}"
    backend = BACKEND_OF_ENGINE.get(engine)
    if backend is None:
        return f"no measured data for engine {engine}"
    if par.attn_dp > 1 and not model.is_moe:
        return f"{par.flags()}: data-parallel attention of a dense model not covered"
    if weight_dtype is Dtype.BF16:
        gemm = "bfloat16"
    elif weight_dtype is Dtype.FP8:
        gemm = scheme.value
    else:
        return f"{weight_dtype.value} weights not covered"
    if kv_dtype not in _KV_QUANT:
        return f"{kv_dtype.value} KV cache not covered"
    aic_model = match_model(model, configs_dir)
    if aic_model is None:
        return f"no measured model config of {model.name}'s shape"
    moe_tp = moe_ep = None
    if model.is_moe:  # the experts span a stage's tp_attn x dp_attn GPUs (Frontier eq. 1, Parallelism)
        moe_tp, moe_ep = int(par.ffn_tp), int(par.ffn_ep)
    return MeasuredKey(aic_model, system, backend, int(par.attn_tp), moe_tp, moe_ep, gemm, _KV_QUANT[kv_dtype],
                       pp=int(par.pp), attention_dp=int(par.attn_dp))
