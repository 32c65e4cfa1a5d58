"""The simulator's default run settings, in a module that imports nothing, so option declarations can
show them in a command's help without loading the simulator's kernels or numba (``sim.engine`` imports
them from here)."""

from __future__ import annotations

#: Requests simulated per run, and the share of them discarded as warm-up.
DEFAULT_N_REQUESTS = 20_000
DEFAULT_WARMUP_FRACTION = 0.1

#: ``sim.validate``: slots per instance, utilisations and customers per (c, rho) of the M/M/c check.
DEFAULT_VALIDATE_C_VALUES = (1, 8, 64)
DEFAULT_VALIDATE_RHOS = (0.5, 0.8, 0.95)
DEFAULT_VALIDATE_N_CUSTOMERS = 2_000_000
