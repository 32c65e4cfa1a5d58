"""Build a ``PoolSpec`` from a GPU profile's calibrated serving constants.

This is where hardware meets the simulator spec (the engine never sees a
``GpuProfile``).  Defaults follow the core paper (inference-fleet-sim §2.1, §3.2):

* ``kv_blocks`` and ``block_size_tokens`` from ``ServingConstants``;
* ``max_num_seqs = n_max(max_context_tokens) = floor(kv_blocks / ceil(ctx / block))``,
  the paper's slot count at the pool's context limit (128 for A100 at 8K);
* ``max_num_batched_tokens = max_num_seqs + chunk_tokens``: vLLM's token budget counts
  every decode token too, so a budget of one chunk would starve a full batch of
  decodes; this budget lets every running sequence decode and one calibrated prefill
  chunk run in the same step, the iteration the paper's eqs. (4)-(5) assume;
* step model ``LinearStepModel.from_serving`` (eq. 3, ``t = W + H n``).

Every default can be overridden with the vLLM-spelled keyword.
"""

from __future__ import annotations

from typing import Any

from fleetplan.errors import ConfigError, FleetplanError
from fleetplan.perf.linear import LinearStepModel
from fleetplan.sim.spec import DEFAULT_MODEL_TAG, InstanceRouter, PoolSpec, SchedulerLimits

__all__ = ["build_pool", "calibrated_gpu_names"]


def calibrated_gpu_names() -> tuple[str, ...]:
    """Names of catalog GPUs that carry calibrated serving constants."""
    from fleetplan.hardware import load_catalog

    catalog = load_catalog()
    return tuple(n for n in catalog.names() if catalog.get(n).serving is not None)


def build_pool(
    gpu_profile: Any,
    name: str,
    n_instances: int,
    max_context_tokens: int,
    *,
    router: InstanceRouter | str = InstanceRouter.LEAST_OUTSTANDING,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    kv_blocks: int | None = None,
    block_size_tokens: int | None = None,
    prefill_s_per_token: float | None = None,
    price_usd_per_h: float | None = None,
    model_tag: str = DEFAULT_MODEL_TAG,
) -> PoolSpec:
    """A pool of ``n_instances`` instances of ``gpu_profile`` (a ``hardware.GpuProfile``).

    Parameters
    ----------
    gpu_profile : GpuProfile
        Must carry ``serving`` constants; otherwise ``ConfigError`` listing the
        calibrated GPUs.
    max_context_tokens : int
        Longest prompt + output the pool accepts (tokens).
    max_num_seqs, max_num_batched_tokens, kv_blocks, block_size_tokens : int, optional
        vLLM-style overrides; default from the profile as described above.
    prefill_s_per_token : float, optional
        Step cost per prefill token (s); default ``LinearStepModel.from_serving``'s.
    price_usd_per_h : float, optional
        Per-instance price; default the profile's (None when it has none).
    """
    serving = gpu_profile.serving
    if serving is None:
        try:
            calibrated = ", ".join(calibrated_gpu_names()) or "none"
        except (FleetplanError, OSError, ImportError):  # a broken catalog must not hide this error
            calibrated = "see `fleetplan gpus list`"
        raise ConfigError(
            f"GPU {gpu_profile.name!r} has no calibrated serving constants (W, H, KV blocks, chunk); "
            f"calibrated GPUs are {calibrated}; pick one of them or add a [serving] table to its profile"
        )
    blocks = int(serving.kv_blocks) if kv_blocks is None else kv_blocks
    block = int(serving.block_size_tokens) if block_size_tokens is None else block_size_tokens
    if max_num_seqs is None:
        if kv_blocks is None and block_size_tokens is None:
            max_num_seqs = int(serving.n_max(max_context_tokens))
        else:
            max_num_seqs = int(blocks // -(-int(max_context_tokens) // int(block)))
        if max_num_seqs < 1:
            raise ConfigError(
                f"pool {name!r}: max_context_tokens = {max_context_tokens} leaves no sequence slot on "
                f"{gpu_profile.name} ({blocks} KV blocks of {block} tokens); lower max_context_tokens"
            )
    if max_num_batched_tokens is None:
        max_num_batched_tokens = int(max_num_seqs) + int(serving.chunk_tokens)
    limits = SchedulerLimits(
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        kv_blocks=blocks,
        block_size_tokens=block,
    )
    try:
        step_model = LinearStepModel.from_serving(serving, prefill_s_per_token=prefill_s_per_token)
    except ValueError as exc:
        raise ConfigError(f"pool {name!r}: {exc}") from exc
    price = gpu_profile.price_usd_per_h if price_usd_per_h is None else price_usd_per_h
    return PoolSpec(
        name=name,
        gpu=str(gpu_profile.name),
        n_instances=n_instances,
        max_context_tokens=max_context_tokens,
        step_model=step_model,
        limits=limits,
        router=InstanceRouter.parse(router),
        price_usd_per_h=price,
        model_tag=model_tag,
    )
