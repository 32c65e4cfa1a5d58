"""GpuCatalog and load_catalog: lookup, aliases, user TOML overrides, malformed files."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fleetplan.errors import ConfigError, DataFormatError, UnknownNameError
from fleetplan.hardware import catalog as catalog_module
from fleetplan.hardware import load_catalog, power_w
from fleetplan.paths import gpu_profiles_dir

NAMES = {"A10G", "L4", "L40S", "A100-40GB", "A100-80GB", "H100-SXM", "H100-PCIe", "H200", "H20", "H20-3e",
         "H800", "B200", "MI300X"}


def write(tmp_path: Path, text: str, name: str = "user.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_bundled_catalog_has_the_thirteen_gpus() -> None:
    catalog = load_catalog()
    assert set(catalog.names()) == NAMES and len(catalog) == 13
    assert [p.name for p in catalog] == list(catalog.names())


def test_bundled_load_is_cached() -> None:
    assert load_catalog() is load_catalog()


@pytest.mark.parametrize(
    "query, canonical",
    [("h100", "H100-SXM"), ("H100", "H100-SXM"), ("h100-sxm", "H100-SXM"), ("a100", "A100-80GB"),
     ("A10G", "A10G"), ("a10g", "A10G"), (" l40s ", "L40S"), ("h100-pcie", "H100-PCIe"),
     ("instinct-mi300x", "MI300X"), ("a100-40g", "A100-40GB")],
)
def test_get_by_name_or_alias(query: str, canonical: str) -> None:
    assert load_catalog().get(query).name == canonical
    assert query in load_catalog()


@pytest.mark.parametrize("query", ["mi300", "h100-nvl", "b100", "a10", ""])
def test_unknown_names_never_substitute_hardware(query: str) -> None:
    with pytest.raises(UnknownNameError) as info:
        load_catalog().get(query)
    assert info.value.kind == "GPU"
    assert set(info.value.valid) == NAMES
    assert "\n" not in str(info.value) and "valid GPU names are" in str(info.value)


def test_every_alias_maps_to_exactly_one_gpu() -> None:
    seen: dict[str, str] = {}
    for profile in load_catalog():
        for key in (profile.name.lower(), *profile.aliases):
            assert key not in seen, (key, seen.get(key), profile.name)
            seen[key] = profile.name


def test_price_overrides_by_alias() -> None:
    catalog = load_catalog(price_overrides={"h100": 2.49, "H20": 1.2})
    assert catalog.get("H100-SXM").price_usd_per_h == 2.49
    assert catalog.get("H20").price_usd_per_h == 1.2
    assert "override" in catalog.get("H100-SXM").sources["price_usd_per_h"]
    assert load_catalog().get("H100-SXM").price_usd_per_h == 4.02  # cached catalog untouched


@pytest.mark.parametrize("prices, error", [({"h99": 1.0}, UnknownNameError), ({"h100": -1.0}, ConfigError),
                                           ({"h100": float("inf")}, ConfigError)])
def test_bad_price_overrides(prices, error) -> None:
    with pytest.raises(error):
        load_catalog(price_overrides=prices)


def test_user_toml_overrides_some_fields(tmp_path: Path) -> None:
    path = write(tmp_path, """
[gpu.h100]
price_usd_per_h = 2.49
[gpu.h100.sources]
price_usd_per_h = "our 2026 contract"

[gpu.A100-80GB]
idle_w = 55.0
[gpu.A100-80GB.serving]
chunk_tokens = 1024
""")
    catalog = load_catalog(path)
    h100 = catalog.get("H100-SXM")
    assert h100.price_usd_per_h == 2.49 and h100.sources["price_usd_per_h"] == "our 2026 contract"
    assert h100.tdp_w == 700.0 and h100.serving == load_catalog().get("H100-SXM").serving
    a100 = catalog.get("a100")
    assert a100.idle_w == 55.0 and a100.sources["idle_w"] == f"user override in {path}"
    assert a100.serving.chunk_tokens == 1024 and a100.serving.kv_blocks == 65_536
    assert a100.sources["serving.chunk_tokens"] == f"user override in {path}"
    # the bundled (cached) catalog is not mutated by the merge
    assert load_catalog().get("A100-80GB").serving.chunk_tokens == 512


def test_user_toml_adds_power_curve_to_a_bundled_gpu(tmp_path: Path) -> None:
    path = write(tmp_path, """
