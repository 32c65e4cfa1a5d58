"""Random small fleets with runtime features for the feature-kernel tests (helpers only, no tests)."""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.features.level import run_iteration_features
from fleetplan.sim._kernels.groups import FeatureInputs, FeatureKernelOutputs, FleetInputs, RequestInputs, RoundInputs
from fleetplan.sim.features.arrays import SPEC_K_MAX, RequestExtras, no_extras
from fleetplan.sim.features.run import allocate_outputs
from tests.reference.features_level import OUT_NAMES
from tests.reference.features_level import run_iteration_features as twin_features
from tests.sim.test_kernels_iteration import make_case

VLLM_LADDER = np.array([1, 2, 4, 8] + list(range(16, 513, 8)), dtype=np.int64)


def features_off(n_pools: int) -> dict:
    p = n_pools
    return dict(policy=np.zeros(p, np.int32), policy_param=np.zeros((p, 4)), graph_mode=np.zeros(p, np.int32),
                graph_sizes=np.zeros((p, 1), np.int64), graph_n=np.zeros(p, np.int32), graph_time_s=np.zeros((p, 3)),
                spec_k=np.zeros(p, np.int32), spec_accept=np.zeros((p, SPEC_K_MAX)), draft_code=np.zeros(p, np.int32),
                draft_coef=np.zeros((p, 18)), prefix_on=np.zeros(p, np.int32), prefix_entries=np.zeros(p, np.int64),
                affinity_slack=np.zeros(p, np.int64), spec_seed=0)


def random_features(rng: np.random.Generator, case: dict, which: str = "all") -> dict:
    """Every feature drawn per pool (``which`` = one of policy/graph/spec/prefix/route, or all)."""
    p = len(case["pool_router"])
    f = features_off(p)

    def on(name: str) -> bool:
        return which in ("all", name)

    if on("policy"):
        f["policy"] = rng.integers(0, 5, p).astype(np.int32)
        for q in range(p):
            if f["policy"][q] == 3:
                f["policy_param"][q] = (rng.choice([0.002, 0.01, 0.05]), rng.integers(1, 5), 0, 0)
            elif f["policy"][q] == 4:
                f["policy_param"][q] = (rng.choice([16, 64, 150]), rng.choice([100, 400]), rng.integers(1, 4), 0)
    if on("graph"):
        f["graph_mode"] = rng.integers(0, 3, p).astype(np.int32)
        sizes = np.zeros((p, 6), np.int64)
        for q in range(p):
            n = int(rng.integers(1, 7))
            sizes[q, :n] = np.sort(rng.choice(np.arange(1, 300), n, replace=False))
            f["graph_n"][q] = n if f["graph_mode"][q] else 0
        f["graph_sizes"] = sizes
        f["graph_time_s"] = np.column_stack([rng.uniform(0, 0.002, p), rng.uniform(0, 0.001, p),
                                             rng.uniform(0, 0.001, p)])
    if on("spec"):
        f["spec_k"] = rng.integers(0, 5, p).astype(np.int32)
        f["spec_accept"] = rng.uniform(0, 1, (p, SPEC_K_MAX))
        f["draft_coef"] = case["pool_step_coef"] * rng.uniform(0.05, 0.3)
        f["spec_seed"] = int(rng.integers(0, 2**62))
    if on("prefix"):
        f["prefix_on"] = rng.integers(0, 2, p).astype(np.int32)
        f["prefix_entries"] = rng.integers(1, 6, p).astype(np.int64)
    if on("route"):
        for q in range(p):
            if rng.random() < 0.5:
                case["pool_router"][q] = 4
        f["affinity_slack"] = rng.integers(0, 4, p).astype(np.int64)
    return f


def random_extras(rng: np.random.Generator, case: dict, sessions: bool = True) -> RequestExtras:
    """Multi-round sessions (a round's prompt = previous context + new tokens) and shared prefixes."""
    prompt, output = case["prompt_tokens"].copy(), case["output_tokens"]
    n = prompt.size
    x = no_extras(prompt)
    prev, delay, sess, new = x.prev_req.copy(), x.delay_s.copy(), x.session.copy(), x.new_tokens.copy()
    has_next = np.zeros(n, bool)
    n_sess = 0
    for j in range(n):
        cands = [i for i in range(max(0, j - 20), j) if not has_next[i]]
        if sessions and cands and rng.random() < 0.35:
            i = int(rng.choice(cands))
            has_next[i] = True
            prev[j] = i
            delay[j] = rng.choice([0.0, 0.0, rng.uniform(0, 0.05)])
            if sess[i] < 0:
                sess[i] = n_sess
                n_sess += 1
            sess[j] = sess[i]
            prompt[j] = prompt[i] + output[i] + new[j]
    key = np.full((n, 2), -1, np.int64)
    tok = np.zeros((n, 2), np.int64)
    for j in range(n):
        if rng.random() < 0.6:
            key[j, 0] = rng.integers(0, 3)
            tok[j, 0] = min(prompt[j], rng.choice([8, 32, 64]))
        tok[j, 1] = tok[j, 0]
        if prev[j] >= 0:
            key[j, 1] = 1000 + sess[j]
            tok[j, 1] = prompt[prev[j]] + output[prev[j]] - 1
    case["prompt_tokens"] = prompt
    return RequestExtras(prev_req=prev, delay_s=delay, session=sess, n_sessions=n_sess, new_tokens=new,
                         prefix_key=key, prefix_tokens=tok)


def make_feature_case(seed: int, which: str = "all", sessions: bool = True, n_max: int = 120):
    rng = np.random.default_rng(10_000 + seed)
    case = make_case(seed, n_max)
    case["pool_router"] = case["pool_router"].copy()
    extras = random_extras(rng, case, sessions)
    return case, random_features(rng, case, which), extras


def run_one(fn, case: dict, feats: dict, extras: RequestExtras, **kw) -> tuple[int, dict]:
    n, n_inst, p = len(case["arrival_s"]), int(case["pool_inst_start"][-1]), len(case["pool_router"])
    out = allocate_outputs(n, n_inst, p, log_itl=True)
    for a in out.values():
        a.fill(77)  # kernels must initialise their outputs
    n_steps = fn(*kernel_groups(case, feats, extras, out), **kw)
    return n_steps, dict(zip(OUT_NAMES, out.values(), strict=True))


def kernel_groups(case: dict, feats: dict, extras: RequestExtras, out: dict) -> tuple:
    """The feature kernel's arguments (``fleetplan.sim._kernels.groups``) from a case, its features,
    extras and outputs (``allocate_outputs``): ``(requests, fleet, features, rounds, out, horizon_s)``."""
    e = extras
    return (RequestInputs(**{k: case[k] for k in RequestInputs._fields}),
            FleetInputs(**{k: case[k] for k in FleetInputs._fields}),
            FeatureInputs(**feats),
            RoundInputs(prev_req=e.prev_req, delay_s=e.delay_s, session=e.session, n_sessions=e.n_sessions,
                        new_tokens=e.new_tokens, prefix_key=e.prefix_key, prefix_tokens=e.prefix_tokens),
            FeatureKernelOutputs(**out), case["horizon_s"])


def assert_twin(case, feats, extras, checks: dict | None = None) -> dict:
    n1, o1 = run_one(run_iteration_features, case, feats, extras)
    n2, o2 = run_one(twin_features, case, feats, extras, checks=checks)
    for name in OUT_NAMES:
        np.testing.assert_array_equal(o1[name], o2[name], err_msg=name)
    assert n1 == n2
    return o1
