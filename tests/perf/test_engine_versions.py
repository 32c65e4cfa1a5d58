"""Per-release engine-profile values (``fleetplan.perf.engine_profile``, "Engine versions";
``fleetplan.perf.engine_version.release_of``).

Rules checked: a named release takes the values of the newest profiled release at or before it (the oldest profiled
one when older than all, the default version's when newer than all); values a release does not override come from
the next newer profiled release; the default version is the newest profiled release and carries no overrides; a
string that is not a release number is one ``ConfigError``; a profile file breaking a rule is a
``DataFormatError`` naming the table.
"""

from __future__ import annotations

import pytest

from fleetplan.errors import ConfigError, DataFormatError
from fleetplan.models import Dtype
from fleetplan.perf import engine_profile
from fleetplan.perf.engine_profile import ENGINE_NAMES, load_engine_profile
from fleetplan.perf.engine_version import release_of


@pytest.mark.parametrize(("text", "release"), [
    ("0.10.2", (0, 10, 2)), ("v0.9.1", (0, 9, 1)), ("0.5.6.post1", (0, 5, 6)), ("1.3.0rc20", (1, 3, 0)),
    ("0.6.3.dev116+g151ef4ef", (0, 6, 3)), (" 0.11.0 ", (0, 11, 0)), ("1.0", (1, 0)),
])
def test_release_of_reads_the_release_segment(text, release):
    assert release_of(text) == release


@pytest.mark.parametrize("text", ["", "latest", "not stated (2024)", "0.10.x", "0..1", "v", "0.9.1 static"])
def test_a_string_that_is_no_release_is_one_config_error(text):
    with pytest.raises(ConfigError, match="not a release number"):
        release_of(text)


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_every_profile_has_a_default_version_without_overrides(engine):
    profile = load_engine_profile(engine)
    newest = profile.versions[0]
    assert profile.default_version == newest.name
    assert release_of(newest.name) == max(release_of(v.name) for v in profile.versions)
    assert not newest.options and not newest.gpu_options
    assert profile.values_version(None) == newest.name


@pytest.mark.parametrize(("named", "values"), [
    (None, "0.24.0"), ("0.30.0", "0.24.0"), ("0.24.0", "0.24.0"), ("0.23.1", "0.22.0"), ("0.21.0", "0.19.0"),
    ("0.19.0", "0.19.0"), ("0.13.0", "0.11.1"), ("0.11.0", "0.11.0"),
    ("0.10.2", "0.10.1"), ("0.10.1", "0.10.1"),
    ("0.10.0", "0.9.1"), ("0.9.1", "0.9.1"), ("0.8.5", "0.6.3"), ("0.6.3.dev116+g151ef4ef", "0.6.3"),
    ("0.5.4", "0.6.3"),
])
def test_a_named_release_takes_the_newest_profiled_at_or_before_it(named, values):
    assert load_engine_profile("vllm").values_version(named) == values


def test_overrides_apply_per_gpu_and_release_only(catalog):
    """MI300X weight streaming per release; every other option and a GPU without overrides as the default
    version's."""
    profile = load_engine_profile("vllm")
    mi300x, h100 = catalog.get("MI300X"), catalog.get("A100-80GB")
    default = profile.options_for(mi300x, Dtype.FP8)
    for named, value in (("0.6.3", 0.41), ("0.9.1", 0.32), ("0.10.1", 0.40)):
        opts = profile.options_for(mi300x, Dtype.FP8, named)
        assert opts.weight_bandwidth_efficiency == pytest.approx(value)
        assert opts.__class__(**{**opts.__dict__, "weight_bandwidth_efficiency": 0.40}) == default
        assert profile.options_for(h100, Dtype.FP8, named) == profile.options_for(h100, Dtype.FP8)


def test_a_bad_release_string_fails_before_any_work(catalog):
    with pytest.raises(ConfigError, match="'newest' is not a release number"):
        load_engine_profile("vllm").options_for(catalog.get("MI300X"), Dtype.FP8, "newest")


def _write(tmp_path, monkeypatch, text: str):
    (tmp_path / "vllm.toml").write_text('name = "vllm"\n[options]\ncpu_overhead_s = 1e-3\n[sources]\n'
                                        'cpu_overhead_s = "test"\n' + text, encoding="utf-8")
    monkeypatch.setattr(engine_profile, "data_dir", lambda name: tmp_path)


def test_chained_overrides_take_the_nearest_newer_release(tmp_path, monkeypatch, catalog):
    """1.0 overrides the CPU time, 0.5 the GEMM efficiency: 0.5 runs both (its own, then 1.0's), 1.0 only its own."""
    _write(tmp_path, monkeypatch, '''
[versions."2.0"]
note = "default"
[versions."1.0"]
note = "one"
[versions."1.0".options]
cpu_overhead_s = 2e-3
[versions."1.0".sources]
cpu_overhead_s = "one"
[versions."0.5"]
note = "half"
[versions."0.5".gpu_options.H100-SXM]
gemm_efficiency = 0.5
[versions."0.5".gpu_sources.H100-SXM]
gemm_efficiency = "half"
''')
    profile, h100 = load_engine_profile("vllm"), catalog.get("H100-SXM")
    assert profile.default_version == "2.0"
    assert profile.options_for(h100, Dtype.BF16).cpu_overhead_s == pytest.approx(1e-3)
    one = profile.options_for(h100, Dtype.BF16, "1.5")
    half = profile.options_for(h100, Dtype.BF16, "0.5.9")
    assert (one.cpu_overhead_s, one.gemm_efficiency) == (pytest.approx(2e-3), profile.options.gemm_efficiency)
    assert (half.cpu_overhead_s, half.gemm_efficiency) == (pytest.approx(2e-3), pytest.approx(0.5))


