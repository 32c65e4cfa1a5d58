"""Reading one GPU's table from TOML into a ``GpuProfile``.

The file format is documented in ``fleetplan.hardware.catalog``.  Parsing happens in two
steps so that a user file can override part of a bundled profile: ``parse_table`` checks
keys and types of one (possibly partial) table and returns plain typed values;
``merge_tables`` lays an override over a base; ``build_profile`` checks completeness and
constructs the frozen ``GpuProfile``.  Every problem is a ``DataFormatError`` naming the
file, the GPU and the field.

The word ``"none"`` marks a value that does not exist (FP8 on Ampere, NVLink on a
PCIe-only card, an unpublished failure rate).  Serving times are written in ms, as the
paper quotes them, and converted to seconds here.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from fleetplan.errors import ConfigError, DataFormatError
from fleetplan.hardware.power import PowerCurve
from fleetplan.hardware.profile import OPTIONAL_SPEC_FIELDS, REQUIRED_SPEC_FIELDS, SPEC_FIELDS, GpuProfile
from fleetplan.hardware.serving import ServingConstants
from fleetplan.units import ms_to_s

__all__ = ["ABSENT", "SERVING_KEYS", "POWER_KEYS", "parse_table", "merge_tables", "build_profile"]

ABSENT = "none"
SERVING_KEYS = (
    "model", "iter_base_ms", "iter_per_seq_ms", "kv_blocks", "block_size_tokens", "chunk_tokens",
    "ref_context_tokens",
)
_SERVING_INTS = ("kv_blocks", "block_size_tokens", "chunk_tokens", "ref_context_tokens")
POWER_KEYS = ("k", "x0_log2_batch", "floor_w", "nominal_w")
_SCALAR_KEYS = ("name", "aliases", "description") + SPEC_FIELDS
_TABLE_KEYS = ("sources", "serving", "power")
_SUB_SOURCE_KEYS = ("source", "sources")
_SUB_FIELDS = {"serving": SERVING_KEYS, "power": POWER_KEYS}


def _fail(path: Path, where: str, problem: str, fix: str = "") -> DataFormatError:
    return DataFormatError(str(path), where, problem, fix)


def _number(value: Any, path: Path, where: str, key: str, *, optional: bool) -> float | None:
    if optional and value == ABSENT:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        hint = f' or "{ABSENT}" when it does not exist' if optional else ""
        raise _fail(path, where, f"{key} = {value!r} is not a finite number", f"give a number{hint}")
    return float(value)


def _string_map(value: Any, path: Path, where: str, key: str, allowed: tuple[str, ...]) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _fail(path, where, f"[{key}] must be a table of field = \"citation\"")
    for k, v in value.items():
        if k not in allowed:
            raise _fail(path, where, f"[{key}] names unknown field {k!r}",
                        f"valid fields are {', '.join(allowed)}")
        if not isinstance(v, str) or not v.strip():
            raise _fail(path, where, f"{key}.{k} must be a non-empty citation string")
    return dict(value)


def _sub_table(value: Any, path: Path, where: str, key: str, fields: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(path, where, f"{key} must be a table ([{key}])")
    out: dict[str, Any] = {}
    for k, v in value.items():
        if k == "source":
            if not isinstance(v, str) or not v.strip():
                raise _fail(path, where, f"{key}.source must be a non-empty citation string")
            out[k] = v
        elif k == "sources":
            out[k] = _string_map(v, path, where, f"{key}.sources", fields)
        elif k not in fields:
            raise _fail(path, where, f"unknown key {key}.{k}",
                        f"valid keys are {', '.join(fields + _SUB_SOURCE_KEYS)}")
        elif k == "model":
            if not isinstance(v, str) or not v.strip():
                raise _fail(path, where, f"{key}.model must be a model name such as \"Llama-3-70B\"")
            out[k] = v
        elif k in _SERVING_INTS:
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise _fail(path, where, f"{key}.{k} = {v!r} must be a positive integer")
            out[k] = v
        else:
            out[k] = _number(v, path, where, f"{key}.{k}", optional=False)
    return out


def parse_table(table: dict[str, Any], path: Path, where: str) -> dict[str, Any]:
    """Check keys and types of one GPU table (complete or partial); return typed values."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key in SPEC_FIELDS:
            out[key] = _number(value, path, where, key, optional=key in OPTIONAL_SPEC_FIELDS)
        elif key == "name" or key == "description":
            if not isinstance(value, str) or not value.strip():
                raise _fail(path, where, f"{key} must be a non-empty string")
            out[key] = value.strip()
        elif key == "aliases":
            if not isinstance(value, list) or not all(isinstance(a, str) and a.strip() for a in value):
                raise _fail(path, where, "aliases must be a list of names", 'e.g. aliases = ["h100"]')
            out[key] = tuple(a.strip().lower() for a in value)
        elif key == "sources":
            out[key] = _string_map(value, path, where, key, SPEC_FIELDS)
        elif key == "serving":
            out[key] = _sub_table(value, path, where, key, SERVING_KEYS)
        elif key == "power":
            out[key] = _sub_table(value, path, where, key, POWER_KEYS)
        else:
            raise _fail(path, where, f"unknown key {key!r}",
                        f"valid keys are {', '.join(_SCALAR_KEYS + _TABLE_KEYS)}")
    return out


