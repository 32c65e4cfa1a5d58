"""Cold and warm wall time of three commands from a fresh install (plain script; prints figures, asserts nothing).

    python benchmarks/bench_cold_start.py                   # this checkout
    python benchmarks/bench_cold_start.py --checkout DIR    # another checkout (e.g. `git worktree add`)
    python benchmarks/bench_cold_start.py --warm-repeats 3 --only readme

For each command a new virtual environment is made (``--system-site-packages``, so numpy, numba, ...
come from this interpreter) and the checkout is installed into it with ``pip install --no-deps`` (a
regular, non-editable install: numba's cache, which lives next to the installed sources in
``__pycache__``, starts empty).  The command then runs once **cold** (every kernel it needs is
compiled) and ``--warm-repeats`` times **warm** (kernels loaded from numba's on-disk cache; the best
run is shown, since other work on the machine only ever adds time).  ``NUMBA_CACHE_DIR`` is removed
from the environment so the default cache location is the one measured.

Commands (the same as the issue's targets):

* ``readme``: ``fleetplan optimize --workload lmsys.json --slo-ttft 500`` (the README's main command);
* ``features``: ``fleetplan simulate`` of ``examples/homogeneous_h100.toml`` with every runtime
  feature on (CUDA graphs, MTP, prefix caching, the H2Q-BR scheduler);
* ``pdd``: ``fleetplan simulate pdd --workload lmsys --lam 20 --policy sibyl``.

The load average is printed with every figure: on a shared two-core machine, compare runs made back
to back.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

COMMANDS: dict[str, tuple[str, ...]] = {
    "readme": ("optimize", "--workload", "lmsys.json", "--slo-ttft", "500"),
    "features": (
        "simulate", "--fleet", "{checkout}/examples/homogeneous_h100.toml", "--workload", "lmsys", "--lam", "50",
        "--cudagraph-mode", "full_decode_only", "--launch-overhead-ms", "1",
        "--speculative-config",
        '{"method":"mtp","num_speculative_tokens":2,"acceptance_rate":0.8,"draft_cost_fraction":0.1}',
        "--enable-prefix-caching", "--scheduler-policy", "h2q_br",
        "--scheduler-config", '{"h2q_long_round_tokens":4096}',
    ),
    "pdd": ("simulate", "pdd", "--workload", "lmsys", "--lam", "20", "--policy", "sibyl"),
}


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def fresh_install(checkout: Path, root: Path) -> Path:
    """A new venv under ``root`` with ``checkout`` installed (no dependencies); returns its ``fleetplan`` script."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", str(checkout)],
                   check=True, stdout=subprocess.DEVNULL)
    return venv / "bin" / "fleetplan"


def run(script: Path, args: list[str], cwd: Path) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["FLEETPLAN_COMPILE_NOTICE"] = "1"  # stderr is a pipe here: ask for the first-run notice
    env["COLUMNS"] = "120"
    t0 = time.perf_counter()
    proc = subprocess.run([str(script), *args], cwd=cwd, env=env, capture_output=True, text=True)
    elapsed_s = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return elapsed_s, proc.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", type=Path, default=REPO, help="source tree to install (default: this one)")
    parser.add_argument("--warm-repeats", type=int, default=2, help="warm runs per command (best is shown)")
    parser.add_argument("--only", default=",".join(COMMANDS), help="comma-separated subset of " + ",".join(COMMANDS))
    opts = parser.parse_args()
    checkout = opts.checkout.resolve()
    print(f"checkout {checkout}; {os.cpu_count()} cores; load average {load()}")
    for name in opts.only.split(","):
        args = [a.replace("{checkout}", str(checkout)) for a in COMMANDS[name]]
        root = Path(tempfile.mkdtemp(prefix=f"fleetplan-cold-{name}-"))
        try:
            script = fresh_install(checkout, root)
            load_before = load()
            cold_s, stderr = run(script, args, root)
            notice = next((line for line in stderr.splitlines() if "compiling" in line), "(no compile notice)")
            warm = [run(script, args, root)[0] for _ in range(opts.warm_repeats)]
            print(f"{name:9s} cold {cold_s:6.1f} s (load {load_before})   warm best of {len(warm)} "
                  f"{min(warm):5.2f} s (load {load()})   stderr: {notice.strip()}")
            print(f"          fleetplan {' '.join(args)}")
        finally:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
