"""Shared system prompts on a plain request stream (prefix-cache identity of each request).

``SharedPrefix(tokens, n_prompts)``: every request's prompt starts with one of ``n_prompts``
distinct system prompts of ``tokens`` tokens (drawn uniformly per request from the stream
``prefix`` of the run's seed); a prompt shorter than that is a prefix of it.  The system prompt
is part of the workload's prompt length, not added to it.  Request ``i`` gets prefix segment 0 =
``(key = its prompt's index, t0 = min(tokens, prompt_i))`` and no segment 1, which the feature
kernel's prefix cache (docs/runtime_features_contract.md) matches block by block: with prefix
caching on, a request whose system prompt is cached skips ``floor(min(tokens, prompt - 1) / B) * B``
tokens of prefill.  The ``prefix_affinity`` router sends equal keys to the same instance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.sim.features.arrays import RequestExtras, no_extras

__all__ = ["SharedPrefix", "parse_shared_prefix"]


@dataclass(frozen=True)
class SharedPrefix:
    """``n_prompts`` system prompts of ``tokens`` tokens at the start of every prompt."""

    tokens: int
    n_prompts: int = 1

    def __post_init__(self) -> None:
        for name in ("tokens", "n_prompts"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise ConfigError(f"shared prefix {name} = {value!r} must be an integer >= 1; "
                                  "give e.g. `shared_prefix` 1024x4 (4 system prompts of 1,024 tokens)")

    def extras(self, prompt_tokens: np.ndarray, rng: np.random.Generator) -> RequestExtras:
        """``RequestExtras`` giving each request its system prompt's key and length."""
        prompt = np.asarray(prompt_tokens, dtype=np.int64)
        base = no_extras(prompt)
        key = rng.integers(0, self.n_prompts, size=prompt.size, dtype=np.int64)
        prefix_key = base.prefix_key.copy()
        prefix_tokens = base.prefix_tokens.copy()
        prefix_key[:, 0] = key
        prefix_tokens[:, 0] = np.minimum(prompt, self.tokens)
        prefix_tokens[:, 1] = prefix_tokens[:, 0]
        return RequestExtras(prev_req=base.prev_req, delay_s=base.delay_s, session=base.session, n_sessions=0,
                             new_tokens=base.new_tokens, prefix_key=prefix_key, prefix_tokens=prefix_tokens)


def parse_shared_prefix(text: str) -> SharedPrefix:
    """``"TOKENS"`` or ``"TOKENSxCOUNT"`` (e.g. ``1024x4``) -> ``SharedPrefix``."""
    parts = str(text).strip().lower().split("x")
    try:
        numbers = [int(p) for p in parts]
    except ValueError:
        numbers = []
    if len(numbers) not in (1, 2):
        raise ConfigError(f"`shared_prefix` {text!r} is not TOKENS or TOKENSxCOUNT; give e.g. 1024 or 1024x4",
                          param="shared_prefix", value=text)
    return SharedPrefix(*numbers)
