"""The qualitative result of vidur-ns3-pd-cosim.txt (section 7) on the flow-level model.

Setting (``KvTransferSetting`` defaults, assumptions in its docstring): 8 prefill + 8 decode hosts
on 4 leaves x 4 hosts and 2 spines, 100 Gb/s links, 2.28 GB transfers, Poisson 6 req/s.  The paper:
ECMP slowdowns reach 3.2x with many flows above 2x; path reservation cuts p99 FCT by 34 %.

Each claim is checked on R independent replications (seeded streams) of N flows: the lower end of
a one-sided 99 % Student-t bound on the replication mean must clear the threshold, so the
tolerance comes from the replications' own spread (replicate-to-replicate sd at these sizes:
mean slowdown 0.014, p99 slowdown 0.17, relative p99 FCT cut 0.03 around its mean of 0.41).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from fleetplan.rng import stream
from fleetplan.sim.network import PAPER_KV_BYTES, FlowNetwork, KvTransferSetting

N_FLOWS = 2000
N_REPLICATIONS = 6


def replicate(setting: KvTransferSetting) -> dict[str, np.ndarray]:
    net = FlowNetwork(setting.fabric)
    rows = []
    for rep in range(N_REPLICATIONS):
        flows = setting.flows(N_FLOWS, stream(rep, "kv-setting", "arrivals"))
        ecmp = net.simulate_flows(flows, "ecmp", rng=stream(rep, "kv-setting", "ecmp")).summary()
        resv = net.simulate_flows(flows, "reservation").summary()
        rows.append((ecmp["mean_slowdown"], ecmp["p99_slowdown"], resv["p99_slowdown"], ecmp["p99_fct_s"],
                     resv["p99_fct_s"], ecmp["mean_fct_s"], resv["mean_fct_s"]))
    cols = np.array(rows).T
    keys = ("ecmp_mean", "ecmp_p99", "resv_p99", "ecmp_p99_fct", "resv_p99_fct", "ecmp_mean_fct", "resv_mean_fct")
    return dict(zip(keys, cols, strict=True))


def lower_bound(x: np.ndarray, confidence: float = 0.99) -> float:
    """One-sided lower confidence bound on the mean of the replications."""
    t = stats.t.ppf(confidence, df=x.size - 1)
    return float(x.mean() - t * x.std(ddof=1) / np.sqrt(x.size))


@pytest.fixture(scope="module")
def paper_setting() -> dict[str, np.ndarray]:
    return replicate(KvTransferSetting())


def test_ecmp_mean_slowdown_above_1_3(paper_setting):
    assert lower_bound(paper_setting["ecmp_mean"]) > 1.3


def test_ecmp_p99_slowdown_above_2(paper_setting):
    assert lower_bound(paper_setting["ecmp_p99"]) > 2.0


def test_reservation_lowers_the_tail(paper_setting):
    gain = paper_setting["ecmp_p99"] - paper_setting["resv_p99"]
    assert lower_bound(gain) > 0.0
    # the paper's size of the effect: p99 FCT -34 %, mean FCT -23 %; ours must cut both by >= 15 %
    assert lower_bound(1 - paper_setting["resv_p99_fct"] / paper_setting["ecmp_p99_fct"]) > 0.15
    assert lower_bound(1 - paper_setting["resv_mean_fct"] / paper_setting["ecmp_mean_fct"]) > 0.15


def test_trace_size_transfers_still_show_the_tail():
    """At the trace excerpt's 0.94 GB the load is lighter (mean slowdown ~1.17, not > 1.3), but the
    ECMP tail is still above 2x and the controller still lowers it."""
    res = replicate(KvTransferSetting(transfer_bytes=float(PAPER_KV_BYTES)))
    assert lower_bound(res["ecmp_p99"]) > 2.0
    assert lower_bound(res["ecmp_p99"] - res["resv_p99"]) > 0.0
    assert lower_bound(res["ecmp_mean"]) > 1.0
