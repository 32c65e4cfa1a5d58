"""Shared click options and parameter types, defined once: the CLI's one vocabulary.

Every option that means the same thing in two commands is declared here (or, for the served model
and the runtime features, in ``model_options`` and ``feature_options`` with ``declare``) and spelled
the same everywhere.  A declaration fixes the spelling, the parameter name the command receives and
the type; a command may set only what differs per command (default, required, help).  Each type
validates at parse time and fails with a one-line message naming the value, the rule and the fix
(click prints it and exits 2).

Canonical spellings (``tests/cli/test_vocabulary.py`` holds the full table and fails on a second
spelling of a concept or a second meaning of a spelling):

* arrival rate ``--lam`` (``--request-rate``, vLLM's spelling, is an alias); ``bench serve`` and
  ``perf calibrate`` keep vLLM's ``--request-rate`` (a number or ``inf``) as their only spelling;
* SLOs ``--slo-ttft``, ``--slo-tpot`` (ms) at ``--percentile``;
* simulation length ``--sim-<what is counted>``: ``--sim-requests``, ``--sim-sessions``,
  ``--sim-flows`` (``bench serve`` keeps vLLM's ``--num-prompts``);
* ``--seed``, ``--gpus`` (GPU types, a list), ``--gpu`` (one GPU), ``--model``,
  ``--tensor-parallel-size``/``-tp``/``--tp`` (and ``-pp``, ``-dp`` alike), ``--weight-dtype``,
  ``--kv-cache-dtype``/``--kv-dtype``, ``--max-model-len``, ``--workers``/``--executor``/``--ray-address``,
  ``--json``/``--csv``/``--html``/``--plots``, ``-q``/``--quiet``.

Old spellings (``DEPRECATED_SPELLINGS``) keep working for one release as hidden options
(``deprecated_spelling``): each prints a one-line note on stderr when the command runs and gives its
value to the canonical option; the old and the new spelling with different values is an error.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from fleetplan.cli.deprecation import deprecation_note
from fleetplan.errors import ConfigError
from fleetplan.exec import Executor, default_workers, make_executor
from fleetplan.perf.speculative import DEEPSEEK_V3_MTP_ACCEPTANCE


@dataclass(frozen=True)
class CliParam:
    """How the CLI spells a library parameter: its flag, and its value in the flag's unit."""

    flag: str
    scale: float = 1.0  # flag value = library value x scale (seconds -> ms: 1e3)
    unit: str = ""  # shown after a scaled value

    def show(self, value: object) -> str:
        """``value`` (the library's) as the flag takes it."""
        if self.scale != 1.0 and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = value * self.scale
        return f"{value!r} {self.unit}" if self.unit else repr(value)


