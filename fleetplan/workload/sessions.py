"""Multi-round session workloads: templates, a mix of them, and a session arrival process.

A ``SessionTemplate`` is a fixed plan of rounds ``(new_prompt_tokens, output_tokens)``
(definitions and the context formula in ``fleetplan.workload.session_table``), optionally
with a relative length jitter (each count times ``U(1 - jitter, 1 + jitter)``, rounded half
to even, at least 1), a tool-call delay distribution and a shared system prompt (``id``,
``tokens``) at the head of every context, shared by all sessions naming the same id.
A ``SessionWorkload`` draws each session's template from the mix weights (normalised),
and session arrivals from a Poisson or Gamma renewal process (``fleetplan.workload.arrivals``).

Bundled (``fleetplan/_data/sessions/``): ``frontier_agentic``, the two templates of the
Frontier paper's Table 7 (appendix B.1; Feng et al. 2026, arXiv:2605.21312): Short
4096/96, 1024/64, 512/64, 512/64, 256/192 and Heavy tail 32768/96, 16384/64, 8192/64,
4096/64, 256/192 (new prompt / decode tokens per round; round 5 is answer-visible).  The
paper states neither the mix of the two templates nor the tool-call delay: the file mixes
them equally (change it with ``with_mix("heavy_tail=0.3,short=0.7")``) and gives no delay,
so the caller must give one (``with_tool_delay``).

JSON format of a user-defined session workload (``load_session_workload(path)``)::

    {
      "name": "my_agents",                       optional, default the file's stem
      "source": "where the numbers come from",   optional
      "tool_delay": {"kind": "exponential", "mean_s": 2.0},   optional default for templates;
                    kinds fixed | exponential | lognormal (+ "sigma"), seconds
      "arrival": {"process": "poisson"},         optional; or {"process": "gamma", "cv": 2.0}
      "templates": [                             at least one
        {"name": "coder", "weight": 0.7,         weight >= 0, default 1
         "rounds": [[4096, 96], [1024, 64], [256, 192]],   [new_prompt_tokens, output_tokens]
         "jitter": 0.1,                          optional, in [0, 1)
         "tool_delay": {"kind": "fixed", "mean_s": 0.5},   optional, overrides the default
         "system_prompt": {"id": "coder-v1", "tokens": 2048}}   optional
      ]
    }

Unknown keys, wrong types and out-of-range values raise ``DataFormatError`` naming the file,
the key and the fix.  Full description with examples: docs/sessions.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.workload.arrivals import gamma_arrivals_s, poisson_arrivals_s
from fleetplan.workload.session_table import SessionTable, ToolDelay

__all__ = ["ARRIVAL_PROCESSES", "SessionTemplate", "SessionWorkload", "parse_mix"]

ARRIVAL_PROCESSES = ("poisson", "gamma")


@dataclass(frozen=True)
class SessionTemplate:
    """A fixed plan of rounds (see the module docstring)."""

    name: str
    rounds: tuple[tuple[int, int], ...]
    jitter: float = 0.0
    tool_delay: ToolDelay | None = None
    system_prompt: str | None = None
    system_tokens: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "rounds", tuple((int(p), int(o)) for p, o in self.rounds))
        if not self.name:
            raise ConfigError("a session template needs a non-empty name")
        if not self.rounds:
            raise ConfigError(f"template {self.name!r} has no rounds; give at least one [new_prompt, output] pair")
        for k, (p, o) in enumerate(self.rounds):
            if p < 0 or o < 1 or (k == 0 and p + self.system_tokens < 1):
                raise ConfigError(f"template {self.name!r} round {k + 1} = {p}/{o}: new prompt tokens must be >= 0 "
                                  "(>= 1 in round 1 without a system prompt) and output tokens >= 1")
        if not (math.isfinite(self.jitter) and 0.0 <= self.jitter < 1.0):
            raise ConfigError(f"template {self.name!r} jitter = {self.jitter!r} must be in [0, 1); 0 = exact lengths")
        if self.system_tokens < 0 or (self.system_tokens > 0) != (self.system_prompt is not None):
            raise ConfigError(f"template {self.name!r}: give a system prompt id together with tokens > 0, or neither")

    @property
    def n_rounds(self) -> int:
        return len(self.rounds)


def parse_mix(text: str, names: tuple[str, ...]) -> dict[str, float]:
    """``"heavy_tail=0.3,short=0.7"`` -> ``{"heavy_tail": 0.3, "short": 0.7}``, checked against ``names``."""
    out: dict[str, float] = {}
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigError(f"mix entry {part!r} is not name=weight; give e.g. heavy_tail=0.3,short=0.7")
        if name not in names:
            raise UnknownNameError("session template", name, names)
        if name in out:
            raise ConfigError(f"mix names template {name!r} twice; give each template once")
        try:
            w = float(value)
        except ValueError:
            raise ConfigError(f"mix weight {value.strip()!r} of {name} is not a number; give e.g. {name}=0.3") from None
        if not math.isfinite(w) or w < 0:
            raise ConfigError(f"mix weight {name}={value.strip()} must be a finite number >= 0")
        out[name] = w
    if not out or sum(out.values()) <= 0:
        raise ConfigError(f"mix {text!r} gives no positive weight; give e.g. {names[0]}=1")
    return out


@dataclass(frozen=True)
class SessionWorkload:
    """Templates, their mix weights (any scale, normalised) and the session arrival process."""

    name: str
    templates: tuple[SessionTemplate, ...]
    weights: tuple[float, ...]
    tool_delay: ToolDelay | None = None
    arrival: str = "poisson"
    cv: float = 1.0
    source: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "templates", tuple(self.templates))
        object.__setattr__(self, "weights", tuple(float(w) for w in self.weights))
        names = self.template_names
        if not names:
            raise ConfigError(f"session workload {self.name!r} has no templates; give at least one")
        if len(set(names)) != len(names):
            raise ConfigError(f"session workload {self.name!r} repeats a template name ({', '.join(names)})")
        if len(self.weights) != len(names):
            raise ConfigError(f"{len(self.weights)} mix weights for {len(names)} templates; give one each")
        if any(not math.isfinite(w) or w < 0 for w in self.weights) or sum(self.weights) <= 0:
            raise ConfigError(f"mix weights {self.weights} must be finite, >= 0 and not all 0")
        if self.arrival not in ARRIVAL_PROCESSES:
            raise UnknownNameError("session arrival process", self.arrival, ARRIVAL_PROCESSES)
        if not (math.isfinite(self.cv) and self.cv > 0) or (self.arrival == "poisson" and self.cv != 1.0):
            raise ConfigError(f"arrival cv = {self.cv!r} must be > 0, and 1 for poisson; use process gamma for cv != 1")

    @property
    def template_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.templates)

    @property
    def shares(self) -> np.ndarray:
        """Normalised mix weights."""
        w = np.asarray(self.weights, dtype=np.float64)
        return w / w.sum()

    def with_mix(self, mix: str | Mapping[str, float]) -> SessionWorkload:
        """Same workload with new weights; templates left out of ``mix`` get weight 0."""
        given = parse_mix(mix, self.template_names) if isinstance(mix, str) else dict(mix)
        for name in given:
            if name not in self.template_names:
                raise UnknownNameError("session template", name, self.template_names)
        return replace(self, weights=tuple(float(given.get(n, 0.0)) for n in self.template_names))

    def with_tool_delay(self, delay: ToolDelay) -> SessionWorkload:
        """Same workload with ``delay`` for every template (overriding the templates' own)."""
        return replace(self, tool_delay=delay, templates=tuple(replace(t, tool_delay=None) for t in self.templates))

    def _delay_of(self, t: SessionTemplate) -> ToolDelay | None:
        return t.tool_delay if t.tool_delay is not None else self.tool_delay

    def sample(self, rng: np.random.Generator, n_sessions: int, rate_per_s: float) -> SessionTable:
        """``n_sessions`` sessions arriving at ``rate_per_s`` (sessions/s) as a ``SessionTable``.

        ``rng`` is split into independent child streams for arrivals, template choice, length
        jitter and tool delays (``Generator.spawn``), so changing one never shifts another.
        """
        if isinstance(n_sessions, bool) or int(n_sessions) != n_sessions or n_sessions < 1:
            raise ConfigError(f"number of sessions {n_sessions!r} must be an integer >= 1")
        n = int(n_sessions)
        share = self.shares
        for t, s in zip(self.templates, share, strict=True):
            if s > 0 and t.n_rounds > 1 and self._delay_of(t) is None:
                raise ConfigError(f"session workload {self.name} template {t.name!r} has no tool-call delay (its "
                                  "source does not state one); give one, e.g. `tool_delay` 1.0 or a tool_delay key",
                                  param="tool_delay")
        r_arr, r_tpl, r_jit, r_del = rng.spawn(4)
        if self.arrival == "gamma":
            arrival_s = gamma_arrivals_s(r_arr, rate_per_s, self.cv, n)
        else:
            arrival_s = poisson_arrivals_s(r_arr, rate_per_s, n)
        tpl = np.minimum(np.searchsorted(np.cumsum(share), r_tpl.random(n), side="right"), share.size - 1)
        n_rounds = np.array([t.n_rounds for t in self.templates])[tpl]
        starts = np.concatenate(([0], np.cumsum(n_rounds)[:-1]))
        session = np.repeat(np.arange(n), n_rounds)
        round_index = np.arange(session.size) - np.repeat(starts, n_rounds)
        offset = np.concatenate(([0], np.cumsum([t.n_rounds for t in self.templates])[:-1]))
        flat = np.array([r for t in self.templates for r in t.rounds], dtype=np.float64).reshape(-1, 2)
        rows_tpl = tpl[session]
        base = flat[offset[rows_tpl] + round_index]
        jitter = np.array([t.jitter for t in self.templates])[rows_tpl]
        factor = 1.0 + jitter[:, None] * (2.0 * r_jit.random((session.size, 2)) - 1.0)
        tokens = np.rint(base * factor).astype(np.int64)
        tokens = np.where(base >= 1, np.maximum(tokens, 1), 0)
        delay = np.zeros(session.size)
        for i, t in enumerate(self.templates):
            later = (rows_tpl == i) & (round_index > 0)
            if later.any():
                delay[later] = self._delay_of(t).sample(r_del, int(later.sum()))
        sys_names = list(dict.fromkeys(t.system_prompt for t in self.templates if t.system_prompt is not None))
        sys_id = np.array([sys_names.index(t.system_prompt) if t.system_prompt else -1 for t in self.templates])
        return SessionTable(
            session=session, round_index=round_index, is_final=round_index == n_rounds[session] - 1,
            new_prompt_tokens=tokens[:, 0], output_tokens=tokens[:, 1], delay_s=delay,
            system_prompt_id=sys_id[rows_tpl],
            system_tokens=np.array([t.system_tokens for t in self.templates])[rows_tpl],
            session_arrival_s=arrival_s[session], template=rows_tpl, template_names=self.template_names,
            burst=np.full(session.size, -1),
        )
