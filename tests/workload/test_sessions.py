"""Session workloads: the bundled Frontier Table 7 templates, mixes, the JSON format, RL rollouts."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from fleetplan.cli.errors import render_error
from fleetplan.errors import ConfigError, DataFormatError, UnknownNameError
from fleetplan.workload.rollouts import OutputLengths, RlRollout
from fleetplan.workload.session_io import (
    list_session_workloads,
    load_session_workload,
    parse_session_document,
    session_document,
)
from fleetplan.workload.session_table import ToolDelay
from fleetplan.workload.sessions import SessionTemplate, SessionWorkload, parse_mix

# Frontier full paper, appendix B.1, Table 7 (new prompt / decode tokens; round 5 answer-visible)
TABLE7_SHORT = ((4096, 96), (1024, 64), (512, 64), (512, 64), (256, 192))
TABLE7_HEAVY = ((32768, 96), (16384, 64), (8192, 64), (4096, 64), (256, 192))
ONE_SECOND = ToolDelay("fixed", 1.0)


def frontier(mix: str | None = None) -> SessionWorkload:
    return load_session_workload("frontier_agentic", mix=mix, tool_delay=ONE_SECOND)


def test_bundled_templates_are_table_7_exactly():
    assert "frontier_agentic" in list_session_workloads()
    w = load_session_workload("frontier_agentic")
    assert w.template_names == ("short", "heavy_tail")
    assert w.templates[0].rounds == TABLE7_SHORT and w.templates[1].rounds == TABLE7_HEAVY
    assert all(t.jitter == 0 and t.system_prompt is None and t.tool_delay is None for t in w.templates)
    assert w.tool_delay is None  # the paper states no tool-call delay: the caller must give one
    assert "Table 7" in w.source


def test_sampled_rounds_and_context_follow_the_template():
    t = frontier("short=1").sample(np.random.default_rng(1), 3, 2.0)
    assert t.n_sessions == 3 and t.n_rows == 15
    assert np.array_equal(t.round_index, np.tile(np.arange(5), 3))
    assert np.array_equal(t.is_final, np.tile([False] * 4 + [True], 3))
    assert np.array_equal(t.new_prompt_tokens[:5], [p for p, _ in TABLE7_SHORT])
    assert np.array_equal(t.output_tokens[:5], [o for _, o in TABLE7_SHORT])
    assert np.array_equal(t.delay_s[:5], [0, 1, 1, 1, 1])
    prompt, previous = t.context_tokens()
    # prompt_k = sum_{j<k} (new_j + out_j) + new_k
    assert np.array_equal(prompt[:5], [4096, 4096 + 96 + 1024, 5216 + 64 + 512, 5792 + 64 + 512, 6368 + 64 + 256])
    assert np.array_equal(previous[:5], prompt[:5] - t.new_prompt_tokens[:5])
    assert np.all(np.diff(t.session_arrival_s[t.round_index == 0]) > 0)


def test_mix_shares_within_binomial_tolerance():
    n, p = 20_000, 0.3
    t = frontier("heavy_tail=0.3,short=0.7").sample(np.random.default_rng(7), n, 1.0)
    heavy = int(np.sum(t.template[t.round_index == 0] == 1))
    assert abs(heavy - n * p) <= 4 * math.sqrt(n * p * (1 - p))


def test_arrivals_are_poisson_at_the_rate():
    n, rate = 20_000, 4.0
    t = frontier("short=1").sample(np.random.default_rng(3), n, rate)
    gaps = np.diff(np.concatenate(([0.0], t.session_arrival_s[t.round_index == 0])))
    assert abs(gaps.mean() - 1 / rate) <= 4 * (1 / rate) / math.sqrt(n)  # exponential gaps: sd = mean


def test_jitter_system_prompt_and_delays():
    tpl = SessionTemplate("a", ((1000, 100), (200, 50)), jitter=0.2, tool_delay=ToolDelay("exponential", 2.0),
                          system_prompt="sys", system_tokens=512)
    other = SessionTemplate("b", ((10, 10),), system_prompt="sys", system_tokens=512)
    t = SessionWorkload("w", (tpl, other), (1.0, 1.0)).sample(np.random.default_rng(0), 4000, 1.0)
    a = t.template == 0
    assert np.all((t.new_prompt_tokens[a & (t.round_index == 0)] >= 800)
                  & (t.new_prompt_tokens[a & (t.round_index == 0)] <= 1200))
    assert np.all(t.system_prompt_id == 0) and np.all(t.system_tokens == 512)
    d = t.delay_s[t.round_index == 1]
    assert abs(d.mean() - 2.0) <= 4 * 2.0 / math.sqrt(d.size)
    prompt, previous = t.context_tokens()
    assert np.all(previous[t.round_index == 0] == 512)


def test_json_round_trip(tmp_path):
    w = SessionWorkload(
        "mine", (SessionTemplate("x", ((100, 10), (20, 5)), jitter=0.1, tool_delay=ToolDelay("lognormal", 1.5, 0.8),
                                 system_prompt="s1", system_tokens=64),
                 SessionTemplate("y", ((300, 30),))),
        (0.25, 0.75), tool_delay=ToolDelay("fixed", 0.5), arrival="gamma", cv=2.0, source="test")
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(session_document(w)))
    assert load_session_workload(path) == w
    assert parse_session_document(session_document(w), "<doc>", "x") == w


GOOD = {"templates": [{"name": "a", "rounds": [[100, 10], [50, 5]]}]}


def _with(path: tuple, value) -> dict:
    doc = json.loads(json.dumps(GOOD))
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


BAD_DOCS = [
    ([1, 2], "is list, not an object"),
    ({"templats": []}, "unknown key 'templats'"),
    ({"name": "x"}, "missing key 'templates'"),
    ({"templates": []}, "templates): is not a non-empty list"),
    (_with(("templates", 0, "rounds", 0), [100]), "is not a [new_prompt_tokens, output_tokens] pair"),
    (_with(("templates", 0, "rounds", 0), [-1, 10]), "-1 is not an integer >= 0"),
    (_with(("templates", 0, "rounds", 1), [5, 0]), "0 is not an integer >= 1"),
    (_with(("templates", 0, "tool_delay"), {"kind": "fixed", "mean_s": -1}), "-1 is not a finite number >= 0 seconds"),
    (_with(("templates", 0, "tool_delay"), {"kind": "gaussian", "mean_s": 1}), "unknown tool-delay kind 'gaussian'"),
    (_with(("templates", 0, "tool_delay"), {"kind": "lognormal", "mean_s": 1}), "needs sigma > 0"),
    (_with(("templates", 0, "weight"), -0.5), "-0.5 is not a finite number >= 0"),
    (_with(("templates", 0, "jitter"), 1.5), "jitter = 1.5 must be in [0, 1)"),
    (_with(("templates", 0, "system_prompt"), {"id": "s"}), "missing key 'tokens'"),
    (_with(("templates", 0, "colour"), 1), "unknown key 'colour'"),
    (_with(("arrival",), {"process": "hawkes"}), "unknown session arrival process 'hawkes'"),
    ({"templates": [GOOD["templates"][0], GOOD["templates"][0]]}, "repeats a template name"),
]


@pytest.mark.parametrize(("doc", "fragment"), BAD_DOCS)
def test_bad_documents_raise_one_line_naming_the_file(tmp_path, doc, fragment):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(DataFormatError) as info:
        load_session_workload(path)
    msg = str(info.value)
    assert fragment in msg and str(path) in msg and "\n" not in msg


def test_malformed_json_and_unknown_name(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"templates": [')
    with pytest.raises(DataFormatError, match="not valid JSON"):
        load_session_workload(path)
    with pytest.raises(UnknownNameError, match="valid session workload names are frontier_agentic"):
        load_session_workload("frontier")


@pytest.mark.parametrize(("mix", "error", "fragment"), [
    ("long=1", UnknownNameError, "unknown session template 'long'"),
    ("short", ConfigError, "is not name=weight"),
    ("short=x", ConfigError, "is not a number"),
    ("short=-1", ConfigError, "must be a finite number >= 0"),
    ("short=0,heavy_tail=0", ConfigError, "gives no positive weight"),
    ("short=1,short=2", ConfigError, "twice"),
])
def test_bad_mix(mix, error, fragment):
    with pytest.raises(error, match=fragment):
        frontier(mix)


def test_mix_leaves_out_templates_and_normalises():
    assert parse_mix(" heavy_tail = 3 ", ("short", "heavy_tail")) == {"heavy_tail": 3.0}
    assert np.allclose(frontier("heavy_tail=3").shares, [0.0, 1.0])


def test_missing_tool_delay_is_required_not_invented():
    with pytest.raises(ConfigError, match="no tool-call delay") as err:
        load_session_workload("frontier_agentic").sample(np.random.default_rng(0), 10, 1.0)
    assert "give one, e.g. --tool-delay-s" in render_error(err.value)  # the CLI's wording
    with pytest.raises(ConfigError, match="must be a finite number >= 0 seconds"):
        ToolDelay("fixed", -0.1)


@pytest.mark.parametrize("lengths", [OutputLengths("lognormal", 2000, 1.2, 32768), OutputLengths("pareto", 500, 1.5,
                                                                                                   50_000)])
def test_rollout_lengths_match_their_law(lengths):
    n = 40_000
    x = lengths.sample(np.random.default_rng(11), n).astype(float)
    # ceil adds less than one token on average; the sample mean's sd is sd(x)/sqrt(n)
    assert abs(x.mean() - lengths.expected_mean_tokens()) <= 4 * x.std() / math.sqrt(n) + 1.0
    for q in (0.5, 0.9, 0.99):
        band = 4 * math.sqrt(q * (1 - q) / n)  # order-statistic bound on the empirical quantile's level
        lo, hi = lengths.quantile_tokens(max(q - band, 1e-9)), lengths.quantile_tokens(min(q + band, 1 - 1e-9))
        assert lo <= np.quantile(x, q) <= math.ceil(hi)
    assert x.max() <= lengths.cap_tokens and np.mean(x) > np.median(x)  # right-skewed: heavy tail


def test_rollout_bursts_release_together_and_split_outputs():
    r = RlRollout(n_trajectories=50, n_bursts=3, burst_interval_s=60.0, prompt_tokens=256, rounds_per_trajectory=3,
                  observation_tokens=32, output=OutputLengths("lognormal", 300, 1.0, 4000), tool_delay=ONE_SECOND)
    t = r.sample(np.random.default_rng(2))
    assert t.n_sessions == 150 and t.n_rows == 450
    first = t.round_index == 0
    assert np.array_equal(np.unique(t.session_arrival_s), [0.0, 60.0, 120.0])
    assert np.array_equal(t.burst[first], np.repeat([0, 1, 2], 50))
    assert np.all(t.new_prompt_tokens[first] == 256) and np.all(t.new_prompt_tokens[~first] == 32)
    per_round = t.output_tokens.reshape(150, 3)
    assert np.all(per_round.max(axis=1) - per_round.min(axis=1) <= 1) and np.all(per_round >= 1)


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"n_trajectories": 0}, "n_trajectories = 0 must be an integer >= 1"),
    ({"n_bursts": 2}, "2 bursts need burst_interval_s > 0"),
    ({"rounds_per_trajectory": 2}, "need a tool_delay"),
    ({"burst_interval_s": -1.0}, "must be a finite number >= 0 seconds"),
])
def test_rollout_bad_input(kwargs, fragment):
    base = {"n_trajectories": 10, "prompt_tokens": 100, "output": OutputLengths("pareto", 100, 1.5, 1000)}
    with pytest.raises(ConfigError, match=fragment):
        RlRollout(**{**base, **kwargs})
    with pytest.raises(UnknownNameError, match="unknown output-length distribution 'weibull'"):
        OutputLengths("weibull", 1, 1, 1)
