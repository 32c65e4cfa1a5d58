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

Engine versions.  ``[versions."<release>"]`` tables name the engine releases the values were measured on, each
with a ``note`` saying what rests on it; the newest is the profile's default version
(``EngineProfile.default_version``) and the tables above hold its values.  An older release's table may carry
``options`` / ``gpu_options.<GPU>`` overrides (sourced in ``sources`` / ``gpu_sources.<GPU>`` beside them): the
values measured on that release.  A version the user names (``release_of``: ``0.10.2``, ``v0.9.1``,
``0.6.3.dev116+g151ef4ef``) takes the values of the newest profiled release at or before it (the oldest profiled
one if it is older than all): that release's overrides, then those of every profiled release after it that it
does not override itself, then the default version's (``options_for(gpu, weights, version)``).  So a value holds
from the release it was measured on until the next release measured, and releases newer than every measurement
run the newest one.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from types import MappingProxyType

from fleetplan.errors import DataFormatError, FleetplanError, UnknownNameError
from fleetplan.paths import data_dir
from fleetplan.perf.engine_version import release_of
from fleetplan.perf.overheads import PredictorOptions

__all__ = ["ENGINE_NAMES", "EngineProfile", "ProfiledVersion", "load_engine_profile"]

ENGINE_NAMES = ("vllm", "sglang", "trtllm", "lmdeploy")
_OPTION_FIELDS = {f.name for f in dataclasses.fields(PredictorOptions)}


@dataclass(frozen=True)
class ProfiledVersion:
    """One engine release the profile's values were measured on (``[versions."<release>"]``)."""

    name: str  # as the file spells it, e.g. "0.10.1"
    release: tuple[int, ...]  # ``release_of(name)``
    note: str  # what rests on this release
    #: option overrides measured on this release (empty for the default version: the tables above are its values)
    options: MappingProxyType = field(default_factory=lambda: MappingProxyType({}), hash=False)
    #: per GPU name (folded to lower case): option overrides measured on this release
    gpu_options: MappingProxyType = field(default_factory=lambda: MappingProxyType({}), hash=False)
    #: the source of each override: ``options`` names, and ``gpu_options`` per GPU name as written in the file
    sources: MappingProxyType = field(default_factory=lambda: MappingProxyType({}), hash=False)
    gpu_sources: MappingProxyType = field(default_factory=lambda: MappingProxyType({}), hash=False)


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
    #: the profiled releases, newest first (module docstring, "Engine versions"); the first is the default
    versions: tuple[ProfiledVersion, ...] = ()

    @property
    def default_version(self) -> str:
        """The newest profiled release: the version whose values the profile's main tables hold."""
        return self.versions[0].name

    def values_version(self, version: str | None = None) -> str:
        """The profiled release whose values engine ``version`` runs (None: the default version): the newest
        profiled release at or before it, else the oldest (module docstring).

        Raises
        ------
        ConfigError
            ``version`` is not a release number.
        """
        if version is None:
            return self.default_version
        release = release_of(version)
        return next((v.name for v in self.versions if v.release <= release), self.versions[-1].name)

    def options_for(self, gpu, weight_dtype, version: str | None = None) -> PredictorOptions:  # noqa: ARG002
        """The options for ``gpu`` and ``weight_dtype`` (a per-dtype hook) at engine ``version`` (None: the
        default version): the main tables with their ``[gpu_options]`` for ``gpu``, then the overrides of the
        profiled releases from the newest down to ``values_version(version)`` (module docstring)."""
        name = str(gpu.name).lower()
        values = {**self.gpu_options.get(name, {})}
        for profiled in self._layers(version):
            values.update(profiled.options)
            values.update(profiled.gpu_options.get(name, {}))
        return dataclasses.replace(self.options, **values) if values else self.options

    def source_of(self, option: str, gpu, version: str | None = None) -> str:
        """The source of ``option``'s value in ``options_for(gpu, ..., version)``: the layer that set it last."""
        name = str(gpu.name).lower()

        def gpu_source(tables) -> str | None:
            return next((t.get(option) for g, t in tables.items() if g.lower() == name and option in t), None)

        source = gpu_source(self.gpu_sources) or self.sources.get(option, "")
        for profiled in self._layers(version):
            source = gpu_source(profiled.gpu_sources) or profiled.sources.get(option) or source
        return source

    def _layers(self, version: str | None) -> tuple[ProfiledVersion, ...]:
        """The profiled releases whose overrides apply at engine ``version``, in the order they apply: from the
        newest after the default version down to ``values_version(version)`` (none at the default version, whose
        values are the main tables)."""
        target = self.values_version(version)
        if target == self.default_version:
            return ()
        names = [v.name for v in self.versions]
        return self.versions[1:names.index(target) + 1]


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
    _check_options(path, "[options]", opts, sources, "[sources]")
    gpu_options, gpu_sources = _gpu_tables(path, "", opts, doc.get("gpu_options", {}), doc.get("gpu_sources", {}))
    versions = _versions(path, opts, doc.get("versions", {}))
    return EngineProfile(str(doc.get("name", key)), str(doc.get("description", "")), PredictorOptions(**opts),
                         MappingProxyType(dict(sources)), gpu_options, gpu_sources, versions)


