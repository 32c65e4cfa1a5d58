"""Closed families of names (routers, policies, modes) with one loud lookup.

``NameRegistry`` is a ``StrEnum`` base: ``parse`` accepts a member or its name (case and ``-``/``_``
insensitive) and raises ``UnknownNameError`` listing the valid names otherwise, so no spec ever falls
back to a default silently.  Subclasses name their family in ``kind``.
"""

from __future__ import annotations

from enum import StrEnum

from fleetplan.errors import UnknownNameError

__all__ = ["NameRegistry"]


class NameRegistry(StrEnum):
    """A closed family of names; ``parse`` is the one loud lookup."""

    @classmethod
    def kind(cls) -> str:
        raise NotImplementedError

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(member.value for member in cls)

    @classmethod
    def parse(cls, name: str | NameRegistry) -> NameRegistry:
        """The member called ``name``; ``UnknownNameError`` listing valid names otherwise."""
        if isinstance(name, cls):
            return name
        key = str(name).strip().lower().replace("-", "_")
        for member in cls:
            if member.value == key:
                return member
        raise UnknownNameError(cls.kind(), str(name), cls.names())