#: Library parameter name (the Python API's spelling) -> the flag of the CLI that sets it.  Library
#: errors name parameters; ``fleetplan.cli.errors.render_error`` respells them with this table.
FLAG_OF_PARAM: dict[str, CliParam] = {
    "rate_per_s": CliParam("--lam"),
    "rates_per_s": CliParam("--lam-range"),
    "start_rate_per_s": CliParam("--start-lam"),
    "slo_ttft_s": CliParam("--slo-ttft", 1e3, "ms"),
    "slo_tpot_s": CliParam("--slo-tpot", 1e3, "ms"),
    "percentile": CliParam("--percentile"),
    "max_gpus": CliParam("--max-gpus"),
    "rho_max": CliParam("--rho-max"),
    "compress_gamma": CliParam("--compress-gamma"),
    "availability": CliParam("--node-avail"),
    "gpus": CliParam("--gpus"),
    "gpu": CliParam("--gpu"),
    "engine_version": CliParam("--engine-version"),
    "topologies": CliParam("--topology"),
    "thresholds_tokens": CliParam("--b-short"),
    "step_time_margin": CliParam("--step-time-margin"),
    "top_k": CliParam("--verify-top"),
    "n_requests": CliParam("--sim-requests"),
    "n_replications": CliParam("--replications"),
    "kv_latency_s": CliParam("--kv-latency-ms", 1e3, "ms"),
    "kv_bandwidth_bytes_per_s": CliParam("--kv-bandwidth-gb-per-s", 1e-9),
    "af_ratios": CliParam("--af-ratios"),
    "pd_ratios": CliParam("--pd-ratios"),
    "n_micro_batches": CliParam("--micro-batches"),
    "min_ce_gain": CliParam("--min-ce-gain"),
    "n_gpus": CliParam("--n-gpus"),
    "window_s": CliParam("--window-s"),
    "max_context_tokens": CliParam("--max-model-len"),
    "max_model_len_tokens": CliParam("--max-model-len"),
    "growth_per_month": CliParam("--growth"),
    "months": CliParam("--months"),
    "lead_time_weeks": CliParam("--lead-time-weeks"),
    "perf_profile": CliParam("--perf-profile"),
    "tensor_parallel_size": CliParam("--tensor-parallel-size"),
    "max_gpus_per_instance": CliParam("--max-gpus-per-instance"),
    "pipeline_parallel_size": CliParam("--pipeline-parallel-size"),
    "data_parallel_size": CliParam("--data-parallel-size"),
    "enable_expert_parallel": CliParam("--enable-expert-parallel"),
    "model": CliParam("--model"),
    "executor": CliParam("--executor"),
    "workers": CliParam("--workers"),
    "ray_address": CliParam("--ray-address"),
    "kv_dtype": CliParam("--kv-cache-dtype"),
    "weight_dtype": CliParam("--weight-dtype"),
    "gpu_memory_utilization": CliParam("--gpu-memory-utilization"),
    "extra_toml": CliParam("--gpu-profiles"),
    "price_overrides": CliParam("--price"),
    "tool_delay": CliParam("--tool-delay-s"),
    "out": CliParam("--out"),
    "input_fraction": CliParam("--input-fraction"),
    "cudagraph_mode": CliParam("--cudagraph-mode"),
    "enable_prefix_caching": CliParam("--enable-prefix-caching"),
    "launch_overhead_ms": CliParam("--launch-overhead-ms"),
    "level": CliParam("--level"),
    "failures": CliParam("--failures"),
    "max_in_flight": CliParam("--max-concurrency"),
    "shared_prefix": CliParam("--shared-prefix"),
    "mtbf_s": CliParam("--mtbf-h", 1 / 3600),
    "mttr_s": CliParam("--mttr-h", 1 / 3600),
    "arrival": CliParam("--arrival"),
    "arrival_cv": CliParam("--cv"),
    "decode_max_num_seqs": CliParam("--decode-max-num-seqs"),
    # bench serve / perf calibrate: vLLM's own names (EngineArgs, BenchServeConfig, DatasetSpec)
    "num_prompts": CliParam("--num-prompts"),
    "request_rate_per_s": CliParam("--request-rate"),
    "burstiness": CliParam("--burstiness"),
    "max_concurrency": CliParam("--max-concurrency"),
    "n_api_servers": CliParam("--api-server-count"),
    "api_server_count": CliParam("--api-server-count"),
    "seed": CliParam("--seed"),
    "percentile_metrics": CliParam("--percentile-metrics"),
    "metric_percentiles": CliParam("--metric-percentiles"),
    "dataset_name": CliParam("--dataset-name"),
    "dataset_path": CliParam("--dataset-path"),
    "random_input_len": CliParam("--random-input-len"),
    "random_output_len": CliParam("--random-output-len"),
    "random_prefix_len": CliParam("--random-prefix-len"),
    "random_range_ratio": CliParam("--random-range-ratio"),
    "sharegpt_output_len": CliParam("--sharegpt-output-len"),
    "custom_output_len": CliParam("--custom-output-len"),
    "instances": CliParam("--instances"),
    "max_num_seqs": CliParam("--max-num-seqs"),
    "chat_template_tokens": CliParam("--chat-template-tokens"),
    "max_num_batched_tokens": CliParam("--max-num-batched-tokens"),
    "max_model_len": CliParam("--max-model-len"),
    "kv_cache_dtype": CliParam("--kv-cache-dtype"),
    "bench_result": CliParam("--bench-result"),
    "candidate": CliParam("--candidate"),  # fleetplan deploy
    "out_dir": CliParam("--out"),
    "force": CliParam("--force"),
    "engine": CliParam("--engine"),
    "timing_source": CliParam("--timing-source"),
    "current_fleet": CliParam("--current-fleet"),
    "metrics": CliParam("--metrics"),
}

#: Where a command spells a parameter its own way (command path without the program name).
FLAG_OF_COMMAND: dict[str, dict[str, CliParam]] = {
    "grid-flex": {"gpu": CliParam("--gpus")},  # grid-flex takes its one GPU type as --gpus
    "bench serve": {"backend": CliParam("--backend")},  # the client's endpoint (vllm bench serve's --backend)
    "perf calibrate": {"backend": CliParam("--backend")},  # the --metrics run's client endpoint
}

#: Fix hint, naming flags, for each reason code of an infeasible plan (``fleetplan.errors.REASONS``).
FIX_OF_REASON: dict[str, str] = {
    "prefill-alone": "raise --slo-ttft, add a lower --b-short so long prompts get their own pool, or use faster GPUs",
    "decode": "raise --slo-tpot, or use faster GPUs (with --model: a larger --tensor-parallel-size)",
    "max-gpus": "raise --max-gpus or lower --lam",
    "unstable": "raise --max-gpus or lower --lam",
    "verification-failed": "raise --verify-top, raise --max-gpus, relax the SLO or lower --lam",
    "prefill-bound": "the percentile is set by prompts' own prefill, not by queueing: raise --slo-ttft, use faster "
                     "GPUs (with --model: a larger --tensor-parallel-size), raise --max-num-batched-tokens, or "
                     "serve a shorter --max-model-len",
    "other": "relax the SLO or widen the candidate space",
}


def cli_param(name: str, command: str | None = None) -> CliParam | None:
    """The CLI spelling of library parameter ``name`` for ``command`` (None: the CLI has none)."""
    for path, table in FLAG_OF_COMMAND.items():
        if command is not None and (command == path or command.startswith(path + " ")) and name in table:
            return table[name]
    return FLAG_OF_PARAM.get(name)

