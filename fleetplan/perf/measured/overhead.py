"""The engine's per-step time outside the measured kernels, per engine (``[measured_overhead]``).

Measured operator tables time the GPU kernels of a step; a serving engine's iteration also spends
time in scheduling, input preparation, sampling, detokenisation hand-off, MoE routing bookkeeping
and launch gaps.  AIConfigurator 0.12's own SGLang estimate for Qwen3-235B-A22B BF16 on 8x B200 is
31-41 % below a published TPOT at batch 1, 16 and 64: kernel tables are not the whole step.  Each
engine profile (``engine_profiles/<engine>.toml``) may carry a section

    [measured_overhead]
    step_s = 1.2e-3          # added to every step (kernel-table steps + this)
    per_seq_s = 0.0          # added per sequence in the step
    engine_versions = "..."  # the engine versions of the serving runs it was fitted on
    source = "..."           # the runs it was fitted on and how

fitted on published serving runs of that engine against the measured step (``fit_overhead`` in ``benchmarks/
aiconfigurator_compare.py``, which also fits each engine release with runs on its own: one value per engine holds
where two releases have runs, SGLang's within 6 %).  An engine without the section adds nothing, and the
timing-source label says so; a fitted zero (TensorRT-LLM) is labelled as fitted.
"""

from __future__ import annotations

import functools
import math
import tomllib
from dataclasses import dataclass

from fleetplan.errors import DataFormatError
from fleetplan.paths import data_dir

__all__ = ["EngineOverhead", "SECTION", "engine_overhead"]

SECTION = "measured_overhead"
_KEYS = {"step_s", "per_seq_s", "engine_versions", "source"}


@dataclass(frozen=True)
class EngineOverhead:
    """Non-kernel time of one engine's step: ``step_s + per_seq_s * n_seqs`` (seconds)."""

    engine: str
    step_s: float
    per_seq_s: float
    engine_versions: str
    source: str

    def label(self) -> str:
        if not self.source:
            return f"no {self.engine} non-kernel overhead fitted"
        per_seq = f" + {self.per_seq_s * 1e3:.3g} ms/seq" if self.per_seq_s else ""
        return f"{self.engine} non-kernel overhead {self.step_s * 1e3:.3g} ms/step{per_seq}"


@functools.cache
def engine_overhead(engine: str) -> EngineOverhead:
    """The ``[measured_overhead]`` section of ``engine_profiles/<engine>.toml`` (zero without one)."""
    path = data_dir("engine_profiles") / f"{engine}.toml"
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise DataFormatError(str(path), None, f"cannot read the engine profile: {err}") from None
    section = doc.get(SECTION)
    if section is None:
        return EngineOverhead(engine, 0.0, 0.0, "", "")
    unknown = sorted(set(section) - _KEYS)
    missing = sorted(_KEYS - set(section))
    if unknown or missing:
        raise DataFormatError(str(path), f"[{SECTION}]", f"keys must be {sorted(_KEYS)}; unknown {unknown}, "
                              f"missing {missing}")
    values = {}
    for name in ("step_s", "per_seq_s"):
        value = section[name]
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise DataFormatError(str(path), f"[{SECTION}] {name}", f"{value!r} must be a number of seconds >= 0")
        values[name] = float(value)
    return EngineOverhead(engine, values["step_s"], values["per_seq_s"], str(section["engine_versions"]),
                          str(section["source"]))
