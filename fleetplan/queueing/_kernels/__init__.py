"""Compiled kernels of the analytic engine model (numpy + numba only; options from ``fleetplan.jit``).

Each kernel takes arrays and scalars only, grouped in named tuples, and has a slow pure-Python twin
in ``fleetplan.queueing`` that tests compare it with (``tests/queueing/test_kernels.py``):

* ``mixture.mixture_quantiles``: the p-quantile of many fleets' latency mixtures at once (twin:
  ``fleetplan.queueing.engine.mixture_quantile_s``, one fleet at a time).

This folder is a helper tree (``fleetplan.jit.register_helper_tree``): a change to any file in it makes
its kernels' on-disk cache stale.
"""

from pathlib import Path

from fleetplan.jit import register_helper_tree

register_helper_tree(Path(__file__).parent)
