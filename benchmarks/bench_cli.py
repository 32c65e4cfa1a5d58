"""Wall time of the README's main command, end to end, and where it goes (plain script; prints figures,
asserts nothing).

    python benchmarks/bench_cli.py                       # best of 3, warm caches
    python benchmarks/bench_cli.py --repeats 5 -- --sim-requests 100000
    python benchmarks/bench_cli.py --baseline /tmp/old   # also time another checkout (e.g. `git archive`)
    python benchmarks/bench_cli.py --phases-only --baseline /tmp/old   # the phase split, before / after
    python benchmarks/bench_cli.py --phases-only --with-100k            # and λ = 100,000 (minutes)

First (skip with ``--no-phases``) the phase split of four commands: the README's, a 70B model
(``--model llama-3.1-70b --weight-dtype fp8``), λ = 20,000 (``azure_conv``) and a MoE model at 100 req/s
(DeepSeek-V3, its FP8 checkpoint, on H200 and B200 with a 1 s P99 TTFT: issue 26's speed target, under 30 s
warm on two cores, is printed beside it), with ``--with-100k``
also λ = 100,000 (the issue's 150 s target; minutes per run), each one warm run per checkout in a
fresh interpreter, back to back: imports (the entry point and the optimize command's modules), the
analytic phase (its own timer, and candidates per second), simulation (phase 2), the headroom search,
and the rest (workload loading, the report figures' extra simulation, writing the reports), with the
total wall time of the process and the load average before each run.  With ``--baseline`` each
command's ``--json`` (timing fields removed) is compared between the checkouts: ``same`` means the
recommendation and every figure are identical.  The analytic timer and candidates/s are the least
load-sensitive figures; on a shared machine read the load first.

Runs ``fleetplan optimize --workload lmsys.json --slo-ttft 500`` (plus any arguments after ``--``)
as a fresh process (``python -m fleetplan.cli.main``, so the checkout on ``PYTHONPATH`` is the one
timed) with the default executor, ``--workers 1`` (in this process) and ``--workers 2`` (a process
pool), the variants interleaved round by round because this machine class drifts by 10-20 % in
speed over minutes.  ``--baseline DIR`` adds the same variants run from another checkout
(``PYTHONPATH=DIR``), interleaved too.  Each figure is the best of ``--repeats`` (other work only ever
adds time); one untimed run per checkout first loads numba's on-disk cache (a cold compile takes
minutes on two cores).  The ``--json`` outputs of every run are compared with their timing fields
removed: the recommendation and every figure must be identical for any executor and checkout.  Then
the start-up parts of one in-process run per checkout: the entry point with the optimize command's
modules, the first Student-t interval, and the first and second call of the iteration kernel (the
first loads it from numba's cache).  On a shared machine, read the load average printed first.

Then (skip with ``--no-scale``) the verification scale figures: ``optimize --workload azure_conv
--slo-ttft 500 --lam L`` (the paper's constants, verification of the top 5 with the default
steady-state run length, default executor) at λ = 1,000, 20,000 and 100,000, one warm run each, with
the targets 10 s, 60 s and 5 min; each line also shows the recommended GPU count, phase 2's own time and
the headroom search's (``optimize``'s default; ``benchmarks/bench_headroom.py`` compares the two).
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

README_ARGS = ("optimize", "--workload", "lmsys.json", "--slo-ttft", "500")
VARIANTS = {"default executor": (), "--workers 1": ("--workers", "1"), "--workers 2": ("--workers", "2")}
TIMING_KEYS = ("elapsed_s", "verify_time_s", "analytic_time_s")
SCALE_ARGS = ("optimize", "--workload", "azure_conv", "--slo-ttft", "500")
SCALE_TARGETS_S = {1_000: 10.0, 20_000: 60.0, 100_000: 300.0}
#: The MoE command of the phase split: issue 26's ``optimize`` with a MoE model at 100 req/s.
MOE_ARGS = ("optimize", "--workload", "lmsys", "--slo-ttft", "1000", "--model", "deepseek-v3", "--gpus", "h200,b200",
            "--lam", "100")
#: Issue 26's target for it: the whole command, warm, on two cores (seconds).
MOE_TARGET_S = 30.0
#: The commands of the phase split (``phases``): README, a 70B model, a high rate, a MoE model.
PHASE_COMMANDS = {
    "README": README_ARGS,
    "70B fp8": README_ARGS + ("--model", "llama-3.1-70b", "--weight-dtype", "fp8"),
    "λ = 20,000": SCALE_ARGS + ("--lam", "20000"),
    "MoE 100/s": MOE_ARGS,
}
#: Added to the phase split by ``--with-100k``.
PHASE_100K = ("λ = 100,000", SCALE_ARGS + ("--lam", "100000"))
#: Run in a fresh interpreter: imports timed apart, then the command in-process with --json.
_PHASE_CODE = """
import json, sys, time
t0 = time.perf_counter()
import fleetplan.cli.main as m
m.cli.get_command(None, "optimize")
t1 = time.perf_counter()
try:
    m.cli.main(args=sys.argv[2:], standalone_mode=False)
