"""The served model's context limit (vLLM ``max_model_len``), shared by planning and simulation.

vLLM serves requests whose prompt + requested output fit ``max_model_len`` and answers every
other one with an error (HTTP 400) before it is scheduled.  ``max_model_len`` defaults to the
model's context window (``ModelConfig.context_window_tokens``, config.json
``max_position_embeddings``); a value given explicitly must not exceed the window unless the
operator opts in, as vLLM's ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` does (``allow_long``).  Without a
model and without an explicit value there is no limit (``None``): the core paper's constants.

``ContextLimitError`` carries the values that broke the rule (``fleetplan.cli`` names the options).
"""

from __future__ import annotations

import enum

from fleetplan.errors import ConfigError
from fleetplan.models.config import ModelConfig

__all__ = ["ContextLimitError", "ContextLimitRule", "served_context_limit"]


class ContextLimitRule(enum.Enum):
    """Which rule a context-limit setting broke."""

    NOT_POSITIVE = "not_positive"  # max_model_len < 1
    EXCEEDS_WINDOW = "exceeds_window"  # max_model_len > the model's window without allow_long
    WINDOW_UNKNOWN = "window_unknown"  # the model's config gives no window and no max_model_len was given
    ALLOW_LONG_UNUSED = "allow_long_unused"  # allow_long without a max_model_len above a model's window


class ContextLimitError(ConfigError):
    """A context-limit setting breaks a rule (``rule``); fields hold the values involved (tokens)."""

    def __init__(self, rule: ContextLimitRule, max_model_len_tokens: int | None, model: str | None,
                 context_window_tokens: int | None) -> None:
        self.max_model_len_tokens = max_model_len_tokens
        self.model = model
        self.context_window_tokens = context_window_tokens
        if rule is ContextLimitRule.NOT_POSITIVE:
            text = f"max_model_len {max_model_len_tokens!r} must be an integer >= 1 token"
        elif rule is ContextLimitRule.EXCEEDS_WINDOW:
            text = (f"max_model_len {max_model_len_tokens:,} tokens exceeds {model}'s context window "
                    f"(max_position_embeddings {context_window_tokens:,}); lower it, or allow a longer limit "
                    "explicitly as vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 does")
        elif rule is ContextLimitRule.WINDOW_UNKNOWN:
            text = f"{model}'s config.json gives no context window (max_position_embeddings); give max_model_len"
        else:
            text = ("allowing a long max_model_len needs a max_model_len above the model's context window; "
                    "give both or neither")
        super().__init__(text, param="max_model_len_tokens", value=max_model_len_tokens)
        self.rule = rule  # the ContextLimitRule broken (a closed set, unlike the base class's text)


def served_context_limit(model: ModelConfig | None, max_model_len_tokens: int | None,
                         allow_long: bool = False) -> int | None:
    """The longest prompt + output served (tokens), or None for no limit (module docstring).

    Parameters
    ----------
    model : ModelConfig, optional
        The served model; its ``context_window_tokens`` is the default limit.
    max_model_len_tokens : int, optional
        An explicit limit (vLLM ``max_model_len``).
    allow_long : bool
        Let ``max_model_len_tokens`` exceed the model's window (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1).
    """
    name = None if model is None else model.name
    window = None if model is None else model.context_window_tokens
    value = max_model_len_tokens
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ContextLimitError(ContextLimitRule.NOT_POSITIVE, value, name, window)
    if allow_long and (value is None or window is None or value <= window):
        raise ContextLimitError(ContextLimitRule.ALLOW_LONG_UNUSED, value, name, window)
    if model is None:
        return value
    if value is None:
        if window is None:
            raise ContextLimitError(ContextLimitRule.WINDOW_UNKNOWN, None, name, None)
        return window
    if window is not None and value > window and not allow_long:
        raise ContextLimitError(ContextLimitRule.EXCEEDS_WINDOW, value, name, window)
    return value
