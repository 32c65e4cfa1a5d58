"""Fleet TOML: the shipped examples load; every malformed input names file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetplan.errors import DataFormatError
from fleetplan.hardware import load_catalog
from fleetplan.sim.fleet_toml import load_fleet_toml
from fleetplan.sim.spec import InstanceRouter, PoolRouter

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

GOOD = """
pool_router = "compress_and_route"
compress_gamma = 1.25

[[pool]]
name = "short"
gpu = "a100"
instances = 3
max_context_tokens = 4096
router = "power_of_two"
max_num_seqs = 200
max_num_batched_tokens = 1024

[[pool]]
name = "long"
gpu = "H100-SXM"
instances = 2
max_context_tokens = 65536
price_usd_per_h = 3.5
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fleet.toml"
    path.write_text(text)
    return path


def test_two_pool_example_is_the_papers_table_1_layout():
    spec = load_fleet_toml(EXAMPLES / "two_pool_a100.toml")
    a100 = load_catalog().get("a100")
    short, long = spec.pools
    assert (short.name, short.n_instances, short.max_context_tokens) == ("short", 3, 4096)
    assert (long.name, long.n_instances, long.max_context_tokens) == ("long", 5, 65536)
    assert short.gpu == long.gpu == a100.name and spec.pool_router is PoolRouter.LENGTH
    # defaults from the calibrated profile: n_max(4096) = 65536 // 256, n_max(65536) = 16 (paper §2.1)
    assert short.limits.max_num_seqs == 256 and long.limits.max_num_seqs == 16
    assert short.limits.max_num_batched_tokens == 256 + a100.serving.chunk_tokens


@pytest.mark.parametrize("name", ["homogeneous_h100.toml", "mixed_a10g_h100.toml"])
def test_other_examples_load(name):
    spec = load_fleet_toml(EXAMPLES / name)
    assert spec.n_instances > 0 and all(p.price_usd_per_h > 0 for p in spec.pools)


def test_overrides_and_top_level_keys(tmp_path):
    spec = load_fleet_toml(write(tmp_path, GOOD))
    short, long = spec.pools
    assert spec.pool_router is PoolRouter.COMPRESS_AND_ROUTE and spec.compress_gamma == 1.25
    assert short.router is InstanceRouter.POWER_OF_TWO
    assert (short.limits.max_num_seqs, short.limits.max_num_batched_tokens) == (200, 1024)
    assert long.price_usd_per_h == 3.5 and long.router is InstanceRouter.LEAST_OUTSTANDING


@pytest.mark.parametrize(
    "old, new, fragments",
    [
        ('max_num_seqs = 200', 'max_seqs = 200', ["pool 'short'", "unknown key 'max_seqs'", "max_num_seqs"]),
        ('gpu = "a100"', 'gpu = "b200x"', ["pool 'short'.gpu", "unknown GPU 'b200x'", "A100-80GB"]),
        ('instances = 3', 'instances = 0', ["pool 'short'.instances", "must be an integer >= 1"]),
        ('instances = 3', 'instances = 2.5', ["pool 'short'.instances", "2.5"]),
        ('instances = 3', 'instances = "3"', ["pool 'short'.instances"]),
        ('price_usd_per_h = 3.5', 'price_usd_per_h = -3.5', ["pool 'long'.price_usd_per_h", ">= 0"]),
        ('compress_gamma = 1.25', 'compress_gamma = 0.5', ["compress_gamma", ">= 1"]),
        ('pool_router = "compress_and_route"', 'pool_router = "fastest"',
         ["pool_router", "unknown pool router"]),
        ('router = "power_of_two"', 'router = "fastest"', ["pool 'short'", "unknown instance router"]),
        ('max_context_tokens = 4096', 'max_context_tokens = 9999999',
         ["pool 'short'", "exceeds the KV cache"]),
        ('name = "long"', 'name = "short"', ["repeated"]),
        ('pool_router = "compress_and_route"', 'pool_router = "length"\ncolour = "red"',
         ["unknown key 'colour'"]),
        ('max_context_tokens = 65536\n', '\n', ["pool 'long'", "missing key 'max_context_tokens'"]),
    ],
)
def test_malformed_fleet_names_file_and_key(tmp_path, old, new, fragments):
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(DataFormatError) as err:
        load_fleet_toml(path)
    msg = str(err.value)
    assert msg.startswith(str(path)) and "\n" not in msg
    for fragment in fragments:
        assert fragment in msg


def test_invalid_toml_and_no_pools(tmp_path):
    with pytest.raises(DataFormatError, match="not valid TOML"):
        load_fleet_toml(write(tmp_path, "[[pool]\nname = 1"))
    with pytest.raises(DataFormatError, match="no \\[\\[pool\\]\\] tables"):
        load_fleet_toml(write(tmp_path, 'pool_router = "length"\n'))
