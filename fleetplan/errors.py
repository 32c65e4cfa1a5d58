"""One exception hierarchy for fleetplan.

Every error a user can cause (bad file, unknown name, impossible target) is a
``FleetplanError`` subclass whose message is one line naming the value, the rule
that was broken and the fix.  ``fleetplan.cli`` maps all of them to exit code 2;
nothing else in the library catches them.
"""

from __future__ import annotations

__all__ = [
    "FleetplanError",
    "ConfigError",
    "UnknownNameError",
    "DataFormatError",
    "InfeasibleError",
]


class FleetplanError(Exception):
    """Base class: a user-facing, one-line error."""

    def __init__(self, message: str) -> None:
        # Collapse to one line: the CLI prints exactly one line per error.
        super().__init__(" ".join(str(message).split()))


class ConfigError(FleetplanError):
    """An option or spec value breaks a rule (negative rate, SLO <= 0, ...)."""


class UnknownNameError(FleetplanError):
    """A name (GPU, workload, policy, model) is not in its registry."""

    def __init__(self, kind: str, name: str, valid: list[str] | tuple[str, ...]) -> None:
        self.kind = kind
        self.name = name
        self.valid = tuple(valid)
        super().__init__(
            f"unknown {kind} {name!r}: valid {kind} names are {', '.join(self.valid)}"
        )


class DataFormatError(FleetplanError):
    """A data file (CDF, trace, profile) is malformed; names file and position."""

    def __init__(self, path: str, where: str | None, problem: str, fix: str = "") -> None:
        self.path = str(path)
        self.where = where
        loc = f"{self.path}" + (f" ({where})" if where else "")
        msg = f"{loc}: {problem}"
        if fix:
            msg += f"; {fix}"
        super().__init__(msg)


class InfeasibleError(FleetplanError):
    """No candidate meets the targets; names the binding constraint."""
