"""One vocabulary: every command's options, walked recursively, against one table of spellings.

A concept (the arrival rate, a TTFT SLO, the simulation length, ...) has one canonical spelling plus
the aliases ``VOCABULARY`` declares, in every command that has it; a spelling means one thing (one
parameter name, one type) in every command.  The exceptions are listed with their reason:
``VLLM_SPELLINGS`` (``bench serve`` speaks vLLM's flags) and ``SECOND_MEANINGS``.  An option that is
not declared once in ``fleetplan.cli.options`` (``SharedOption``) but whose parameter name or help
marks it as one of the concepts (``MARKERS``) fails: declare it there.  Old spellings are hidden
``DeprecatedOption``s for one release (``DEPRECATED``); old command names are hidden aliases.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from fleetplan.cli.groups import DefaultCommandGroup
from fleetplan.cli.main import DEPRECATED_COMMANDS, cli
from fleetplan.cli.options import DEPRECATED_SPELLINGS, NOTES_KEY, DeprecatedOption, SharedOption
from tests.cli.cli_check import one_line_error, run

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

#: concept -> (canonical spelling, declared aliases).  Every SharedOption's concept is here.
VOCABULARY: dict[str, tuple[str, tuple[str, ...]]] = {
    # the concepts of the issue
    "arrival rate": ("--lam", ("--request-rate",)),
    "TTFT SLO": ("--slo-ttft", ()),
    "TPOT SLO": ("--slo-tpot", ()),
    "SLO percentile": ("--percentile", ()),
    "simulated requests": ("--sim-requests", ()),
    "simulated sessions": ("--sim-sessions", ()),
    "simulated flows": ("--sim-flows", ()),
    "seed": ("--seed", ()),
    "GPU types": ("--gpus", ()),
    "GPU": ("--gpu", ()),
    "model": ("--model", ()),
    "tensor-parallel size": ("--tensor-parallel-size", ("-tp", "--tp")),
    "pipeline-parallel size": ("--pipeline-parallel-size", ("-pp", "--pp")),
    "data-parallel size": ("--data-parallel-size", ("-dp", "--dp")),
    "largest serving instance": ("--max-gpus-per-instance", ()),
    "weight dtype": ("--weight-dtype", ()),
    "KV-cache dtype": ("--kv-cache-dtype", ("--kv-dtype",)),
    "context limit": ("--max-model-len", ()),
    "allow a long context limit": ("--allow-long-max-model-len", ()),
    "executor": ("--executor", ()),
    "workers": ("--workers", ()),
    "Ray address": ("--ray-address", ()),
    "JSON export": ("--json", ()),
    "CSV export": ("--csv", ()),
    "HTML report": ("--html", ()),
    "plots": ("--plots", ()),
    "per-request CSV": ("--requests-csv", ()),
    "output file": ("--out", ()),
    "deployment folder": ("--deploy", ()),
    "quiet": ("--quiet", ("-q",)),
    "table format": ("--format", ()),
    # further options that two commands share
    "workload": ("--workload", ()),
    "input fraction": ("--input-fraction", ()),
    "arrival process": ("--arrival", ()),
    "inter-arrival CV": ("--cv", ()),
    "burstiness window": ("--ca2-window-s", ()),
    "fleet file": ("--fleet", ()),
    "instances": ("--instances", ()),
    "client endpoint": ("--backend", ()),
    "chat template tokens": ("--chat-template-tokens", ()),
    "replications": ("--replications", ()),
    "simulated time limit": ("--horizon", ()),
    "warm-up share": ("--warmup-fraction", ()),
    "GPU profiles file": ("--gpu-profiles", ()),
    "price override": ("--price", ()),
    "perf profile": ("--perf-profile", ()),
    "engine profile": ("--engine", ()),
    "engine version": ("--engine-version", ()),
    "timing source": ("--timing-source", ()),
    "MTP acceptance": ("--mtp-acceptance", ()),
    "expert-parallel size": ("--ep", ("--ep-size", "--expert-parallel-size")),
    "DP attention": ("--enable-dp-attention", ()),
    "nodes per instance": ("--nnodes", ()),
    "TTFT model": ("--ttft-model", ()),
    "max_num_seqs": ("--max-num-seqs", ()),
    "max_num_batched_tokens": ("--max-num-batched-tokens", ()),
    "GPU memory utilisation": ("--gpu-memory-utilization", ()),
    "KV block size": ("--block-size", ()),
    "client concurrency": ("--max-concurrency", ()),
    "API server processes": ("--api-server-count", ()),
    "expert parallelism": ("--enable-expert-parallel", ()),
    "host link rate": ("--link-gbps", ()),
    "spine link rate": ("--spine-gbps", ()),
    "path policy": ("--path-policy", ()),
    "MTBF": ("--mtbf-h", ()),
    "MTTR": ("--mttr-h", ()),
    "repair-time distribution": ("--repair", ()),
    "CUDA graph mode": ("--cudagraph-mode", ()),
    "CUDA graph capture sizes": ("--cudagraph-capture-sizes", ()),
    "speculative decoding": ("--speculative-config", ()),
    "prefix caching": ("--enable-prefix-caching", ()),
    "prefix-cache entries": ("--prefix-cache-entries", ()),
    "scheduler policy": ("--scheduler-policy", ()),
    "scheduler parameters": ("--scheduler-config", ()),
    "launch overhead": ("--launch-overhead-ms", ()),
}

#: ``bench serve`` mirrors ``vllm bench serve`` (and ``vllm serve``'s engine flags), and ``perf calibrate``
#: reads the settings of such a run: where vLLM spells a concept differently, these commands keep vLLM's
#: spelling, and only they.  (command, concept) -> the spellings there.
VLLM_SPELLINGS: dict[tuple[str, str], tuple[str, ...]] = {
    # a number or "inf" (every request at once), vLLM's type; fleetplan's --lam is a number > 0
    ("bench serve", "arrival rate"): ("--request-rate",),
    ("perf calibrate", "arrival rate"): ("--request-rate",),
    # vLLM counts a benchmark in prompts
    ("bench serve", "simulated requests"): ("--num-prompts",),
    ("perf calibrate", "simulated requests"): ("--num-prompts",),
    # vLLM names quantization methods (fp8, awq, gptq), -q for short (vllm serve)
    ("bench serve", "weight dtype"): ("--quantization", "-q"),
}

#: A spelling that means something else in some commands: flag -> (those commands, why).
SECOND_MEANINGS: dict[str, tuple[frozenset[str], str]] = {
    "--request-rate": (frozenset({"bench serve", "perf calibrate"}),
                       "vLLM's client flag (requests/s or inf); elsewhere an alias of --lam"),
    "-q": (frozenset({"bench serve"}), "vllm serve's short flag of --quantization; elsewhere --quiet"),
    "--enable-prefix-caching": (frozenset({"bench serve"}), "one instance: vLLM's on/off switch "
                                "(--no-enable-prefix-caching); elsewhere repeatable per pool ([POOL])"),
    "--speculative-config": (frozenset({"bench serve"}), "one instance: vLLM's single JSON; elsewhere [POOL=]JSON"),
    "--cudagraph-capture-sizes": (frozenset({"bench serve"}), "one instance: vLLM's single list; elsewhere "
                                  "[POOL=]N,N,..."),
    "--policy": (frozenset({"simulate network"}), "the old spelling of --path-policy there, until the next "
                 "release; simulate pdd's --policy is its decode-assignment policy"),
}

#: Old spelling -> canonical spelling (hidden for one release; options.DEPRECATED_SPELLINGS must agree).
DEPRECATED = {
    "--rate": "--lam",
    "--requests": "--sim-requests",
    "--customers": "--sim-requests",
    "--n-sessions": "--sim-sessions",
    "--flows": "--sim-flows",
    "--max-context": "--max-model-len",
    "--policy": "--path-policy",
}

#: concept -> (parameter-name pattern, help pattern): an option matching either means that concept.
MARKERS: dict[str, tuple[str, str | None]] = {
    "arrival rate": (r"^(lam|rate|rate_per_s|request_rate|arrival_rate(_per_s)?)$", r"(?i)\barrival rate\b"),
    "TTFT SLO": (r"^slo_ttft", r"\bTTFT (SLO|target)\b"),
    "TPOT SLO": (r"^slo_tpot", r"\bTPOT (SLO|target)\b"),
    "SLO percentile": (r"^percentile$", None),
    "simulated requests": (r"^(n_requests|sim_requests|requests|n_customers|customers|num_prompts)$",
                           r"(?i)requests to simulate|requests per simulat"),
    "simulated sessions": (r"^(n_sessions|sim_sessions)$", None),
    "simulated flows": (r"^(n_flows|flows|sim_flows)$", None),
    "seed": (r"^(seed|random_seed)$", None),
    "GPU types": (r"^(gpus|gpu_names|gpu_types)$", None),
    "GPU": (r"^(gpu|gpu_name)$", None),
    "model": (r"^(model|model_name)$", None),
    "tensor-parallel size": (r"^(tp|tensor_parallel_size)$", None),
    "pipeline-parallel size": (r"^(pp|pipeline_parallel_size)$", None),
    "data-parallel size": (r"^(dp|data_parallel_size)$", None),
    "expert parallelism": (r"^enable_expert_parallel$", None),
    "weight dtype": (r"^(weight_dtype|quantization)$", None),
    "KV-cache dtype": (r"^kv_(cache_)?dtype$", None),
    "context limit": (r"^(max_model_len|max_context(_tokens)?)$", None),
    "executor": (r"^executor$", None),
    "workers": (r"^(workers|n_workers)$", None),
    "JSON export": (r"^json(_path)?$", None),
    "CSV export": (r"^csv(_path)?$", None),
    "HTML report": (r"^html(_path)?$", None),
    "plots": (r"^plots(_dir)?$", None),
    "quiet": (r"^quiet$", None),
}


def _commands() -> list[tuple[str, click.Command]]:
    """(path, command) of every visible command below ``fleetplan``, groups' default commands included."""
    ctx = click.Context(cli, info_name="fleetplan")
    out: list[tuple[str, click.Command]] = []

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(command, DefaultCommandGroup):
            out.append((" ".join(path), command.default_command()))
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, (*path, name))
        else:
            out.append((" ".join(path), command))

    walk(cli, ())
    return out


