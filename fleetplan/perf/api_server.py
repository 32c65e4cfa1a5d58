"""The engine's API server: host time per request and per token, a throughput ceiling.

vLLM's V1 engine runs its OpenAI-compatible server in its own process(es), apart from the
engine core that schedules steps: HTTP handling, input processing (tokenisation) and output
streaming (detokenisation) happen there and communicate with the engine core over ZMQ
(vllm-project/vllm ``docs/design/arch_overview.md``; one API server process by default, vLLM's
``api_server_count`` engine argument for more, scaled to the data-parallel size with DP).  So this work
is not on the step's critical path; it is a second server in front of the engine, busy per request

    t_api = s_per_request + s_per_token * (prompt_tokens + output_tokens)

of which the prompt's tokenisation ``s_per_token * prompt_tokens`` comes before the engine sees the
request (it adds to the TTFT).  With ``n_servers`` processes the instance cannot take requests faster than

    max_rate_per_s = n_servers / E[t_api]

(a utilisation-one ceiling; short requests, where ``t_api`` is large next to their GPU time, hit it
first).  One model in both phases: ``ApiServerCost`` is read by the analytic hook
(``fleetplan.queueing.api_server``: utilisation ``lambda_i E[t_api] / n`` < 1 in sizing, the M/G/c wait
and the tokenisation in the TTFT) and by the simulator's FCFS stage in front of each pool
(``fleetplan.sim.api_server``: ``n`` servers per instance, each request holds one for ``t_api`` and
reaches the engine after its wait and its tokenisation).

``s_per_request`` and ``s_per_token`` are ``PredictorOptions.api_server_s_per_request`` and
``api_server_s_per_token``, set per engine in ``engine_profiles/*.toml`` with their source; 0 (the
default, and every engine but vLLM) means not modelled and the ceiling is infinite.  vLLM: 12.6 ms per
request and 1.2 us per token -- one API server process saturated at 76.5 req/s of ShareGPT requests
(220.6 prompt + ~202 output tokens) in vllm-project/vllm PR #17546's 'DP=2 before' run, and a
HuggingFace fast tokenizer's 834,716 tokens/s on one core (marin-community/marin issue #2829).  The
output stream's own per-token cost (incremental detokenisation, one SSE chunk per token) is not
measured apart from the request's: it is folded into ``s_per_request`` at ShareGPT's ~200 output tokens,
so requests with far longer outputs are charged less API time than they take.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.perf.overheads import PredictorOptions

__all__ = ["ApiServerCost", "api_server_busy_s", "api_server_max_request_rate_per_s"]


def _check_tokens(name: str, value) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(arr) & (arr >= 0)):
        bad = arr[~(np.isfinite(arr) & (arr >= 0))].flat[0]
        raise ConfigError(f"{name}={bad!r} must be a finite number of tokens >= 0", param=name, value=float(bad))
    return arr


@dataclass(frozen=True)
class ApiServerCost:
    """``t_api = s_per_request + s_per_token (prompt + output)`` on each of ``n_servers`` processes
    per instance (vLLM's ``api_server_count``); module docstring."""

    s_per_request: float = 0.0
    s_per_token: float = 0.0
    n_servers: int = 1

    def __post_init__(self) -> None:
        for name in ("s_per_request", "s_per_token"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not (math.isfinite(v) and v >= 0):
                raise ConfigError(f"api_server_{name}={v!r} must be a finite number of seconds >= 0",
                                  param=f"api_server_{name}", value=v)
        n = self.n_servers
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"n_api_servers={n!r} must be an integer >= 1 (vLLM's api_server_count)",
                              param="n_api_servers", value=n)

    @classmethod
    def of(cls, options: PredictorOptions, n_servers: int = 1) -> ApiServerCost:
        """The cost an engine profile's options give (0, 0: not modelled)."""
        return cls(options.api_server_s_per_request, options.api_server_s_per_token, n_servers)

    @classmethod
    def of_step_model(cls, step_model, n_servers: int = 1) -> ApiServerCost:
        """The cost of a pool's step model: its predictor options', else not modelled (calibrated and
        linear step models carry no engine profile)."""
        options = getattr(step_model, "options", None)
        return cls.of(options, n_servers) if isinstance(options, PredictorOptions) else cls(n_servers=n_servers)

    @property
    def modelled(self) -> bool:
        return self.s_per_request > 0.0 or self.s_per_token > 0.0

    def busy_s(self, prompt_tokens, output_tokens) -> np.ndarray:
        """``t_api`` of each request (seconds one process is busy with it)."""
        p, o = _check_tokens("prompt_tokens", prompt_tokens), _check_tokens("output_tokens", output_tokens)
        return self.s_per_request + self.s_per_token * (p + o)

    def tokenize_s(self, prompt_tokens) -> np.ndarray:
        """The prompt's tokenisation ``s_per_token * prompt``: before the engine sees the request."""
        return self.s_per_token * _check_tokens("prompt_tokens", prompt_tokens)

    def max_rate_per_s(self, mean_busy_s: float) -> float:
        """``n_servers / E[t_api]`` requests per second per instance (``inf`` when not modelled)."""
        return math.inf if mean_busy_s <= 0.0 else self.n_servers / mean_busy_s


def api_server_busy_s(options: PredictorOptions, prompt_tokens: float, output_tokens: float) -> float:
    """Seconds one API server process spends on a request of the given lengths (module docstring)."""
    return float(ApiServerCost.of(options).busy_s(prompt_tokens, output_tokens))


def api_server_max_request_rate_per_s(options: PredictorOptions, prompt_tokens: float, output_tokens: float,
                                      n_api_servers: int = 1) -> float:
    """Requests per second ``n_api_servers`` processes can serve (``inf`` when the cost is not modelled)."""
    cost = ApiServerCost.of(options, n_api_servers)
    return cost.max_rate_per_s(float(cost.busy_s(prompt_tokens, output_tokens)))
