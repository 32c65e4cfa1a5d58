"""Benchmark clients driving the simulator the way serving benchmarks drive a real server.

``serve.py`` is the entry point: ``run_bench_serve(EngineArgs, BenchServeConfig)`` simulates
``vllm bench serve`` against one serving instance (or several behind a router) and returns
vLLM's metrics (``BenchServeResult.metrics``, same keys as vLLM's result JSON).
``instance.py`` builds the instance from vLLM's engine flags; ``datasets.py`` samples the
request lengths of vLLM's datasets.  Layer: above ``sim`` (and beside ``plan``), below
``report`` and ``cli``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fleetplan.bench.datasets import DatasetName, DatasetSpec
    from fleetplan.bench.instance import EngineArgs, serving_fleet
    from fleetplan.bench.serve import BenchServeConfig, BenchServeResult, run_bench_serve

#: public name -> its module, imported on first use (PEP 562), so that ``fleetplan.bench.datasets`` (the
#: command's option types) loads without the simulator that ``serve`` runs.
_MODULE_OF = {"DatasetName": "datasets", "DatasetSpec": "datasets", "EngineArgs": "instance",
              "serving_fleet": "instance", "BenchServeConfig": "serve", "BenchServeResult": "serve",
              "run_bench_serve": "serve"}


def __getattr__(name: str):
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'fleetplan.bench' has no attribute {name!r}")
    return getattr(importlib.import_module(f"fleetplan.bench.{_MODULE_OF[name]}"), name)

__all__ = ["BenchServeConfig", "BenchServeResult", "DatasetName", "DatasetSpec", "EngineArgs", "run_bench_serve",
           "serving_fleet"]