#: Simulated requests (tasks x requests x replications) up to which a local run without --workers stays
#: in this process.  A pool's start-up (its fork server imports the simulator and loads the kernels from
#: numba's cache, 1.1 s on 2 cores) costs more than two workers save below about this much work:
#: ``benchmarks/bench_cli.py`` on a 2-core machine shared with other work (load average ~2), ``optimize``
#: with 5 x 3 replications of 20,000 requests (300,000): 2.6 s in-process, 4.2 s on a pool of 2; of
#: 100,000 (1.5 M): 6.1 s against 6.8 s; of 300,000 (4.5 M): 13.0 s against 9.6 s.
IN_PROCESS_MAX_REQUESTS = 2_000_000


class PositiveFloat(click.ParamType):
    """A finite number > 0."""

    name = "number>0"

    def convert(self, value, param, ctx):  # noqa: D102
        if isinstance(value, float):
            v = value
        else:
            try:
                v = float(value)
            except (TypeError, ValueError):
                self.fail(f"{value!r} is not a number; give a positive number", param, ctx)
        if not math.isfinite(v) or v <= 0:
            self.fail(f"{value!r} must be a finite number > 0", param, ctx)
        return v


class Fraction(click.ParamType):
    """A number in (0, 1]."""

    name = "fraction"

    def __init__(self, open_high: bool = False) -> None:
        self.open_high = open_high

    def convert(self, value, param, ctx):  # noqa: D102
        try:
            v = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number; give a fraction in (0, 1]", param, ctx)
        hi_ok = v < 1 if self.open_high else v <= 1
        if not (math.isfinite(v) and v > 0 and hi_ok):
            bound = "(0, 1)" if self.open_high else "(0, 1]"
            self.fail(f"{value!r} must be in {bound}", param, ctx)
        return v


class IntList(click.ParamType):
    """Comma-separated positive integers, e.g. ``4096,8192``."""

    name = "int,int,..."

    def convert(self, value, param, ctx):  # noqa: D102
        if isinstance(value, tuple):
            return value
        out = []
        for part in str(value).split(","):
            part = part.strip()
            if not part:
                continue
            try:
                v = int(float(part))
            except ValueError:
                self.fail(f"{part!r} is not an integer; give comma-separated token counts", param, ctx)
            if v <= 0 or float(part) != v:
                self.fail(f"{part!r} must be a positive integer", param, ctx)
            out.append(v)
        if not out:
            self.fail("empty list; give at least one value", param, ctx)
        return tuple(out)


class NameList(click.ParamType):
    """Comma-separated names (checked against a registry by the library)."""

    name = "name,name,..."

    def convert(self, value, param, ctx):  # noqa: D102
        if isinstance(value, tuple):
            return value
        out = tuple(p.strip() for p in str(value).split(",") if p.strip())
        if not out:
            self.fail("empty list; give at least one name", param, ctx)
        return out


POSITIVE = PositiveFloat()
FRACTION = Fraction()
INT_LIST = IntList()
NAME_LIST = NameList()

# --- declaring an option once -----------------------------------------------------------------------

