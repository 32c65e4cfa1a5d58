"""Workloads: request-length CDFs, traces, arrival processes, the bundled catalog, and multi-round
sessions / RL-rollout bursts (``sessions``, ``session_io``, ``rollouts``)."""

from fleetplan.workload.arrivals import gamma_arrivals_s, poisson_arrivals_s, replay_arrivals_s
from fleetplan.workload.burstiness import ArrivalStats, arrival_stats, replay_ca2
from fleetplan.workload.catalog import (
    list_workloads,
    load_workload,
    workload_from_document,
    workload_from_trace,
)
from fleetplan.workload.cdf import LengthCDF
from fleetplan.workload.cdf_io import CdfDocument, parse_cdf_document, read_cdf_json, write_cdf_json
from fleetplan.workload.fit import SPLIT_THRESHOLDS_TOKENS, empirical_cdf_points, empirical_copula, fit
from fleetplan.workload.rollouts import OutputLengths, RlRollout
from fleetplan.workload.session_io import list_session_workloads, load_session_workload
from fleetplan.workload.session_table import SessionTable, ToolDelay
from fleetplan.workload.sessions import SessionTemplate, SessionWorkload
from fleetplan.workload.traces import Trace, TraceFormat, read_trace
from fleetplan.workload.workload import DEFAULT_INPUT_FRACTION, DEFAULT_QUADRATURE_POINTS, Workload

__all__ = [
    "ArrivalStats",
    "arrival_stats",
    "replay_ca2",
    "CdfDocument",
    "DEFAULT_INPUT_FRACTION",
    "DEFAULT_QUADRATURE_POINTS",
    "LengthCDF",
    "OutputLengths",
    "RlRollout",
    "SessionTable",
    "SessionTemplate",
    "SessionWorkload",
    "ToolDelay",
    "SPLIT_THRESHOLDS_TOKENS",
    "Trace",
    "TraceFormat",
    "Workload",
    "empirical_cdf_points",
    "empirical_copula",
    "fit",
    "gamma_arrivals_s",
    "list_session_workloads",
    "list_workloads",
    "load_session_workload",
    "load_workload",
    "parse_cdf_document",
    "poisson_arrivals_s",
    "read_cdf_json",
    "read_trace",
    "replay_arrivals_s",
    "workload_from_document",
    "workload_from_trace",
    "write_cdf_json",
]
