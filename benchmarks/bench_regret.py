"""Regret of verifying only the cheapest analytic candidates (plain script; prints figures, asserts nothing).

    python benchmarks/bench_regret.py            # the 16-scenario grid
    python benchmarks/bench_regret.py --quick    # 4 scenarios (the paper constants on every workload)
    python benchmarks/bench_regret.py --topology pdd,afd   # the disaggregated grid of bench_agreement
    python benchmarks/bench_regret.py --topology pdd --moe # its DeepSeek-V3 PDD scenarios (DISAGG_MOE_SCENARIOS)

For each scenario ``optimize`` runs twice: with its default phase 2 (the 5 cheapest analytic candidates,
then the bound: further candidates while their analytic cost undercuts the cheapest verified fleet, up
to 25 more; ``plan.optimize``) and verifying exactly the 30 cheapest (``extend_max=0``).  Printed per
scenario: the default run's recommendation, the cheapest verified fleet among the top 30, the regret
(default cost / top-30 cost - 1), the default run's wall time and how many candidates it verified.
Target: the top 30 find no cheaper fleet on >= 90 % of the scenarios
and never one more than 5 % cheaper.

``--topology pdd,afd`` runs ``bench_agreement.DISAGG_SCENARIOS`` instead (PDD / AFD and the runs where
``homo,two-pool,pdd`` compete, with the default cost-efficiency gate) and prints, besides the regret, the family
each run recommends (target for mixed runs: the same family verifying 30 as 5, cost within 1 %).

Grid: workloads {lmsys, azure_conv, azure_code, agent_heavy} x
  paper:    the core paper's constants (A10G, A100, H100), λ = 100, TTFT SLO 500 ms;
  70b-fp8:  llama-3.1-70b FP8 weights on h100, h200, b200, λ = 50, TTFT 1000 ms, TPOT 50 ms;
  8b:       llama-3.1-8b on l40s, a100, h100, λ = 100, TTFT 500 ms, TPOT 30 ms;
  qwen3:    qwen3-30b-a3b on h100, h200, λ = 100, TTFT 1000 ms, TPOT 50 ms.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, replace

from fleetplan.exec import LocalExecutor
from fleetplan.hardware import load_catalog
from fleetplan.models import dtype, load_model
from fleetplan.models.context import served_context_limit
from fleetplan.plan.optimize import OptimizeRequest, optimize, resolve_gpus, verified_fleet
from fleetplan.plan.placement import place_model
from fleetplan.plan.verify import VerifySettings
from fleetplan.workload import load_workload

WORKLOADS = ("lmsys", "azure_conv", "azure_code", "agent_heavy")
TOP_SMALL, TOP_LARGE = 5, 30
MAX_GPUS = 10_000


@dataclass(frozen=True)
class Config:
    name: str
    model: str | None
    weight_dtype: str
    gpus: tuple[str, ...] | None
    rate_per_s: float
    slo_ttft_s: float
    slo_tpot_s: float | None


CONFIGS = (
    Config("paper", None, "bf16", None, 100.0, 0.5, None),
    Config("70b-fp8", "llama-3.1-70b", "fp8", ("h100", "h200", "b200"), 50.0, 1.0, 0.05),
    Config("8b", "llama-3.1-8b", "bf16", ("l40s", "a100", "h100"), 100.0, 0.5, 0.03),
    Config("qwen3", "qwen3-30b-a3b", "bf16", ("h100", "h200"), 100.0, 1.0, 0.05),
)


def inputs(cfg: Config, workload: str) -> tuple[OptimizeRequest, VerifySettings]:
    """The optimize request and verification settings of one scenario (the CLI's --model path)."""
    catalog = load_catalog()
    if cfg.model is None:
        gpus, per_instance, step_models, limit = resolve_gpus(catalog, cfg.gpus), (), (), None
    else:
        model = load_model(cfg.model)
        limit = served_context_limit(model, None)  # the served model's window, as optimize's CLI sets it
        placed = [p for name in cfg.gpus for p in place_model(model, catalog.get(name),
                                                              weight_dtype=dtype(cfg.weight_dtype),
                                                              kv_dtype=dtype("bf16"))]
        gpus = tuple(p.gpu for p in placed)
        per_instance = tuple((p.gpu.name, p.gpus_per_instance) for p in placed)
        step_models = tuple((p.gpu.name, p.predictor) for p in placed)
    req = OptimizeRequest(workload=load_workload(workload), gpus=gpus, gpus_per_instance=per_instance,
                          slo_ttft_s=cfg.slo_ttft_s, slo_tpot_s=cfg.slo_tpot_s, rate_per_s=cfg.rate_per_s,
                          max_gpus=MAX_GPUS, max_model_len_tokens=limit, step_models=step_models)
    vs = VerifySettings(slo_ttft_s=cfg.slo_ttft_s, slo_tpot_s=cfg.slo_tpot_s, rate_per_s=cfg.rate_per_s,
                        max_gpus=MAX_GPUS, top_k=TOP_LARGE, step_models=step_models, max_model_len_tokens=limit)
    return req, vs


def cheapest(result, top: int) -> float:
    costs = [verified_fleet(c).cost_usd_per_year for c in result.candidates
             if c.verification is not None and c.verification.passed and c.rank <= top]
    return min(costs) if costs else float("inf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the paper constants on every workload only")
    parser.add_argument("--workers", type=int, default=None, help="executor workers (default: one per core)")
    parser.add_argument("--topology", default=None, help="pdd,afd: the disaggregated grid (module docstring)")
    parser.add_argument("--scenarios", default=None, help="with --topology: indices into DISAGG_SCENARIOS")
    parser.add_argument("--moe", action="store_true", help="with --topology: bench_agreement.DISAGG_MOE_SCENARIOS "
                        "(DeepSeek-V3 FP8 PDD on H200 / B200) instead")
    args = parser.parse_args()
    if args.topology is not None:
        disagg_regret(args)
        return
    configs = CONFIGS[:1] if args.quick else CONFIGS
    rows = []
    print(f"{'scenario':<24} {'default $/yr':>14} {'top-30 $/yr':>14} {'regret':>8} {'default s':>9} "
          f"{'verified':>9}")
    with LocalExecutor(workers=args.workers) as ex:
        for cfg in configs:
            for wl in WORKLOADS:
                name = f"{wl}/{cfg.name}"
                try:
                    req, vs = inputs(cfg, wl)
                    t0 = time.perf_counter()
                    default = optimize(req, replace(vs, top_k=TOP_SMALL), map_fn=ex)  # top 5 and the bound
                    seconds = time.perf_counter() - t0
                    result = optimize(req, replace(vs, extend_max=0), map_fn=ex)  # exactly the top 30
                except Exception as exc:  # noqa: BLE001 - a benchmark reports and goes on
                    print(f"{name:<24} error: {exc}")
                    continue
                small = (default.recommendation.cost_usd_per_year if default.recommendation is not None
                         else float("inf"))
                large = cheapest(result, TOP_LARGE)
                n_default = len(default.verification)
                if large == float("inf"):
                    why = "no feasible analytic candidate" if not any(c.feasible for c in result.candidates) \
                        else "no verified fleet in the top 30"
                    print(f"{name:<24} {'-':>14} {'-':>14} {'-':>8} {seconds:>9.1f}  ({why}; not counted)", flush=True)
                    continue
                regret = small / large - 1.0
                rows.append((name, small, large, regret))
                print(f"{name:<24} {small:>14,.0f} {large:>14,.0f} {regret:>8.2%} {seconds:>9.1f} {n_default:>9d}",
                      flush=True)
    done = rows
    same = sum(r[1] <= r[2] for r in done)
    worst = max((r[3] for r in done if r[3] == r[3]), default=float("nan"))
    print(f"top 30 finds no cheaper verified fleet on {same}/{len(done)} scenarios "
          f"({same / max(len(done), 1):.0%}; target >= 90 %); largest regret {worst:.2%} (target <= 5 %)")


def disagg_regret(args) -> None:
    """Regret and recommended family on the disaggregated grid (module docstring)."""
    from bench_agreement import DISAGG_MOE_SCENARIOS, DISAGG_SCENARIOS, DISAGG_SETUPS, disagg_request

    from fleetplan.plan.disagg import DEFAULT_MIN_CE_GAIN
    from fleetplan.plan.space import DISAGGREGATED, Topology, family

    grid = DISAGG_MOE_SCENARIOS if args.moe else DISAGG_SCENARIOS
    picked = range(len(grid)) if args.scenarios is None else [int(k) for k in args.scenarios.split(",")]
    rows = []
    with LocalExecutor(workers=args.workers) as ex:
        for k in picked:
            wl, name, rate, topos = grid[k]
            setup = DISAGG_SETUPS[name]
            req = replace(disagg_request(wl, setup, rate, topos), min_ce_gain=DEFAULT_MIN_CE_GAIN,
                          max_gpus=MAX_GPUS)
            vs = VerifySettings(slo_ttft_s=setup.slo_ttft_s, slo_tpot_s=setup.slo_tpot_s, rate_per_s=rate,
                                max_gpus=MAX_GPUS, top_k=TOP_LARGE, step_models=req.step_models,
                                max_model_len_tokens=req.max_model_len_tokens)
            label = f"{wl}@{rate:g}/{name}/{'+'.join(topos)}"
            try:
                t0 = time.perf_counter()
                default = optimize(req, replace(vs, top_k=TOP_SMALL), map_fn=ex)
                seconds = time.perf_counter() - t0
                result = optimize(req, replace(vs, extend_max=0), map_fn=ex)
            except Exception as exc:  # noqa: BLE001 - a benchmark reports and goes on
                print(f"{label:<48} error: {exc}", flush=True)
                continue
            if default.recommendation is None:
                print(f"{label:<48} no verified recommendation", flush=True)
                continue
            small = default.recommendation.cost_usd_per_year
            large = cheapest(result, TOP_LARGE)
            best = min((c for c in result.candidates if c.verification is not None and c.verification.passed
                        and c.rank <= TOP_LARGE), key=lambda c: verified_fleet(c).cost_usd_per_year, default=None)
            fam5 = family(default.recommendation.topology)
            fam30 = "-" if best is None else family(best.topology)
            regret = small / large - 1.0
            rows.append((fam5 == fam30, regret, any(Topology(t) not in DISAGGREGATED for t in topos)))
            print(f"{label:<48} {small:>12,.0f} {large:>12,.0f} {regret:>8.2%} family {fam5}/{fam30} "
                  f"{seconds:>7.1f} s {len(default.verification):>3d} verified", flush=True)
    same = sum(r[0] for r in rows)
    within = sum(abs(r[1]) <= 0.01 for r in rows)
    print(f"same family with 30 as with 5 on {same}/{len(rows)} scenarios; cost within 1 % on {within}/{len(rows)}")
    mixed = [r for r in rows if r[2]]  # the target: runs where co-located and disaggregated families compete
    print(f"mixed-topology runs: same family with 30 as with 5 on {sum(r[0] for r in mixed)}/{len(mixed)}; cost within "
          f"1 % on {sum(abs(r[1]) <= 0.01 for r in mixed)}/{len(mixed)} (target: all)")


if __name__ == "__main__":
    main()
