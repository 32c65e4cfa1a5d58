"""Flow lists, path policies and per-flow results of the flow-level network model.

A flow is ``(src host, dst host, bytes, start time)``.  ``FlowResult`` gives, per flow, the
completion time, the ideal time (bytes over the bottleneck capacity of its path with the
network otherwise empty) and the slowdown ``(completion - start) / ideal`` (>= 1; the metric of
the Vidur x NS-3 PD co-simulation report (Lin et al. 2026), section 7.2, whose ideal is size over one 100 Gb/s link).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.sim._kernels.codes import POLICY_ECMP, POLICY_RESERVATION

__all__ = ["PathPolicy", "path_policy", "FlowSet", "FlowResult"]


class PathPolicy(enum.Enum):
    """How a flow that crosses the spine layer picks its spine (``fleetplan.sim._kernels.flows``).

    * ``ECMP``: a per-flow hash of the 5-tuple; a fresh RDMA queue pair gets a random UDP source
      port, so the hash is a uniform draw over the spines from the caller's seeded stream.
    * ``RESERVATION``: a central controller puts the flow on the currently least-loaded spine path
      (fewest active flows on its busier leaf-spine link, then in total, then lowest spine), as the
      Elephant Flow Path Reservation controller of the Vidur x NS-3 PD co-simulation report (Lin et al. 2026) does.
    """

    ECMP = "ecmp"
    RESERVATION = "reservation"

    @property
    def code(self) -> int:
        """Integer code for the kernel."""
        return _POLICY_CODES[self]


_POLICY_CODES = {PathPolicy.ECMP: POLICY_ECMP, PathPolicy.RESERVATION: POLICY_RESERVATION}


def path_policy(name: str | PathPolicy) -> PathPolicy:
    """The ``PathPolicy`` called ``name`` (case-insensitive); unknown -> ``UnknownNameError``."""
    if isinstance(name, PathPolicy):
        return name
    key = str(name).strip().lower()
    for member in PathPolicy:
        if member.value == key:
            return member
    raise UnknownNameError("path policy", str(name), [m.value for m in PathPolicy])


def _frozen(values, dtype) -> np.ndarray:
    out = np.array(values, dtype=dtype)  # a copy the caller cannot change
    out.setflags(write=False)
    return out


@dataclass(frozen=True)
class FlowSet:
    """Flows to simulate, in any order (columns of equal length)."""

    src: np.ndarray
    dst: np.ndarray
    size_bytes: np.ndarray
    start_at_s: np.ndarray

    def __post_init__(self) -> None:
        cols = {name: getattr(self, name) for name in ("src", "dst", "size_bytes", "start_at_s")}
        lengths = {name: np.ndim(v) and len(v) for name, v in cols.items()}
        if any(np.ndim(v) != 1 for v in cols.values()) or len(set(lengths.values())) != 1:
            raise ConfigError(f"flow columns must be 1-d and equally long, got lengths {lengths}; "
                              f"give one src, dst, size and start per flow")
        object.__setattr__(self, "src", _frozen(self.src, np.int64))
        object.__setattr__(self, "dst", _frozen(self.dst, np.int64))
        object.__setattr__(self, "size_bytes", _frozen(self.size_bytes, np.float64))
        object.__setattr__(self, "start_at_s", _frozen(self.start_at_s, np.float64))
        if not np.all(np.isfinite(self.size_bytes) & (self.size_bytes > 0)):
            raise ConfigError("flow sizes must be finite and > 0 bytes; drop empty transfers")
        if not np.all(np.isfinite(self.start_at_s) & (self.start_at_s >= 0)):
            raise ConfigError("flow start times must be finite and >= 0 s; shift the trace to start at 0")
        if np.any(self.src == self.dst):
            i = int(np.argmax(self.src == self.dst))
            raise ConfigError(f"flow {i} goes from host {int(self.src[i])} to itself; give src != dst")

    @property
    def n_flows(self) -> int:
        return int(self.src.shape[0])


@dataclass(frozen=True)
class FlowResult:
    """Per-flow outcome, in the order of the ``FlowSet`` given."""

    flows: FlowSet
    policy: PathPolicy
    done_at_s: np.ndarray
    ideal_s: np.ndarray
    spine: np.ndarray  # spine crossed, -1 within a leaf
    peak_active_flows: int

    @property
    def fct_s(self) -> np.ndarray:
        """Flow completion time: done - start (s)."""
        return self.done_at_s - self.flows.start_at_s

    @property
    def slowdown(self) -> np.ndarray:
        """Completion time over the ideal time (>= 1)."""
        return self.fct_s / self.ideal_s

    def summary(self) -> dict[str, float]:
        """Mean, p50, p99 and max slowdown; mean and p99 completion time (s)."""
        sd, fct = self.slowdown, self.fct_s
        return {
            "n_flows": float(self.flows.n_flows),
            "mean_slowdown": float(sd.mean()),
            "p50_slowdown": float(np.percentile(sd, 50)),
            "p99_slowdown": float(np.percentile(sd, 99)),
            "max_slowdown": float(sd.max()),
            "mean_fct_s": float(fct.mean()),
            "p99_fct_s": float(np.percentile(fct, 99)),
            "peak_active_flows": float(self.peak_active_flows),
        }
