"""``fleetplan simulate sessions``: multi-round agent sessions or RL-rollout bursts on a fleet."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import click
from rich.table import Table

from fleetplan.cli.feature_options import (
    FEATURE_OPTION_NAMES,
    feature_table,
    features_on,
    runtime_feature_options,
    serving_fleet,
)
from fleetplan.cli.first_run import Kernel, announce_compile
from fleetplan.cli.model_options import SIM_MODEL_OPTION_NAMES, context_limit, sim_model_options
from fleetplan.cli.options import (
    POSITIVE,
    csv_option,
    deprecated_spelling,
    fleet_option,
    gpu_option,
    horizon_option,
    instances_option,
    json_option,
    lam_option,
    max_model_len_option,
    seed_option,
    sim_sessions_option,
    slo_tpot_option,
    slo_ttft_option,
    warmup_fraction_option,
)
from fleetplan.cli.tables import make_console, ms_cell
from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.sim.defaults import DEFAULT_WARMUP_FRACTION
from fleetplan.sim.fleet_toml import FleetFile, PoolEntry, read_fleet_toml
from fleetplan.sim.session_metrics import TAIL_QUANTILE, SessionMetrics
from fleetplan.sim.spec import DEFAULT_COMPRESS_GAMMA, PoolRouter
from fleetplan.units import ms_to_s
from fleetplan.workload.rollouts import LENGTH_KINDS, OutputLengths, RlRollout
from fleetplan.workload.session_io import load_session_workload
from fleetplan.workload.session_table import DELAY_KINDS, ToolDelay

if TYPE_CHECKING:  # the simulator loads when the command runs, not for its --help
    from fleetplan.sim.sessions import SessionResult

DEFAULT_N_SESSIONS = 2_000
NONNEGATIVE = click.FloatRange(min=0.0)

EXAMPLES = """\b
Examples:
  fleetplan simulate sessions --fleet examples/two_pool_a100.toml --sessions frontier_agentic \\
      --mix heavy_tail=0.3,short=0.7 --lam 0.5 --sim-sessions 500 --tool-delay-s 1.0
  fleetplan simulate sessions --gpu h100 --instances 8 --sessions my_agents.json --lam 2 --json out.json \\
      --enable-prefix-caching --scheduler-policy h2q_br --scheduler-config '{"h2q_long_round_tokens": 4096}'
  fleetplan simulate sessions --gpu h100 --instances 4 --model llama-3.1-70b -tp 4 --lam 0.5 \\
      --tool-delay-s 1 --cudagraph-mode full_decode_only --enable-prefix-caching
  fleetplan simulate sessions --gpu h100 --instances 8 --rl-rollout 4000 --rl-prompt-tokens 1024 \\
      --rl-output lognormal --rl-output-scale 2000 --rl-output-shape 1.2 --rl-output-cap 32768
