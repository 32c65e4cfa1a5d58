"""The engine sizing's count search (``queueing.engine._first_count``): the smallest passing count of any
monotone verdict, whatever its score says, in few rounds when the score is informative.

The score only guides the guesses, so a misleading one (constant, rising, infinite, noisy) must never
change the answer, only the number of rounds; an exact one (ρ ∝ 1/n, the utilisation rule) must end
the search in a couple of rounds.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.queueing.engine import _crossing, _first_count

SCORES = {
    "proportional": lambda n, answer: answer / n,  # ρ / ρ_max for the utilisation rule: exactly ∝ 1/n
    "steep": lambda n, answer: math.exp(8.0 * (answer - n) / answer),  # a latency tail
    "constant": lambda n, answer: 1.0,
    "rising": lambda n, answer: float(n),  # wrong way round
    "infinite": lambda n, answer: math.inf,  # an unstable count
    "noisy": lambda n, answer: (answer / n) * (1.0 + 0.5 * math.sin(n)),
}


def _search(answer: int, lo: int, hi: int, shape: str) -> tuple[int | None, list[np.ndarray]]:
    calls: list[np.ndarray] = []

    def test(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        calls.append(np.asarray(counts).copy())
        score = np.array([SCORES[shape](int(n), answer) for n in counts], dtype=np.float64)
        return np.asarray(counts) >= answer, score

    return _first_count(test, lo, hi), calls


@settings(max_examples=300, deadline=None)
@given(answer=st.integers(1, 20_000), lo=st.integers(1, 20_000), span=st.integers(0, 30_000),
       shape=st.sampled_from(sorted(SCORES)))
def test_the_answer_is_the_smallest_passing_count_whatever_the_score(answer, lo, span, shape):
    hi = lo + span
    found, calls = _search(answer, lo, hi, shape)
    expected = max(lo, answer) if max(lo, answer) <= hi else None
    assert found == expected
    tried = np.concatenate(calls)
    assert tried.min() >= lo and tried.max() <= hi  # never outside the range
    assert len(calls) <= 2 * math.ceil(math.log2(span + 2)) + 4  # O(log) rounds whatever the score
    assert all(c.size <= 4 for c in calls)  # at most four counts per round


def test_an_exact_score_ends_the_search_in_two_rounds():
    for answer in (2, 17, 130, 2_080, 9_999):
        found, calls = _search(answer, 1, 10_000, "proportional")
        assert found == answer and len(calls) <= 2


def test_the_guess_is_where_the_line_through_the_scores_nearest_one_crosses_one():
    assert _crossing([(10, 4.0)]) == 40  # one count: score ∝ 1/n
    assert _crossing([(10, 4.0), (20, 2.0), (1000, 50.0)]) == 40  # 4/n through the two nearest 1
    assert _crossing([(10, math.inf)]) == 11  # nothing to draw a line through: the next count


def test_a_flat_line_in_logs_gives_no_guess():
    # different scores with equal logs (seen sizing lmsys at 1,000 req/s with a 15 % margin): the line's
    # slope would divide by zero, so no guess and the search bisects
    sa, sb = 99.99999999999993, 99.99999999999991
    assert sa != sb and math.log(sa) == math.log(sb)
    assert _crossing([(3, sa), (4, sb)]) is None
    assert _crossing([(3, 2.0), (4, 2.0)]) is None  # flat
    assert _crossing([(3, 2.0), (4, 3.0)]) is None  # rising


@settings(max_examples=200, deadline=None)
@given(answer=st.integers(2, 5_000), span=st.integers(1, 10_000),
       score=st.floats(1e-300, 1e300, allow_nan=False, allow_infinity=False), ulps=st.integers(0, 4))
def test_scores_equal_in_logs_still_find_the_answer(answer, span, score, ulps):
    """Scores a few ulps apart (often equal logs) at every count: the search bisects to the answer."""
    def test(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sc = np.array([score + ulps * (int(n) % 2) * math.ulp(score) for n in counts], dtype=np.float64)
        return np.asarray(counts) >= answer, sc

    hi = 1 + span
    found = _first_count(test, 1, hi)
    assert found == (answer if answer <= hi else None)


def test_a_first_count_that_fails_by_one_ends_the_search_in_two_rounds():
    """The count above a failing first count is tried in the next round: an answer there ends the search in two
    rounds whatever the score guesses (a latency search's usual case: its survival falls faster than 1/n)."""
    for lo in (1, 3, 40, 900):
        for shape in sorted(SCORES):
            found, calls = _search(lo + 1, lo, lo + 10_000, shape)
            assert found == lo + 1 and len(calls) == 2