def merge_tables(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``override`` laid over ``base`` (nested tables merge key by key); inputs untouched."""
    merged = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            inner = dict(merged[key])
            for k, v in value.items():
                inner[k] = {**inner.get(k, {}), **v} if k == "sources" else v
            merged[key] = inner
        else:
            merged[key] = dict(value) if isinstance(value, dict) else value
    return merged


def attribute_to(table: dict[str, Any], label: str) -> dict[str, Any]:
    """Cite ``label`` (a user file) for every value in ``table`` that has no citation of its own."""
    out = merge_tables(table, {})
    sources = dict(out.get("sources", {}))
    for key in SPEC_FIELDS:
        if key in out and key not in sources:
            sources[key] = label
    if sources:
        out["sources"] = sources
    for sub, fields in (("serving", SERVING_KEYS), ("power", POWER_KEYS)):
        if sub in out:
            inner = out[sub]
            if "source" not in inner:
                sub_sources = dict(inner.get("sources", {}))
                for k in fields:
                    if k in inner and k not in sub_sources:
                        sub_sources[k] = label
                inner["sources"] = sub_sources
    return out


def _require(table: dict[str, Any], keys: tuple[str, ...], path: Path, where: str, prefix: str = "") -> None:
    missing = [k for k in keys if k not in table]
    if missing:
        raise _fail(path, where, f"missing {', '.join(prefix + k for k in missing)}",
                    f'add them (write "{ABSENT}" for a value that does not exist)')


def _flatten_sources(entry: dict[str, Any], sub: str, path: Path, where: str) -> dict[str, str]:
    table = entry[sub]
    out = {f"{sub}.{k}": v for k, v in table.get("sources", {}).items()}
    if "source" in table:
        out[sub] = table["source"]
    elif out and all(k in table.get("sources", {}) for k in _SUB_FIELDS[sub]):
        out[sub] = "see per-field sources"
    else:
        raise _fail(path, where, f"[{sub}] has no source", f'add {sub}.source = "citation"')
    return out


def build_profile(name: str, entry: dict[str, Any], path: Path) -> GpuProfile:
    """Construct the ``GpuProfile`` for a complete, merged table from ``path``."""
    where = f"GPU {name}"
    _require(entry, ("description",) + REQUIRED_SPEC_FIELDS + OPTIONAL_SPEC_FIELDS, path, where)
    sources = dict(entry.get("sources", {}))
    serving = power = None
    try:
        if "serving" in entry:
            table = entry["serving"]
            _require(table, SERVING_KEYS, path, where, "serving.")
            serving = ServingConstants(
                iter_base_s=ms_to_s(table["iter_base_ms"]),
                iter_per_seq_s=ms_to_s(table["iter_per_seq_ms"]),
                kv_blocks=table["kv_blocks"],
                block_size_tokens=table["block_size_tokens"],
                chunk_tokens=table["chunk_tokens"],
                ref_context_tokens=table["ref_context_tokens"],
                model=table["model"],
            )
            sources.update(_flatten_sources(entry, "serving", path, where))
        if "power" in entry:
            table = entry["power"]
            _require(table, POWER_KEYS, path, where, "power.")
            power = PowerCurve(**{k: table[k] for k in POWER_KEYS})
            sources.update(_flatten_sources(entry, "power", path, where))
        return GpuProfile(
            name=name,
            aliases=entry.get("aliases", ()),
            description=entry["description"],
            sources=sources,
            serving=serving,
            power=power,
            **{k: entry[k] for k in SPEC_FIELDS},
        )
    except ConfigError as exc:
        raise _fail(path, where, str(exc)) from None
