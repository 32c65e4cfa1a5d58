"""The arrival process a plan is sized and verified for (both phases see the same stream).

Phase 1 takes the stream's Ca² (``OptimizeRequest.arrival_cv2``, the engine model's two-moment
wait, ``queueing/engine.py``); phase 2 simulates the process itself (``VerifySettings.arrival``):

* ``poisson``: Ca² = 1;
* ``gamma`` with gap CV c (a renewal process): Ca² = c²;
* ``replay`` of the workload trace's timestamps rescaled to the planned rate: Ca² is the trace's
  index of dispersion of counts at ``ca2_window_s`` of the replay's clock
  (``workload.burstiness.replay_ca2``), so a trace replayed faster is burstier on the queue's
  time scale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fleetplan.errors import ConfigError
from fleetplan.sim import ArrivalProcess
from fleetplan.workload import Workload, replay_ca2
from fleetplan.workload.burstiness import DEFAULT_CA2_WINDOW_S


@dataclass(frozen=True)
class ArrivalSpec:
    """Arrival process (``cv``: gamma gaps' CV; ``ca2_window_s``: replay's Ca² time scale, seconds)."""

    process: ArrivalProcess = ArrivalProcess.POISSON
    cv: float = 1.0
    ca2_window_s: float = DEFAULT_CA2_WINDOW_S

    def __post_init__(self) -> None:
        object.__setattr__(self, "process", ArrivalProcess.parse(self.process))
        if not (math.isfinite(self.cv) and self.cv > 0):
            raise ConfigError(f"arrival cv {self.cv!r} is invalid: give the gaps' CV > 0 (1 is Poisson)")
        if self.process is not ArrivalProcess.GAMMA and self.cv != 1.0:
            raise ConfigError(f"arrival cv {self.cv:g} applies to gamma arrivals only (got {self.process.value}); "
                              "choose gamma or leave the CV at 1")
        if not (math.isfinite(self.ca2_window_s) and self.ca2_window_s > 0):
            raise ConfigError(f"Ca² window {self.ca2_window_s!r} s is invalid: give a time scale > 0 s, e.g. 1")

    def ca2(self, workload: Workload, rate_per_s: float) -> float:
        """Ca² of the stream at mean rate ``rate_per_s`` (see module docstring)."""
        if self.process is ArrivalProcess.GAMMA:
            return self.cv * self.cv
        if self.process is ArrivalProcess.REPLAY:
            if workload.trace is None:
                raise ConfigError(f"replay arrivals need a trace but workload {workload.name!r} is a CDF; give the "
                                  "trace file as the workload or choose poisson or gamma arrivals")
            return replay_ca2(workload.trace, rate_per_s, self.ca2_window_s)
        return 1.0

    def label(self) -> str:
        if self.process is ArrivalProcess.GAMMA:
            return f"gamma CV {self.cv:g}"
        if self.process is ArrivalProcess.REPLAY:
            return f"trace replay (Ca² at {self.ca2_window_s:g} s)"
        return "Poisson"


POISSON = ArrivalSpec()
