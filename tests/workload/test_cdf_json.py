"""CDF JSON layouts, validation messages (file + position) and the atomic writer."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fleetplan.errors import DataFormatError
from fleetplan.workload import read_cdf_json, write_cdf_json


def _write(tmp_path: Path, text: str, name: str = "w.json") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_plain_list_layout(tmp_path):
    doc = read_cdf_json(_write(tmp_path, "[[100, 0.5], [200, 1.0]]"))
    np.testing.assert_allclose(doc.total.tokens, [100, 200])
    assert doc.input is None and doc.output is None and doc.copula is None
    assert doc.total.mean() == pytest.approx(0.5 * 50 + 0.5 * 150)


def test_object_layout_keeps_metadata(tmp_path):
    obj = {
        "cdf": [[100, 0.5], [300, 1.0]],
        "input_cdf": [[80, 0.5], [250, 1.0]],
        "output_cdf": [[10, 0.5], [50, 1.0]],
        "source": "test",
        "license": "CC0",
        "n_samples": 7,
        "generated_by": "hand",
        "provenance": {"note": "x"},
        "seed": 42,
        "input_fraction": 0.7,
    }
    doc = read_cdf_json(_write(tmp_path, json.dumps(obj)))
    assert doc.input is not None and doc.output is not None
    assert (doc.source, doc.license, doc.n_samples, doc.generated_by) == ("test", "CC0", 7, "hand")
    assert doc.metadata == {"provenance": {"note": "x"}, "seed": 42}
    assert doc.input_fraction == 0.7


def test_reads_fleet_sim_anchor_with_repeated_fractions(shared_dir):
    doc = read_cdf_json(shared_dir / "anchors" / "fleet_sim_cdfs" / "azure_cdf.json")
    assert doc.total.max_tokens == 65536
    assert doc.total.cdf(8192) == pytest.approx(0.9999645201348235)
    agent = read_cdf_json(shared_dir / "anchors" / "fleet_sim_cdfs" / "agent_heavy_cdf.json")
    assert agent.metadata["seed"] == 42
    assert agent.total.prob(4096) == pytest.approx(1 - 0.53802)


@pytest.mark.parametrize(
    ("text", "where", "rule"),
    [
        ("[[100, 0.5], [200, 1.0]", "line 1, column 24", "malformed JSON"),
        ("[]", "(cdf)", "empty"),
        ('{"cdf": []}', "(cdf)", "empty"),
        ("[[100, 1.0]]", "(cdf points)", "at least 2"),
        ("[[100, 0.5], [50, 1.0]]", "(cdf point 2)", "strictly increasing"),
        ("[[100, 0.5], [200, 0.9]]", "(cdf point 2)", "exactly 1"),
        ("[[100, 0.6], [200, 0.5], [300, 1]]", "(cdf point 2)", "non-decreasing"),
        ("[[-5, 0.5], [200, 1.0]]", "(cdf point 1)", "positive"),
        ("[[100, 1.5], [200, 1.0]]", "(cdf point 1)", r"\[0, 1\]"),
        ('[[100, "a"], [200, 1.0]]', "(cdf point 1)", "two numbers"),
        ('{"source": "x"}', "", "no 'cdf' key"),
        ('{"cdf": [[1, 0.5], [2, 1]], "input_cdf": [[1, 0.5], [2, 1]]}', "(input_cdf)", "both"),
        ('{"cdf": [[1, 0.5], [2, 1]], "input_fraction": 1.5}', "(input_fraction)", r"\(0, 1\)"),
        ('{"cdf": [[1, 0.5], [2, 1]], "n_samples": -3}', "(n_samples)", "positive integer"),
        (
            '{"cdf": [[1, 0.5], [2, 1]], "input_cdf": [[1, 0.5], [2, 1]], "output_cdf": [[1, 0.5], [2, 1]], '
            '"copula": [[0.5, 0.1], [0.2, 0.1]]}',
            "(copula)",
            "sum to 0.9",
        ),
        ("3", "", "top-level JSON is a int"),
    ],
)
def test_malformed_files_name_file_and_position(tmp_path, text, where, rule):
    p = _write(tmp_path, text)
    with pytest.raises(DataFormatError, match=rule) as info:
        read_cdf_json(p)
    msg = str(info.value)
    assert msg.startswith(str(p)) and "\n" not in msg
    assert where in msg


def test_writer_round_trips_and_is_atomic(tmp_path):
    doc = {"source": "s", "cdf": [[10, 0.25], [20, 1.0]], "provenance": {"a": [1, 2]}}
    target = write_cdf_json(tmp_path / "out.json", doc)
    assert json.loads(target.read_text()) == doc
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temp file left behind


def test_writer_refuses_invalid_document_and_keeps_old_file(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    with pytest.raises(DataFormatError, match="exactly 1"):
        write_cdf_json(target, {"cdf": [[10, 0.25], [20, 0.9]]})
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]
