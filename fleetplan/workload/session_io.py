"""Reading and writing session workload files (JSON format in ``fleetplan.workload.sessions``).

``load_session_workload(x)`` resolves, in order: an existing path (a JSON file in the
documented format); a bundled name with or without ``.json`` in
``fleetplan.paths.data_dir("sessions")`` (``frontier_agentic``); otherwise
``UnknownNameError`` listing the bundled names.  ``mix`` (``"heavy_tail=0.3,short=0.7"``)
and ``tool_delay`` override the file's weights and delays.  Every malformed value raises
``DataFormatError`` naming the file, the key and the fix.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from fleetplan.errors import ConfigError, DataFormatError, UnknownNameError
from fleetplan.paths import data_dir
from fleetplan.workload.session_table import ToolDelay
from fleetplan.workload.sessions import SessionTemplate, SessionWorkload

__all__ = ["list_session_workloads", "load_session_workload", "parse_session_document", "session_document"]

_TOP_KEYS = {"name", "source", "tool_delay", "arrival", "templates"}
_TEMPLATE_KEYS = {"name", "weight", "rounds", "jitter", "tool_delay", "system_prompt"}
_DELAY_KEYS = {"kind", "mean_s", "sigma"}


def _sessions_dir() -> Path | None:
    try:
        return data_dir("sessions")
    except FileNotFoundError:
        return None


def list_session_workloads() -> tuple[str, ...]:
    """Names of the bundled session workloads, sorted."""
    d = _sessions_dir()
    return tuple(sorted(p.stem for p in d.glob("*.json"))) if d is not None else ()


def _keys(path: str, where: str, obj: Any, allowed: set[str], required: tuple[str, ...] = ()) -> dict:
    if not isinstance(obj, dict):
        raise DataFormatError(path, where, f"is {type(obj).__name__}, not an object", "give a JSON object {...}")
    extra = sorted(set(obj) - allowed)
    if extra:
        raise DataFormatError(path, where, f"unknown key {extra[0]!r}", f"valid keys are {', '.join(sorted(allowed))}")
    for key in required:
        if key not in obj:
            raise DataFormatError(path, where, f"missing key {key!r}", f"add \"{key}\"")
    return obj


def _number(path: str, where: str, value: Any, lo: float, rule: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < lo:
        raise DataFormatError(path, where, f"{value!r} is not a finite number {rule}", f"give a number {rule}")
    return float(value)


def _count(path: str, where: str, value: Any, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise DataFormatError(path, where, f"{value!r} is not an integer >= {lo}", f"give a token count >= {lo}")
    return int(value)


def _delay(path: str, where: str, obj: Any) -> ToolDelay | None:
    if obj is None:
        return None
    d = _keys(path, where, obj, _DELAY_KEYS, ("kind", "mean_s"))
    try:
        return ToolDelay(str(d["kind"]), _number(path, f"{where}.mean_s", d["mean_s"], 0, ">= 0 seconds"),
                         _number(path, f"{where}.sigma", d.get("sigma", 0.0), 0, ">= 0"))
    except (ConfigError, UnknownNameError) as exc:
        raise DataFormatError(path, where, str(exc)) from None


def _template(path: str, k: int, obj: Any) -> tuple[SessionTemplate, float]:
    where = f"templates[{k}]"
    t = _keys(path, where, obj, _TEMPLATE_KEYS, ("name", "rounds"))
    rounds = t["rounds"]
    if not isinstance(rounds, list) or not rounds:
        raise DataFormatError(path, f"{where}.rounds", "is not a non-empty list", "give [[new_prompt, output], ...]")
    pairs = []
    for j, pair in enumerate(rounds):
        w = f"{where}.rounds[{j}]"
        if not isinstance(pair, list) or len(pair) != 2:
            raise DataFormatError(path, w, f"{pair!r} is not a [new_prompt_tokens, output_tokens] pair",
                                  "give two integers, e.g. [4096, 96]")
        pairs.append((_count(path, w, pair[0], 0), _count(path, w, pair[1], 1)))
    system_prompt, system_tokens = None, 0
    if t.get("system_prompt") is not None:
        s = _keys(path, f"{where}.system_prompt", t["system_prompt"], {"id", "tokens"}, ("id", "tokens"))
        if not isinstance(s["id"], str) or not s["id"]:
            raise DataFormatError(path, f"{where}.system_prompt.id", f"{s['id']!r} is not a non-empty string",
                                  "give a name shared by the templates that share the prompt")
        system_prompt, system_tokens = s["id"], _count(path, f"{where}.system_prompt.tokens", s["tokens"], 1)
    if not isinstance(t["name"], str):
        raise DataFormatError(path, f"{where}.name", f"{t['name']!r} is not a string", "give a template name")
    try:
        template = SessionTemplate(
            name=t["name"], rounds=tuple(pairs),
            jitter=_number(path, f"{where}.jitter", t.get("jitter", 0.0), 0, ">= 0 and < 1"),
            tool_delay=_delay(path, f"{where}.tool_delay", t.get("tool_delay")),
            system_prompt=system_prompt, system_tokens=system_tokens,
        )
    except ConfigError as exc:
        raise DataFormatError(path, where, str(exc)) from None
    return template, _number(path, f"{where}.weight", t.get("weight", 1.0), 0, ">= 0")


def parse_session_document(doc: Any, path: str, default_name: str) -> SessionWorkload:
    """``SessionWorkload`` from a parsed JSON document (format in ``fleetplan.workload.sessions``)."""
    d = _keys(path, None, doc, _TOP_KEYS, ("templates",))
    if not isinstance(d["templates"], list) or not d["templates"]:
        raise DataFormatError(path, "templates", "is not a non-empty list", "give at least one template object")
    parsed = [_template(path, k, t) for k, t in enumerate(d["templates"])]
    arrival = _keys(path, "arrival", d.get("arrival", {"process": "poisson"}), {"process", "cv"}, ("process",))
    name = d.get("name", default_name)
    try:
        return SessionWorkload(
            name=str(name), templates=tuple(t for t, _ in parsed), weights=tuple(w for _, w in parsed),
            tool_delay=_delay(path, "tool_delay", d.get("tool_delay")), arrival=str(arrival["process"]),
            cv=_number(path, "arrival.cv", arrival.get("cv", 1.0), 0, "> 0"), source=str(d.get("source", "")),
        )
    except (ConfigError, UnknownNameError) as exc:
        raise DataFormatError(path, None, str(exc)) from None


def session_document(w: SessionWorkload) -> dict:
    """The JSON document of ``w`` (``parse_session_document`` reads it back unchanged)."""
    templates = []
    for t, weight in zip(w.templates, w.weights, strict=True):
        obj: dict[str, Any] = {"name": t.name, "weight": weight, "rounds": [list(r) for r in t.rounds]}
        if t.jitter:
            obj["jitter"] = t.jitter
        if t.tool_delay is not None:
            obj["tool_delay"] = t.tool_delay.to_json()
        if t.system_prompt is not None:
            obj["system_prompt"] = {"id": t.system_prompt, "tokens": t.system_tokens}
        templates.append(obj)
    doc: dict[str, Any] = {"name": w.name, "source": w.source, "arrival": {"process": w.arrival}}
    if w.arrival == "gamma":
        doc["arrival"]["cv"] = w.cv
    if w.tool_delay is not None:
        doc["tool_delay"] = w.tool_delay.to_json()
    doc["templates"] = templates
    return doc


def _read(path: Path) -> SessionWorkload:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFormatError(str(path), f"line {exc.lineno}", f"not valid JSON ({exc.msg})",
                              "fix the syntax (docs/sessions.md shows the format)") from None
    except UnicodeDecodeError:
        raise DataFormatError(str(path), None, "is not UTF-8 text", "give a JSON session workload file") from None
    return parse_session_document(doc, str(path), path.stem)


def load_session_workload(
    name_or_path: str | os.PathLike, mix: str | None = None, tool_delay: ToolDelay | None = None
) -> SessionWorkload:
    """A bundled session workload by name, or a JSON file (see the module docstring)."""
    p = Path(name_or_path)
    if p.exists():
        if p.is_dir():
            raise DataFormatError(str(p), None, "is a directory", "give a session workload JSON file")
        w = _read(p)
    else:
        name = str(name_or_path)
        stem = name.removesuffix(".json")
        bundled = list_session_workloads()
        if os.sep in name or stem not in bundled:
            raise UnknownNameError("session workload", name, bundled)
        w = _read(_sessions_dir() / f"{stem}.json")
    if mix is not None:
        w = w.with_mix(mix)
    if tool_delay is not None:
        w = w.with_tool_delay(tool_delay)
    return w
