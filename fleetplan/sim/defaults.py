"""The simulator's default run settings, in a module that imports nothing, so option declarations can
show them in a command's help without loading the simulator's kernels or numba (``sim.engine`` imports
them from here)."""

from __future__ import annotations

#: Requests simulated per run, and the share of them discarded as warm-up.
DEFAULT_N_REQUESTS = 20_000
DEFAULT_WARMUP_FRACTION = 0.1
