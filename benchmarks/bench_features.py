"""Speed of the runtime-feature kernel (#5) against the featureless kernel (plain script; prints figures).

    python benchmarks/bench_features.py            # 10^6 requests
    python benchmarks/bench_features.py --quick    # 10^5 requests
    python benchmarks/bench_features.py --quick --per-feature   # also each feature alone
    python -m benchmarks.bench_features --policy all   # all-on once per scheduler policy

Fleet and workload of ``benchmarks/bench_des.py`` (the Table-1 builder: 3 short + 5 long
A100 instances, LMSYS lengths, lambda = 100 req/s).  Three runs on the same requests:

* ``run_iteration_level`` (the featureless fast path);
* ``run_iteration_features`` with every feature off (must match it bit for bit; checked);
* ``run_iteration_features`` with everything on: full_decode_only CUDA graphs with vLLM's
  capture ladder (1, 2, 4, 8..248 by 8, 256..512 by 16; launch 3 ms, replay 0.5 ms), MTP
  k = 2 with acceptance 0.8 per position (draft pass = 10% of a target step), prefix caching
  with a shared 256-token system-prompt key (64 entries per instance), the policy given by
  ``--policy`` (vllm_v1, sglang, spf, mlfq (default): q0 = 20 ms, 4 levels; h2q: L 8192,
  C 16384, B 8; ``all``: one all-on run per policy, in the same interleaved rounds).
``--per-feature`` adds one run per feature alone (policy, graphs, spec, prefix: the others off;
with ``--policy all`` one policy-alone run per policy).
JIT time (compile or cache load, first call on a tiny input) is reported apart from run time.
Target: all-on >= 0.5x the featureless kernel's requests/s.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.bench_des import iteration_outputs, two_pool_fleet, workload
from fleetplan.sim._kernels import STATUS_DONE, run_iteration_level
from fleetplan.sim._kernels.codes import (
    GRAPH_FULL_DECODE_ONLY,
    SCHED_H2Q_BR,
    SCHED_MLFQ,
    SCHED_SGLANG,
    SCHED_SPF,
    SCHED_VLLM_V1,
)
from fleetplan.sim._kernels.features.level import run_iteration_features
from fleetplan.sim._kernels.groups import (
    FeatureInputs,
    FeatureKernelOutputs,
    FleetInputs,
    RequestInputs,
    RoundInputs,
    iteration_groups,
)
from fleetplan.sim.features.arrays import SPEC_K_MAX, no_extras
from fleetplan.sim.features.run import allocate_outputs

VLLM_LADDER = np.array([1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16)), dtype=np.int64)
SYSTEM_PROMPT_TOKENS = 256
REPEATS = 3
POLICIES = {"vllm_v1": SCHED_VLLM_V1, "sglang": SCHED_SGLANG, "spf": SCHED_SPF, "mlfq": SCHED_MLFQ,
            "h2q": SCHED_H2Q_BR}


def features(fleet: dict, on: bool, policy: str) -> dict:
    p = len(fleet["pool_router"])
    f = dict(policy=np.zeros(p, np.int32), policy_param=np.zeros((p, 4)), graph_mode=np.zeros(p, np.int32),
             graph_sizes=np.zeros((p, VLLM_LADDER.size), np.int64), graph_n=np.zeros(p, np.int32),
             graph_time_s=np.zeros((p, 3)), spec_k=np.zeros(p, np.int32), spec_accept=np.zeros((p, SPEC_K_MAX)),
             draft_code=fleet["pool_step_code"].copy(), draft_coef=0.1 * fleet["pool_step_coef"],
             prefix_on=np.zeros(p, np.int32), prefix_entries=np.zeros(p, np.int64),
             affinity_slack=np.zeros(p, np.int64), spec_seed=12345)
    if on:
        f["policy"][:] = POLICIES[policy]
        if policy == "mlfq":
            f["policy_param"][:, :2] = (0.02, 4)
        elif policy == "h2q":
            f["policy_param"][:, :3] = (8192, 16384, 8)
        f["graph_mode"][:] = GRAPH_FULL_DECODE_ONLY
        f["graph_sizes"][:] = VLLM_LADDER
        f["graph_n"][:] = VLLM_LADDER.size
        f["graph_time_s"][:] = (0.003, 0.0005, 0.0)
        f["spec_k"][:] = 2
        f["spec_accept"][:, :2] = 0.8
        f["prefix_on"][:] = 1
        f["prefix_entries"][:] = 64
    return f


FEATURE_KEYS = {"policy": ("policy", "policy_param"),
                "graphs": ("graph_mode", "graph_sizes", "graph_n", "graph_time_s"),
                "spec": ("spec_k", "spec_accept"), "prefix": ("prefix_on", "prefix_entries")}


def only(feats_on: dict, feats_off: dict, feature: str) -> dict:
    """``feats_off`` with ``feature``'s switches taken from ``feats_on``."""
    f = dict(feats_off)
    for key in FEATURE_KEYS[feature]:
        f[key] = feats_on[key]
    return f


def extras_for(prompt: np.ndarray, shared_prefix: bool):
    x = no_extras(prompt)
    if shared_prefix:
        x.prefix_key[:, 0] = 0
        x.prefix_tokens[:, 0] = np.minimum(prompt, SYSTEM_PROMPT_TOKENS)
        x.prefix_tokens[:, 1] = x.prefix_tokens[:, 0]
    return x


