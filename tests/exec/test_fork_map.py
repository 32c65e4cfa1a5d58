"""``fork_map``: the serial map's values, in order, from forked children; failures redone here; and
the analytic sweep sized through it gives the very same candidates."""

from __future__ import annotations

import os
import pickle
import time

import pytest

from fleetplan.errors import ConfigError
from fleetplan.exec import fork
from fleetplan.exec.fork import MIN_ITEMS_PER_WORKER, fork_map
from fleetplan.hardware import load_catalog
from fleetplan.plan.optimize import OptimizeRequest, analytical_phase_with_baselines, resolve_gpus
from fleetplan.plan.points import LengthPoints
from fleetplan.plan.space import layouts
from fleetplan.plan.sweep import sweep_pools
from fleetplan.workload import load_workload

N = 4 * MIN_ITEMS_PER_WORKER


def _square_and_pid(x: int) -> tuple[int, int]:
    time.sleep(0.002)  # long enough that every process gets some of the items
    return x * x, os.getpid()


def test_values_in_input_order_and_computed_by_several_processes():
    out = fork_map(_square_and_pid, range(N), workers=3)
    assert [v for v, _ in out] == [x * x for x in range(N)]
    pids = {pid for _, pid in out}
    assert len(pids) >= 2 or not hasattr(os, "fork")  # items are taken dynamically: who computes varies


@pytest.mark.parametrize(("n_items", "n_procs"), [(1, 1), (5, 3), (100, 2), (393, 3), (1000, 4)])
def test_chunks_cover_every_item_once_and_shrink_to_one_at_the_end(n_items, n_procs):
    """``_take``: consecutive chunks of at most ``CHUNK_ITEMS`` covering 0..n-1 once, none larger than a
    chunk before it, the last ``n_procs`` of them one item each (the processes finish together)."""
    import multiprocessing

    from fleetplan.exec.fork import CHUNK_ITEMS, _take

    counter = multiprocessing.get_context("fork").Value("q", 0)
    chunks = []
    while True:
        lo, hi = _take(counter, n_items, n_procs)
        if lo >= n_items:
            break
        chunks.append((lo, hi))
    assert [i for lo, hi in chunks for i in range(lo, hi)] == list(range(n_items))
    sizes = [hi - lo for lo, hi in chunks]
    assert all(1 <= a <= CHUNK_ITEMS for a in sizes) and sizes == sorted(sizes, reverse=True)
    assert sizes[-min(n_procs, len(sizes)):] == [1] * min(n_procs, len(sizes))


def test_many_items_with_meanwhile_come_back_whole_and_in_order():
    """The children's chunks pickled one by one and put back in place: the serial map's list."""
    out = fork_map(_square_and_pid, range(3 * N + 7), workers=2, meanwhile=lambda: None)
    assert [v for v, _ in out] == [x * x for x in range(3 * N + 7)]


def test_few_items_or_one_worker_stay_in_this_process():
    assert {pid for _, pid in fork_map(_square_and_pid, range(N), workers=1)} == {os.getpid()}
    assert {pid for _, pid in fork_map(_square_and_pid, range(MIN_ITEMS_PER_WORKER), workers=4)} == {os.getpid()}


def _fails_in_children(x: int) -> int:
    if os.getpid() != PARENT:
        raise RuntimeError("child failure")
    return x + 1


def _dies_in_children(x: int) -> int:
    if os.getpid() != PARENT:
        os._exit(3)
    return x + 1


PARENT = os.getpid()


@pytest.mark.parametrize("fn", [_fails_in_children, _dies_in_children])
def test_a_failed_or_dead_child_has_its_share_redone_here(fn):
    assert fork_map(fn, range(N), workers=2) == [x + 1 for x in range(N)]


def _user_error_at_7(x: int) -> int:
    if x == 7:
        raise ConfigError("item 7 is bad; fix it")
    return x


def test_an_error_surfaces_as_in_a_serial_map():
    with pytest.raises(ConfigError, match="item 7"):
        fork_map(_user_error_at_7, range(N), workers=2)


def test_meanwhile_runs_here_while_children_map_and_its_errors_are_ignored():
    ran = []
    out = fork_map(_square_and_pid, range(N), workers=2, meanwhile=lambda: ran.append(os.getpid()))
    assert [v for v, _ in out] == [x * x for x in range(N)] and ran == [os.getpid()]

    def broken() -> None:
        raise RuntimeError("head start failed")

    assert [v for v, _ in fork_map(_square_and_pid, range(N), workers=2, meanwhile=broken)] == [x * x for x in range(N)]


def test_the_sweep_sized_through_fork_map_gives_the_same_candidates():
    req = OptimizeRequest(workload=load_workload("lmsys"), gpus=resolve_gpus(load_catalog(), None), slo_ttft_s=0.5,
                          rate_per_s=100.0)
    serial, base = analytical_phase_with_baselines(req)
    forked, base_f = analytical_phase_with_baselines(req, pool_map=lambda fn, items: fork_map(fn, items, workers=2))
    assert repr(forked) == repr(serial) and repr(base_f) == repr(base)


def test_sweep_pools_lists_every_pool_the_sweep_sizes_once(monkeypatch):
    import fleetplan.plan.sweep as sweep_module

    req = OptimizeRequest(workload=load_workload("lmsys"), gpus=resolve_gpus(load_catalog(), None), slo_ttft_s=0.5,
                          rate_per_s=100.0)
    points = LengthPoints(req.workload, req.pool_points, req.quadrature_points, req.max_model_len_tokens)
    lays = list(layouts(req.topologies, req.thresholds_tokens, points.max_tokens, req.max_pools))
    keys = sweep_pools(lays, req.gpus, req.routers)
    assert len({(r, g.name, router) for r, g, router in keys}) == len(keys)
    sized_by_sweep = []
    real = sweep_module.size_one_pool
    monkeypatch.setattr(sweep_module, "size_one_pool", lambda *a: sized_by_sweep.append(a) or real(*a))
    analytical_phase_with_baselines(req, pool_map=lambda fn, items: [fn(x) for x in items])
    assert sized_by_sweep == []  # every pool it needed was among sweep_pools' keys


def test_a_child_message_reads_back_its_chunks_and_a_cut_one_raises():
    """A child's message: the OK byte, then each chunk's pickle one after another (read back whole and in the
    order done); the FAILED byte alone; a message cut mid-pickle (a child that died while writing) raises,
    so the parent redoes the map."""
    chunks = [(4, [1.5, {"a": 2}]), (0, [None]), (9, list(range(300)))]
    data = fork._OK + b"".join(pickle.dumps(c, protocol=pickle.HIGHEST_PROTOCOL) for c in chunks)
    assert fork._read_chunks(data) == (True, chunks)
    assert fork._read_chunks(fork._OK) == (True, [])
    assert fork._read_chunks(fork._FAILED) == (False, [])
    with pytest.raises(Exception):  # noqa: B017, PT011 - whatever pickle raises on a cut stream
        fork._read_chunks(data[:-7])
