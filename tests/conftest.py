"""Shared test fixtures: where ../shared lives (tests skip cleanly without it)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared`` beside the repository, or skip the test."""
    if not SHARED.is_dir():
        pytest.skip("../shared is absent (anchors and traces are read from there, never copied)")
    return SHARED
