"""Wall time of `fleetplan deploy` on a saved run (plain script; prints figures, asserts nothing).

    python benchmarks/bench_deploy.py                   # makes the README command's run once, then times deploy
    python benchmarks/bench_deploy.py --run run.json    # time deploy of an existing optimize --json file

Target (issue #29): under 1 s warm, no network.  Each figure is the best of ``--repeats`` fresh processes
(``python -m fleetplan.cli.main deploy RUN --out DIR --force``, the checkout of this file on ``PYTHONPATH``),
one untimed run first (the interpreter's own caches); also the in-process time of
``fleetplan.deploy.write_deployment`` alone.  The network is not touched: the run is read from disk and every
format (flag lists, schemas, GPU labels) is data in the package.  On a shared machine, read the load average
printed first: other work only adds time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README_ARGS = ("optimize", "--workload", "lmsys.json", "--slo-ttft", "500", "-q")


def _run(args: list[str], cwd: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "fleetplan.cli.main", *args], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, default=None, help="an optimize --json file (default: make the README's)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--engine", default="vllm")
    args = ap.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (other work on this machine adds time)")
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        run_json = args.run
        if run_json is None:
            run_json = tmp_path / "run.json"
            t = _run([*README_ARGS, "--json", str(run_json)], tmp_path)
            print(f"made the README command's run in {t:.1f} s")
        out = tmp_path / "fleet"
        cmd = ["deploy", str(run_json.resolve()), "--out", str(out), "--force", "--engine", args.engine]
        _run(cmd, tmp_path)  # untimed: warm the interpreter's caches
        times = [_run(cmd, tmp_path) for _ in range(args.repeats)]
        print(f"fleetplan deploy (fresh process, {args.engine}): best {min(times):.3f} s, median "
              f"{sorted(times)[len(times) // 2]:.3f} s over {len(times)} runs (target < 1 s warm)")
        sys.path.insert(0, str(ROOT))
        from fleetplan.deploy import write_deployment

        doc = json.loads(run_json.read_text())
        t0 = time.perf_counter()
        result = write_deployment(doc, out, engine=args.engine, force=True)
        print(f"write_deployment in process: {time.perf_counter() - t0:.3f} s, {len(result.files)} files")


if __name__ == "__main__":
    main()
