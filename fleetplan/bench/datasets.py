"""Prompt and output lengths of ``vllm bench serve`` datasets (tokens), without a tokenizer.

Each dataset gives ``num_prompts`` pairs ``(prompt_tokens, output_tokens)`` the way vLLM's
``vllm/benchmarks/datasets.py`` samples them (vllm-project/vllm, read at commit
009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1):

* ``random``: ``r = random_range_ratio`` read by the client named in ``random_range_ratio_rule``
  (the two benchmark clients give the same flag different meanings):

  - ``vllm`` (``vllm bench serve``): input lengths uniform integers on
    ``[floor(I (1 - r)), ceil(I (1 + r))]``, outputs likewise from ``O``, ``r`` in ``[0, 1)``;
  - ``sglang`` (``python -m sglang.bench_serving``, ``sample_random_requests`` in
    sgl-project/sglang ``python/sglang/bench_serving.py``): inputs uniform integers on
    ``[max(int(I r), 1), I]``, outputs on ``[int(O r), O]``, ``r`` in ``[0, 1]`` (``r = 1``: fixed
    lengths; SGLang's default ``r = 0``: uniform from 1).  An output of 0 tokens (SGLang draws it
    with probability ``1 / (O + 1)`` at ``r = 0``) is served as 1 token, the first token every
    request returns.

  Under vLLM's rule the draw starts at 1 when the lower bound is below 1; every prompt starts with the same
  ``random_prefix_len`` tokens (counted in the prompt).
* ``sharegpt``: the first two turns of each conversation with at least two turns, shuffled
  with the seed; pairs with a prompt or output under ``SHAREGPT_MIN_TOKENS`` tokens, a prompt
  over ``SHAREGPT_MAX_PROMPT_TOKENS`` or a total over ``SHAREGPT_MAX_TOTAL_TOKENS`` are skipped
  (vLLM's ``is_valid_sequence`` defaults); ``sharegpt_output_len`` fixes the outputs.
* ``burstgpt``: rows of the BurstGPT CSV (``Model``, ``Request tokens``, ``Response tokens``)
  of model ``GPT-4`` with a non-zero response, sampled with replacement when too few.
* ``custom``: JSONL, one object per line with ``prompt`` (text), output length
  ``custom_output_len``; an object may instead carry integer ``prompt_tokens`` and
  ``output_tokens`` (fleetplan's extension, for token counts you already have).

Text is measured without a tokenizer at ``CHARS_PER_TOKEN`` characters per token (OpenAI's
rule of thumb for English text, "What are tokens and how to count them?", help.openai.com);
a real tokenizer differs by roughly +-20 % per prompt, so sharegpt/custom lengths carry that
uncertainty.  Random draws use the stream ``lengths`` of the seed (``fleetplan.rng``).
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fleetplan.errors import ConfigError, DataFormatError
from fleetplan.names import NameRegistry

__all__ = ["CHARS_PER_TOKEN", "DatasetName", "DatasetSpec", "RangeRatioRule", "random_length_bounds",
           "sample_lengths"]

CHARS_PER_TOKEN = 4.0
SHAREGPT_MIN_TOKENS = 4
SHAREGPT_MAX_PROMPT_TOKENS = 1024
SHAREGPT_MAX_TOTAL_TOKENS = 2048
BURSTGPT_MODEL = "GPT-4"
DEFAULT_CUSTOM_OUTPUT_LEN = 256


class DatasetName(NameRegistry):
    """``dataset_name`` values ``bench serve`` models."""

    RANDOM = "random"
    SHAREGPT = "sharegpt"
    BURSTGPT = "burstgpt"
    CUSTOM = "custom"

    @classmethod
    def kind(cls) -> str:
        return "dataset"


class RangeRatioRule(NameRegistry):
    """Whose meaning of ``random_range_ratio`` (the two clients' flag) a random dataset follows (module docstring)."""

    VLLM = "vllm"
    SGLANG = "sglang"

    @classmethod
    def kind(cls) -> str:
        return "range-ratio rule"


@dataclass(frozen=True)
class DatasetSpec:
    """Which dataset and its length options (vLLM's flag names without the dashes)."""

    name: DatasetName = DatasetName.RANDOM
    path: str | None = None
    random_input_len: int = 1024
    random_output_len: int = 128
    random_range_ratio: float = 0.0
    random_prefix_len: int = 0
    sharegpt_output_len: int | None = None
    custom_output_len: int = DEFAULT_CUSTOM_OUTPUT_LEN
    random_range_ratio_rule: RangeRatioRule = RangeRatioRule.VLLM

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", DatasetName.parse(self.name))
        object.__setattr__(self, "random_range_ratio_rule", RangeRatioRule.parse(self.random_range_ratio_rule))
        needs_path = self.name is not DatasetName.RANDOM
        if needs_path and not self.path:
            raise ConfigError(f"`dataset_name` {self.name.value} needs `dataset_path` FILE", param="dataset_path")
        if not needs_path and self.path:
            raise ConfigError(f"`dataset_path` {self.path} cannot be used with `dataset_name` random; "
                              "give `dataset_name` sharegpt, burstgpt or custom for a file", param="dataset_path",
                              value=self.path)
        for name, value, lo in (("random_input_len", self.random_input_len, 1),
                                ("random_output_len", self.random_output_len, 1),
                                ("random_prefix_len", self.random_prefix_len, 0),
                                ("custom_output_len", self.custom_output_len, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < lo:
                raise ConfigError(f"`{name}` {value!r} must be an integer >= {lo}", param=name, value=value)
        r = self.random_range_ratio
        sglang = self.random_range_ratio_rule is RangeRatioRule.SGLANG
        if isinstance(r, bool) or not isinstance(r, int | float) or not (0 <= r <= 1 if sglang else 0 <= r < 1):
            interval = "[0, 1] (SGLang's rule: lengths on [r L, L])" if sglang else "[0, 1) (vLLM's rule)"
            raise ConfigError(f"`random_range_ratio` {r!r} must be in {interval}; e.g. 0.5",
                              param="random_range_ratio", value=r)
        if self.sharegpt_output_len is not None and self.sharegpt_output_len < 1:
            raise ConfigError(f"`sharegpt_output_len` {self.sharegpt_output_len} must be >= 1",
                              param="sharegpt_output_len", value=self.sharegpt_output_len)


def _text_tokens(text: object) -> int:
    return max(1, round(len(str(text)) / CHARS_PER_TOKEN))


def random_length_bounds(spec: DatasetSpec) -> tuple[tuple[int, int], tuple[int, int]]:
    """Inclusive ``((lo, hi) prompt, (lo, hi) output)`` token bounds a random dataset draws from, before the
    prefix and before lengths below 1 are raised to 1 (module docstring, both rules)."""
    r = float(spec.random_range_ratio)
    i, o = spec.random_input_len, spec.random_output_len
    if spec.random_range_ratio_rule is RangeRatioRule.SGLANG:
        return (max(int(i * r), 1), i), (int(o * r), o)
    return (math.floor(i * (1 - r)), math.ceil(i * (1 + r))), (math.floor(o * (1 - r)), math.ceil(o * (1 + r)))


def _random(spec: DatasetSpec, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    (lo_in, hi_in), (lo_out, hi_out) = random_length_bounds(spec)
    if spec.random_range_ratio_rule is RangeRatioRule.VLLM:  # vLLM's rule never draws below 1
        lo_in, lo_out = max(lo_in, 1), max(lo_out, 1)
    prompt = np.maximum(rng.integers(lo_in, hi_in + 1, size=n), 1) + spec.random_prefix_len
    output = np.maximum(rng.integers(lo_out, hi_out + 1, size=n), 1)
    return prompt.astype(np.int64), output.astype(np.int64)


def _read_text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DataFormatError(path, None, f"cannot read: {err}", "check `dataset_path`") from None


def _sharegpt(spec: DatasetSpec, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    path = str(spec.path)
    try:
        data = json.loads(_read_text(path))
    except json.JSONDecodeError as err:
        raise DataFormatError(path, f"line {err.lineno}", "is not JSON",
                              "give the ShareGPT JSON (a list of {\"conversations\": [...]})") from None
    if not isinstance(data, list):
        raise DataFormatError(path, None, "is not a JSON list", "give the ShareGPT JSON list of conversations")
    pairs = []
    for entry in data:
        conv = entry.get("conversations") if isinstance(entry, dict) else None
        if isinstance(conv, list) and len(conv) >= 2 and all(isinstance(t, dict) and "value" in t for t in conv[:2]):
            pairs.append((_text_tokens(conv[0]["value"]), _text_tokens(conv[1]["value"])))
    if not pairs:
        raise DataFormatError(path, None, "holds no conversation with two turns",
                              "give the ShareGPT JSON (entries with \"conversations\": [{\"value\": ...}, ...])")
    order = rng.permutation(len(pairs))
    prompt, output = [], []
    for j in order:
        p, o = pairs[j]
        o = spec.sharegpt_output_len or o
        too_short = p < SHAREGPT_MIN_TOKENS or o < SHAREGPT_MIN_TOKENS
        too_long = p > SHAREGPT_MAX_PROMPT_TOKENS or p + o > SHAREGPT_MAX_TOTAL_TOKENS
        if spec.sharegpt_output_len is None and (too_short or too_long):
            continue
        prompt.append(p)
        output.append(o)
        if len(prompt) == n:
            break
    if len(prompt) < n:
        raise DataFormatError(path, None, f"yields {len(prompt)} valid conversations, fewer than `num_prompts` {n}",
                              "lower `num_prompts`")
    return np.array(prompt, dtype=np.int64), np.array(output, dtype=np.int64)


def _burstgpt(spec: DatasetSpec, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    path = str(spec.path)
    rows = list(csv.DictReader(_read_text(path).splitlines()))
    need = ("Model", "Request tokens", "Response tokens")
    if not rows or any(c not in rows[0] for c in need):
        raise DataFormatError(path, "header", f"lacks the BurstGPT columns {', '.join(need)}",
                              "give a BurstGPT CSV (github.com/HPMLL/BurstGPT)")
    pairs = []
    for i, row in enumerate(rows, start=2):
        if row["Model"] != BURSTGPT_MODEL:
            continue
        try:
            p, o = int(float(row["Request tokens"])), int(float(row["Response tokens"]))
        except ValueError:
            raise DataFormatError(path, f"row {i}", "token counts are not numbers") from None
        if o > 0 and p > 0:
            pairs.append((p, o))
    if not pairs:
        raise DataFormatError(path, None, f"has no {BURSTGPT_MODEL} row with a response",
                              "give the BurstGPT trace with GPT-4 rows")
    idx = rng.choice(len(pairs), size=n, replace=len(pairs) < n)
    arr = np.array(pairs, dtype=np.int64)[idx]
    return arr[:, 0].copy(), arr[:, 1].copy()


def _custom(spec: DatasetSpec, n: int) -> tuple[np.ndarray, np.ndarray]:
    path = str(spec.path)
    prompt, output = [], []
    for i, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            raise DataFormatError(path, f"line {i}", "is not a JSON object",
                                  "give JSONL with one {\"prompt\": ...} object per line") from None
        if isinstance(obj, dict) and isinstance(obj.get("prompt_tokens"), int):
            p, o = obj["prompt_tokens"], obj.get("output_tokens", spec.custom_output_len)
            if not isinstance(o, int) or p < 1 or o < 1:
                raise DataFormatError(path, f"line {i}", "prompt_tokens and output_tokens must be integers >= 1")
        elif isinstance(obj, dict) and "prompt" in obj:
            p, o = _text_tokens(obj["prompt"]), spec.custom_output_len
        else:
            raise DataFormatError(path, f"line {i}", "has no \"prompt\" (or \"prompt_tokens\")",
                                  "give JSONL with one {\"prompt\": ...} object per line")
        prompt.append(p)
        output.append(o)
        if len(prompt) == n:
            break
    if len(prompt) < n:
        raise DataFormatError(path, None, f"holds {len(prompt)} prompts, fewer than `num_prompts` {n}",
                              "lower `num_prompts`")
    return np.array(prompt, dtype=np.int64), np.array(output, dtype=np.int64)


def sample_lengths(spec: DatasetSpec, num_prompts: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(prompt_tokens, output_tokens)`` of ``num_prompts`` requests of ``spec`` (module docstring)."""
    if isinstance(num_prompts, bool) or not isinstance(num_prompts, int) or num_prompts < 1:
        raise ConfigError(f"`num_prompts` {num_prompts!r} must be an integer >= 1", param="num_prompts",
                          value=num_prompts)
    if spec.name is DatasetName.RANDOM:
        return _random(spec, num_prompts, rng)
    if spec.name is DatasetName.SHAREGPT:
        return _sharegpt(spec, num_prompts, rng)
    if spec.name is DatasetName.BURSTGPT:
        return _burstgpt(spec, num_prompts, rng)
    return _custom(spec, num_prompts)
