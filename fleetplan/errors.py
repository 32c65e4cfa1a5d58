"""One exception hierarchy for fleetplan.

Every error a user can cause (bad file, unknown name, impossible target) is a
``FleetplanError`` subclass whose message is one line naming the value, the rule
that was broken and the fix.  ``fleetplan.cli`` maps all of them to exit code 2;
nothing else in the library catches them.

Errors are structured as well as worded, so a front end can word them in its own
vocabulary without reading the text:

* ``param``: the parameter at fault, spelt as the Python API spells it
  (``rate_per_s``, ``slo_ttft_s``, ``max_gpus``); ``value``: the offending value;
* ``rule``: the rule it breaks; ``fix``: how to repair it;
* ``reason``: for ``InfeasibleError``, a code naming the binding constraint (``REASONS``).

Inside a message a parameter is referred to in backticks, `` `rate_per_s` ``;
``FleetplanError.render`` lets a front end respell those references (the CLI turns
them into its flags) and the value of ``param`` (e.g. seconds as milliseconds).
``str(exc)`` is the library's own wording.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = [
    "FleetplanError",
    "ConfigError",
    "UnknownNameError",
    "DataFormatError",
    "InfeasibleError",
    "REASONS",
    "param_refs",
]

#: Reason codes an ``InfeasibleError`` (and an infeasible plan) names its binding constraint with.
REASONS = (
    "prefill-alone",  # a lone request's prefill already misses the TTFT target
    "decode",  # a lone request's decode step already misses the TPOT target
    "max-gpus",  # the targets need more GPUs than the cap allows
    "unstable",  # utilisation >= 1 at every count within the cap
    "verification-failed",  # analytic fleets exist but none passed simulation
    "prefill-bound",  # the simulated percentile stopped falling with more instances: prefills alone set it
    "other",
)

_UNSET = object()
#: A parameter reference inside a message: an identifier in single backticks (not ``literal``).
_PARAM_REF = re.compile(r"(?<!`)`([A-Za-z_][A-Za-z0-9_]*)`(?!`)")


def param_refs(text: str) -> tuple[str, ...]:
    """Parameter names referred to (in backticks) in ``text``, in order."""
    return tuple(_PARAM_REF.findall(text))


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class FleetplanError(Exception):
    """Base class: a user-facing, one-line error with structured fields.

    Parameters
    ----------
    message
        The message; may refer to parameters as `` `name` ``.  Without it the message is
        composed from the fields: `` `param` value is invalid: rule``.
    param, value
        The parameter at fault (its Python API name) and the value given.
    rule
        The rule the value breaks.
    fix
        How to repair it (appended after ``; ``); phrased in parameter names, not flags.
    reason
        Code of the binding constraint (``REASONS``), for infeasibility.
    """

    #: Text between the message and the fix.
    fix_joiner = "; "

    def __init__(
        self,
        message: str | None = None,
        *,
        param: str | None = None,
        value: object = _UNSET,
        rule: str | None = None,
        fix: str | None = None,
        reason: str | None = None,
    ) -> None:
        if message is None and (param is None or rule is None):
            raise TypeError("FleetplanError needs a message, or param and rule")
        if reason is not None and reason not in REASONS:
            raise ValueError(f"unknown reason code {reason!r}; valid: {', '.join(REASONS)}")
        self.template = None if message is None else _one_line(message)
        self.param = param
        self.has_value = value is not _UNSET
        self.value = value if self.has_value else None
        self.rule = None if rule is None else _one_line(rule)
        self.fix = None if fix is None else _one_line(fix)
        self.reason = reason
        # Collapse to one line: the CLI prints exactly one line per error.
        super().__init__(self.render())

    @property
    def params(self) -> tuple[str, ...]:
        """Every parameter the error names: ``param`` first, then those its text refers to."""
        names = [] if self.param is None else [self.param]
        for text in (self.template, self.rule, self.fix):
            names += [n for n in param_refs(text or "") if n not in names]
        return tuple(names)

    def render(
        self,
        name_of: Callable[[str], str] | None = None,
        value_of: Callable[[str, object], str] | None = None,
        fix: str | None = None,
    ) -> str:
        """The one-line message, with parameter references spelt by ``name_of``.

        ``name_of(name)`` spells a parameter (default `` `name` ``); ``value_of(param, value)``
        spells the value of ``param`` in the composed form (default ``repr``); ``fix`` replaces
        the error's own fix (a front end's hint in its own vocabulary).
        """
        spell = name_of or (lambda n: f"`{n}`")

        def refs(text: str) -> str:
            return _PARAM_REF.sub(lambda m: spell(m.group(1)), text)

        if self.template is not None:
            text = refs(self.template)
        else:
            shown = "" if not self.has_value else " " + (
                value_of(self.param, self.value) if value_of else repr(self.value))
            text = f"{spell(self.param)}{shown} is invalid: {refs(self.rule)}"
        hint = self.fix if fix is None else fix
        if hint:
            text += self.fix_joiner + refs(hint)
        return text

    def __reduce__(self):
        # Crosses process boundaries (executors) with its fields, whatever the subclass's __init__ takes.
        return (_restore, (type(self), self.args, self.__dict__.copy()))


def _restore(cls: type[FleetplanError], args: tuple, state: dict) -> FleetplanError:
    exc = cls.__new__(cls)
    Exception.__init__(exc, *args)
    exc.__dict__.update(state)
    return exc


class ConfigError(FleetplanError):
    """An option or spec value breaks a rule (negative rate, SLO <= 0, ...)."""


class UnknownNameError(FleetplanError):
    """A name (GPU, workload, policy, model) is not in its registry."""

    def __init__(self, kind: str, name: str, valid: list[str] | tuple[str, ...]) -> None:
        self.kind = kind
        self.name = name
        self.valid = tuple(valid)
        super().__init__(
            f"unknown {kind} {name!r}: valid {kind} names are {', '.join(self.valid)}",
            value=name, rule=f"not a known {kind}",
        )


class DataFormatError(FleetplanError):
    """A data file (CDF, trace, profile) is malformed; names file and position."""

    def __init__(self, path: str, where: str | None, problem: str, fix: str = "") -> None:
        self.path = str(path)
        self.where = where
        loc = f"{self.path}" + (f" ({where})" if where else "")
        super().__init__(f"{loc}: {problem}", rule=problem, fix=fix or None)


class InfeasibleError(FleetplanError):
    """No candidate meets the targets; names the binding constraint (``reason``) and the fix."""

    fix_joiner = "; fix: "
