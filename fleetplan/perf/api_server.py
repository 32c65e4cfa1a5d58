"""The engine's API server: host time per request and per token, a throughput ceiling.

vLLM's V1 engine runs its OpenAI-compatible server in its own process(es), apart from the
engine core that schedules steps: HTTP handling, input processing (tokenisation) and output
streaming (detokenisation) happen there and communicate with the engine core over ZMQ
(vllm-project/vllm ``docs/design/arch_overview.md``; one API server process by default, vLLM's
``api_server_count`` engine argument for more, scaled to the data-parallel size with DP).  So this work
is not on the step's critical path; it is a second server in front of the engine, busy per request

    busy_s = s_per_request + s_per_token * (prompt_tokens + output_tokens)

and the instance cannot take requests faster than

    max_rate_per_s = n_api_servers / busy_s

(a utilisation-one ceiling; short requests, where ``busy_s`` is large next to their GPU time,
hit it first).  ``s_per_request`` and ``s_per_token`` are ``PredictorOptions.api_server_s_per_request``
and ``api_server_s_per_token``, set per engine in ``engine_profiles/*.toml`` with their source;
0 (the default) means not modelled and the ceiling is infinite.
"""

from __future__ import annotations

import math

from fleetplan.errors import ConfigError
from fleetplan.perf.overheads import PredictorOptions

__all__ = ["api_server_busy_s", "api_server_max_request_rate_per_s"]


def api_server_busy_s(options: PredictorOptions, prompt_tokens: float, output_tokens: float) -> float:
    """Seconds one API server process spends on a request of the given lengths (module docstring)."""
    for name, value in (("prompt_tokens", prompt_tokens), ("output_tokens", output_tokens)):
        if not (math.isfinite(value) and value >= 0):
            raise ConfigError(f"{name}={value!r} must be a finite number of tokens >= 0", param=name, value=value)
    return options.api_server_s_per_request + options.api_server_s_per_token * (prompt_tokens + output_tokens)


def api_server_max_request_rate_per_s(options: PredictorOptions, prompt_tokens: float, output_tokens: float,
                                      n_api_servers: int = 1) -> float:
    """Requests per second ``n_api_servers`` processes can serve (``inf`` when the cost is not modelled)."""
    if isinstance(n_api_servers, bool) or not isinstance(n_api_servers, int) or n_api_servers < 1:
        raise ConfigError(f"n_api_servers={n_api_servers!r} must be an integer >= 1 (vLLM's api_server_count)",
                          param="n_api_servers", value=n_api_servers)
    busy = api_server_busy_s(options, prompt_tokens, output_tokens)
    return math.inf if busy == 0.0 else n_api_servers / busy