@pytest.mark.parametrize(("text", "where"), [
    ("", "[versions]"),
    ('[versions."1.0"]\nnote = ""\n', '[versions."1.0"]'),
    ('[versions."latest"]\nnote = "x"\n', '[versions."latest"]'),
    ('[versions."1.0"]\nnote = "x"\n[versions."1.0".options]\ncpu_overhead_s = 2e-3\n'
     '[versions."1.0".sources]\ncpu_overhead_s = "x"\n', '[versions."1.0"]'),
    ('[versions."2.0"]\nnote = "x"\n[versions."1.0"]\nnote = "y"\n[versions."1.0".options]\ncpu_overhead_s = 2e-3\n',
     '[versions."1.0".sources]'),
    ('[versions."2.0"]\nnote = "x"\n[versions."1.0"]\nnote = "y"\nvalues = 1\n', '[versions."1.0"]'),
])
def test_a_profile_breaking_a_version_rule_names_the_table(tmp_path, monkeypatch, text, where):
    _write(tmp_path, monkeypatch, text)
    with pytest.raises(DataFormatError) as err:
        load_engine_profile("vllm")
    assert where in str(err.value)


@pytest.mark.parametrize(("gpu", "version", "value", "needle"), [
    ("H100-SXM", None, 0.49, "oaitritonmxfp4experts"), ("H100-SXM", "0.11.0", 0.21, "marlinexperts"),
    ("H200", "0.6.3", 0.21, "marlinexperts"), ("H200", "0.11.1", 0.49, "oaitritonmxfp4experts"),
])
def test_each_value_in_force_names_its_source(catalog, gpu, version, value, needle):
    """Hopper MXFP4 experts: Marlin through 0.11.0 (the wheels lack triton_kernels), Triton from 0.11.1; the
    source of the value in force is the layer that set it (``EngineProfile.source_of``)."""
    profile = load_engine_profile("vllm")
    assert profile.options_for(catalog.get(gpu), Dtype.MXFP4, version).moe_mxfp4_gemm_efficiency == value
    assert needle in profile.source_of("moe_mxfp4_gemm_efficiency", catalog.get(gpu), version)
    assert "dstackai" in profile.source_of("weight_bandwidth_efficiency", catalog.get("MI300X"), "0.6.3")
    assert "0.10.1" in profile.source_of("weight_bandwidth_efficiency", catalog.get("MI300X"))


@pytest.mark.parametrize(("gpu", "version", "bf16", "fp8_block", "table"), [
    ("H200", None, 0.44, 0.24, "0.24.0"), ("H200", "0.22.0", 0.44, 0.24, "0.24.0"),
    ("H200", "0.19.0", 0.37, 0.23, "0.19.0"), ("H200", "0.13.0", 0.37, 0.23, "0.19.0"),
    ("H200", "0.11.0", 0.37, 0.23, "0.19.0"), ("B200", None, 0.31, 0.16, "0.24.0"),
    ("B200", "0.23.0", 0.25, 0.09, "0.22.0"), ("B200", "0.19.0", 0.27, 0.10, "0.19.0"),
    ("B200", "0.11.0", 0.27, 0.10, "0.19.0"), ("H100-SXM", "0.11.0", 0.38, 0.23, "0.24.0"),
])
def test_moe_gemm_rates_of_the_nearest_measured_release(catalog, gpu, version, bf16, fp8_block, table):
    """The fused-MoE GEMM rates come from AIConfigurator's table of the nearest measured release at or after the
    named one (H200: 0.19.0 for every older release; B200: 0.22.0, 0.19.0; the H100 has only the 0.24.0 table),
    each value's source naming its table."""
    profile = load_engine_profile("vllm")
    opts = profile.options_for(catalog.get(gpu), Dtype.FP8, version)
    assert (opts.moe_gemm_efficiency, opts.moe_fp8_gemm_efficiency) == (bf16, fp8_block)
    assert f"/moe/vllm/{table}/" in profile.source_of("moe_fp8_gemm_efficiency", catalog.get(gpu), version)


@pytest.mark.parametrize(("gpu", "version", "bf16", "fp8_block", "table"), [
    ("H200", None, 0.23, 0.29, "0.5.14"), ("H200", "0.5.14", 0.23, 0.29, "0.5.14"),
    ("H200", "0.5.11", 0.23, 0.27, "0.5.10"),
    ("H200", "0.5.10", 0.23, 0.27, "0.5.10"), ("H200", "0.5.6.post2", 0.23, 0.27, "0.5.10"),
    ("H200", "0.5.3", 0.23, 0.27, "0.5.10"), ("H100-SXM", "0.5.3", 0.21, 0.26, "0.5.14"),
    ("B200", "0.5.3", 0.30, 0.16, "0.5.14"),
])
def test_sglang_moe_gemm_rates_of_the_nearest_measured_release(catalog, gpu, version, bf16, fp8_block, table):
    """SGLang under the same rule: the H200's block-FP8 fused-MoE rate of the 0.5.10 table for the releases before
    0.5.14 (the newest profiled release at or before the run's, the oldest for older ones: the GPUStack SGLang
    0.5.3 / 0.5.6.post2 runs); the H200's BF16 and the H100's 0.5.10 read-backs round to
    the default version's values, and the B200 has only the 0.5.14 table. Each value in force names its table."""
    profile = load_engine_profile("sglang")
    opts = profile.options_for(catalog.get(gpu), Dtype.FP8, version)
    assert (opts.moe_gemm_efficiency, opts.moe_fp8_gemm_efficiency) == (bf16, fp8_block)
    assert f"/moe/sglang/{table}/" in profile.source_of("moe_fp8_gemm_efficiency", catalog.get(gpu), version)
