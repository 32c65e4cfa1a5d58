"""The GPU catalog: bundled ``gpu_profiles/*.toml`` plus an optional user TOML.

Bundled profile format (one file per GPU)::

    name = "H100-SXM"                     # canonical name
    description = "NVIDIA H100 SXM5 80 GB"
    aliases = ["h100", "h100-sxm5"]       # lower case; each names this GPU and no other
    bf16_tflops = 989.5                   # dense tensor TFLOPS (no 2:4 sparsity)
    fp8_tflops = 1979.0                   # "none" when the GPU has no FP8 tensor cores
    hbm_gib = 80.0
    hbm_tb_per_s = 3.35
    nvlink_gb_per_s = 900.0               # per GPU, bidirectional; "none" if PCIe only
    network_gbps = 400.0                  # scale-out NIC per GPU in the reference server
    gpus_per_node = 8                     # GPUs per scale-up domain (server); larger groups cross the network
    tdp_w = 700.0
    idle_w = 70.0
    price_usd_per_h = 4.02                # "none" when no public on-demand price exists
    failure_rate_per_day = "none"         # failures per node-day, where published
    mttr_days = "none"                    # mean time to repair, where published

    [sources]                             # one citation per field above (required)
    bf16_tflops = "NVIDIA H100 datasheet (2023), SXM5 column: 1,979 TFLOPS with sparsity / 2"
    ...

    [serving]                             # optional: calibrated constants (core paper §3.2)
    model = "Llama-3-70B"
    iter_base_ms = 4.0                    # W
    iter_per_seq_ms = 0.32                # H
    kv_blocks = 131072
    block_size_tokens = 16
    chunk_tokens = 1024
    ref_context_tokens = 8192
    source = "core paper §3.2 table"
    [serving.sources]                     # optional per-field refinements
    kv_blocks = "derived: n_max(8192) = 256 x 512 blocks per 8K sequence"

    [power]                               # optional: logistic power curve (core paper §4.8)
    k = 1.0
    x0_log2_batch = 4.2
    floor_w = 300.0
    nominal_w = 600.0
    source = "..."

User TOML (``load_catalog(extra_toml)``) holds one ``[gpu.<NAME>]`` table per GPU::

    [gpu.H100-SXM]                 # NAME resolves like GpuCatalog.get (name or alias):
    price_usd_per_h = 2.49         # an existing GPU -> only the keys given change
    [gpu.H100-SXM.sources]
    price_usd_per_h = "our 2026 contract"

    [gpu.MyAccel]                  # an unknown NAME -> a new GPU; every field required
    description = "..."
    bf16_tflops = 500.0
    ...

A value given without a citation is cited as "user override in <file>".  Nested tables
(``sources``, ``serving``, ``power``) merge key by key.  Price overrides passed to
``load_catalog`` apply last.  Malformed files raise ``DataFormatError`` naming file,
GPU and field; an alias naming two GPUs is a load error.
"""

from __future__ import annotations

import functools
import math
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from fleetplan.errors import ConfigError, DataFormatError, UnknownNameError
from fleetplan.hardware.profile import GpuProfile
from fleetplan.hardware.profile_toml import attribute_to, build_profile, merge_tables, parse_table
from fleetplan.paths import gpu_profiles_dir

__all__ = ["GpuCatalog", "load_catalog"]

USER_TABLE = "gpu"
PRICE_OVERRIDE_SOURCE = "price override supplied at load time"


@dataclass(frozen=True)
class GpuCatalog:
    """GPU profiles looked up by canonical name or alias, case-insensitively."""

    profiles: tuple[GpuProfile, ...]
    _index: Mapping[str, GpuProfile] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, GpuProfile] = {}
        for profile in self.profiles:
            for key in (profile.name.lower(), *profile.aliases):
                if key in index:
                    raise ConfigError(
                        f"GPU name or alias {key!r} names both {index[key].name!r} and {profile.name!r}; "
                        f"an alias must map to exactly one GPU"
                    )
                index[key] = profile
        object.__setattr__(self, "_index", MappingProxyType(index))

    def get(self, name: str) -> GpuProfile:
        """The profile whose canonical name or alias is ``name`` (case-insensitive).

        Unknown names raise ``UnknownNameError`` listing the canonical names; no
        alias ever stands in for other hardware.
        """
        key = str(name).strip().lower()
        if key not in self._index:
            raise UnknownNameError("GPU", str(name), self.names())
        return self._index[key]

    def names(self) -> tuple[str, ...]:
        """Canonical names in catalog order."""
        return tuple(p.name for p in self.profiles)

    def __iter__(self) -> Iterator[GpuProfile]:
        return iter(self.profiles)

    def __len__(self) -> int:
        return len(self.profiles)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.strip().lower() in self._index


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        raise DataFormatError(str(path), None, f"cannot read: {exc.strerror}", "check the path") from None
    except tomllib.TOMLDecodeError as exc:
        raise DataFormatError(str(path), None, f"not valid TOML: {exc}", "fix the syntax") from None