COMMANDS = _commands()
OPTIONS = [(path, p) for path, command in COMMANDS for p in command.params if isinstance(p, click.Option)]


def _visible(option: click.Option) -> tuple[str, ...]:
    return tuple(sorted(option.opts + option.secondary_opts))


def _marked(option: click.Option) -> list[str]:
    """The concepts whose markers ``option`` matches."""
    return [concept for concept, (name, help_) in MARKERS.items()
            if re.search(name, option.name or "") or (help_ and re.search(help_, option.help or ""))]


def _meaning(option: click.Option) -> tuple:
    """What a spelling means: parameter name, type, multiple, flag (and concept, when declared)."""
    return (getattr(option, "concept", None), option.name, type(option.type).__name__, option.multiple,
            option.is_flag)


def test_the_walk_sees_every_command_and_the_default_simulate():
    paths = {path for path, _ in COMMANDS}
    assert {"simulate", "simulate pdd", "simulate sessions", "simulate network", "optimize", "whatif",
            "grid-flex", "reliability", "bench serve", "perf calibrate", "validate queueing"} <= paths
    assert not {"simulate-pdd", "simulate-sessions", "network simulate"} & paths  # hidden aliases


def test_deprecated_table_matches_the_options_module():
    assert DEPRECATED == DEPRECATED_SPELLINGS