except SystemExit:
    pass
t2 = time.perf_counter()
print(json.dumps({"imports_s": t1 - t0, "run_s": t2 - t1}))
"""


def _strip_timing(doc):
    if isinstance(doc, dict):
        return {k: _strip_timing(v) for k, v in doc.items() if k not in TIMING_KEYS and not k.endswith("_time_s")}
    if isinstance(doc, list):
        return [_strip_timing(v) for v in doc]
    return doc


def run_once(args: tuple[str, ...], json_path: Path, checkout: str) -> float:
    """Seconds of one run of the command from ``checkout`` (a fresh interpreter, started in the JSON's
    directory: ``python -m`` puts the working directory ahead of ``PYTHONPATH``)."""
    cmd = [sys.executable, "-m", "fleetplan.cli.main", *README_ARGS, *args, "--json", str(json_path)]
    env = {**os.environ, "PYTHONPATH": checkout}
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                   cwd=json_path.parent)
    return time.perf_counter() - t0


def parts(checkout: str) -> None:
    """Start-up parts of one in-process run from ``checkout``, in a fresh interpreter: the entry point
    with the optimize command, the first Student-t interval (verification), the first and second
    simulation (the first loads the kernel from numba's cache)."""
    code = (
        "import time; t0 = time.perf_counter()\n"
        "import fleetplan.cli.main as m; m.cli.get_command(None, 'optimize'); t1 = time.perf_counter()\n"
        "from fleetplan.metrics import student_t_interval; student_t_interval([1.0, 2.0]); t2 = time.perf_counter()\n"
        "from fleetplan.hardware import load_catalog; from fleetplan.sim import FleetSpec, build_pool, simulate\n"
        "from fleetplan.workload import load_workload\n"
        "spec = FleetSpec((build_pool(load_catalog().get('h100'), 'p', 2, 65536),)); wl = load_workload('lmsys')\n"
        "t3 = time.perf_counter(); simulate(spec, wl, 50.0, 2000); t4 = time.perf_counter()\n"
        "simulate(spec, wl, 50.0, 2000); t5 = time.perf_counter()\n"
        "print(f'entry point + optimize command: {t1 - t0:.2f} s; first Student-t interval: {t2 - t1:.2f} s; '\n"
        "      f'first simulate (kernel loaded from the cache): {t4 - t3:.2f} s; second: {t5 - t4:.2f} s')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": checkout},
                   cwd=tempfile.gettempdir())


