"""Moved to ``fleetplan.names`` (the base layer): kept so code written against the old path keeps
importing while parallel work lands; import ``fleetplan.names`` instead."""

from fleetplan.names import NameRegistry

__all__ = ["NameRegistry"]
