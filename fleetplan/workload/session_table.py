"""Flat per-round table of multi-round sessions, and tool-call delay distributions.

A session (an agentic request, Frontier paper §3.2 "Agentic Reasoning" and appendix B.1;
an RL trajectory, §6.4) is a chain of rounds ``k = 0 .. R-1``.  Round ``k`` adds
``new_prompt_tokens[k]`` to the context, generates ``output_tokens[k]``, and round ``k + 1`` is
released ``delay_s[k + 1]`` seconds after round ``k`` completes (the tool call in between).
The last round is the answer-visible round (``is_final``); the others are hidden planning.

``SessionTable`` holds one row per round, session-major (rows of a session are contiguous and
in round order), sessions in order of arrival, so the table maps one to one onto the
simulator's request rows (``fleetplan.sim.sessions``).  Context of round ``k``:

    prompt_k = S + sum_{j<k} (new_j + out_j) + new_k         (S = system-prompt tokens)

Tool-call delays (``ToolDelay``): ``fixed`` (every delay ``mean_s``), ``exponential``
(mean ``mean_s``) or ``lognormal`` (mean ``mean_s``, log-space standard deviation ``sigma``,
so ``mu = ln(mean_s) - sigma^2 / 2``).  No default value is built in: the Frontier paper
models "a tool-execution latency attached to each inter-round tool call" (§3.2) but does not
state one, so a workload file or the caller must give it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError, UnknownNameError

__all__ = ["DELAY_KINDS", "SessionTable", "ToolDelay"]

DELAY_KINDS = ("fixed", "exponential", "lognormal")


@dataclass(frozen=True)
class ToolDelay:
    """Distribution of one tool-call delay (seconds); see the module docstring."""

    kind: str
    mean_s: float
    sigma: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in DELAY_KINDS:
            raise UnknownNameError("tool-delay kind", self.kind, DELAY_KINDS)
        m = self.mean_s
        if isinstance(m, bool) or not isinstance(m, int | float) or not math.isfinite(m) or m < 0:
            raise ConfigError(f"tool delay mean_s = {m!r} must be a finite number >= 0 seconds; give e.g. 1.0")
        if self.kind != "fixed" and m == 0:
            raise ConfigError(f"{self.kind} tool delay mean_s = 0 is degenerate; use kind fixed for zero delay")
        s = self.sigma
        if isinstance(s, bool) or not isinstance(s, int | float) or not math.isfinite(s) or s < 0:
            raise ConfigError(f"tool delay sigma = {s!r} must be a finite number >= 0; give e.g. 1.0")
        if self.kind == "lognormal" and s == 0:
            raise ConfigError("lognormal tool delay needs sigma > 0 (log-space sd); use kind fixed for a constant")
        if self.kind != "lognormal" and s != 0:
            raise ConfigError(f"sigma = {s!r} applies to lognormal tool delays only; drop it for kind {self.kind}")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` delays (s)."""
        if self.kind == "fixed":
            return np.full(n, float(self.mean_s))
        if self.kind == "exponential":
            return rng.exponential(float(self.mean_s), n)
        mu = math.log(self.mean_s) - 0.5 * self.sigma**2
        return rng.lognormal(mu, self.sigma, n)

    def to_json(self) -> dict:
        out = {"kind": self.kind, "mean_s": float(self.mean_s)}
        if self.kind == "lognormal":
            out["sigma"] = float(self.sigma)
        return out


def _column(name: str, values, dtype, n: int) -> np.ndarray:
    arr = np.ascontiguousarray(values, dtype=dtype)
    if arr.shape != (n,):
        raise ConfigError(f"session table column {name} has shape {arr.shape}, not ({n},); give one value per round")
    return arr