def call_features(req: dict, fleet: dict, feats: dict, extras) -> tuple[int, dict]:
    n, n_inst, p = len(req["arrival_s"]), int(fleet["pool_inst_start"][-1]), len(fleet["pool_router"])
    out = allocate_outputs(n, n_inst, p)
    e = extras
    n_steps = run_iteration_features(
        RequestInputs(**{k: req[k] for k in RequestInputs._fields}),
        FleetInputs(**{k: fleet[k] for k in FleetInputs._fields}), FeatureInputs(**feats),
        RoundInputs(prev_req=e.prev_req, delay_s=e.delay_s, session=e.session, n_sessions=e.n_sessions,
                    new_tokens=e.new_tokens, prefix_key=e.prefix_key, prefix_tokens=e.prefix_tokens),
        FeatureKernelOutputs(**out), fleet["horizon_s"])
    return n_steps, out


def timed_interleaved(runs: dict, repeats: int) -> tuple[dict, dict]:
    """Best time of each run over ``repeats`` rounds, the runs interleaved within a round (this
    machine class's speed drifts by 10-20 % over minutes; interleaving keeps the ratios fair)."""
    best, result = {k: np.inf for k in runs}, {}
    for _ in range(repeats):
        for key, fn in runs.items():
            t0 = time.perf_counter()
            result[key] = fn()
            best[key] = min(best[key], time.perf_counter() - t0)
    return best, result


def timed(fn, repeats: int = REPEATS) -> tuple[float, object]:
    best, result = np.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def row(label: str, t: float, t_ref: float, n: int, steps: int, repeats: int, status=None) -> str:
    done = "" if status is None else f"  done {np.mean(status == STATUS_DONE):.4f}"
    return (f"  {label:32s} best of {repeats} {t:7.3f} s  {n / t:12,.0f} req/s  {steps / t:12,.0f} steps/s  "
            f"{steps / n:5.1f} steps/req{done}  ({t_ref / t:.2f}x)")


def summary(label: str, out: dict) -> str:
    g, kind, pt = out["pool_graph_tokens"], out["pool_step_kind"], out["pool_prefix_tokens"]
    return (f"  {label}: padding inflation {g[:, 1].sum() / max(g[:, 0].sum(), 1):.3f}, graphed steps "
            f"{kind[:, 1].sum() / max(kind.sum(), 1):.3f}, acceptance "
            f"{out['accepted'].sum() / max(out['drafted'].sum(), 1):.3f}, prefix hit "
            f"{pt[:, 1].sum() / max(pt[:, 0].sum(), 1):.3f}, preemptions {int(out['preemptions'].sum())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10^5 requests instead of 10^6")
    parser.add_argument("--policy", choices=(*POLICIES, "all"), default="mlfq",
                        help="scheduler policy of the all-on run (all: one run per policy)")
    parser.add_argument("--per-feature", action="store_true", help="also time each feature alone")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds (best of)")
    args = parser.parse_args()
    n = 100_000 if args.quick else 1_000_000
    policies = list(POLICIES) if args.policy == "all" else [args.policy]
    fleet = two_pool_fleet(3, 5)
    tiny, _ = workload(np.random.default_rng(0), 10.0, 20)
    for label, fn in (("run_iteration_level", lambda: run_iteration_level(
            *iteration_groups(tiny | fleet | iteration_outputs(20, 8)), fleet["horizon_s"])),
            ("run_iteration_features", lambda: call_features(
                tiny, fleet, features(fleet, True, policies[0]), extras_for(tiny["prompt_tokens"], True)))):
        t0 = time.perf_counter()
        fn()
        print(f"JIT {label}: first call {time.perf_counter() - t0:.2f} s (compile or cache load)")
    req, source = workload(np.random.default_rng(20260601), 100.0, n)
    print(f"fleet 3 short + 5 long A100 (Table 1 builder), lambda 100/s, N {n:,}, lengths: {source}")
    out_ref = iteration_outputs(n, 8)
    feats_off = features(fleet, False, policies[0])
    feats_on = {pol: features(fleet, True, pol) for pol in policies}
    extras_off, extras_on = no_extras(req["prompt_tokens"]), extras_for(req["prompt_tokens"], True)
    runs = {"ref": lambda: run_iteration_level(*iteration_groups(req | fleet | out_ref), fleet["horizon_s"]),
            "off": lambda: call_features(req, fleet, feats_off, extras_off)}
    for pol in policies:
        runs[pol] = lambda f=feats_on[pol]: call_features(req, fleet, f, extras_on)
    best, result = timed_interleaved(runs, args.repeats)
    t_ref, steps_ref = best["ref"], result["ref"]
    steps_off, out_off = result["off"]
    same = steps_off == steps_ref and all(np.array_equal(out_ref["out_" + k], out_off[k])
                                          for k in ("done_s", "first_token_s", "preemptions", "status"))
    print(row("run_iteration_level", t_ref, t_ref, n, steps_ref, args.repeats, out_ref["out_status"]))
    print(row("features, all off", best["off"], t_ref, n, steps_off, args.repeats, out_off["status"]))
    for pol in policies:
        print(row(f"features, all on ({pol})", best[pol], t_ref, n, result[pol][0], args.repeats,
                  result[pol][1]["status"]))
    print(f"  all-off outputs identical to run_iteration_level: {same}")
    if args.per_feature:
        alone = [(f"{name} only", only(feats_on[policies[0]], feats_off, name), name == "prefix")
                 for name in FEATURE_KEYS if name != "policy"]
        alone[:0] = [(f"policy only{'' if len(policies) == 1 else f' ({pol})'}",
                      only(feats_on[pol], feats_off, "policy"), False) for pol in policies]
        for label, f, prefix in alone:
            x = extras_for(req["prompt_tokens"], prefix)
            t, (steps, _) = timed(lambda f=f, x=x: call_features(req, fleet, f, x))
            print(row("features, " + label, t, t_ref, n, steps, REPEATS))
    for pol in policies:
        print(summary("all on" if len(policies) == 1 else f"all on ({pol})", result[pol][1]))


if __name__ == "__main__":
    main()
