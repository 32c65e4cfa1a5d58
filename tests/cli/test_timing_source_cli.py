"""``--timing-source measured|roofline|auto`` on ``optimize``, ``whatif``, ``bench serve`` and ``perf explain``
(issue #26 item 1: the choice is a CLI option declared once, the library takes a parameter).

``measured`` without ``aiconfigurator-core`` is bad input: one line naming the extra, exit 2.  The package's
absence is simulated by patching ``aic.package_version`` (the one probe ``perf.measured`` reads).
"""

from __future__ import annotations

import re

import pytest

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.perf.calibrate import CalibratedStepModel
from fleetplan.perf.measured import aic
from fleetplan.perf.measured.source import TIMING_SOURCE_ENV, TimingChoice, timing_choice
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.plan.placement import place_model, place_on_gpus
from tests.cli.cli_check import one_line_error, run

EXTRA = "fleetplan[aiconfigurator]"
OPTIMIZE = ("optimize", "--workload", "azure_conv", "--model", "llama-3.1-8b", "--gpus", "h100", "--lam", "5",
            "--slo-ttft", "2000", "--topology", "homo", "--no-verify")
WHATIF = ("whatif", "--workload", "azure_conv", "--model", "llama-3.1-8b", "--gpus", "h100", "--lam-range", "5:5:1",
          "--slo-ttft", "2000", "--topology", "homo", "--no-verify")
EXPLAIN = ("perf", "explain", "--model", "llama-3.1-8b", "--gpu", "h100", "--batch", "decode=8x1024")
BENCH = ("bench", "serve", "--model", "llama-3.1-8b", "--gpu", "h100", "--num-prompts", "20", "--request-rate", "2",
         "--random-input-len", "128", "--random-output-len", "16")


@pytest.fixture
def no_extra(monkeypatch):
    monkeypatch.setattr(aic, "package_version", lambda: None)


@pytest.mark.parametrize("args", [OPTIMIZE, WHATIF, EXPLAIN, BENCH], ids=["optimize", "whatif", "explain", "bench"])
def test_measured_without_the_extra_is_one_line_naming_it(no_extra, args):
    one_line_error(run(*args, "--timing-source", "measured"), "--timing-source measured", "aiconfigurator-core",
                   EXTRA)


@pytest.mark.parametrize("args", [OPTIMIZE, EXPLAIN, BENCH], ids=["optimize", "explain", "bench"])
def test_an_unknown_choice_is_a_usage_error(args):
    res = run(*args, "--timing-source", "tables")
    assert res.exit_code == 2 and "'tables' is not one of 'auto', 'measured', 'roofline'" in res.stderr


def test_timing_source_needs_a_model():
    one_line_error(run("optimize", "--workload", "azure_conv", "--gpus", "h100", "--lam", "5", "--slo-ttft", "2000",
                       "--no-verify",
                       "--timing-source", "roofline"), "--timing-source needs --model")


def test_perf_explain_roofline_names_the_choice():
    res = run(*EXPLAIN, "--timing-source", "roofline")
    assert res.exit_code == 0, res.stderr
    assert "timing source: roofline+engine profile (timing source roofline)" in res.output


def test_perf_explain_auto_without_the_extra_falls_back_to_the_roofline(no_extra):
    res = run(*EXPLAIN, "--timing-source", "auto")
    assert res.exit_code == 0, res.stderr
    assert "timing source: roofline+engine profile (aiconfigurator-core not installed" in res.output


def test_bench_serve_header_names_the_source():
    """bench serve keeps the roofline by default (the serving validation's step model), tables or not."""
    for extra in ((), ("--timing-source", "roofline")):
        res = run(*BENCH, *extra)
        assert res.exit_code == 0, res.stderr
        assert re.search(r"engine profile vllm [\w.]+ \(default\), timing roofline\+engine profile", res.output)


@pytest.mark.skipif(aic.package_version() is None, reason="aiconfigurator-core not installed")
def test_measured_and_roofline_time_the_same_pool_differently():
    """With the extra: ``measured`` gives the tables' step model, ``roofline`` the predictor, in both phases'
    placement (the parameter, not the environment, decides)."""
    model, gpu = load_model("llama-3.1-8b"), load_catalog().get("h100")
    measured = place_model(model, gpu, timing_source="measured")
    roofline = place_model(model, gpu, timing_source="roofline")
    assert all(isinstance(p.step_model, CalibratedStepModel) for p in measured)
    assert all(isinstance(p.step_model, StepTimePredictor) for p in roofline)
    assert measured[0].gpu.serving.iter_base_s != roofline[0].gpu.serving.iter_base_s


def test_the_library_takes_a_parameter(no_extra, monkeypatch):
    model, gpu = load_model("llama-3.1-8b"), load_catalog().get("h100")
    with pytest.raises(ConfigError) as err:
        place_on_gpus(model, [gpu], timing_source="measured")
    assert err.value.param == "timing_source" and EXTRA in str(err.value)
    with pytest.raises(UnknownNameError):
        place_model(model, gpu, timing_source="tables")
    # the parameter wins over the environment (the documented fallback)
    monkeypatch.setenv(TIMING_SOURCE_ENV, "measured")
    assert timing_choice("roofline") is TimingChoice.ROOFLINE
    assert timing_choice(None) is TimingChoice.MEASURED
    assert all(isinstance(p.step_model, StepTimePredictor) for p in place_model(model, gpu, timing_source="auto"))
