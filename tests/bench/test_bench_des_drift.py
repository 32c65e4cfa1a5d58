"""``benchmarks/bench_des.py``'s stability label: STABLE only when every check passes (all finished, the
MSER-5 warm-up cut below its limit, no significant rise of the mean wait between the halves), and the
label says which check decided."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench_des():
    spec = importlib.util.spec_from_file_location("bench_des", ROOT / "benchmarks" / "bench_des.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _series(n: int, growth: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exponential waits (mean 10 ms) scaled by 1 + ``growth`` x^3 over the run (x from 0 to 1: a queue
    that builds up late); TTFT = wait + 20 ms."""
    rng = np.random.default_rng(seed)
    wait = rng.exponential(0.010, n) * (1.0 + growth * np.linspace(0.0, 1.0, n) ** 3)
    return wait, wait + 0.020, np.ones(n, dtype=bool)


def test_a_stationary_run_is_stable_and_says_what_was_checked(bench_des):
    label, checked = bench_des.drift_check(*_series(40_000, 0.0))
    assert label == "STABLE"
    assert "all done" in checked and "MSER-5" in checked and "second vs first half" in checked


def test_a_wait_that_doubles_is_unstable_and_a_smaller_rise_is_rising(bench_des):
    # the 1,024-GPU case of issue #28 (mean wait 6.5 -> 10.3 ms across quarters) was labelled STABLE
    label, checked = bench_des.drift_check(*_series(40_000, 3.0))
    assert label == "UNSTABLE" and "above +50%" in checked
    assert bench_des.drift_check(*_series(40_000, 0.6))[0] == "RISING"


def test_unfinished_requests_make_a_run_unstable(bench_des):
    wait, ttft, done = _series(10_000, 0.0)
    done[-5:] = False
    label, checked = bench_des.drift_check(wait, ttft, done)
    assert label == "UNSTABLE" and checked == "5 requests unfinished"
