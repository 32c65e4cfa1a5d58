"""The one wording of a deprecation note (old option spellings in ``cli.options``, old command
names in ``cli.groups``); a module of its own so neither imports the other."""

from __future__ import annotations


def deprecation_note(old: str, new: str, what: str = "option") -> str:
    """The one line printed when an old spelling or command name is used."""
    return f"note: {old} is deprecated; use {new} (the old {what} goes away in the next release)"
