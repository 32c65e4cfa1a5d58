"""Where the bundled data lives.

``cdfs/`` and ``gpu_profiles/`` sit at the repository root (the single copy of the
data).  A wheel carries them as ``fleetplan/_data/cdfs`` and
``fleetplan/_data/gpu_profiles``; an editable install finds them beside the
package.  Models' ``config.json`` files follow the same rule (``models/``).
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Directory of bundled data ``name`` (``"cdfs"``, ``"gpu_profiles"``, ...)."""
    for candidate in (_PKG / "_data" / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"bundled data directory {name!r} not found next to {_PKG}")


def cdfs_dir() -> Path:
    return data_dir("cdfs")


def gpu_profiles_dir() -> Path:
    return data_dir("gpu_profiles")
