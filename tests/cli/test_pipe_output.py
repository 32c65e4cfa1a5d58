"""Output through a pipe at 80 columns: no cell is ever cut; ``--format csv|json|markdown``.

CliRunner's stdout is not a terminal, like ``fleetplan models list | cat``; ``COLUMNS=80`` is what a
narrow terminal would report."""

from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli
from fleetplan.hardware import load_catalog
from fleetplan.models import list_models
from fleetplan.workload import list_workloads

NARROW = {"COLUMNS": "80"}


def run(*args: str):
    result = CliRunner().invoke(cli, list(args), env=NARROW)
    assert result.exit_code == 0, result.output
    return result.stdout


def _tokens(text: str) -> set[str]:
    """Every whitespace- or box-separated word of ``text``."""
    for ch in "│┃|,":
        text = text.replace(ch, " ")
    return set(text.split())


@pytest.mark.parametrize(("group", "names"), [
    ("models", list_models()),
    ("gpus", [p.name for p in load_catalog()]),
    ("workloads", list_workloads()),
])
def test_list_through_a_pipe_keeps_every_name_whole(group, names):
    words = _tokens(run(group, "list"))
    assert "…" not in run(group, "list")
    assert set(names) <= words, set(names) - words


@pytest.mark.parametrize(("group", "names"), [
    ("models", list_models()),
    ("gpus", [p.name for p in load_catalog()]),
    ("workloads", list_workloads()),
])
def test_list_formats(group, names):
    rows = list(csv.DictReader(io.StringIO(run(group, "list", "--format", "csv"))))
    assert [r["name"] for r in rows] == list(names)
    doc = json.loads(run(group, "list", "--format", "json"))
    assert [r["name"] for r in doc] == list(names)
    md = run(group, "list", "--format", "markdown").splitlines()
    body = [line for line in md if line.startswith("| ") and not line.startswith("| name")]
    assert [line.split(" | ")[0].removeprefix("| ") for line in body] == list(names)


@pytest.mark.parametrize("args", [
    ("models", "show", "qwen3-235b-a22b"),
    ("models", "show", "llama-3.1-8b", "--gpu", "h100"),
    ("gpus", "show", "h100"),
    ("workloads", "show", "lmsys"),
])
def test_show_formats(args):
    text = run(*args)
    assert "…" not in text
    doc = json.loads(run(*args, "--format", "json"))
    tables = doc.values() if isinstance(doc, dict) else [doc]  # several tables: keyed by title
    assert tables and all(isinstance(rows, list) and rows for rows in tables)
    assert run(*args, "--format", "csv").count("\n") > 3
    assert "|---|" in run(*args, "--format", "markdown")


def test_optimize_table_through_a_pipe_keeps_cells_whole():
    args = ("optimize", "--workload", "lmsys.json", "--slo-ttft", "500", "--no-verify", "--quiet")
    text = run(*args)
    assert "…" not in text
    words = _tokens(text)
    assert "H100-SXM" in words and words & {"multi-pool", "two-pool"}
    assert any(w.endswith("-65536") for w in words)  # the longest pool's range, not cut
    doc = json.loads(run(*args, "--format", "json"))
    assert doc[0]["#"] == "1" and doc[0]["topology"] and doc[0]["$/yr"]
    rows = list(csv.DictReader(io.StringIO(run(*args, "--format", "csv"))))
    assert {r["topology"].split(" ")[0] for r in rows} & {"multi-pool", "two-pool"}


def test_simulate_through_a_pipe_keeps_numbers_and_names_whole(tmp_path):
    fleet = tmp_path / "fleet.toml"
    fleet.write_text('pool_router = "length"\n'
                     '[[pool]]\nname = "all"\ngpu = "h100"\ninstances = 2\nmax_context_tokens = 4096\n'
                     '[[pool]]\nname = "long-prompts"\ngpu = "a100"\ninstances = 2\nmax_context_tokens = 65536\n')
    text = run("simulate", "--fleet", str(fleet), "--workload", "lmsys", "--lam", "20", "--sim-requests", "1200",
               "--level", "request", "--seed", "3")
    assert "…" not in text
    words = _tokens(text)
    assert {"H100-SXM", "A100-80GB", "long-prompts", "all", "(fleet", "total)"} <= words
    assert "1,200" in text  # request counts printed whole
    # the pool named "all" and the fleet row are told apart
    rows = [line for line in text.splitlines() if line.startswith("│ all ") or line.startswith("│ (fleet total)")]
    assert len(rows) >= 2 and any("(fleet total)" in r for r in rows)
