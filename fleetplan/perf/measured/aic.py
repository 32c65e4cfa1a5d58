"""The one module that imports ``aiconfigurator_core`` (imported lazily, inside the functions).

Public API used (aiconfigurator-core 0.12.0, ``aiconfigurator_core/__init__.py`` and
``aiconfigurator_core/sdk/engine.py``):

* ``sdk.engine.EngineHandle.compile(model_id, system, backend, backend_version=..., tp_size=..., pp_size=...,
  attention_dp_size=..., moe_tp_size=..., moe_ep_size=..., gemm_quant_mode=..., moe_quant_mode=...,
  kvcache_quant_mode=..., fmha_quant_mode=...)``: builds the model's operator list and loads the measured tables of
  (system, backend, version) into the compiled engine;
* ``EngineHandle.predict_prefill_latency(batch, isl)``: one context (prefill) iteration of ``batch``
  prompts of ``isl`` tokens, ms; ``EngineHandle.predict_decode_latency(batch, isl, 2)``: one generation
  iteration of ``batch`` sequences holding ``isl`` tokens, ms (AIConfigurator's TPOT at ``osl = 2``); with
  ``pp_size`` > 1 the iteration's latency through every stage (each stage's layers plus the ``p2p``
  activation sends); with ``attention_dp_size`` D > 1 one attention rank's iteration of ``batch`` prompts or
  sequences, the MoE layers timed at D times its tokens;
* ``sdk.perf_database.get_latest_database_version(system, backend)``: the engine version whose tables
  AIConfigurator uses by default (its ``current`` slot, ``systems/query_versions.yaml``).

Both latencies interpolate the measured per-operator tables (SILICON database mode: measured rows
only, AIConfigurator's own interpolation between them).  AIConfigurator logs warnings about fallback
rows while loading; they are silenced here (the library never prints).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import importlib.util
import logging
from collections.abc import Iterator
from pathlib import Path

from fleetplan.perf.measured.coverage import MeasuredKey

__all__ = ["DISTRIBUTION", "DATABASE_MODE", "AicEngine", "configs_dir", "package_version"]

DISTRIBUTION = "aiconfigurator-core"
MODULE = "aiconfigurator_core"
DATABASE_MODE = "SILICON"  # measured rows only (AIConfigurator's default)
FMHA_QUANT = "bfloat16"  # attention math in BF16 (FP8 KV is dequantised), as AIConfigurator's examples


def package_version() -> str | None:
    """The installed ``aiconfigurator-core`` version, None when it is not installed or not importable."""
    try:
        version = importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    return version if importlib.util.find_spec(MODULE) is not None else None


def configs_dir() -> Path:
    """``aiconfigurator_core/model_configs`` (HuggingFace ``config.json`` files), without importing it."""
    spec = importlib.util.find_spec(MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"{DISTRIBUTION} is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "model_configs"


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """AIConfigurator's loggers at ERROR for the duration (restored afterwards)."""
    logger = logging.getLogger(MODULE)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


@functools.cache
def database_version(system: str, backend: str) -> str | None:
    """The engine version of AIConfigurator's default tables for (system, backend); None without data."""
    from aiconfigurator_core.sdk.perf_database import get_latest_database_version

    with _quiet():
        return get_latest_database_version(system=system, backend=backend)


class AicEngine:
    """AIConfigurator's compiled engine for one ``MeasuredKey`` (step latencies in ms)."""

    def __init__(self, key: MeasuredKey, engine_version: str) -> None:
        from aiconfigurator_core.sdk.engine import EngineHandle

        self.key = key
        self.engine_version = engine_version
        moe = key.is_moe
        with _quiet():
            self._handle = EngineHandle.compile(
                key.aic_model, key.system, key.backend, backend_version=engine_version, tp_size=key.tp,
                pp_size=key.pp, attention_dp_size=key.attention_dp, moe_tp_size=key.moe_tp if moe else None,
                moe_ep_size=key.moe_ep if moe else None,
                gemm_quant_mode=key.gemm_quant, moe_quant_mode=key.gemm_quant if moe else None,
                kvcache_quant_mode=key.kv_quant, fmha_quant_mode=FMHA_QUANT)

    def prefill_ms(self, batch: int, tokens: int) -> float:
        """One prefill iteration of ``batch`` prompts of ``tokens`` each (nothing cached), ms."""
        with _quiet():
            return float(self._handle.predict_prefill_latency(int(batch), int(tokens)))

    def decode_ms(self, batch: int, context_tokens: int) -> float:
        """One decode iteration of ``batch`` sequences holding ``context_tokens`` each, ms."""
        with _quiet():
            return float(self._handle.predict_decode_latency(int(batch), int(context_tokens), 2))