def test_one_concept_one_spelling():
    """Each declared option is spelled as the table says (vLLM's spellings only where allowed), and no
    option outside the options module means one of the concepts."""
    problems = []
    for path, option in OPTIONS:
        if isinstance(option, DeprecatedOption):
            continue
        if isinstance(option, SharedOption):
            if option.concept not in VOCABULARY:
                problems.append(f"{path}: {option.opts[0]} declares concept {option.concept!r}, missing from "
                                "VOCABULARY (add it with its spelling)")
                continue
            canonical, aliases = VOCABULARY[option.concept]
            allowed = VLLM_SPELLINGS.get((path, option.concept)) or (canonical, *aliases)
            if _visible(option) != tuple(sorted(allowed)):
                problems.append(f"{path}: {option.concept} spelled {', '.join(_visible(option))}; "
                                f"the vocabulary says {', '.join(allowed)}")
            continue
        for concept in _marked(option):
            spelled = VLLM_SPELLINGS.get((path, concept))
            if spelled is None or _visible(option) != tuple(sorted(spelled)):
                problems.append(f"{path}: {'/'.join(_visible(option))} (parameter {option.name}) means "
                                f"{concept}: declare it with fleetplan.cli.options, spelled "
                                f"{VOCABULARY[concept][0]}")
    assert not problems, "\n".join(problems)


