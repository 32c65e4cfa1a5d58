"""``fleetplan simulate network``: the flow-level KV-transfer network on its own."""

from __future__ import annotations

import click
import pandas as pd
from rich.table import Table

from fleetplan.cli.options import (
    POSITIVE,
    csv_option,
    deprecated_spelling,
    lam_option,
    link_gbps_option,
    path_policy_option,
    replications_option,
    seed_option,
    sim_flows_option,
    spine_gbps_option,
)
from fleetplan.cli.tables import make_console
from fleetplan.sim.network import LeafSpineFabric
from fleetplan.sim.network.kv_setting import MEAN_KV_BYTES, KvTransferSetting, compare_policies

COUNT = click.IntRange(min=1)


@click.command("network", epilog="""\b
Examples:
  fleetplan simulate network
  fleetplan simulate network --lam 12 --sim-flows 10000 --replications 3
  fleetplan simulate network --size-gb 0.94 --path-policy ecmp --csv flows.csv
  fleetplan simulate network --leaves 2 --hosts-per-leaf 8 --spines 4 --spine-gbps 400
""")
@sim_flows_option(default=2000, show_default=True, help="Transfers per replication.")
@deprecated_spelling("--flows", "n_flows")
@lam_option(default=6.0, show_default=True,
            help="Poisson arrival rate of transfers, per second (--request-rate: vLLM's spelling).")
@deprecated_spelling("--rate", "rate_per_s")
@click.option("--size-gb", type=POSITIVE, default=round(MEAN_KV_BYTES / 1e9, 3), show_default=True,
              help="Bytes per transfer, in GB (10^9 bytes).")
@click.option("--leaves", "n_leaves", type=COUNT, default=4, show_default=True, help="Leaf switches.")
@click.option("--hosts-per-leaf", type=COUNT, default=4, show_default=True, help="Hosts under each leaf.")
@click.option("--spines", "n_spines", type=COUNT, default=2, show_default=True, help="Spine switches.")
@link_gbps_option(help="Host NIC link rate, Gb/s.")
@spine_gbps_option
@click.option("--prefill-hosts", type=COUNT, default=8, show_default=True,
              help="Hosts 0..N-1 send (prefill); the rest receive (decode).")
@path_policy_option(default="ecmp,reservation", show_default=True,
                    help="Path policies to compare: ecmp (hash), reservation (least-loaded spine).")
@deprecated_spelling("--policy", "path_policy")
@replications_option
@csv_option(help="Write the first replication's per-flow results here.")
@seed_option
def network_cmd(n_flows, rate_per_s, size_gb, n_leaves, hosts_per_leaf, n_spines, link_gbps, spine_gbps,
                prefill_hosts, path_policy, replications, csv_path, seed) -> None:
    """KV transfers on a leaf-spine fabric: completion time and slowdown by path policy.

    The setting of the Vidur x NS-3 PD co-simulation report (Lin et al. 2026) by default: 8 prefill
    + 8 decode hosts, 4 leaves x 4
    hosts, 2 spines, 100 Gb/s links, Poisson 6 req/s, 2.28 GB per transfer.  Slowdown = completion
    time / (bytes / the path's slowest link), with rates max-min fair at every instant.
    """
    fabric = LeafSpineFabric(n_leaves, hosts_per_leaf, n_spines, link_gbps, spine_gbps)
    if prefill_hosts >= fabric.n_hosts:
        raise click.BadParameter(f"{prefill_hosts} prefill hosts leave no decode host on a {fabric.n_hosts}-host "
                                 f"fabric; use fewer than {fabric.n_hosts}", param_hint="--prefill-hosts")
    setting = KvTransferSetting(rate_per_s=rate_per_s, transfer_bytes=size_gb * 1e9, n_prefill_hosts=prefill_hosts,
                                n_decode_hosts=fabric.n_hosts - prefill_hosts, fabric=fabric)
    df, first = compare_policies(setting, n_flows, path_policy, seed=seed, n_replications=replications)
    table = Table(title=f"{n_flows:,} transfers of {size_gb:g} GB at {rate_per_s:g}/s on {n_leaves} leaves x "
                        f"{hosts_per_leaf} hosts, {n_spines} spines ({fabric.oversubscription:g}:1), "
                        f"{replications} replication(s), seed {seed}")
    table.add_column("policy", no_wrap=True, min_width=11)
    for col in ("mean FCT ms", "p99 FCT ms", "mean slowdown", "p50", "p99", "max", "peak flows"):  # slowdowns
        table.add_column(col, justify="right")
    for policy, g in df.groupby("policy", sort=False):
        m = g.mean(numeric_only=True)
        table.add_row(policy, f"{m.mean_fct_s * 1e3:.1f}", f"{m.p99_fct_s * 1e3:.1f}", f"{m.mean_slowdown:.2f}",
                      f"{m.p50_slowdown:.2f}", f"{m.p99_slowdown:.2f}", f"{m.max_slowdown:.2f}",
                      f"{g.peak_active_flows.max():d}")
    con = make_console(soft_wrap=True, highlight=False)
    con.print(table)
    con.print("means over replications; flow-level fluid model (no packet effects, no latency).")
    if csv_path is not None:
        frames = [pd.DataFrame({"policy": name, "flow": range(r.flows.n_flows), "src": r.flows.src,
                                "dst": r.flows.dst, "size_bytes": r.flows.size_bytes,
                                "start_ms": r.flows.start_at_s * 1e3, "fct_ms": r.fct_s * 1e3,
                                "ideal_ms": r.ideal_s * 1e3, "slowdown": r.slowdown, "spine": r.spine})
                  for name, r in first.items()]
        pd.concat(frames).to_csv(csv_path, index=False)
        con.print(f"per-flow results: {csv_path}")
