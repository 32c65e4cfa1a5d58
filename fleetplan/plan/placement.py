"""Serving a chosen model on each catalog GPU: parallelism, constants, step model.

For a model (HuggingFace ``config.json``) and a GPU, every tensor-parallel size the
model's heads allow (up to ``max_tp``) whose weights, activations and KV cache fit
(``fleetplan.perf.kv_budget``) is a placement, unless the user fixed the parallelism; the
planner sweeps them as if they were GPU types ("H100-SXM tp2", "H100-SXM tp4", ...), because
a larger TP group costs more GPUs but holds far more KV cache, and which is cheaper per
request depends on the workload.  One serving instance is ``par.gpus_per_replica`` GPUs, and:

* the analytical phase uses ``ServingConstants`` derived from the roofline predictor
  (``fleetplan.perf.derive``: W, H at 8K context, KV blocks of the replica, chunk), in place
  of the core paper's three hand-calibrated Llama-3-70B profiles;
* the simulator runs the operator-level ``StepTimePredictor`` itself for that GPU.

Where NVIDIA ``aiconfigurator-core`` is installed and its measured tables cover the placement (GPU, model,
parallelism, dtypes; vLLM's tables), the measured step model (``fleetplan.perf.measured``) is its step model
in both phases, W and H re-derived from it as below; its ``source`` names the tables.

A calibrated profile (``perf.calibrate``) replaces the predictor of the placement
it was calibrated for (same GPU, parallelism and storage types; ``calibrate_placements``): its
step model in both phases, and W, H of its serving constants re-derived from the profile by
``perf.derive.linear_constants`` (what the paper's eqs. 3-5 and the pdd/afd screen read).

Costs count every GPU of an instance (``PoolPlan.gpus_per_instance``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from fleetplan.errors import ConfigError, FleetplanError
from fleetplan.hardware import GpuProfile
from fleetplan.models import Dtype, ModelConfig
from fleetplan.perf.calibrate import CalibratedStepModel
from fleetplan.perf.derive import derive_serving_constants, linear_constants
from fleetplan.perf.kv_budget import DEFAULT_MAX_NUM_SEQS
from fleetplan.perf.measured import measured_step_model
from fleetplan.perf.parallelism import Parallelism, valid_tensor_parallel_sizes
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.perf.seam import StepModel

#: Largest tensor-parallel size tried automatically (one 8-GPU node).
DEFAULT_MAX_TP = 8


@dataclass(frozen=True)
class ModelPlacement:
    """``model`` served on ``gpu`` (whose ``serving`` constants are the derived ones)."""

    model: ModelConfig
    gpu: GpuProfile
    parallelism: Parallelism
    predictor: StepTimePredictor
    calibrated: CalibratedStepModel | None = None  # a profile fitted to this placement's measured steps

    @property
    def gpus_per_instance(self) -> int:
        return self.parallelism.gpus_per_replica

    @property
    def step_model(self) -> StepModel:
        """The calibrated profile when there is one, else the operator-level predictor."""
        return self.calibrated if self.calibrated is not None else self.predictor

    def matches(self, profile: CalibratedStepModel) -> bool:
        """``profile`` was calibrated for this model on this GPU, parallelism and storage types."""
        p = self.predictor
        return (profile.model == self.model.name and profile.gpu == p.gpu.name
                and profile.parallelism == self.parallelism.flags() and profile.weight_dtype == p.weight_dtype.value
                and profile.kv_dtype == p.kv_dtype.value)


def variant_name(gpu: GpuProfile, par: Parallelism) -> str:
    """Name of a GPU type serving one replica at ``par``: ``"H100-SXM tp4"`` (``pp``, ``dp`` too)."""
    extra = "".join(f" {k}{v}" for k, v in (("pp", par.pp), ("dp", par.dp)) if v > 1)
    return f"{gpu.name} tp{par.tp}{extra}"


def _place(model: ModelConfig, gpu: GpuProfile, par: Parallelism, weight_dtype: Dtype, kv_dtype: Dtype,
           gpu_memory_utilization: float) -> ModelPlacement:
    serving = derive_serving_constants(model, gpu, par, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                                       gpu_memory_utilization=gpu_memory_utilization)
    sources = {**gpu.sources, "serving": f"derived by fleetplan.perf.derive for {model.name} at {par.flags()}"}
    placed = replace(gpu, name=variant_name(gpu, par), aliases=(), serving=serving, sources=sources)
    placement = ModelPlacement(model, placed, par, StepTimePredictor(model, gpu, par, weight_dtype, kv_dtype))
    measured = measured_step_model(placement.predictor)  # aiconfigurator-core's tables where they cover the pool
    return placement if measured is None else calibrate_placements((placement,), measured)[0]


def place_model(
    model: ModelConfig,
    gpu: GpuProfile,
    *,
    parallelism: Parallelism | None = None,
    weight_dtype: Dtype = Dtype.BF16,
    kv_dtype: Dtype = Dtype.BF16,
    gpu_memory_utilization: float = 0.9,
    max_tp: int = DEFAULT_MAX_TP,
) -> tuple[ModelPlacement, ...]:
    """Every placement of ``model`` on ``gpu`` (see the module docstring), smallest TP first; a
    model that fits nowhere up to ``max_tp`` GPUs is a ``ConfigError`` with the reason."""
    if parallelism is not None:
        return (_place(model, gpu, parallelism, weight_dtype, kv_dtype, gpu_memory_utilization),)
    found: list[ModelPlacement] = []
    last: FleetplanError | None = None
    for tp in (t for t in valid_tensor_parallel_sizes(model) if t <= max_tp):
        par = Parallelism.vllm(tensor_parallel_size=tp, enable_expert_parallel=model.is_moe and tp > 1)
        try:
            found.append(_place(model, gpu, par, weight_dtype, kv_dtype, gpu_memory_utilization))
        except FleetplanError as exc:  # does not fit at this size
            last = exc
    if not found:
        raise ConfigError(
            f"{model.name} in {weight_dtype.value} does not fit on {gpu.name} with `tensor_parallel_size` up to "
            f"{max_tp} ({last}); use a larger GPU, FP8/INT4 weights or give `pipeline_parallel_size`",
            param="tensor_parallel_size", value=max_tp,
        )
    return tuple(found)


def calibrate_placements(placements: Sequence[ModelPlacement],
                         profile: CalibratedStepModel) -> tuple[ModelPlacement, ...]:
    """``placements`` with ``profile`` as the step model of those it matches (``ModelPlacement.matches``)
    and their W, H re-derived from it (module docstring); ``ConfigError`` when it matches none."""
    out, hit = [], False
    for p in placements:
        if not p.matches(profile):
            out.append(p)
            continue
        hit = True
        serving = p.gpu.require_serving()
        ref = int(serving.ref_context_tokens)
        n_ref = max(1, min(int(serving.n_max(ref)), DEFAULT_MAX_NUM_SEQS))
        w_s, h_s = linear_constants(profile, n_ref, ref)
        if not (w_s >= 0 and h_s >= 0):
            raise ConfigError(f"`perf_profile` for {profile.gpu} gives a negative eq. 3 constant (W {w_s:.3g} s, H "
                              f"{h_s:.3g} s) from its decode steps; recalibrate with more decode-only rows",
                              param="perf_profile")
        sources = {**p.gpu.sources, "serving": f"W, H from the calibrated profile of {profile.source}"}
        gpu = replace(p.gpu, serving=replace(serving, iter_base_s=w_s, iter_per_seq_s=h_s), sources=sources)
        out.append(replace(p, gpu=gpu, calibrated=profile))
    if not hit:
        swept = ", ".join(f"{p.gpu.name} ({p.predictor.weight_dtype.value}/{p.predictor.kv_dtype.value})"
                          for p in placements) or "none"
        raise ConfigError(
            f"`perf_profile` was calibrated for {profile.model} on {profile.gpu} at {profile.parallelism} with "
            f"{profile.weight_dtype} weights and {profile.kv_dtype} KV cache; no swept placement matches (swept: "
            f"{swept}); add its GPU to `gpus`, give its `tensor_parallel_size` and storage types, or recalibrate",
            param="perf_profile")
    return tuple(out)