@dataclass(frozen=True, eq=False)
class SessionTable:
    """One row per round (N rows, session-major, sessions by arrival); see the module docstring.

    ``template_names[template[i]]`` names the template of row ``i``'s session; ``burst`` is the
    RL burst of a rollout trajectory (-1 for ordinary sessions); ``system_prompt_id`` indexes
    the distinct shared system prompts (-1 = none).
    """

    session: np.ndarray  # i8[N] 0 .. n_sessions-1
    round_index: np.ndarray  # i4[N] 0 .. R-1
    is_final: np.ndarray  # bool[N] the answer-visible (last) round
    new_prompt_tokens: np.ndarray  # i8[N] tokens added to the context by the round
    output_tokens: np.ndarray  # i8[N]
    delay_s: np.ndarray  # f8[N] tool-call delay before this round (0 for first rounds)
    system_prompt_id: np.ndarray  # i8[N]
    system_tokens: np.ndarray  # i8[N] shared system-prompt tokens at the head of the context
    session_arrival_s: np.ndarray  # f8[N] arrival of the row's session
    template: np.ndarray  # i4[N]
    template_names: tuple[str, ...]
    burst: np.ndarray  # i8[N]

    def __post_init__(self) -> None:
        n = np.asarray(self.session).size
        for name, dtype in (("session", np.int64), ("round_index", np.int32), ("is_final", np.bool_),
                            ("new_prompt_tokens", np.int64), ("output_tokens", np.int64), ("delay_s", np.float64),
                            ("system_prompt_id", np.int64), ("system_tokens", np.int64),
                            ("session_arrival_s", np.float64), ("template", np.int32), ("burst", np.int64)):
            object.__setattr__(self, name, _column(name, getattr(self, name), dtype, n))
        if n == 0:
            return
        first = self.round_index == 0
        starts = np.flatnonzero(first)
        if starts.size == 0 or starts[0] != 0 or not np.array_equal(self.session[starts], np.arange(starts.size)):
            raise ConfigError("session table rows must be session-major with sessions numbered 0, 1, ... in order")
        expect_round = np.arange(n) - np.repeat(starts, np.diff(np.append(starts, n)))
        if not np.array_equal(self.round_index, expect_round):
            raise ConfigError("session table rounds must run 0, 1, ... within each session")
        last = np.append(starts[1:] - 1, n - 1)
        if not np.array_equal(np.flatnonzero(self.is_final), last):
            raise ConfigError("session table: exactly the last round of each session must be final")
        arrival = self.session_arrival_s[starts]
        if not np.all(np.isfinite(arrival)) or arrival[0] < 0 or np.any(np.diff(arrival) < 0):
            raise ConfigError("session arrival times must be finite, >= 0 and non-decreasing over sessions")
        if np.any(self.output_tokens < 1) or np.any(self.new_prompt_tokens < 0) or np.any(self.system_tokens < 0):
            raise ConfigError("every round needs output_tokens >= 1 and new_prompt_tokens >= 0; fix the workload")
        if np.any(self.system_tokens[first] + self.new_prompt_tokens[first] < 1):
            raise ConfigError("a session's first round needs at least one prompt token; fix the workload")
        if not np.all(np.isfinite(self.delay_s)) or np.any(self.delay_s < 0) or np.any(self.delay_s[first] != 0):
            raise ConfigError("tool-call delays must be finite and >= 0 seconds, and 0 before first rounds")

    @property
    def n_rows(self) -> int:
        return int(self.session.size)

    @property
    def n_sessions(self) -> int:
        return int(self.session[-1]) + 1 if self.session.size else 0

    def context_tokens(self) -> tuple[np.ndarray, np.ndarray]:
        """``(prompt_tokens, previous_context_tokens)`` per row: the full context each round
        prefills (module docstring) and the part of it that the previous round left behind
        (system tokens for first rounds)."""
        total = self.new_prompt_tokens + self.output_tokens
        csum = np.cumsum(total)
        starts = np.flatnonzero(self.round_index == 0)
        base = np.repeat(csum[starts] - total[starts], np.diff(np.append(starts, self.n_rows)))
        previous = self.system_tokens + (csum - total - base)
        return previous + self.new_prompt_tokens, previous
