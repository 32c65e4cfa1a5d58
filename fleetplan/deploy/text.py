"""TOML and YAML text of plain documents (dicts, lists, strings, numbers, booleans): formats only.

The fleet file is TOML (``sim.fleet_toml``'s format: top-level keys, then one ``[[pool]]`` table per
pool with its ``[pool.features]`` sub-table); manifests and the router configuration are YAML in block
style with every string double-quoted (JSON escapes, valid YAML 1.2), so no value is read back as
another type (``"on"``, ``"1e3"``, ``"8000"`` stay strings).  Reading either back gives the document
(``tomllib``; any YAML 1.2 reader), which the tests check.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["toml_text", "yaml_text"]


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"TOML value {value!r} must be finite")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def _toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def _toml_table(lines: list[str], table: dict[str, Any], prefix: str) -> None:
    subtables = {k: v for k, v in table.items() if isinstance(v, dict) and k != "speculative_config"}
    for key, value in table.items():
        if key not in subtables:
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    for key, value in subtables.items():
        lines.append(f"[{prefix}.{key}]" if prefix else f"[{key}]")
        _toml_table(lines, value, f"{prefix}.{key}" if prefix else key)


def toml_text(doc: dict[str, Any], header: str = "") -> str:
    """``doc`` as TOML: scalar keys first, then each array of tables (``[[pool]]``), each table's own
    tables below it; ``header`` lines become ``#`` comments at the top."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    arrays = {k: v for k, v in doc.items() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)}
    tables = {k: v for k, v in doc.items() if isinstance(v, dict)}
    for key, value in doc.items():
        if key not in arrays and key not in tables:
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    for key, value in tables.items():
        lines += ["", f"[{key}]"]
        _toml_table(lines, value, key)
    for key, items in arrays.items():
        for item in items:
            lines += ["", f"[[{key}]]"]
            _toml_table(lines, item, key)
    return "\n".join(lines) + "\n"


def _yaml_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"YAML value {value!r} must be finite")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"no YAML form for {type(value).__name__}")


def _yaml_lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return [pad + "{}"]
        out = []
        for k, v in value.items():
            key = _yaml_scalar(str(k)) if not str(k).replace("-", "").replace("_", "").replace(".", "").replace(
                "/", "").isalnum() else str(k)
            if isinstance(v, dict | list) and v:
                out.append(f"{pad}{key}:")
                out += _yaml_lines(v, indent + 2)
            else:
                empty = "{}" if isinstance(v, dict) else "[]"
                out.append(f"{pad}{key}: {empty if isinstance(v, dict | list) else _yaml_scalar(v)}")
        return out
    if isinstance(value, list):
        if not value:
            return [pad + "[]"]
        out = []
        for item in value:
            sub = _yaml_lines(item, indent + 2)
            out.append(f"{pad}- {sub[0].lstrip()}")
            out += sub[1:]
        return out
    return [pad + _yaml_scalar(value)]


def yaml_text(*docs: dict[str, Any], header: str = "") -> str:
    """``docs`` as one YAML stream (``---`` between documents); ``header`` lines as ``#`` comments."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    for i, doc in enumerate(docs):
        if i or lines:
            lines.append("---")
        lines += _yaml_lines(doc, 0)
    return "\n".join(lines) + "\n"
