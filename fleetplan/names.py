"""Closed families of names (routers, policies, modes, dtypes) with one loud lookup.

``lookup`` finds the member of an ``Enum`` family called ``name`` and raises ``UnknownNameError``
listing the valid names otherwise, so no spec ever falls back to a default silently.  How a given
name is compared with the members' values is the family's ``fold``: ``fold_case`` (case and
surrounding blanks ignored), ``fold_dashes`` (also ``-`` = ``_``) or ``exact``.

``NameRegistry`` is a ``StrEnum`` base for families that parse themselves: ``parse`` is
``lookup`` with ``fold_dashes``; subclasses name their family in ``kind``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from enum import StrEnum
from typing import TypeVar

from fleetplan.errors import UnknownNameError

__all__ = ["NameRegistry", "exact", "fold_case", "fold_dashes", "lookup"]

E = TypeVar("E", bound=enum.Enum)


def fold_case(name: object) -> str:
    """``name`` compared case-insensitively, surrounding blanks ignored."""
    return str(name).strip().lower()


def fold_dashes(name: object) -> str:
    """As ``fold_case``, with ``-`` and ``_`` the same."""
    return fold_case(name).replace("-", "_")


def exact(name: object) -> object:
    """``name`` compared as given."""
    return name


def lookup(family: type[E], kind: str, name: object, fold: Callable[[object], object] = fold_case) -> E:
    """The member of ``family`` called ``name`` (a member passes through); ``UnknownNameError``
    naming ``kind`` and listing the valid names otherwise."""
    if isinstance(name, family):
        return name
    key = fold(name)
    for member in family:
        if member.value == key:
            return member
    raise UnknownNameError(kind, str(name), [m.value for m in family])


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
        return lookup(cls, cls.kind(), name, fold_dashes)