@functools.lru_cache(maxsize=1)
def _bundled_tables() -> tuple[tuple[str, Path, dict[str, Any]], ...]:
    """``(name, file, typed table)`` for every bundled profile, read once per process."""
    out: list[tuple[str, Path, dict[str, Any]]] = []
    seen: dict[str, Path] = {}
    for path in sorted(gpu_profiles_dir().glob("*.toml")):
        data = _read_toml(path)
        name = data.get("name")
        if not isinstance(name, str) or not name.strip():
            raise DataFormatError(str(path), "name", "missing or empty canonical name", 'add name = "..."')
        table = parse_table({k: v for k, v in data.items() if k != "name"}, path, f"GPU {name}")
        if name.lower() in seen:
            raise DataFormatError(str(path), f"GPU {name}", f"name also defined in {seen[name.lower()]}",
                                  "each GPU has exactly one profile file")
        seen[name.lower()] = path
        out.append((name.strip(), path, table))
    return tuple(out)


def _check_aliases(entries: dict[str, tuple[Path, dict[str, Any]]]) -> None:
    owner: dict[str, str] = {n.lower(): n for n in entries}
    for name, (path, table) in entries.items():
        for alias in table.get("aliases", ()):
            other = owner.get(alias)
            if other is not None and other != name:
                raise DataFormatError(
                    str(path), f"GPU {name}", f"alias {alias!r} already names GPU {other!r}",
                    "an alias maps to exactly one GPU; remove or rename it",
                )
            owner[alias] = name


def _resolve(key: str, entries: dict[str, tuple[Path, dict[str, Any]]]) -> str | None:
    wanted = key.strip().lower()
    for name, (_, table) in entries.items():
        if wanted == name.lower() or wanted in table.get("aliases", ()):
            return name
    return None


def _apply_user_file(path: Path, entries: dict[str, tuple[Path, dict[str, Any]]]) -> None:
    data = _read_toml(path)
    extra = sorted(set(data) - {USER_TABLE})
    if extra:
        raise DataFormatError(str(path), None, f"unexpected top-level key(s) {', '.join(extra)}",
                              f"put each GPU under a [{USER_TABLE}.<NAME>] table")
    gpus = data.get(USER_TABLE, {})
    if not isinstance(gpus, dict) or not all(isinstance(v, dict) for v in gpus.values()):
        raise DataFormatError(str(path), USER_TABLE, "must hold one table per GPU", "use [gpu.<NAME>] tables")
    for key, raw in gpus.items():
        table = parse_table(raw, path, f"GPU {key}")
        if "name" in table and table.pop("name").lower() != key.lower():
            raise DataFormatError(str(path), f"GPU {key}", "name differs from the table key",
                                  f"drop name or make it {key!r}")
        table = attribute_to(table, f"user override in {path}")
        target = _resolve(key, entries)
        if target is None:
            entries[key] = (path, table)
        else:
            entries[target] = (path, merge_tables(entries[target][1], table))


def _price_overrides(catalog: GpuCatalog, prices: Mapping[str, float]) -> GpuCatalog:
    replaced = {p.name: p for p in catalog}
    for name, price in prices.items():
        profile = catalog.get(name)
        if isinstance(price, bool) or not isinstance(price, (int, float)) or not math.isfinite(price) \
                or price <= 0:
            raise ConfigError(
                f"price for GPU {profile.name!r} is {price!r}; give a finite USD per GPU-hour > 0"
            )
        replaced[profile.name] = profile.with_price(float(price), PRICE_OVERRIDE_SOURCE)
    return GpuCatalog(tuple(replaced[n] for n in catalog.names()))


def _build(entries: dict[str, tuple[Path, dict[str, Any]]]) -> GpuCatalog:
    _check_aliases(entries)
    profiles = [build_profile(name, table, path) for name, (path, table) in entries.items()]
    profiles.sort(key=lambda p: p.name.lower())
    return GpuCatalog(tuple(profiles))


@functools.lru_cache(maxsize=1)
def _bundled_catalog() -> GpuCatalog:
    return _build({name: (path, table) for name, path, table in _bundled_tables()})


def load_catalog(
    extra_toml: Path | None = None,
    price_overrides: Mapping[str, float] | None = None,
) -> GpuCatalog:
    """The bundled GPU catalog, optionally amended by a user TOML and price overrides.

    Parameters
    ----------
    extra_toml : Path, optional
        User TOML with ``[gpu.<NAME>]`` tables overriding or adding GPUs (format in the
        module docstring).
    price_overrides : Mapping[str, float], optional
        GPU name or alias -> USD per GPU-hour, applied last.

    Returns
    -------
    GpuCatalog
        The bundled catalog alone is read once per process and cached.
    """
    if extra_toml is None and not price_overrides:
        return _bundled_catalog()
    if extra_toml is None:
        catalog = _bundled_catalog()
    else:
        entries = {name: (path, table) for name, path, table in _bundled_tables()}
        _apply_user_file(Path(extra_toml), entries)
        catalog = _build(entries)
    return _price_overrides(catalog, price_overrides or {})