class SharedOption(click.Option):
    """An option declared once (``declare``); ``concept`` names what it means, for the vocabulary test."""

    def __init__(self, *args: Any, concept: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.concept = concept


#: What a command may set on a shared option; the spelling, parameter name and type are the declaration's.
PER_COMMAND_ATTRIBUTES = frozenset({"default", "required", "help", "show_default", "metavar"})


class OptionDeclaration:
    """One concept's option: ``@decl`` adds it as declared, ``@decl(default=..., help=...)`` with the
    per-command attributes (``PER_COMMAND_ATTRIBUTES``; ``type`` only to narrow a range's bounds)."""

    def __init__(self, concept: str, decls: tuple[str, ...], attrs: dict[str, Any]) -> None:
        self.concept, self.decls, self.attrs = concept, decls, attrs

    def __call__(self, func: Callable[..., Any] | None = None, /, **overrides: Any):
        if func is not None:
            return self.option()(func)
        return self.option(**overrides)

    def option(self, **overrides: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """The click decorator, with ``overrides`` applied."""
        unknown = sorted(set(overrides) - PER_COMMAND_ATTRIBUTES - {"type"})
        if unknown:
            raise TypeError(f"{self.decls[0]}: {unknown[0]!r} is fixed by the declaration; a command may set "
                            f"{', '.join(sorted(PER_COMMAND_ATTRIBUTES))}")
        if "type" in overrides and type(overrides["type"]) is not type(self.attrs.get("type")):
            raise TypeError(f"{self.decls[0]}: a command may narrow the type's bounds, not change the type")
        attrs = {**self.attrs, **overrides}
        if attrs.get("required") and "default" not in overrides:
            attrs.pop("default", None)  # a default, even None, would satisfy click's required check
        return click.option(*self.decls, cls=SharedOption, concept=self.concept, **attrs)


def declare(concept: str, *decls: str, **attrs: Any) -> OptionDeclaration:
    """Declare the option of ``concept``: ``decls`` are its spellings then its parameter name, ``attrs``
    click's option attributes (type, default, help, ...)."""
    return OptionDeclaration(concept, decls, attrs)


# --- old spellings ----------------------------------------------------------------------------------

#: ``ctx.meta`` key of the deprecation notes printed when the command runs (not when it fails to parse).
NOTES_KEY = "fleetplan.deprecation_notes"

#: Old spelling -> the canonical one; each is a hidden option for one release (``deprecated_spelling``).
DEPRECATED_SPELLINGS = {
    "--rate": "--lam",  # simulate sessions, simulate network
    "--requests": "--sim-requests",  # simulate, simulate pdd, reliability
    "--customers": "--sim-requests",  # validate queueing
    "--n-sessions": "--sim-sessions",  # simulate sessions
    "--flows": "--sim-flows",  # simulate network
    "--max-context": "--max-model-len",  # simulate pdd, simulate sessions, grid-flex
    "--policy": "--path-policy",  # simulate network only (simulate pdd's --policy is its assignment policy)
}


class DeprecatedOption(click.Option):
    """A hidden old spelling of another option of the same command (``canonical``: its parameter name).

    Processed before the other options (eager): its value becomes the canonical option's, as if given
    under the new spelling (same type, same checks); both spellings with different values is a usage
    error (one line, exit 2).  The note is printed when the command runs (``prints_deprecation_notes``).
    """

    def __init__(self, param_decls: tuple[str, ...], *, canonical: str) -> None:
        (old,) = param_decls
        super().__init__([old, f"deprecated_{old.lstrip('-').replace('-', '_')}"], hidden=True, expose_value=False,
                         is_eager=True)
        self.old, self.canonical = old, canonical

    def target(self, command: click.Command) -> click.Option:
        """The canonical option in ``command``."""
        for param in command.params:
            if param.name == self.canonical and isinstance(param, click.Option):
                return param
        raise LookupError(f"{self.old} names {self.canonical!r}, which {command.name} does not have")

    def handle_parse_result(self, ctx: click.Context, opts: Any, args: list[str]) -> tuple[Any, list[str]]:  # noqa: D102
        if self.name in opts and not ctx.resilient_parsing:
            target = self.target(ctx.command)
            new, raw = target.opts[0], opts[self.name]
            try:
                value = target.type_cast_value(ctx, raw)
            except click.BadParameter as exc:
                exc.param = self  # name the spelling the user typed
                raise
            if target.name in opts:
                try:
                    same = target.type_cast_value(ctx, opts[target.name]) == value
                except click.BadParameter:
                    same = False
                if not same:
                    raise click.UsageError(f"{self.old} {raw} and {new} {opts[target.name]} disagree: {self.old} is "
                                           f"the old spelling of {new}; give {new} alone", ctx)
            else:
                opts[target.name] = raw
            ctx.meta.setdefault(NOTES_KEY, []).append(deprecation_note(self.old, new))
        return super().handle_parse_result(ctx, opts, args)


def print_deprecation_notes(ctx: click.Context | None = None) -> None:
    """Print (on stderr) and forget the notes collected while parsing."""
    ctx = ctx or click.get_current_context(silent=True)
    if ctx is not None:
        for note in ctx.meta.pop(NOTES_KEY, ()):
            click.echo(note, err=True)


def prints_deprecation_notes(func: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a command's function so that it first prints the notes of the old spellings it was given."""
    if getattr(func, "prints_deprecation_notes", False):
        return func

    @functools.wraps(func)  # copies __click_params__ (the same list): options added later still count
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        print_deprecation_notes()
        return func(*args, **kwargs)

    wrapper.prints_deprecation_notes = True  # type: ignore[attr-defined]
    return wrapper


def deprecated_spelling(old: str, canonical: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Keep ``old`` working as a hidden alias of the command's option named ``canonical``."""
    if old not in DEPRECATED_SPELLINGS:
        raise ValueError(f"{old} is not in DEPRECATED_SPELLINGS; add it there (with its canonical spelling)")

    def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
        func = click.option(old, cls=DeprecatedOption, canonical=canonical)(func)
        return prints_deprecation_notes(func)

    return decorator


# --- the vocabulary -----------------------------------------------------------------------------------

class RateOrInf(click.ParamType):
    """vLLM's ``--request-rate``: requests/s > 0, or ``inf`` (every request at once)."""

    name = "number|inf"

    def convert(self, value, param, ctx):  # noqa: D102
        if isinstance(value, float):
            return value
        try:
            v = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number; give requests/s or inf", param, ctx)
        if math.isnan(v) or v <= 0:
            self.fail(f"{value!r} must be > 0 requests/s, or inf", param, ctx)
        return v


#: vLLM ``--kv-cache-dtype`` spellings -> fleetplan's storage dtype name ("auto" = the model dtype, bf16 here).
KV_CACHE_DTYPES = {"auto": "bf16", "bf16": "bf16", "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}
WEIGHT_DTYPES = ("bf16", "fp8", "int4", "mxfp4")

# arrivals, SLOs, simulation length, seed
lam_option = declare(
    "arrival rate", "--lam", "--request-rate", "rate_per_s", type=POSITIVE, default=None,
    help="Arrival rate, requests/s (--request-rate: vLLM's spelling).")
request_rate_option = declare(  # bench serve and perf calibrate speak vLLM's client: a number or inf
    "arrival rate", "--request-rate", "request_rate", type=RateOrInf(), default="inf", show_default=True,
    help="Requests/s (vLLM bench serve); inf sends all at once.")
slo_ttft_option = declare("TTFT SLO", "--slo-ttft", "slo_ttft_ms", type=POSITIVE, default=None,
                          help="TTFT SLO, ms.")
slo_tpot_option = declare("TPOT SLO", "--slo-tpot", "slo_tpot_ms", type=POSITIVE, default=None,
                          help="TPOT SLO, ms.")
percentile_option = declare(
    "SLO percentile", "--percentile", "percentile", type=click.FloatRange(0, 100, min_open=True, max_open=True),
    default=99.0, show_default=True, help="Latency percentile the SLOs apply to.")
sim_requests_option = declare("simulated requests", "--sim-requests", "n_requests", type=click.IntRange(min=1),
                              help="Requests to simulate.")
sim_sessions_option = declare("simulated sessions", "--sim-sessions", "n_sessions", type=click.IntRange(min=1),
                              help="Sessions to simulate.")
sim_flows_option = declare("simulated flows", "--sim-flows", "n_flows", type=click.IntRange(min=1),
                           help="Transfers to simulate per replication.")
num_prompts_option = declare(  # vLLM bench's simulation length
    "simulated requests", "--num-prompts", "num_prompts", type=click.IntRange(min=1),
    help="Requests to send (vLLM bench serve).")
max_concurrency_option = declare("client concurrency", "--max-concurrency", "max_concurrency",
                                 type=click.IntRange(min=1), default=None,
                                 help="At most N requests in flight (vLLM bench serve; closed loop).")
client_backend_option = declare(  # vllm bench serve's --backend: the client's endpoint
    "client endpoint", "--backend", "backend", type=click.Choice(["vllm", "openai", "openai-chat"]), default="vllm",
    show_default=True, help="The client's endpoint, as vllm bench serve's --backend: openai-chat "
    "(/v1/chat/completions) prefills the chat template's tokens and streams a role chunk first; vllm and openai are "
    "the completions endpoint.")
chat_template_tokens_option = declare(
    "chat template tokens", "--chat-template-tokens", "chat_template_tokens", type=int, default=None,
    help="With --backend openai-chat: tokens the server's chat template adds around each prompt, prefilled but not "
    "counted by the client (default: the model's count, fleetplan models show).")
enable_expert_parallel_option = declare(
    "expert parallelism", "--enable-expert-parallel", "enable_expert_parallel", is_flag=True, default=False,
    help="Spread routed experts over TP x DP GPUs instead of splitting each expert (vLLM's flag).")
api_server_count_option = declare(
    "API server processes", "--api-server-count", "api_server_count", type=click.IntRange(min=1), default=1,
    show_default=True, help="vLLM's API server processes per instance (api_server_count): a request-rate ceiling "
    "n / E[t_api] and a wait before the engine, for engine profiles with an API server cost (--engine vllm; "
    "SGLang's tokenizer manager is one process, its profile has none).")
seed_option = declare(
    "seed", "--seed", "seed", type=click.IntRange(min=0), default=0, show_default=True,
    help="One seed for every random stream of the run (arrivals, lengths, routing).")
replications_option = declare("replications", "--replications", "replications", type=click.IntRange(min=1),
                              default=1, show_default=True, help="Independent replications.")
horizon_option = declare("simulated time limit", "--horizon", "horizon_s", type=POSITIVE, default=None,
                         help="Stop after this many seconds (default: run until every request finishes).")
warmup_fraction_option = declare(
    "warm-up share", "--warmup-fraction", "warmup_fraction", type=click.FloatRange(0, 1, max_open=True),
    help="Share of the earliest arrivals left out of the statistics.")

# workload and arrival process
workload_option = declare(
    "workload", "--workload", "workload", required=True,
    help="Workload: a bundled name (lmsys, azure_conv, ...), a CDF JSON file or a trace (CSV/JSONL).")
input_fraction_option = declare(
    "input fraction", "--input-fraction", "input_fraction", type=Fraction(open_high=True), default=None,
    help="Share of a request's total tokens that is prompt, for CDFs that give totals only "
    "(default: the workload's own, else 0.8 as documented in the README).")
arrival_option = declare(
    "arrival process", "--arrival", "arrival", type=click.Choice(("poisson", "gamma", "replay")), default="poisson",
    show_default=True, help="Arrival process sized for and simulated: poisson, gamma (gaps with CV --cv) or replay "
    "(the trace workload's own timestamps, rescaled to the rate).")
cv_option = declare(
    "inter-arrival CV", "--cv", "arrival_cv", type=POSITIVE, default=None,
    help="Inter-arrival CV for --arrival gamma (the analytic phase takes Ca2 = CV^2) [default: 1.0].")
ca2_window_option = declare(
    "burstiness window", "--ca2-window-s", "ca2_window_s", type=POSITIVE, default=None,
    help="--arrival replay: time scale of the trace's burstiness (index of dispersion of counts) on the "
    "replay clock, seconds [default: 1].")
ARRIVAL_OPTIONS = (arrival_option, cv_option, ca2_window_option)

# fleets, GPUs, models, engine limits
fleet_option = declare("fleet file", "--fleet", "fleet_path", type=click.Path(dir_okay=False), default=None,
                       help="Fleet TOML: pools, GPUs, instances, context limits (see examples/README.md).")
gpus_option = declare("GPU types", "--gpus", "gpus", type=NAME_LIST, default=None,
                      help="GPU types to consider, e.g. a10g,a100,h100.")
gpu_option = declare("GPU", "--gpu", "gpu", default=None, help="GPU name or alias (fleetplan gpus list).")
instances_option = declare("instances", "--instances", "instances", type=click.IntRange(min=1), default=None,
                           help="Instances of the GPU.")
model_option = declare(
    "model", "--model", "model", default=None,
    help="Model: a bundled name (llama-3.1-70b, qwen3-30b-a3b, ...; fleetplan models list) or a HuggingFace "
    "config.json.")
tensor_parallel_option = declare(
    "tensor-parallel size", "--tensor-parallel-size", "-tp", "--tp", "tensor_parallel_size",
    type=click.IntRange(min=1), default=1, show_default=True, help="GPUs sharing each layer, as in vLLM.")
pipeline_parallel_option = declare(
    "pipeline-parallel size", "--pipeline-parallel-size", "-pp", "--pp", "pipeline_parallel_size",
    type=click.IntRange(min=1), default=1, show_default=True,
    help="Pipeline stages, each holding a contiguous slice of layers.")
data_parallel_option = declare(
    "data-parallel size", "--data-parallel-size", "-dp", "--dp", "data_parallel_size", type=click.IntRange(min=1),
    default=1, show_default=True,
    help="Attention data-parallel ranks per replica, each with its own batch and KV cache.")
expert_parallel_size_option = declare(
    "expert-parallel size", "--ep", "--ep-size", "--expert-parallel-size", "ep", type=click.IntRange(min=1), default=1,
    show_default=True, help="Expert parallel size (MoE; must divide tp*dp; SGLang --ep-size).")
enable_dp_attention_option = declare(
    "DP attention", "--enable-dp-attention", "enable_dp_attention", is_flag=True, default=False,
    help="SGLang (--engine sglang): attention in --dp ranks of tp/dp GPUs, experts over all --tp GPUs.")
nnodes_option = declare("nodes per instance", "--nnodes", "nnodes", type=click.IntRange(min=1), default=None,
                        help="Nodes one instance spans (checked against the GPUs per node of the catalog).")
weight_dtype_option = declare("weight dtype", "--weight-dtype", "weight_dtype", type=click.Choice(WEIGHT_DTYPES),
                              default="bf16", show_default=True,
                              help="Weight storage type (fp8/int4/mxfp4 = quantized checkpoint).")
kv_cache_dtype_option = declare(
    "KV-cache dtype", "--kv-cache-dtype", "--kv-dtype", "kv_cache_dtype", type=click.Choice(list(KV_CACHE_DTYPES)),
    default="auto", show_default=True, help="KV-cache storage type, vLLM spelling (auto = bf16).")
max_model_len_option = declare(
    "context limit", "--max-model-len", "max_model_len", type=click.IntRange(min=1), default=None,
    help="Longest prompt + output served (tokens), vLLM --max-model-len.")
max_num_seqs_option = declare("max_num_seqs", "--max-num-seqs", "max_num_seqs", type=click.IntRange(min=1),
                              default=None, help="Sequences per step (vLLM --max-num-seqs).")
max_num_batched_tokens_option = declare(
    "max_num_batched_tokens", "--max-num-batched-tokens", "max_num_batched_tokens", type=click.IntRange(min=1),
    default=None, help="Tokens per step (vLLM --max-num-batched-tokens).")
gpu_memory_utilization_option = declare(
    "GPU memory utilisation", "--gpu-memory-utilization", "gpu_memory_utilization", type=FRACTION, default=0.9,
    show_default=True, help="Fraction of HBM the engine may use, as in vLLM.")
#: ``--block-size``: vLLM's default 16 (``fleetplan.sim.spec.DEFAULT_BLOCK_SIZE_TOKENS``).
block_size_option = declare(
    "KV block size", "--block-size", "block_size", type=click.IntRange(min=1), default=16, show_default=True,
    help="Tokens per KV-cache block (vLLM --block-size).")
#: ``--mtp-acceptance``: conditional acceptance of each MTP draft (perf explain; optimize/whatif with --mtp).
mtp_acceptance_option = declare(
    "MTP acceptance", "--mtp-acceptance", "mtp_acceptance", type=FRACTION, default=DEEPSEEK_V3_MTP_ACCEPTANCE,
    show_default=True, help="Conditional acceptance of each MTP draft position (DeepSeek-V3 Technical Report, "
    "arXiv:2412.19437 sec. 5.4.3: 0.85-0.90).")
#: ``--timing-source``: which source times the steps (``fleetplan.perf.measured.source.TimingChoice``).
timing_source_option = declare(
    "timing source", "--timing-source", "timing_source", type=click.Choice(["auto", "measured", "roofline"]),
    default=None, help="Step timing: measured = aiconfigurator-core's measured operator tables only (the extra "
    "fleetplan[aiconfigurator]; a pool they do not cover is an error), roofline = the roofline + engine profile, "
    "auto = the tables where they cover the pool, else the roofline [default: $FLEETPLAN_TIMING_SOURCE, else auto].")
engine_option = declare("engine profile", "--engine", "engine", default="vllm", show_default=True,
                        help="Engine profile (vllm|sglang|trtllm): efficiencies and per-step overheads.")


class EngineVersionType(click.ParamType):
    """An engine release in the engine's own numbering (``fleetplan.perf.engine_version.release_of``)."""

    name = "release"

    def convert(self, value, param, ctx):
        from fleetplan.perf.engine_version import release_of

        try:
            release_of(value)
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)
        return str(value).strip()


#: ``--engine-version``: the release whose engine-profile values time the steps (``EngineProfile.options_for``).
engine_version_option = declare(
    "engine version", "--engine-version", "engine_version", type=EngineVersionType(), default=None,
    help="The --engine's release as the engine numbers it (vLLM 0.10.1, SGLang 0.5.6.post1): the profile values "
    "measured on the newest profiled release at or before it time the steps (e.g. vLLM's MI300X weight streaming "
    "of its ROCm builds) [default: the profile's newest profiled release, shown in the output].")
#: engine profile -> (engine's name, its flag for sequences per step, its flag for tokens per step, whether a
#: data-parallel-attention instance takes them per DP rank): the recommendation's engine limits in the
#: engine's own launch flags.  vLLM: docs.vllm.ai engine arguments (--max-num-seqs, --max-num-batched-tokens,
#: read per DP rank); SGLang: docs.sglang.ai server arguments (--max-running-requests, --chunked-prefill-size;
#: both for the whole server: sgl-project/sglang python/sglang/srt/server_args.py divides them by dp_size under
#: --enable-dp-attention); TensorRT-LLM: nvidia.github.io/TensorRT-LLM commands/trtllm-serve.html
#: (--max_batch_size, --max_num_tokens); LMDeploy: `lmdeploy serve api_server -h` (--max-batch-size,
#: --max-prefill-token-num).  TensorRT-LLM and LMDeploy are given per rank as vLLM (not checked).
ENGINE_LIMIT_FLAGS = {
    "vllm": ("vLLM", "--max-num-seqs", "--max-num-batched-tokens", True),
    "sglang": ("SGLang", "--max-running-requests", "--chunked-prefill-size", False),
    "trtllm": ("TensorRT-LLM", "--max_batch_size", "--max_num_tokens", True),
    "lmdeploy": ("LMDeploy", "--max-batch-size", "--max-prefill-token-num", True),
}
perf_profile_option = declare(
    "perf profile", "--perf-profile", "perf_profile", type=click.Path(dir_okay=False), default=None,
    help="Calibrated step-time profile (from `fleetplan perf calibrate`).")
ttft_model_option = declare(
    "TTFT model", "--ttft-model", "ttft_model", type=click.Choice(["quantile", "mean-prefill"]), default="quantile",
    show_default=True, help="quantile = percentile of wait + prefill; mean-prefill = wait percentile + mean prefill "
    "(fleet-sim).")

# KV-transfer fabric
link_gbps_option = declare("host link rate", "--link-gbps", "link_gbps", type=POSITIVE, default=100.0,
                           show_default=True, help="Fabric host link rate, Gb/s.")
spine_gbps_option = declare("spine link rate", "--spine-gbps", "spine_gbps", type=POSITIVE, default=100.0,
                            show_default=True, help="Fabric leaf-spine link rate, Gb/s.")
path_policy_option = declare("path policy", "--path-policy", "path_policy", type=NAME_LIST, default=None,
                             help="Fabric path choice: ecmp (hash) or reservation (least-loaded spine).")

# outputs
json_option = declare("JSON export", "--json", "json_path", type=click.Path(dir_okay=False), default=None,
                      help="Write the run as JSON.")
csv_option = declare("CSV export", "--csv", "csv_path", type=click.Path(dir_okay=False), default=None,
                     help="Write the rows as CSV.")
html_option = declare("HTML report", "--html", "html_path", type=click.Path(dir_okay=False), default=None,
                      help="Write an HTML report.")
plots_option = declare("plots", "--plots", "plots_dir", type=click.Path(file_okay=False), default=None,
                       help="Write the plots as PNG and SVG into this directory.")
deploy_option = declare("deployment folder", "--deploy", "deploy_dir", type=click.Path(file_okay=False),
                        default=None, help="Write the recommended fleet as a deployment folder (fleet.toml, engine "
                        "commands, Kubernetes manifests, router configuration, README.md), as `fleetplan deploy` does.")
requests_csv_option = declare("per-request CSV", "--requests-csv", "requests_csv", type=click.Path(dir_okay=False),
                              default=None, help="Write one row per request (latencies in ms) to this CSV.")
out_option = declare("output file", "--out", "out_path", type=click.Path(dir_okay=False), required=True,
                     help="File to write.")
quiet_option = declare("quiet", "--quiet", "-q", "quiet", is_flag=True, help="No progress bars (for scripts).")
FORMATS = ("table", "csv", "json", "markdown")
format_option = declare(
    "table format", "--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
    help="table: aligned columns (never truncated when piped); csv, json (one object per row) or markdown.")


def arrival_spec(arrival: str, arrival_cv: float | None, ca2_window_s: float | None):
    """The library's ``ArrivalSpec`` from the arrival options (options that nothing would read are refused)."""
    from fleetplan.plan.arrivals import ArrivalSpec

    if arrival_cv is not None and arrival != "gamma":
        raise ConfigError(f"--cv applies to --arrival gamma only (got --arrival {arrival}); add --arrival gamma or "
                          "drop --cv")
    if ca2_window_s is not None and arrival != "replay":
        raise ConfigError(f"--ca2-window-s applies to --arrival replay only (got --arrival {arrival}); add "
                          "--arrival replay or drop --ca2-window-s")
    kw = {} if ca2_window_s is None else {"ca2_window_s": ca2_window_s}
    return ArrivalSpec(arrival, 1.0 if arrival_cv is None else arrival_cv, **kw)


class PriceOverride(click.ParamType):
    """``NAME=USD_PER_HOUR``, e.g. ``h100=2.49`` (the GPU name is checked by the catalog)."""

    name = "GPU=USD"

    def convert(self, value, param, ctx):  # noqa: D102
        if isinstance(value, tuple):
            return value
        gpu, sep, price = str(value).partition("=")
        if not sep or not gpu.strip():
            self.fail(f"{value!r} is not GPU=USD_PER_HOUR; write e.g. h100=2.49", param, ctx)
        try:
            usd = float(price)
        except ValueError:
            self.fail(f"price {price!r} in {value!r} is not a number; write e.g. h100=2.49", param, ctx)
        if not math.isfinite(usd) or usd <= 0:
            self.fail(f"price {price!r} in {value!r} must be a finite USD per GPU-hour > 0", param, ctx)
        return gpu.strip(), usd


gpu_profiles_option = declare(
    "GPU profiles file", "--gpu-profiles", "gpu_profiles", default=None,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="User TOML that overrides fields of bundled GPUs or adds GPUs ([gpu.<NAME>] tables).",
)
price_option = declare(
    "price override", "--price", "prices", multiple=True, type=PriceOverride(),
    help="Override a GPU's price per GPU-hour, e.g. --price h100=2.49 (repeatable).",
)


ray_address_option = declare(
    "Ray address", "--ray-address", "ray_address", default=None, metavar="auto|HOST:PORT",
    help="Ray cluster for --executor ray: 'auto' (default) joins the cluster this machine belongs to "
    "(`ray start --head`), HOST:PORT a remote head node.")
workers_option = declare(
    "workers", "--workers", "workers", type=click.IntRange(min=1), default=None,
    help="Worker processes for --executor local (1 runs in this process; default: in this process when the "
    f"command simulates at most {IN_PROCESS_MAX_REQUESTS:,} requests in all, where a pool's start-up costs more "
    "than it saves (optimize: on a thread per core), else one per core).")
executor_option = declare(
    "executor", "--executor", "executor", default="local", show_default=True, metavar="local|ray",
    help="Where independent simulations run: local (a process pool on this machine) or ray "
    "(a Ray cluster; needs pip install 'fleetplan[ray]'). Results are identical either way.")


def executor_options(func):
    """``--executor local|ray``, ``--workers N``, ``--ray-address auto|HOST:PORT`` for commands that
    run independent simulations; the command receives ``executor``, ``workers``, ``ray_address``
    and builds the executor with ``executor_from_options``."""
    return executor_option(workers_option(ray_address_option(func)))


def local_workers(executor: str, workers: int | None, simulated_requests: int | None) -> int | None:
    """``--workers`` as given, or 1 (in this process) for a local run of at most
    ``IN_PROCESS_MAX_REQUESTS`` simulated requests when it was not given (``None``: one per core)."""
    if workers is not None or executor != "local" or simulated_requests is None:
        return workers
    return 1 if simulated_requests <= IN_PROCESS_MAX_REQUESTS else None


@contextlib.contextmanager
def executor_from_options(executor: str, workers: int | None, ray_address: str | None,
                          simulated_requests: int | None = None, threads: bool = False) -> Iterator[Executor]:
    """The executor chosen by ``executor_options``, closed (workers stopped) when the block ends::

        with executor_from_options(executor, workers, ray_address, simulated_requests=n) as run_tasks:
            result = optimize(request, verify, progress, map_fn=run_tasks)

    ``simulated_requests`` (tasks x requests x replications the command will simulate, when it can
    tell) lets a local run without ``--workers`` stay in this process (``local_workers``), on one
    thread per core when ``threads`` (the command's tasks are thread-safe simulator runs:
    ``fleetplan.exec.threads``); results are identical either way.  An unknown name, Ray not
    installed, or an option of the other executor is a ``FleetplanError`` (one line, exit 2 via
    ``fleetplan.cli.errors``).
    """
    chosen = local_workers(executor, workers, simulated_requests)
    if threads and workers is None and chosen == 1 and default_workers() > 1:
        from fleetplan.exec.threads import ThreadExecutor

        built: Executor = ThreadExecutor(default_workers())
    else:
        built = make_executor(executor, workers=chosen, ray_address=ray_address)
    try:
        yield built
    finally:
        built.close()
