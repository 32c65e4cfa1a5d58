"""Benchmark clients driving the simulator the way serving benchmarks drive a real server.

``serve.py`` is the entry point: ``run_bench_serve(EngineArgs, BenchServeConfig)`` simulates
``vllm bench serve`` against one serving instance (or several behind a router) and returns
vLLM's metrics (``BenchServeResult.metrics``, same keys as vLLM's result JSON).
``instance.py`` builds the instance from vLLM's engine flags; ``datasets.py`` samples the
request lengths of vLLM's datasets.  Layer: above ``sim`` (and beside ``plan``), below
``report`` and ``cli``.
"""

from fleetplan.bench.datasets import DatasetName, DatasetSpec
from fleetplan.bench.instance import EngineArgs, serving_fleet
from fleetplan.bench.serve import BenchServeConfig, BenchServeResult, run_bench_serve

__all__ = ["BenchServeConfig", "BenchServeResult", "DatasetName", "DatasetSpec", "EngineArgs", "run_bench_serve",
           "serving_fleet"]