def test_one_spelling_one_meaning():
    """A spelling has one parameter name and type in every command (barring ``SECOND_MEANINGS``)."""
    meanings: dict[str, dict[tuple, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path, option in OPTIONS:
        meaning = ("deprecated", option.canonical) if isinstance(option, DeprecatedOption) else _meaning(option)
        for flag in option.opts + option.secondary_opts:
            meanings[flag][meaning].add(path)
    problems = []
    for flag, by_meaning in meanings.items():
        others, why = SECOND_MEANINGS.get(flag, (frozenset(), ""))
        for inside in (False, True):  # the commands of the second meaning, then the rest, each on its own
            seen = {m: {p for p in paths if (p in others) == inside} for m, paths in by_meaning.items()}
            seen = {m: paths for m, paths in seen.items() if paths}
            if len(seen) > 1:
                problems.append(f"{flag} means {len(seen)} things: " + "; ".join(
                    f"{m} in {', '.join(sorted(paths))}" for m, paths in seen.items()))
        if flag in SECOND_MEANINGS and len(by_meaning) < 2:
            problems.append(f"{flag} has one meaning now: drop it from SECOND_MEANINGS ({why})")
    assert not problems, "\n".join(problems)


def test_an_option_of_two_commands_is_declared_once():
    """Outside the options module, a spelling that two commands share comes from one declaration
    (same help, default and type), as the plan options of optimize and whatif do."""
    infos: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path, option in OPTIONS:
        if isinstance(option, (SharedOption, DeprecatedOption)):
            continue
        info = option.to_info_dict()
        info.pop("name", None)
        for flag in option.opts:
            infos[flag][repr(sorted(info.items(), key=str))].append(path)
    problems = [f"{flag}: declared {len(decls)} ways ({'; '.join(', '.join(p) for p in decls.values())}); "
                "declare it once in fleetplan.cli.options" for flag, decls in infos.items()
                if len(decls) > 1 and flag not in SECOND_MEANINGS]
    assert not problems, "\n".join(problems)


def test_old_spellings_are_hidden_aliases_of_an_option_of_the_same_command():
    problems = []
    for path, option in OPTIONS:
        if not isinstance(option, DeprecatedOption):
            continue
        (old,) = option.opts
        target = option.target(dict(COMMANDS)[path])
        if not option.hidden or old not in DEPRECATED or target.opts[0] != DEPRECATED[old]:
            problems.append(f"{path}: {old} -> {target.opts[0]}")
    assert not problems, "\n".join(problems)
    live = {flag for _, o in OPTIONS if not isinstance(o, DeprecatedOption) for flag in o.opts + o.secondary_opts}
    assert live & set(DEPRECATED) <= set(SECOND_MEANINGS), "an old spelling is still a live one somewhere"


def test_every_arrival_rate_takes_request_rate_as_an_alias_of_lam():
    with_lam = [(path, o) for path, o in OPTIONS if "--lam" in o.opts]
    assert {path for path, _ in with_lam} >= {"simulate", "simulate pdd", "simulate sessions", "simulate network",
                                               "optimize", "grid-flex", "reliability"}
    for _, option in with_lam:
        assert option.opts[:2] == ["--lam", "--request-rate"] and option.name == "rate_per_s"


# --- behaviour ---------------------------------------------------------------------------------------

NETWORK = ("--sim-flows", "60", "--lam", "3")


def _quick_network(*args: str):
    return run("simulate", "network", *args)


def test_request_rate_gives_the_same_run_as_lam():
    lam = _quick_network("--sim-flows", "60", "--lam", "3")
    alias = _quick_network("--sim-flows", "60", "--request-rate", "3")
    assert lam.exit_code == alias.exit_code == 0, (lam.output, alias.output)
    assert lam.stdout == alias.stdout and "at 3/s" in lam.stdout and not alias.stderr


@pytest.mark.parametrize(("old", "new"), [
    (("--flows", "60", "--rate", "3"), NETWORK),
    (("--sim-flows", "60", "--rate", "3", "--policy", "ecmp"), (*NETWORK, "--path-policy", "ecmp")),
])
def test_old_option_spellings_still_work_with_a_note(old, new):
    res_old, res_new = _quick_network(*old), _quick_network(*new)
    assert res_old.exit_code == res_new.exit_code == 0, res_old.output
    assert res_old.stdout == res_new.stdout and not res_new.stderr
    notes = res_old.stderr.splitlines()
    flags = [a for a in old if a in DEPRECATED]
    assert len(notes) == len(flags)
    for flag, note in zip(flags, notes, strict=True):
        assert note == f"note: {flag} is deprecated; use {DEPRECATED[flag]} (the old option goes away in the next " \
                       "release)"


def test_old_and_new_spelling_with_different_values_is_one_line_exit_2():
    one_line_error(_quick_network("--sim-flows", "60", "--flows", "70"), "--flows 70", "--sim-flows 60", "disagree")
    same = _quick_network("--sim-flows", "60", "--flows", "60", "--lam", "3")
    assert same.exit_code == 0 and "deprecated" in same.stderr


def test_a_bad_value_under_an_old_spelling_names_that_spelling():
    one_line_error(_quick_network("--rate", "-1"), "--rate", "must be a finite number > 0")


#: (command, old spelling, value, other arguments the command requires to parse)
OLD_SPELLINGS = [
    ("simulate", "--requests", "700", ("--fleet", "f.toml", "--workload", "lmsys")),
    ("simulate pdd", "--requests", "700", ("--workload", "lmsys")),
    ("simulate pdd", "--max-context", "4096", ("--workload", "lmsys")),
    ("simulate sessions", "--rate", "0.5", ()),
    ("simulate sessions", "--n-sessions", "30", ()),
    ("simulate sessions", "--max-context", "4096", ()),
    ("simulate network", "--rate", "3", ()),
    ("simulate network", "--flows", "60", ()),
    ("simulate network", "--policy", "ecmp", ()),
    ("reliability", "--requests", "700", ("--fleet", "f.toml", "--workload", "lmsys", "--slo-ttft", "500")),
    ("grid-flex", "--max-context", "4096", ("--workload", "lmsys", "--lam", "5", "--gpus", "h100")),
    ("validate queueing", "--customers", "700", ()),
]


def test_every_old_spelling_is_in_the_table():
    declared = {(path, option.opts[0]) for path, option in OPTIONS if isinstance(option, DeprecatedOption)}
    assert declared == {(path, old) for path, old, _, _ in OLD_SPELLINGS}


@pytest.mark.parametrize(("path", "old", "value", "required"), OLD_SPELLINGS)
def test_every_old_spelling_gives_its_value_to_the_canonical_option(path, old, value, required):
    command = dict(COMMANDS)[path]
    (option,) = [o for o in command.params if isinstance(o, DeprecatedOption) and o.opts == [old]]
    target = option.target(command)
    ctx = command.make_context(path, [*required, old, value])
    assert ctx.params[target.name] == target.type_cast_value(ctx, value)
    assert ctx.meta[NOTES_KEY] == [f"note: {old} is deprecated; use {target.opts[0]} (the old option goes away in "
                                   "the next release)"]
    helped = run(*path.split(), "--help")
    assert helped.exit_code == 0 and f"{target.opts[0]} " in helped.stdout and f"{old} " not in helped.stdout


@pytest.mark.parametrize(("old", "new", "args"), [
    (("network", "simulate"), ("simulate", "network"), NETWORK),
    (("simulate-pdd",), ("simulate", "pdd"), ("--workload", "lmsys", "--lam", "5", "--sim-requests", "200")),
])
def test_old_command_names_still_work_with_a_note(old, new, args):
    assert DEPRECATED_COMMANDS[old] == new
    res_old, res_new = run(*old, *args), run(*new, *args)
    assert res_old.exit_code == res_new.exit_code == 0, res_old.output
    assert res_old.stdout == res_new.stdout and not res_new.stderr
    assert res_old.stderr.splitlines() == [f"note: `fleetplan {' '.join(old)}` is deprecated; use "
                                           f"`fleetplan {' '.join(new)}` (the old name goes away in the next release)"]


@pytest.mark.parametrize("old", sorted(DEPRECATED_COMMANDS))
def test_old_command_names_are_hidden_but_answer_help(old):
    top = run("--help")
    assert f"  {old[0]} " not in top.stdout
    res = run(*old, "--help")
    assert res.exit_code == 0 and "Deprecated: use `fleetplan " in res.stdout


def test_old_sessions_name_runs_the_new_command_after_its_note():
    res = run("simulate-sessions", "--sim-sessions", "10")  # no --lam: simulate sessions' own one-line error
    assert res.exit_code == 2
    note, error = res.stderr.splitlines()
    assert note.startswith("note: `fleetplan simulate-sessions` is deprecated; use `fleetplan simulate sessions`")
    assert error == "error: --lam (sessions/s) is required for a session workload; give e.g. --lam 0.5"


def test_simulate_without_a_command_runs_the_fleet_simulation_unchanged(tmp_path):
    from fleetplan.cli.errors import FleetplanGroup
    from fleetplan.cli.simulate_cmd import simulate_cmd

    args = ["--fleet", str(EXAMPLES / "homogeneous_h100.toml"), "--workload", "lmsys", "--lam", "20",
            "--sim-requests", "300", "--seed", "3"]
    via_group = run("simulate", *args, "--json", str(tmp_path / "a.json"))

    @click.group(cls=FleetplanGroup)
    def bare() -> None:
        """The simulate command alone, as it was registered before the group."""

    bare.add_command(simulate_cmd, "simulate")
    direct = CliRunner().invoke(bare, ["simulate", *args, "--json", str(tmp_path / "b.json")])
    assert via_group.exit_code == direct.exit_code == 0, via_group.output
    assert via_group.stdout.replace("a.json", "b.json") == direct.stdout
    assert (tmp_path / "a.json").read_text() == (tmp_path / "b.json").read_text()


def test_simulate_alone_still_asks_for_the_fleet():
    one_line_error(run("simulate"), "Missing option '--fleet'")
    one_line_error(run("simulate", "--workload", "lmsys"), "Missing option '--fleet'")
    one_line_error(run("simulate", "pdq"), "No such command 'pdq'")


def test_simulate_help_lists_the_default_options_and_the_commands():
    res = run("simulate", "--help")
    assert res.exit_code == 0
    out = res.stdout
    assert "Usage: cli simulate [OPTIONS]\n   or: cli simulate COMMAND [ARGS]...\n" in out  # runner: prog "cli"
    assert "--fleet" in out and "Commands:" in out and "Examples:" in out
    for name in ("pdd", "sessions", "network"):
        assert f"  {name} " in out
    default_help = run("simulate", "--fleet", "x.toml", "--help")
    assert default_help.exit_code == 0 and default_help.stdout.startswith("Usage: cli simulate [OPTIONS]\n")


def test_a_list_where_a_command_takes_one_is_one_line_exit_2():
    """``--gpus`` and ``--path-policy`` are lists everywhere; grid-flex and simulate pdd take one item."""
    one_line_error(run("grid-flex", "--workload", "lmsys", "--lam", "5", "--gpus", "h100,a100", "--no-sim"),
                   "--gpus h100,a100", "names 2 GPU types", "give one")
    one_line_error(run("simulate", "pdd", "--workload", "lmsys", "--fabric", "1x4x1", "--path-policy",
                       "ecmp,reservation"), "ecmp,reservation", "simulate pdd runs one")
