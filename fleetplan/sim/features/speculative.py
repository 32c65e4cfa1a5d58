"""Speculative decoding / MTP of one pool: vLLM's ``speculative_config`` plus acceptance.

``SpeculativeConfig.from_json`` reads vLLM's spelling (``vllm/config/speculative.py``):
``method`` (``mtp``, also ``deepseek_mtp``; ``draft_model``; ``ngram``), ``num_speculative_tokens``
k, ``model`` (the draft model, draft_model only; with no ``method`` a ``model`` implies
draft_model, as in vLLM) and ``draft_tensor_parallel_size``.  vLLM keys that do not change
timing in this simulator (``prompt_lookup_max``, ``prompt_lookup_min``, ``quantization``,
``max_model_len``, ``revision``, ``code_revision``, ``disable_by_batch_size``) are accepted
and have no effect.  Our keys (exactly one acceptance key is required; there is no default):

* ``acceptance_rate`` alpha: every position accepted with conditional probability alpha;
* ``acceptance_rates`` [p_0, ..., p_{k-1}]: position j accepted with probability p_j given
  positions < j were accepted (conditional);
* ``acceptance_table`` [q_0, ..., q_k]: empirical P(accepted drafts = j), summing to 1.
  With S_j = sum_{i >= j} q_i = P(A >= j), the conditional rate is p_j = S_{j+1} / S_j
  (0 where S_j = 0), so P(A = j) = (prod_{i<j} p_i) (1 - p_j) reproduces q exactly;
* ``draft_cost_fraction`` (mtp only): one MTP draft pass as a fraction of a target step;
  without it it is derived from the model (``fleetplan.sim.features.compile``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.sim.features.arrays import SPEC_K_MAX

__all__ = ["SpeculativeConfig", "SPEC_METHODS", "conditional_from_table"]

SPEC_METHODS = ("mtp", "draft_model", "ngram")
_METHOD_ALIASES = {"mtp": "mtp", "deepseek_mtp": "mtp", "draft_model": "draft_model", "ngram": "ngram"}
_ACCEPT_KEYS = ("acceptance_rate", "acceptance_rates", "acceptance_table")
_VLLM_NO_EFFECT_KEYS = {"prompt_lookup_max", "prompt_lookup_min", "quantization", "max_model_len", "revision",
                        "code_revision", "disable_by_batch_size"}
_KEYS = {"method", "num_speculative_tokens", "model", "draft_tensor_parallel_size", "draft_cost_fraction",
         *_ACCEPT_KEYS} | _VLLM_NO_EFFECT_KEYS
TABLE_SUM_TOLERANCE = 1e-6


def _probability(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (0.0 <= value <= 1.0):
        raise ConfigError(f"speculative config: {where} = {value!r} must be a probability in [0, 1]")
    return float(value)


def _number_list(key: str, value: Any, length: int) -> list[float]:
    if not isinstance(value, list | tuple) or len(value) != length:
        n = len(value) if isinstance(value, list | tuple) else "not a list"
        raise ConfigError(f"speculative config: {key} has {n} entries but needs {length} "
                          f"(num_speculative_tokens{' + 1' if key == 'acceptance_table' else ''}); fix the list")
    return [_probability(f"{key}[{j}]", v) for j, v in enumerate(value)]


def conditional_from_table(table: list[float] | tuple[float, ...]) -> tuple[float, ...]:
    """Conditional per-position acceptance p_j = P(A >= j+1) / P(A >= j) from P(A = j), j = 0..k."""
    tail = [0.0] * (len(table) + 1)
    for j in range(len(table) - 1, -1, -1):
        tail[j] = tail[j + 1] + float(table[j])
    return tuple(tail[j + 1] / tail[j] if tail[j] > 0 else 0.0 for j in range(len(table) - 1))


@dataclass(frozen=True)
class SpeculativeConfig:
    """k drafts per step proposed by ``method``, accepted position by position.

    ``acceptance`` holds the conditional acceptance probability of positions 0..k-1.
    """

    method: str
    num_speculative_tokens: int
    acceptance: tuple[float, ...]
    draft_model: str | None = None
    draft_tensor_parallel_size: int | None = None
    draft_cost_fraction: float | None = None

    def __post_init__(self) -> None:
        method = str(self.method).strip().lower().replace("-", "_")
        if method not in _METHOD_ALIASES:
            raise UnknownNameError("speculative method", str(self.method), SPEC_METHODS)
        method = _METHOD_ALIASES[method]
        object.__setattr__(self, "method", method)
        k = self.num_speculative_tokens
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= SPEC_K_MAX:
            raise ConfigError(f"speculative config: num_speculative_tokens = {k!r} must be an integer in "
                              f"1..{SPEC_K_MAX}; give e.g. 3")
        acc = tuple(_probability(f"acceptance[{j}]", a) for j, a in enumerate(self.acceptance))
        if len(acc) != k:
            raise ConfigError(f"speculative config: {len(acc)} acceptance rates for num_speculative_tokens = {k}; "
                              "give one per position")
        object.__setattr__(self, "acceptance", acc)
        if (self.draft_model is None) == (method == "draft_model"):
            verb = "needs" if method == "draft_model" else "takes no"
            raise ConfigError(f"speculative config: method {method} {verb} 'model'; "
                              "'model' names the draft model of method draft_model only")
        tp = self.draft_tensor_parallel_size
        if tp is not None and (method != "draft_model" or isinstance(tp, bool) or not isinstance(tp, int) or tp < 1):
            raise ConfigError(f"speculative config: draft_tensor_parallel_size = {tp!r} must be an integer >= 1 "
                              "and is read by method draft_model only")
        frac = self.draft_cost_fraction
        if frac is not None:
            ok = not isinstance(frac, bool) and isinstance(frac, int | float) and math.isfinite(frac) and 0 < frac <= 1
            if method != "mtp" or not ok:
                raise ConfigError(f"speculative config: draft_cost_fraction = {frac!r} must be in (0, 1] and is read "
                                  "by method mtp only (draft_model uses the draft's own step time, ngram costs 0)")
            object.__setattr__(self, "draft_cost_fraction", float(frac))

    @classmethod
    def from_dict(cls, config: dict) -> SpeculativeConfig:
        """From vLLM-spelled keys plus one acceptance key (module docstring)."""
        if not isinstance(config, dict):
            raise ConfigError(f"speculative config must be a JSON object, got {type(config).__name__}; "
                              'write e.g. {"method": "mtp", "num_speculative_tokens": 2, "acceptance_rate": 0.8}')
        extra = sorted(set(config) - _KEYS)
        if extra:
            valid = ", ".join(sorted(_KEYS))
            raise ConfigError(f"speculative config: unknown key {extra[0]!r}; valid keys are {valid}")
        method = config.get("method") or ("draft_model" if config.get("model") else None)
        if method is None:
            raise ConfigError(f"speculative config: 'method' is missing; give one of {', '.join(SPEC_METHODS)}")
        if "num_speculative_tokens" not in config:
            raise ConfigError("speculative config: 'num_speculative_tokens' is missing; give the drafts per step")
        k = config["num_speculative_tokens"]
        given = [key for key in _ACCEPT_KEYS if key in config]
        if len(given) != 1:
            got = f"got {', '.join(given)}" if given else "got none"
            raise ConfigError(f"speculative config: give exactly one of {', '.join(_ACCEPT_KEYS)} ({got}); "
                              'e.g. "acceptance_rate": 0.7')
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= SPEC_K_MAX:
            raise ConfigError(f"speculative config: num_speculative_tokens = {k!r} must be an integer in "
                              f"1..{SPEC_K_MAX}; give e.g. 3")
        key = given[0]
        if key == "acceptance_rate":
            acceptance = (_probability(key, config[key]),) * k
        elif key == "acceptance_rates":
            acceptance = tuple(_number_list(key, config[key], k))
        else:
            table = _number_list(key, config[key], k + 1)
            if abs(sum(table) - 1.0) > TABLE_SUM_TOLERANCE:
                raise ConfigError(f"speculative config: acceptance_table sums to {sum(table):.6g}; "
                                  "P(accepted = j) for j = 0..k must sum to 1")
            acceptance = conditional_from_table(table)
        return cls(method=method, num_speculative_tokens=k, acceptance=acceptance, draft_model=config.get("model"),
                   draft_tensor_parallel_size=config.get("draft_tensor_parallel_size"),
                   draft_cost_fraction=config.get("draft_cost_fraction"))

    @classmethod
    def from_json(cls, text: str) -> SpeculativeConfig:
        """Parse vLLM ``speculative_config`` JSON text."""
        try:
            config = json.loads(text)
        except (json.JSONDecodeError, TypeError) as exc:
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise ConfigError(f"speculative config {str(text)[:60]!r} is not valid JSON ({why}); write e.g. "
                              '\'{"method": "mtp", "num_speculative_tokens": 2, "acceptance_rate": 0.8}\'') from exc
        return cls.from_dict(config)

    @property
    def mean_accepted_tokens(self) -> float:
        """Expected accepted drafts per step, sum_j prod_{i<=j} p_i (no length cap)."""
        total, run = 0.0, 1.0
        for p in self.acceptance:
            run *= p
            total += run
        return total
