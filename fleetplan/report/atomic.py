"""Atomic file writes for reports (the implementation lives in the base layer, ``fleetplan.atomic``)."""

from fleetplan.atomic import atomic_write_bytes, atomic_write_text

__all__ = ["atomic_write_bytes", "atomic_write_text"]
