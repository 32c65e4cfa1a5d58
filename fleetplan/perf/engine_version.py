"""Engine release numbers: ``0.10.2``, ``v0.9.1``, ``0.5.6.post1``, ``1.3.0rc20``, ``0.6.3.dev116+g151ef4ef``.

``release_of(text)`` is the release as a tuple of integers (``(0, 10, 2)``), the part before any pre-, post-
or dev-release tag and local label (PEP 440's release segment: peps.python.org/pep-0440, which vLLM, SGLang,
TensorRT-LLM and LMDeploy version strings follow), so releases compare as tuples.  A string that is not a
release number is a ``ConfigError`` naming it.
"""

from __future__ import annotations

import re

from fleetplan.errors import ConfigError

__all__ = ["release_of"]

#: PEP 440's public version (release segment, then optional pre / post / dev tags) and local label.
_RELEASE = re.compile(r"v?(?P<release>\d+(?:\.\d+)*)(?:[.\-_]?(?:a|b|rc|post|dev)\d*)*(?:\+[0-9a-z.]+)?",
                      re.IGNORECASE)


def release_of(text: str) -> tuple[int, ...]:
    """The release segment of engine version ``text`` as integers (module docstring).

    Raises
    ------
    ConfigError
        ``text`` is not a release number.
    """
    match = _RELEASE.fullmatch(str(text).strip())
    if match is None:
        raise ConfigError(f"engine version {text!r} is not a release number; give the engine's release, e.g. "
                          "0.10.2 (the engine package's __version__)",
                          param="engine_version", value=text)
    return tuple(int(part) for part in match.group("release").split("."))