def _check_options(path, where: str, table: dict, sources: dict, sources_where: str) -> None:
    unknown = sorted(set(table) - _OPTION_FIELDS)
    if unknown:
        raise DataFormatError(str(path), where, f"unknown option {unknown[0]!r}",
                              f"use PredictorOptions fields: {', '.join(sorted(_OPTION_FIELDS))}")
    unsourced = sorted(set(table) - set(sources))
    if unsourced:
        raise DataFormatError(str(path), sources_where, f"option {unsourced[0]!r} has no source", "add one")


def _gpu_tables(path, prefix: str, opts: dict, tables: dict, sources: dict) -> tuple[MappingProxyType, ...]:
    """(overrides per GPU folded to lower case, sources per GPU as written) of ``[<prefix>gpu_options.<GPU>]``,
    each checked and validated over ``opts``."""
    out = {}
    for gpu, table in tables.items():
        _check_options(path, f"[{prefix}gpu_options.{gpu}]", table, sources.get(gpu, {}),
                       f"[{prefix}gpu_sources.{gpu}]")
        PredictorOptions(**{**opts, **table})  # validated on load, not on first use
        out[gpu.lower()] = MappingProxyType(dict(table))
    return MappingProxyType(out), MappingProxyType({gpu: MappingProxyType(dict(t)) for gpu, t in sources.items()})


def _versions(path, opts: dict, tables: dict) -> tuple[ProfiledVersion, ...]:
    """The ``[versions."<release>"]`` tables, newest first (module docstring)."""
    if not tables:
        raise DataFormatError(str(path), "[versions]", "no profiled engine release",
                              'add a [versions."<release>"] table with a note for the release the values rest on')
    out = []
    for name, table in tables.items():
        where = f'[versions."{name}"]'
        try:
            release = release_of(name)
        except FleetplanError as exc:
            raise DataFormatError(str(path), where, str(exc)) from None
        if not str(table.get("note", "")).strip():
            raise DataFormatError(str(path), where, "no note", "say which values rest on this release")
        unknown = sorted(set(table) - {"note", "options", "sources", "gpu_options", "gpu_sources"})
        if unknown:
            raise DataFormatError(str(path), where, f"unknown key {unknown[0]!r}",
                                  "use note, options, sources, gpu_options, gpu_sources")
        options = dict(table.get("options", {}))
        _check_options(path, f"{where[:-1]}.options]", options, table.get("sources", {}), f"{where[:-1]}.sources]")
        PredictorOptions(**{**opts, **options})
        gpu_options, gpu_sources = _gpu_tables(path, f'versions."{name}".', opts, table.get("gpu_options", {}),
                                               table.get("gpu_sources", {}))
        out.append(ProfiledVersion(str(name), release, str(table["note"]), MappingProxyType(options), gpu_options,
                                   MappingProxyType(dict(table.get("sources", {}))), gpu_sources))
    out.sort(key=lambda v: v.release, reverse=True)
    if len({v.release for v in out}) < len(out):
        raise DataFormatError(str(path), "[versions]", "two tables name the same release", "merge them")
    if out[0].options or out[0].gpu_options:
        raise DataFormatError(str(path), f'[versions."{out[0].name}"]', "the newest release carries overrides",
                              "its values are the main [options] / [gpu_options] tables: move them there")
    return tuple(out)
