"""RL-rollout bursts: N trajectories released together, with heavy-tailed lengths.

Agentic RL rollouts (Frontier paper §6.4, Feng et al. 2026, arXiv:2605.21312): "the
trainer launches many trajectories in parallel ... once most short trajectories terminate,
a heavy-tail subset continues decoding alone and dictates when the trainer can advance"
(the paper's scenario: a 4,000-trajectory burst whose heavy-tail fraction is 5%).

``RlRollout`` releases ``n_bursts`` bursts of ``n_trajectories`` trajectories each, burst
``b`` at ``b * burst_interval_s`` (all of a burst at the same instant).  A trajectory is a
session of ``rounds_per_trajectory`` rounds: round 1 prefills ``prompt_tokens``, later
rounds add ``observation_tokens`` (the environment's reply) after a tool delay.  Its total
output ``L`` is drawn once per trajectory and split over the rounds as evenly as possible
(the remainder on the last rounds, each round >= 1 token):

* ``OutputLengths("lognormal", scale_tokens=m, shape=s, cap_tokens=c)``:
  ``L = min(c, ceil(m * exp(s Z)))``, ``Z ~ N(0, 1)`` (``m`` is the median);
* ``OutputLengths("pareto", scale_tokens=x_m, shape=alpha, cap_tokens=c)``:
  ``L = min(c, ceil(x_m * U^(-1/alpha)))``, ``U ~ U(0, 1]`` (Pareto type I, tail index alpha).

``expected_mean_tokens`` gives ``E[min(c, X)]`` of the continuous draw (before the ceiling,
which adds less than one token), which the tests compare with sample means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.workload.session_table import SessionTable, ToolDelay

__all__ = ["LENGTH_KINDS", "OutputLengths", "RlRollout"]

LENGTH_KINDS = ("lognormal", "pareto")


def _positive(owner: str, name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{owner} {name} = {value!r} must be a finite number > 0")
    return float(value)


def _count(owner: str, name: str, value: int, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < lo:
        raise ConfigError(f"{owner} {name} = {value!r} must be an integer >= {lo}")
    return int(value)


@dataclass(frozen=True)
class OutputLengths:
    """Heavy-tailed, capped trajectory output length (tokens); see the module docstring."""

    kind: str
    scale_tokens: float
    shape: float
    cap_tokens: int

    def __post_init__(self) -> None:
        if self.kind not in LENGTH_KINDS:
            raise UnknownNameError("output-length distribution", self.kind, LENGTH_KINDS)
        _positive("output lengths", "scale_tokens", self.scale_tokens)
        _positive("output lengths", "shape", self.shape)
        _count("output lengths", "cap_tokens", self.cap_tokens, 1)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` lengths (tokens, >= 1, <= cap)."""
        if self.kind == "lognormal":
            x = self.scale_tokens * np.exp(self.shape * rng.standard_normal(n))
        else:
            x = self.scale_tokens * (1.0 - rng.random(n)) ** (-1.0 / self.shape)
        return np.clip(np.ceil(x), 1, self.cap_tokens).astype(np.int64)

    def expected_mean_tokens(self) -> float:
        """``E[min(cap, X)]`` of the continuous law (no ceiling)."""
        c, m, s = float(self.cap_tokens), float(self.scale_tokens), float(self.shape)
        if self.kind == "lognormal":
            z = (math.log(c) - math.log(m)) / s
            from scipy.special import ndtr  # standard normal cdf (what scipy.stats.norm uses); loaded when used

            below = m * math.exp(0.5 * s * s) * ndtr(z - s)
            return below + c * ndtr(-z)
        if c <= m:
            return c
        # E[min(c, X)] = x_m + int_{x_m}^{c} (x_m / x)^alpha dx
        if s == 1.0:
            return m + m * math.log(c / m)
        return m + m**s * (c ** (1.0 - s) - m ** (1.0 - s)) / (1.0 - s)

    def quantile_tokens(self, q: float) -> float:
        """The ``q`` quantile of ``min(cap, X)`` (continuous law)."""
        if self.kind == "lognormal":
            from scipy.special import ndtri  # the standard normal quantile (scipy.stats.norm's), loaded when used

            x = self.scale_tokens * math.exp(self.shape * ndtri(q))
        else:
            x = self.scale_tokens * (1.0 - q) ** (-1.0 / self.shape)
        return min(float(self.cap_tokens), x)


@dataclass(frozen=True)
class RlRollout:
    """Bursts of trajectories released together (see the module docstring)."""

    n_trajectories: int
    output: OutputLengths
    prompt_tokens: int
    n_bursts: int = 1
    burst_interval_s: float = 0.0
    rounds_per_trajectory: int = 1
    observation_tokens: int = 0
    tool_delay: ToolDelay | None = None

    def __post_init__(self) -> None:
        _count("rl rollout", "n_trajectories", self.n_trajectories, 1)
        _count("rl rollout", "prompt_tokens", self.prompt_tokens, 1)
        _count("rl rollout", "n_bursts", self.n_bursts, 1)
        _count("rl rollout", "rounds_per_trajectory", self.rounds_per_trajectory, 1)
        _count("rl rollout", "observation_tokens", self.observation_tokens, 0)
        b = self.burst_interval_s
        if isinstance(b, bool) or not isinstance(b, int | float) or not math.isfinite(b) or b < 0:
            raise ConfigError(f"rl rollout burst_interval_s = {b!r} must be a finite number >= 0 seconds")
        if self.n_bursts > 1 and b <= 0:
            raise ConfigError(f"{self.n_bursts} bursts need burst_interval_s > 0; give the time between bursts")
        if self.rounds_per_trajectory > 1 and self.tool_delay is None:
            raise ConfigError(f"{self.rounds_per_trajectory} rounds per trajectory need a tool_delay between rounds; "
                              "give one, e.g. `tool_delay` 1.0", param="tool_delay")
        if self.output.cap_tokens < self.rounds_per_trajectory:
            raise ConfigError(f"output cap {self.output.cap_tokens} < {self.rounds_per_trajectory} rounds; "
                              "each round needs at least one output token")

    def sample(self, rng: np.random.Generator) -> SessionTable:
        """All trajectories as a ``SessionTable`` (``burst`` set, template ``rollout``)."""
        r_len, r_del = rng.spawn(2)
        n_traj = self.n_trajectories * self.n_bursts
        rounds = self.rounds_per_trajectory
        total = np.maximum(self.output.sample(r_len, n_traj), rounds)
        n = n_traj * rounds
        session = np.repeat(np.arange(n_traj), rounds)
        round_index = np.tile(np.arange(rounds), n_traj)
        # even split, the remainder on the last rounds: round k gets floor((k+1)L/R) - floor(kL/R)
        lt = total[session]
        out = (round_index + 1) * lt // rounds - round_index * lt // rounds
        new = np.where(round_index == 0, self.prompt_tokens, self.observation_tokens)
        delay = np.zeros(n)
        if rounds > 1:
            later = round_index > 0
            delay[later] = self.tool_delay.sample(r_del, int(later.sum()))
        burst = session // self.n_trajectories
        return SessionTable(
            session=session, round_index=round_index, is_final=round_index == rounds - 1,
            new_prompt_tokens=new, output_tokens=out, delay_s=delay, system_prompt_id=np.full(n, -1),
            system_tokens=np.zeros(n, dtype=np.int64), session_arrival_s=burst * float(self.burst_interval_s),
            template=np.zeros(n, dtype=np.int32), template_names=("rollout",), burst=burst,
        )