def scale(checkout: str) -> None:
    """Wall time of ``SCALE_ARGS`` at each rate of ``SCALE_TARGETS_S`` (module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        for rate, target_s in SCALE_TARGETS_S.items():
            path = Path(tmp) / f"scale{rate}.json"
            cmd = [sys.executable, "-m", "fleetplan.cli.main", *SCALE_ARGS, "--lam", str(rate), "--json", str(path)]
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env={**os.environ, "PYTHONPATH": checkout}, cwd=tmp)
            seconds = time.perf_counter() - t0
            doc = json.loads(path.read_text())
            rec = doc.get("recommendation") or {}
            room = doc.get("headroom_time_s")
            room = "" if room is None else f", headroom {room:.1f} s"
            print(f"  λ = {rate:>7,}: {seconds:7.1f} s (target < {target_s:g} s; phase 2 {doc['verify_time_s']:.1f} s"
                  f"{room}; recommended {rec.get('total_gpus_needed')} GPUs; load average {os.getloadavg()[0]:.2f})",
                  flush=True)


def phase_split(args: tuple[str, ...], checkout: str, json_path: Path) -> dict:
    """Seconds per phase of one run of ``optimize`` ``args`` from ``checkout`` (module docstring)."""
    cmd = [sys.executable, "-c", _PHASE_CODE, "-", *args, "--quiet", "--json", str(json_path)]
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": checkout},
                         cwd=json_path.parent)
    total = time.perf_counter() - t0
    timed = json.loads(out.stdout.strip().splitlines()[-1])
    doc = json.loads(json_path.read_text())
    analytic, verify = doc["analytic_time_s"], doc.get("verify_time_s") or 0.0
    room = doc.get("headroom_time_s") or 0.0
    return {"load": load, "total": total, "imports": timed["imports_s"], "analytic": analytic,
            "candidates": doc["n_candidates"], "simulation": verify, "headroom": room,
            "rest": timed["run_s"] - analytic - verify - room, "doc": _strip_timing(doc)}


def phases(checkouts: dict[str, str], commands: dict[str, tuple[str, ...]] = PHASE_COMMANDS) -> None:
    """The phase split of ``commands`` for each checkout, back to back (module docstring)."""
    print("phase split (s; one warm run each, fresh interpreter; analytic: its own timer):")
    print(f"  {'command':<11s} {'checkout':<14s} {'load':>5s} {'total':>7s} {'imports':>8s} {'analytic':>9s} "
          f"{'cand/s':>7s} {'simulation':>10s} {'headroom':>9s} {'rest':>6s}  --json")
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in commands.items():
            first = None
            for where, path in checkouts.items():
                f = phase_split(args, path, Path(tmp) / "phases.json")
                rate = f["candidates"] / f["analytic"] if f["analytic"] > 0 else float("inf")
                same = "" if first is None else ("same" if f["doc"] == first else "DIFFERENT")
                first = f["doc"] if first is None else first
                print(f"  {name:<11s} {where:<14s} {f['load']:5.2f} {f['total']:7.2f} {f['imports']:8.2f} "
                      f"{f['analytic']:9.2f} {rate:7,.0f} {f['simulation']:10.2f} {f['headroom']:9.2f} "
                      f"{f['rest']:6.2f}  {same}", flush=True)
                if args == MOE_ARGS:
                    verdict = "met" if f["total"] < MOE_TARGET_S else "NOT met"
                    print(f"  {'':11s} {'':14s} MoE at 100 req/s: {f['total']:.1f} s warm (issue 26 target "
                          f"< {MOE_TARGET_S:.0f} s on two cores): {verdict}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per variant (best is shown)")
    parser.add_argument("--baseline", default=None, help="another checkout to time the same way")
    parser.add_argument("--no-scale", action="store_true", help="skip the λ = 1,000 / 20,000 / 100,000 timings")
    parser.add_argument("--no-phases", action="store_true", help="skip the phase split of the three commands")
    parser.add_argument("--phases-only", action="store_true", help="only the phase split (and the load)")
    parser.add_argument("--with-100k", action="store_true", help="add λ = 100,000 to the phase split (minutes)")
    parser.add_argument("extra", nargs="*", help="more optimize arguments (after --)")
    args = parser.parse_args()
    extra = tuple(args.extra)
    load1, load5, _ = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load1:.2f} (1 min) {load5:.2f} (5 min)")
    print(f"command: fleetplan {' '.join(README_ARGS + extra)}")
    checkouts = {"this checkout": str(Path(__file__).resolve().parents[1])}
    if args.baseline:
        checkouts["baseline"] = str(Path(args.baseline).resolve())
    if not args.no_phases:
        for path in checkouts.values():  # load (or fill) numba's cache once per checkout
            with tempfile.TemporaryDirectory() as tmp:
                run_once(("--workers", "1"), Path(tmp) / "warm.json", path)
        phases(checkouts, dict([*PHASE_COMMANDS.items(), PHASE_100K]) if args.with_100k else PHASE_COMMANDS)
        if args.phases_only:
            return
    runs = [(where, name) for where in checkouts for name in VARIANTS]
    best = dict.fromkeys(runs, float("inf"))
    with tempfile.TemporaryDirectory() as tmp:
        out = {run: Path(tmp) / f"{i}.json" for i, run in enumerate(runs)}
        for path in checkouts.values():  # load numba's cache once per checkout
            run_once(extra + ("--workers", "1"), Path(tmp) / "warm.json", path)
        for _ in range(args.repeats):
            for where, name in runs:
                seconds = run_once(extra + VARIANTS[name], out[(where, name)], checkouts[where])
                best[(where, name)] = min(best[(where, name)], seconds)
        docs = {run: _strip_timing(json.loads(path.read_text())) for run, path in out.items()}
    for (where, name), seconds in best.items():
        print(f"  {where:<14s} {name:<18s} {seconds:6.2f} s (best of {args.repeats})")
    first = next(iter(docs.values()))
    print(f"results identical across executors and checkouts: {all(doc == first for doc in docs.values())}")
    for where, path in checkouts.items():
        print(f"{where}: ", end="", flush=True)
        parts(path)
    if not args.no_scale:
        print(f"verification at scale: fleetplan {' '.join(SCALE_ARGS)} --lam L (warm, default executor)")
        scale(checkouts["this checkout"])


if __name__ == "__main__":
    main()
