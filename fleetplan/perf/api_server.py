"""The engine's API server: host time per request, per token and per streamed chunk, a throughput ceiling.

vLLM's V1 engine runs its OpenAI-compatible server in its own process(es), apart from the
engine core that schedules steps: HTTP handling, input processing (tokenisation) and output
streaming (detokenisation, one server-sent event per chunk) happen there and communicate with the
engine core over ZMQ (vllm-project/vllm ``docs/design/arch_overview.md``; one API server process by
default, vLLM's ``api_server_count`` engine argument for more, scaled to the data-parallel size with DP).
So this work is not on the step's critical path; it is a second server in front of the engine, busy per
request

    t_api = s_per_request + s_per_token (prompt + output) + s_per_output_chunk ceil(output / interval)

where ``s_per_request`` is HTTP handling and request setup, ``s_per_token`` the tokenise / detokenise
work per token and ``s_per_output_chunk`` the output stream's per-chunk serialisation and IO (vLLM sends
one chunk per ``interval`` = ``stream_interval`` output tokens, 1 by default; vllm-project/vllm PR #27869).
Of it the prompt's tokenisation ``s_per_token * prompt_tokens`` comes before the engine sees the request
(it adds to the TTFT).  With ``n_servers`` processes the instance cannot take requests faster than

    max_rate_per_s = n_servers / E[t_api]

(a utilisation-one ceiling; short requests, where ``t_api`` is large next to their GPU time, hit it
first).  One model in both phases: ``ApiServerCost`` is read by the analytic hook
(``fleetplan.queueing.api_server``: utilisation ``lambda_i E[t_api] / n`` < 1 in sizing, the M/G/c wait
and the tokenisation in the TTFT) and by the simulator's FCFS stage in front of each pool
(``fleetplan.sim.api_server``: ``n`` servers per instance, each request holds one for ``t_api`` and
reaches the engine after its wait and its tokenisation).

The costs are ``PredictorOptions.api_server_s_per_request``, ``api_server_s_per_token``,
``api_server_s_per_output_chunk`` and ``api_server_stream_interval_tokens``, set per engine in
``engine_profiles/*.toml`` with their source; 0 (the default, and every engine but vLLM) means not
modelled and the ceiling is infinite.  vLLM: 1.2 us per token from a HuggingFace fast tokenizer's
834,716 tokens/s on one core (marin-community/marin issue #2829), and for the other two the largest pair
that three published runs, each capped by vLLM's API server or by something else, allow (every run is an
upper bound on ``t_api`` of its mix, per process):

    5.40 ms  >= s_req + 1.2 us (40 + 32) + 32 s_chunk         (PR #41181, 2026-04: 32 / 32-token chat requests,
                                                              740.45 req/s over 4 API server processes)
    30.05 ms >= s_req + 1.2 us (1024 + 1024) + 1024 s_chunk   (PR #27869, 2025-11, stream interval 1: 1,024 /
                                                              1,024 tokens, 5,120 requests in 153.85 s)
    13.07 ms >= s_req + 1.2 us (220.6 + 202) + 202 s_chunk    (PR #17546 'DP=2 before', 2025-05: ShareGPT,
                                                              76.5 req/s through one API server)

The first two bind at their vertex, ``s_per_output_chunk`` = 22.5 us and ``s_per_request`` = 4.60 ms (any
smaller pair fits them too); the third is then slack (9.65 ms: that run was capped elsewhere).  The earlier
pair, 8.87 ms and 18.3 us, solved the last two as equalities and broke the first (9.54 ms against 5.40).  The
runs span vLLM 0.9 to 2026's main on different hosts; one cost for all assumes the per-request work did not
grow across those releases.  Check: with interval 10 the same cost allows 107 req/s of PR #27869's mix, above
the ~52 req/s its 57 % gain reached (vLLM blog, 2026-02-01), so there the engine binds, as the blog's
"relieved output queue bottlenecks" says.  A 128-in / 4-out request costs 4.85 ms (206 req/s per process).
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
    """``t_api = s_per_request + s_per_token (prompt + output) + s_per_output_chunk ceil(output /
    stream_interval)`` on each of ``n_servers`` processes per instance (vLLM's ``api_server_count``);
    module docstring."""

    s_per_request: float = 0.0
    s_per_token: float = 0.0
    n_servers: int = 1
    s_per_output_chunk: float = 0.0
    stream_interval: int = 1

    def __post_init__(self) -> None:
        for name in ("s_per_request", "s_per_token", "s_per_output_chunk"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not (math.isfinite(v) and v >= 0):
                raise ConfigError(f"api_server_{name}={v!r} must be a finite number of seconds >= 0",
                                  param=f"api_server_{name}", value=v)
        n = self.n_servers
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"n_api_servers={n!r} must be an integer >= 1 (vLLM's api_server_count)",
                              param="n_api_servers", value=n)
        k = self.stream_interval
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"api_server_stream_interval_tokens={k!r} must be an integer >= 1 (vLLM's "
                              f"stream_interval engine argument, 1 = a chunk per token)",
                              param="api_server_stream_interval_tokens", value=k)

    @classmethod
    def of(cls, options: PredictorOptions, n_servers: int = 1) -> ApiServerCost:
        """The cost an engine profile's options give (all 0: not modelled)."""
        return cls(options.api_server_s_per_request, options.api_server_s_per_token, n_servers,
                   s_per_output_chunk=options.api_server_s_per_output_chunk,
                   stream_interval=options.api_server_stream_interval_tokens)

    @classmethod
    def of_step_model(cls, step_model, n_servers: int = 1) -> ApiServerCost:
        """The cost of a pool's step model: its predictor options', else not modelled (calibrated and
        linear step models carry no engine profile)."""
        options = getattr(step_model, "options", None)
        return cls.of(options, n_servers) if isinstance(options, PredictorOptions) else cls(n_servers=n_servers)

    @property
    def modelled(self) -> bool:
        return self.s_per_request > 0.0 or self.s_per_token > 0.0 or self.s_per_output_chunk > 0.0

    def output_chunks(self, output_tokens) -> np.ndarray:
        """Streamed chunks of each request, ``ceil(output / stream_interval)``."""
        return np.ceil(_check_tokens("output_tokens", output_tokens) / self.stream_interval)

    def busy_s(self, prompt_tokens, output_tokens) -> np.ndarray:
        """``t_api`` of each request (seconds one process is busy with it)."""
        p, o = _check_tokens("prompt_tokens", prompt_tokens), _check_tokens("output_tokens", output_tokens)
        return self.s_per_request + self.s_per_token * (p + o) + self.s_per_output_chunk * self.output_chunks(o)

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