[gpu.A100-80GB.power]
k = 1.0
x0_log2_batch = 2.5
floor_w = 175.0
nominal_w = 385.0
source = "our measurement"
""")
    a100 = load_catalog(path).get("A100-80GB")
    assert power_w(a100, 2 ** 2.5) == pytest.approx((175.0 + 385.0) / 2)


NEW_GPU = """
[gpu.MyAccel]
description = "In-house accelerator"
aliases = ["myaccel-96"]
bf16_tflops = 500.0
fp8_tflops = "none"
hbm_gib = 96.0
hbm_tb_per_s = 3.0
nvlink_gb_per_s = "none"
network_gbps = 200.0
gpus_per_node = 4
tdp_w = 500.0
idle_w = 60.0
price_usd_per_h = 1.5
failure_rate_per_day = 0.01
mttr_days = 1.0
"""


def test_user_toml_adds_a_gpu(tmp_path: Path) -> None:
    catalog = load_catalog(write(tmp_path, NEW_GPU))
    accel = catalog.get("myaccel-96")
    assert accel.name == "MyAccel" and len(catalog) == len(NAMES) + 1
    assert accel.fp8_tflops is None and accel.availability == pytest.approx(1 / 1.01)
    assert accel.sources["bf16_tflops"].startswith("user override in")


@pytest.mark.parametrize(
    "text, match",
    [
        (NEW_GPU.replace("tdp_w = 500.0\n", ""), "missing tdp_w"),
        (NEW_GPU.replace('bf16_tflops = 500.0', 'bf16_tflops = "fast"'), "bf16_tflops"),
        (NEW_GPU.replace('fp8_tflops = "none"', "fp8_tflops = 0"), "fp8_tflops"),
        (NEW_GPU.replace("tdp_w = 500.0", "tdp_w = 500.0\nturbo = true"), "unknown key 'turbo'"),
        (NEW_GPU.replace('aliases = ["myaccel-96"]', 'aliases = ["h100"]'), "alias 'h100' already names"),
        (NEW_GPU + "[gpu.MyAccel.serving]\nchunk_tokens = 512\n", "missing serving"),
        (NEW_GPU + "[gpu.MyAccel.serving]\nkv_blocks = 1.5\n", "serving.kv_blocks"),
        ("[gpu.H100-SXM]\nprice_usd_per_h = = 2\n", "not valid TOML"),
        ("[gpus.H100-SXM]\nprice_usd_per_h = 2.0\n", "unexpected top-level key"),
        ('[gpu.H100-SXM]\nname = "B200"\n', "name differs"),
        ("[gpu.H100-SXM.sources]\nspeed = \"x\"\n", "unknown field 'speed'"),
    ],
)
def test_malformed_user_toml_names_file_and_field(tmp_path: Path, text: str, match: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(DataFormatError, match=match) as info:
        load_catalog(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_missing_user_file_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="cannot read") as info:
        load_catalog(tmp_path / "absent.toml")
    assert "absent.toml" in str(info.value)


@pytest.fixture
def bundled_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A private copy of gpu_profiles/ that the loader reads instead of the real one."""
    copy = tmp_path / "gpu_profiles"
    shutil.copytree(gpu_profiles_dir(), copy)
    monkeypatch.setattr(catalog_module, "gpu_profiles_dir", lambda: copy)
    catalog_module._bundled_tables.cache_clear()
    catalog_module._bundled_catalog.cache_clear()
    yield copy
    catalog_module._bundled_tables.cache_clear()
    catalog_module._bundled_catalog.cache_clear()


def test_bundled_file_without_a_source_is_a_load_error(bundled_dir: Path) -> None:
    path = bundled_dir / "l4.toml"
    path.write_text("\n".join(line for line in path.read_text().splitlines()
                              if not line.startswith("tdp_w = \"")))
    with pytest.raises(DataFormatError, match="no source for tdp_w") as info:
        load_catalog()
    assert "l4.toml" in str(info.value)


def test_duplicate_alias_across_bundled_files_is_a_load_error(bundled_dir: Path) -> None:
    path = bundled_dir / "h200.toml"
    path.write_text(path.read_text().replace('aliases = ["h200-sxm", "h200-141gb"]',
                                             'aliases = ["h200-sxm", "h100"]'))
    with pytest.raises(DataFormatError, match="alias 'h100' already names GPU 'H100-SXM'"):
        load_catalog()


def test_bundled_file_without_name_is_a_load_error(bundled_dir: Path) -> None:
    (bundled_dir / "broken.toml").write_text("bf16_tflops = 1.0\n")
    with pytest.raises(DataFormatError, match="broken.toml"):
        load_catalog()


def test_hardware_layer_imports_no_cli_libraries() -> None:
    code = ("import sys, fleetplan.hardware as h; h.load_catalog(); "
            "bad = [m for m in ('click', 'rich', 'fleetplan.cli', 'fleetplan.sim', 'fleetplan.plan') "
            "if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])


def test_every_bundled_gpu_states_its_node_size_with_a_source() -> None:
    """HGX/DGX, MI300X and the largest AWS L4/A10G/L40S instances hold 8 GPUs per node."""
    for gpu in load_catalog():
        assert gpu.gpus_per_node == 8 and isinstance(gpu.gpus_per_node, int)
        assert gpu.sources["gpus_per_node"].strip()


def test_a_gpu_without_gpus_per_node_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="gpus_per_node"):
        load_catalog(write(tmp_path, NEW_GPU.replace("gpus_per_node = 4\n", "")))
    with pytest.raises(DataFormatError, match="whole number"):
        load_catalog(write(tmp_path, NEW_GPU.replace("gpus_per_node = 4", "gpus_per_node = 4.5")))
