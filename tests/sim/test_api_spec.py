"""Fleet specs validate on construction, lookups fail loudly, build_pool derives limits."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.hardware import ServingConstants, load_catalog
from fleetplan.perf.linear import LinearStepModel
from fleetplan.sim.builders import build_pool
from fleetplan.sim.spec import (
    ArrivalProcess,
    FleetSpec,
    InstanceRouter,
    Level,
    PoolRouter,
    PoolSpec,
    SchedulerLimits,
)

STEP = LinearStepModel(0.008, 0.00065, 0.0)
LIMITS = SchedulerLimits(max_num_seqs=16, max_num_batched_tokens=512, kv_blocks=65536)


def pool(name: str = "p", ctx: int = 4096, **kw) -> PoolSpec:
    return PoolSpec(name, "a100", kw.pop("n", 2), ctx, STEP, LIMITS, **kw)


@pytest.mark.parametrize(
    "enum_cls, name, member",
    [
        (InstanceRouter, "power-of-two", InstanceRouter.POWER_OF_TWO),
        (PoolRouter, "Compress_And_Route", PoolRouter.COMPRESS_AND_ROUTE),
        (Level, "request", Level.REQUEST),
        (ArrivalProcess, "gamma", ArrivalProcess.GAMMA),
    ],
)
def test_registry_parses_spellings(enum_cls, name, member):
    assert enum_cls.parse(name) is member


def test_unknown_router_lists_valid_names():
    with pytest.raises(UnknownNameError) as err:
        PoolRouter.parse("shortest")
    msg = str(err.value)
    assert "'shortest'" in msg and "length" in msg and "least_loaded" in msg and "\n" not in msg


def test_pool_spec_parses_router_string_and_costs():
    p = pool(router="round_robin", price_usd_per_h=2.5, n=3)
    assert p.router is InstanceRouter.ROUND_ROBIN
    assert p.cost_usd_per_h == pytest.approx(7.5)


def test_unknown_price_gives_nan_cost_not_zero():
    spec = FleetSpec((pool("a", price_usd_per_h=1.0), pool("b")))
    assert spec.cost_usd_per_h != spec.cost_usd_per_h  # NaN


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"n": 0}, "n_instances = 0"),
        ({"ctx": 65536 * 16 + 1}, "exceeds the KV cache"),
        ({"price_usd_per_h": -1.0}, "price_usd_per_h = -1.0"),
        ({"router": "fastest"}, "unknown instance router 'fastest'"),
    ],
)
def test_pool_spec_rejects_bad_values(kwargs, fragment):
    with pytest.raises((ConfigError, UnknownNameError), match=fragment):
        pool(**kwargs)


def test_scheduler_limits_reject_non_integers():
    with pytest.raises(ConfigError, match="max_num_seqs = 1.5"):
        SchedulerLimits(1.5, 512, 100)
    assert SchedulerLimits(4, 512, 100, 32).kv_capacity_tokens == 3200


def test_fleet_spec_rules():
    with pytest.raises(ConfigError, match="no pools"):
        FleetSpec(())
    with pytest.raises(ConfigError, match="repeated"):
        FleetSpec((pool("x"), pool("x")))
    with pytest.raises(ConfigError, match="compress_gamma = 0.9"):
        FleetSpec((pool(),), compress_gamma=0.9)
    spec = FleetSpec((pool("a", n=2), pool("b", n=5)), pool_router="random")
    assert spec.pool_router is PoolRouter.RANDOM and spec.n_instances == 7


def test_model_tag_needs_shares_for_several_tags():
    pools = (pool("a", model_tag="llama"), pool("b", model_tag="qwen"))
    with pytest.raises(ConfigError, match="no tag_shares"):
        FleetSpec(pools, pool_router="model_tag")
    with pytest.raises(ConfigError, match="sum to 0.9"):
        FleetSpec(pools, pool_router="model_tag", tag_shares=(("llama", 0.5), ("qwen", 0.4)))
    with pytest.raises(ConfigError, match="served by no pool"):
        FleetSpec(pools, pool_router="model_tag", tag_shares=(("llama", 0.5), ("mistral", 0.5)))
    FleetSpec(pools, pool_router="model_tag", tag_shares=(("llama", 0.5), ("qwen", 0.5)))


def test_build_pool_derives_limits_from_calibrated_constants():
    a100 = load_catalog().get("A100-80GB")
    p = build_pool(a100, "short", 3, 8192)
    s = a100.serving
    # n_max(8192) = floor(65536 / ceil(8192/16)) = 128 (core paper §2.1)
    assert p.limits.max_num_seqs == s.n_max(8192) == 65536 // 512
    # budget: every running sequence decodes and one prefill chunk fits in the same step
    assert p.limits.max_num_batched_tokens == s.n_max(8192) + s.chunk_tokens
    assert p.limits.kv_blocks == s.kv_blocks and p.limits.block_size_tokens == s.block_size_tokens
    assert p.step_model.iter_base_s == s.iter_base_s and p.step_model.iter_per_seq_s == s.iter_per_seq_s
    assert p.price_usd_per_h == a100.price_usd_per_h and p.gpu == a100.name


def test_build_pool_overrides_win():
    a100 = load_catalog().get("A100-80GB")
    p = build_pool(a100, "x", 1, 4096, max_num_seqs=64, max_num_batched_tokens=2048, kv_blocks=1000,
                   router="random", price_usd_per_h=9.0)
    assert (p.limits.max_num_seqs, p.limits.max_num_batched_tokens, p.limits.kv_blocks) == (64, 2048, 1000)
    assert p.router is InstanceRouter.RANDOM and p.price_usd_per_h == 9.0
    # kv_blocks override changes the derived slot count: floor(1000 / ceil(4096/16)) = 3
    assert build_pool(a100, "y", 1, 4096, kv_blocks=1000).limits.max_num_seqs == 3


def test_uncalibrated_gpu_is_a_config_error_naming_calibrated_ones():
    fake = SimpleNamespace(name="MI300X", serving=None, price_usd_per_h=3.0)
    with pytest.raises(ConfigError) as err:
        build_pool(fake, "p", 1, 4096)
    msg = str(err.value)
    assert "MI300X" in msg and "A100-80GB" in msg and "H100-SXM" in msg


def test_context_beyond_kv_cache_is_a_config_error():
    serving = ServingConstants(iter_base_s=0.01, iter_per_seq_s=0.001, kv_blocks=100, block_size_tokens=16,
                               chunk_tokens=256, ref_context_tokens=1600, model="test")
    fake = SimpleNamespace(name="tiny", serving=serving, price_usd_per_h=1.0)
    with pytest.raises(ConfigError, match="leaves no sequence slot"):
        build_pool(fake, "p", 1, 100 * 16 + 16)