"""


def _fleet(fleet_path: str | None, gpu: str | None, instances: int | None, max_model_len: int | None,
           largest_context: int, limit: int | None) -> FleetFile:
    """The fleet file, or the one ``--gpu`` pool (context: ``--max-model-len``, else the largest session's
    rounded up to a power of two, at most the served model's ``limit``)."""
    if (fleet_path is None) == (gpu is None):
        raise ConfigError("give the fleet as --fleet FILE.toml or as --gpu NAME --instances N, not both or neither")
    catalog = load_catalog()
    if fleet_path is not None:
        if instances is not None or max_model_len is not None:
            raise ConfigError("--instances and --max-model-len go with --gpu; the --fleet file sets its own pools")
        return read_fleet_toml(fleet_path, catalog)
    if instances is None:
        raise ConfigError("--gpu needs --instances N (instances of one GPU each in a single pool)")
    context = max_model_len if max_model_len is not None else 1 << max(0, math.ceil(math.log2(largest_context)))
    if limit is not None:
        context = min(context, limit)
    entry = PoolEntry("pool", catalog.get(gpu), instances, context)
    return FleetFile("--gpu", (entry,), PoolRouter.LENGTH, DEFAULT_COMPRESS_GAMMA, ())


def _delay(delay_s: float | None, kind: str, sigma: float | None) -> ToolDelay | None:
    if delay_s is None:
        if sigma is not None or kind != "fixed":
            raise ConfigError("--tool-delay-kind and --tool-delay-sigma need --tool-delay-s (the mean delay)")
        return None
    return ToolDelay(kind, delay_s, 0.0 if sigma is None else sigma)


def _metrics_table(result: SessionResult) -> Table:
    m = result.metrics
    table = Table(title=f"sessions ({m.n_finished:,} of {m.n_measured:,} measured finished; ms)")
    for col in ("metric", "mean", "P50", "P95", "P99"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    rows = [("aTTFT (arrival -> answer's first token)", m.attft), ("aTPOT (answer round)", m.atpot)]
    rows += [(f"round {r.round_number} TTFT (release -> first token)", r.ttft) for r in m.round_ttft]
    for label, s in rows:
        table.add_row(label, ms_cell(s.mean_s), ms_cell(s.p50_s), ms_cell(s.p95_s), ms_cell(s.p99_s))
    return table


def _unfinished_line(m: SessionMetrics, horizon_s: float | None) -> str:
    """Why measured sessions did not finish (they count as infinite latency)."""
    parts = []
    if m.n_rejected:
        parts.append(f"{m.n_rejected:,} with a rejected round (its prompt + output does not fit any pool's "
                     "context limit; its later rounds never start: raise --max-model-len or give pools with longer "
                     "contexts)")
    rest = m.n_measured - m.n_finished - m.n_rejected
    if rest:
        cut = f"--horizon {horizon_s:g} s" if horizon_s is not None else "the end of the run"
        parts.append(f"{rest:,} not done by {cut}")
    return f"unfinished sessions (infinite latency): {'; '.join(parts)}"


def _burst_table(result: SessionResult) -> Table:
    table = Table(title="RL bursts")
    for col in ("burst", "trajectories", "finished", "release s", "makespan s", f"t{round(100 * TAIL_QUANTILE)} s",
                "tail share"):
        table.add_column(col, justify="right")
    for b in result.metrics.bursts:
        share = "-" if math.isnan(b.tail_share) else f"{100 * b.tail_share:.1f}%"
        table.add_row(str(b.burst), f"{b.n_trajectories:,}", f"{b.n_finished:,}", f"{b.release_s:,.1f}",
                      f"{b.makespan_s:,.2f}", f"{b.t90_s:,.2f}", share)
    return table


@click.command("sessions", epilog=EXAMPLES)
@fleet_option
@gpu_option(help="Instead of --fleet: one pool of this catalog GPU (with --instances).")
@instances_option(help="Instances in the --gpu pool.")
@max_model_len_option(help="Context limit (tokens) of the --gpu pool, vLLM --max-model-len (default: the largest "
                      "session context, rounded up to a power of two).")
@deprecated_spelling("--max-context", "max_model_len")
@click.option("--sessions", "sessions", default="frontier_agentic", show_default=True,
              help="Session workload: a bundled name or a JSON file (format: docs/sessions.md).")
@click.option("--mix", default=None, help="Template mix, e.g. heavy_tail=0.3,short=0.7 (left-out templates get 0).")
@click.option("--tool-delay-s", type=NONNEGATIVE, default=None,
              help="Mean tool-call delay between rounds, s (required when the workload gives none).")
@click.option("--tool-delay-kind", type=click.Choice(DELAY_KINDS), default="fixed", show_default=True)
@click.option("--tool-delay-sigma", type=POSITIVE, default=None, help="Log-space sd of a lognormal delay.")
@lam_option(help="Session arrival rate, sessions/s (--request-rate: vLLM's spelling).")
@deprecated_spelling("--rate", "rate_per_s")
@sim_sessions_option(default=DEFAULT_N_SESSIONS, show_default=True)
@deprecated_spelling("--n-sessions", "n_sessions")
@click.option("--rl-rollout", "rl_n", type=click.IntRange(min=1), default=None,
              help="Instead of --sessions: N trajectories released together per burst.")
@click.option("--rl-bursts", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--rl-interval-s", type=NONNEGATIVE, default=0.0, show_default=True, help="Seconds between bursts.")
@click.option("--rl-prompt-tokens", type=click.IntRange(min=1), default=None, help="Prompt of every trajectory.")
@click.option("--rl-output", "rl_output_kind", type=click.Choice(LENGTH_KINDS), default="lognormal",
              show_default=True, help="Trajectory output length law.")
@click.option("--rl-output-scale", type=POSITIVE, default=None, help="Median (lognormal) or minimum (pareto), tokens.")
@click.option("--rl-output-shape", type=POSITIVE, default=None, help="Log-space sd (lognormal) or tail index alpha.")
@click.option("--rl-output-cap", type=click.IntRange(min=1), default=None, help="Longest trajectory output, tokens.")
@click.option("--rl-rounds", type=click.IntRange(min=1), default=1, show_default=True, help="Rounds per trajectory.")
@click.option("--rl-observation-tokens", type=click.IntRange(min=0), default=0, show_default=True,
              help="New prompt tokens (the environment's reply) of each round after the first.")
@horizon_option(help="Stop after this many seconds (default: run until every session finishes).")
@warmup_fraction_option(help=f"Share of the earliest sessions left out (default {DEFAULT_WARMUP_FRACTION:g}; 0 for "
                        "rollouts).")
@seed_option
@slo_ttft_option(help="Per-round TTFT SLO, ms.")
@slo_tpot_option(help="Per-round TPOT SLO, ms.")
@json_option(help="Write session metrics and the per-round summary as JSON (inf/NaN as null).")
@csv_option(help="Write one row per round (session, release, first token, done; seconds).")
@sim_model_options
@runtime_feature_options
def simulate_sessions_cmd(fleet_path, gpu, instances, max_model_len, sessions, mix, tool_delay_s, tool_delay_kind,
                          tool_delay_sigma, rate_per_s, n_sessions, rl_n, rl_bursts, rl_interval_s, rl_prompt_tokens,
                          rl_output_kind, rl_output_scale, rl_output_shape, rl_output_cap, rl_rounds,
                          rl_observation_tokens, horizon_s,
                          warmup_fraction, seed, slo_ttft_ms, slo_tpot_ms, json_path, csv_path, **opts) -> None:
    """Simulate multi-round sessions (agents, reasoning) or RL-rollout bursts; print session metrics.

    aTTFT runs from session arrival to the first token of the final (answer-visible) round;
    hidden planning throughput counts new prompt + output tokens of the non-final rounds per second.
    Unfinished sessions count as infinite latency.  With --model every pool serves that model (step
    time from the operator-level predictor, KV blocks from the model's KV bytes per token, CUDA-graph
    capture memory taken from them), as in `fleetplan simulate`.
    """
    from fleetplan.sim.sessions import session_table, simulate_sessions  # the simulator: when the command runs

    model_opts = {key: opts.pop(key) for key in SIM_MODEL_OPTION_NAMES}
    feature_opts = {key: opts.pop(key) for key in FEATURE_OPTION_NAMES}
    limit = context_limit(model_opts["model"], max_model_len, model_opts["allow_long_max_model_len"])
    delay = _delay(tool_delay_s, tool_delay_kind, tool_delay_sigma)
    if rl_n is not None:
        given = {"--rl-prompt-tokens": rl_prompt_tokens, "--rl-output-scale": rl_output_scale,
                 "--rl-output-shape": rl_output_shape, "--rl-output-cap": rl_output_cap}
        missing = [flag for flag, value in given.items() if value is None]
        if missing:
            raise ConfigError(f"--rl-rollout needs {missing[0]} (no default is assumed for trajectory lengths); "
                              "give it")
        source = RlRollout(
            n_trajectories=rl_n, n_bursts=rl_bursts, burst_interval_s=rl_interval_s, prompt_tokens=rl_prompt_tokens,
            output=OutputLengths(rl_output_kind, rl_output_scale, rl_output_shape, rl_output_cap),
            rounds_per_trajectory=rl_rounds, observation_tokens=rl_observation_tokens, tool_delay=delay,
        )
        what = f"RL rollout: {rl_bursts} burst(s) of {rl_n:,} trajectories"
    else:
        if rate_per_s is None:
            raise ConfigError("--lam (sessions/s) is required for a session workload; give e.g. --lam 0.5")
        source = load_session_workload(sessions, mix=mix, tool_delay=delay)
        mix_text = ", ".join(f"{n}={s:.3g}" for n, s in zip(source.template_names, source.shares, strict=True))
        what = f"sessions {source.name} ({mix_text}), {n_sessions:,} at {rate_per_s:g}/s"
    table = session_table(source, rate_per_s, n_sessions, seed)
    prompt, _ = table.context_tokens()
    fleet = _fleet(fleet_path, gpu, instances, max_model_len, int((prompt + table.output_tokens).max()), limit)
    spec, step_note = serving_fleet(fleet, model_opts, feature_opts, max_model_len)
    wf = warmup_fraction if warmup_fraction is not None else (0.0 if rl_n is not None else DEFAULT_WARMUP_FRACTION)
    announce_compile([Kernel.FEATURES])  # sessions carry RequestExtras: always the feature kernel
    result = simulate_sessions(
        spec, table, seed=seed, warmup_fraction=wf, horizon_s=horizon_s,
        slo_ttft_s=None if slo_ttft_ms is None else ms_to_s(slo_ttft_ms),
        slo_tpot_s=None if slo_tpot_ms is None else ms_to_s(slo_tpot_ms),
    )
    con = make_console(soft_wrap=True, highlight=False)
    con.print(f"fleet: {len(spec.pools)} pool(s), {spec.n_instances} instances, pool router {spec.pool_router.value}")
    con.print(f"{what}; {table.n_rows:,} rounds, seed {seed}, first {100 * wf:g}% of sessions excluded as warm-up")
    con.print(step_note)
    con.print(_metrics_table(result))
    m = result.metrics
    if m.n_finished < m.n_measured:
        con.print(_unfinished_line(m, horizon_s))
    if not table.is_final.all():
        con.print(f"hidden planning throughput: {m.hidden_tokens_per_s:,.1f} tokens/s (new prompt + output of "
                  f"non-final rounds over {m.hidden_span_s:,.1f} s; output only "
                  f"{m.hidden_output_tokens_per_s:,.1f} tokens/s)")
    if features_on(spec):
        con.print(feature_table(spec, result.sim))
    if m.bursts:
        con.print(_burst_table(result))
        con.print(f"tail share = (makespan - t{round(100 * TAIL_QUANTILE)}) / makespan: the fraction of a burst's "
                  f"makespan after {100 * TAIL_QUANTILE:g}% of its trajectories finished.")
    if json_path or csv_path:
        from fleetplan.report.sim_export import write_rounds_csv, write_sessions_json
    if json_path:
        write_sessions_json(result, json_path)
        con.print(f"wrote {json_path}")
    if csv_path:
        write_rounds_csv(result, csv_path)
        con.print(f"wrote {csv_path} ({table.n_rows:,} rows)")


simulate_sessions_command = simulate_sessions_cmd
