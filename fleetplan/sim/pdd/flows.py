"""Per-flow results of a PDD run on a fabric: the flow table, per-request columns, a summary.

* Flow table (one row per flow, in start order): ``request_id``, ``kind`` (``layers``: all but
  the last layer's KV, streamed from the grant with layer-wise transfer; ``last``: the last
  layer's KV, or the whole KV without layer-wise), hosts, bytes, start, done, completion time
  ``fct_s = done - start``, ``ideal_s`` (bytes over the slowest link of its path, the fabric
  otherwise empty) and ``slowdown = fct / ideal`` (>= 1 up to rounding; the metric of
  Vidur x NS-3 report, Lin et al. 2026, §7.2), spine (-1 within a leaf).  Flows unfinished at the horizon
  have infinite ``done_s``.
* Per request: ``kv_flow_s`` (sum of its flows' completion times), ``kv_ideal_s`` and
  ``kv_slowdown`` (their ratio); NaN for requests that started no flow.
* ``NetworkSummary``: flows of measured (non-warm-up) requests that finished.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fleetplan.sim._kernels.pdd import codes as pc
from fleetplan.sim._kernels.pdd.state import FabricInputs
from fleetplan.sim.pdd.fabric import FabricSpec

__all__ = ["NetworkSummary", "add_flow_columns", "flow_frame", "summarise_network"]

FLOW_KIND_NAMES = ("layers", "last")


@dataclass(frozen=True)
class NetworkSummary:
    """KV flows of the measured requests (module docstring); times in seconds."""

    path_policy: str
    n_flows: int
    n_flows_done: int
    mean_fct_s: float
    p99_fct_s: float
    mean_slowdown: float
    p50_slowdown: float
    p99_slowdown: float
    max_slowdown: float
    mean_request_slowdown: float
    peak_active_flows: int


def flow_frame(network: FabricSpec, net_in: FabricInputs, out_i: np.ndarray, fl_t: np.ndarray,
               fl_i: np.ndarray) -> pd.DataFrame:
    """The flow table from the kernel's per-flow outputs (``codes`` ``FT_*`` / ``FI_*``)."""
    req = fl_i[:, pc.FI_REQ]
    kind = fl_i[:, pc.FI_KIND]
    src = net_in.prefill_host[out_i[req, pc.OI_PF_INST]]
    dst = net_in.decode_host[out_i[req, pc.OI_DEC_INST]]
    size = np.where(kind == pc.FLOW_LAYERS, net_in.layer_bytes[req], net_in.last_bytes[req])
    start, done = fl_t[:, pc.FT_START], fl_t[:, pc.FT_DONE]
    ideal = network.fabric.ideal_s(src, dst, size)
    fct = done - start
    return pd.DataFrame({
        "request_id": req, "kind": np.array(FLOW_KIND_NAMES, dtype=object)[kind], "src_host": src, "dst_host": dst,
        "size_bytes": size, "start_s": start, "done_s": done, "fct_s": fct, "ideal_s": ideal,
        "slowdown": fct / ideal, "spine": fl_i[:, pc.FI_SPINE],
    })


def add_flow_columns(frame: pd.DataFrame, flows: pd.DataFrame) -> None:
    """Add ``kv_flow_s``, ``kv_ideal_s`` and ``kv_slowdown`` to the request table (in place)."""
    n = len(frame)
    req = flows["request_id"].to_numpy()
    fct = np.zeros(n)
    ideal = np.zeros(n)
    np.add.at(fct, req, flows["fct_s"].to_numpy())
    np.add.at(ideal, req, flows["ideal_s"].to_numpy())
    started = np.bincount(req, minlength=n) > 0
    frame["kv_flow_s"] = np.where(started, fct, np.nan)
    frame["kv_ideal_s"] = np.where(started, ideal, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        frame["kv_slowdown"] = np.where(started, fct / np.where(started, ideal, 1.0), np.nan)


def summarise_network(network: FabricSpec, flows: pd.DataFrame, frame: pd.DataFrame,
                      peak_active_flows: int) -> NetworkSummary:
    """Statistics of the finished flows of measured requests (module docstring)."""
    measured = ~frame["warmup"].to_numpy()
    mine = flows[measured[flows["request_id"].to_numpy()]]
    done = mine[np.isfinite(mine["done_s"].to_numpy())]
    fct, sd = done["fct_s"].to_numpy(), done["slowdown"].to_numpy()
    req_sd = frame["kv_slowdown"].to_numpy()[measured]
    req_sd = req_sd[np.isfinite(req_sd)]

    def pick(values: np.ndarray, q: float | None) -> float:
        if not values.size:
            return float("nan")
        return float(values.mean()) if q is None else float(np.percentile(values, q))

    return NetworkSummary(
        path_policy=network.path_policy.value, n_flows=len(mine), n_flows_done=len(done),
        mean_fct_s=pick(fct, None), p99_fct_s=pick(fct, 99), mean_slowdown=pick(sd, None),
        p50_slowdown=pick(sd, 50), p99_slowdown=pick(sd, 99), max_slowdown=float(sd.max()) if sd.size else float("nan"),
        mean_request_slowdown=pick(req_sd, None), peak_active_flows=int(peak_active_flows),
    )
