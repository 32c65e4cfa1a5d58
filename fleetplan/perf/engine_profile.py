"""Engine profiles: the predictor's efficiencies and per-step overheads per serving engine.

One TOML file per engine in ``engine_profiles/`` (shipped in the wheel as
``fleetplan/_data/engine_profiles``): ``name``, ``description``, an ``[options]`` table of
``PredictorOptions`` fields (seconds, fractions of peak) and a ``[sources]`` table giving the
source of every option.  ``load_engine_profile("vllm")`` reads one; an unknown engine is an
``UnknownNameError`` listing the known ones, a file without a source for a value a
``DataFormatError``.

A ``[gpu_options.<GPU>]`` table overrides options on one GPU type (its catalog name, e.g. ``MI300X``: ROCm
kernels where the other GPUs run CUDA ones), each override sourced in ``[gpu_sources.<GPU>]``;
``options_for(gpu, weight_dtype)`` applies them.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from types import MappingProxyType

from fleetplan.errors import DataFormatError, UnknownNameError
from fleetplan.paths import data_dir
from fleetplan.perf.overheads import PredictorOptions

__all__ = ["ENGINE_NAMES", "EngineProfile", "load_engine_profile"]

ENGINE_NAMES = ("vllm", "sglang", "trtllm", "lmdeploy")
_OPTION_FIELDS = {f.name for f in dataclasses.fields(PredictorOptions)}


@dataclass(frozen=True)
class EngineProfile:
    """Predictor options of one engine, each with its source."""

    name: str
    description: str
    options: PredictorOptions
    sources: MappingProxyType = field(hash=False)
    #: per GPU name (folded to lower case): option overrides of ``[gpu_options.<GPU>]``
    gpu_options: MappingProxyType = field(default_factory=lambda: MappingProxyType({}), hash=False)
    #: per GPU name as written in the file: the source of each override (``[gpu_sources.<GPU>]``)
    gpu_sources: MappingProxyType = field(default_factory=lambda: MappingProxyType({}), hash=False)

    def options_for(self, gpu, weight_dtype) -> PredictorOptions:  # noqa: ARG002 - per-dtype hook
        """The options for ``gpu`` (its ``[gpu_options]`` overrides, if any) and ``weight_dtype``."""
        override = self.gpu_options.get(str(gpu.name).lower())
        return dataclasses.replace(self.options, **override) if override else self.options


def load_engine_profile(name: str) -> EngineProfile:
    """The bundled profile of engine ``name`` (module docstring)."""
    key = str(name).strip().lower().replace("-", "").replace("_", "")
    if key not in ENGINE_NAMES:
        raise UnknownNameError("engine", str(name), ENGINE_NAMES)
    path = data_dir("engine_profiles") / f"{key}.toml"
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise DataFormatError(str(path), None, f"cannot read the engine profile: {err}") from None
    opts = doc.get("options", {})
    sources = doc.get("sources", {})
    unknown = sorted(set(opts) - _OPTION_FIELDS)
    if unknown:
        raise DataFormatError(str(path), "[options]", f"unknown option {unknown[0]!r}",
                              f"use PredictorOptions fields: {', '.join(sorted(_OPTION_FIELDS))}")
    unsourced = sorted(set(opts) - set(sources))
    if unsourced:
        raise DataFormatError(str(path), "[sources]", f"option {unsourced[0]!r} has no source", "add one")
    gpu_options, gpu_sources = {}, doc.get("gpu_sources", {})
    for gpu, table in doc.get("gpu_options", {}).items():
        where = f"[gpu_options.{gpu}]"
        unknown = sorted(set(table) - _OPTION_FIELDS)
        if unknown:
            raise DataFormatError(str(path), where, f"unknown option {unknown[0]!r}",
                                  f"use PredictorOptions fields: {', '.join(sorted(_OPTION_FIELDS))}")
        unsourced = sorted(set(table) - set(gpu_sources.get(gpu, {})))
        if unsourced:
            raise DataFormatError(str(path), f"[gpu_sources.{gpu}]", f"option {unsourced[0]!r} has no source",
                                  "add one")
        PredictorOptions(**{**opts, **table})  # validated on load, not on first use
        gpu_options[gpu.lower()] = MappingProxyType(dict(table))
    return EngineProfile(str(doc.get("name", key)), str(doc.get("description", "")), PredictorOptions(**opts),
                         MappingProxyType(dict(sources)), MappingProxyType(gpu_options),
                         MappingProxyType({gpu: MappingProxyType(dict(t)) for gpu, t in gpu_sources.items()}))
