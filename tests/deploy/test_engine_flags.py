"""Every engine command `fleetplan deploy` writes parses against the engine's own argument list.

The flag lists (``data/vllm_flags.json``, ``data/sglang_flags.json``) were read from vLLM's
``vllm/engine/arg_utils.py`` + ``vllm/entrypoints/openai/cli_args.py`` and SGLang's
``python/sglang/srt/server_args.py`` at the commits they name: a flag either takes a value or is a
switch.  A command fails when it spells a flag the engine does not have, gives a switch a value or a
valued flag none.  Checked on the launch lines, the shell scripts and the manifests' container commands.
"""

from __future__ import annotations

import json
import shlex

import pytest

from fleetplan.deploy import Engine, deployment_files
from fleetplan.deploy.engines import ENGINE_SOURCES, PoolServe, launch_lines
from tests.deploy.conftest import DATA, WHICH, recommended_doc

yaml = pytest.importorskip("yaml", reason="dev extra: pip install -e '.[dev]'")

FLAGS = {e: json.loads((DATA / f"{e.value}_flags.json").read_text())["flags"] for e in Engine}
#: argv prefix of an engine command -> (engine, positionals after the prefix)
PREFIXES = {("vllm", "serve"): (Engine.VLLM, 1), ("python", "-m", "sglang.launch_server"): (Engine.SGLANG, 0)}


def engine_problems(argv: list[str]) -> list[str]:
    """Unknown flags, valued flags without a value, switches with one (empty: the command parses)."""
    found = [(prefix, spec) for prefix, spec in PREFIXES.items() if tuple(argv[:len(prefix)]) == prefix]
    assert found, f"not an engine command: {argv}"
    prefix, (engine, positionals) = found[0]
    flags, rest, problems = FLAGS[engine], argv[len(prefix) + positionals:], []
    i = 0
    while i < len(rest):
        word = rest[i]
        if word not in flags:
            problems.append(f"{engine.value}: unknown flag or stray value {word!r}")
            i += 1
            continue
        if flags[word]:
            if i + 1 >= len(rest) or rest[i + 1].startswith("--"):
                problems.append(f"{engine.value}: {word} needs a value")
            i += 2
        else:
            i += 1
    return problems


def commands_of(files: dict[str, str]) -> list[list[str]]:
    """Every engine argv in the scripts and manifests of a deployment folder."""
    out = []
    for rel, text in files.items():
        if rel.endswith(".sh"):
            for line in text.splitlines():
                for part in line.split(" && "):
                    words = shlex.split(part.split(") ", 1)[-1].removesuffix(" ;;")) if part.strip() else []
                    if words[:2] == ["vllm", "serve"] or words[:3] == ["python", "-m", "sglang.launch_server"]:
                        out.append(words)
        if rel.endswith(".yaml") and rel.startswith("kubernetes/"):
            for doc in yaml.safe_load_all(text):
                if not doc or doc["kind"] not in ("Deployment", "LeaderWorkerSet"):
                    continue
                spec = doc["spec"]
                templates = [spec["template"]] if doc["kind"] == "Deployment" else [
                    spec["leaderWorkerTemplate"]["leaderTemplate"], spec["leaderWorkerTemplate"]["workerTemplate"]]
                for t in templates:
                    for c in t["spec"]["containers"]:
                        cmd = c["command"]
                        parts = [shlex.split(p.removeprefix("exec ")) for p in cmd[2].split(" && ")] \
                            if cmd[:2] == ["sh", "-c"] else [cmd]
                        out += [p for p in parts if p[:1] in (["vllm"], ["python"])]
    return out


@pytest.mark.parametrize("engine", list(Engine))
@pytest.mark.parametrize("which", WHICH)
def test_every_written_command_parses(engine, which, small_run, fp8_run, dp_run):
    doc = recommended_doc(which, small_run, fp8_run, dp_run)
    _, files = deployment_files(doc, engine=engine)
    commands = commands_of(files)
    pools = len(doc["recommendation"]["deployment"]["pools"])
    assert len(commands) >= 2 * pools  # one per script and one per manifest at least
    problems = [p for argv in commands for p in engine_problems(argv)]
    assert problems == [], problems


def test_the_checker_catches_bad_commands():
    assert engine_problems(["vllm", "serve", "m", "--max-num-seq", "4"])  # misspelt
    assert engine_problems(["vllm", "serve", "m", "--max-num-seqs"])  # value missing
    assert engine_problems(["vllm", "serve", "m", "--enforce-eager", "1"])  # a switch given a value
    assert engine_problems(["python", "-m", "sglang.launch_server", "--max-num-seqs", "4"])  # vLLM's name
    assert not engine_problems(["python", "-m", "sglang.launch_server", "--max-running-requests", "4"])


def _serve(**kw) -> PoolServe:
    base = dict(pool="p", served_model_name="m", tensor_parallel_size=1, pipeline_parallel_size=1,
                expert_parallel=False, max_num_seqs=64, max_num_batched_tokens=2048, max_model_len_tokens=8192,
                kv_blocks=1000, block_size_tokens=16, gpus_per_node=8)
    return PoolServe(**{**base, **kw})


def test_verified_limits_in_each_engines_spelling():
    s = _serve(tensor_parallel_size=4, expert_parallel=True, weight_fp8=True, kv_cache_fp8=True)
    (vllm,) = launch_lines(Engine.VLLM, s)
    v = vllm.argv
    assert v[v.index("--max-num-seqs") + 1] == "64" and v[v.index("--max-num-batched-tokens") + 1] == "2048"
    assert v[v.index("--max-model-len") + 1] == "8192" and v[v.index("--num-gpu-blocks-override") + 1] == "1000"
    assert v[v.index("--tensor-parallel-size") + 1] == "4" and "--enable-expert-parallel" in v
    assert v[v.index("--quantization") + 1] == "fp8" and v[v.index("--kv-cache-dtype") + 1] == "fp8"
    assert "--no-enable-prefix-caching" in v  # simulated without a prefix cache; vLLM V1 turns it on by default
    (sgl,) = launch_lines(Engine.SGLANG, s)
    g = sgl.argv
    assert g[g.index("--max-running-requests") + 1] == "64" and g[g.index("--chunked-prefill-size") + 1] == "2048"
    assert g[g.index("--context-length") + 1] == "8192" and g[g.index("--max-total-tokens") + 1] == str(1000 * 16)
    assert g[g.index("--tp-size") + 1] == "4" and g[g.index("--ep-size") + 1] == "4"
    assert g[g.index("--kv-cache-dtype") + 1] == "fp8_e4m3" and "--disable-radix-cache" in g


def test_an_instance_wider_than_a_node_gets_one_line_per_node():
    s = _serve(tensor_parallel_size=8, pipeline_parallel_size=2)
    assert (s.n_nodes, s.gpus_per_pod) == (2, 8)
    head, worker = launch_lines(Engine.VLLM, s)
    assert head.argv[:3] == ("ray", "start", "--head") and "--distributed-executor-backend" in head.then
    assert worker.argv[:2] == ("ray", "start") and any(a.startswith("--address={leader}") for a in worker.argv)
    lines = launch_lines(Engine.SGLANG, s)
    assert [ln.argv[ln.argv.index("--node-rank") + 1] for ln in lines] == ["0", "1"]
    assert all(ln.argv[ln.argv.index("--nnodes") + 1] == "2" for ln in lines)


def test_sources_are_cited():
    for engine in Engine:
        data = json.loads((DATA / f"{engine.value}_flags.json").read_text())
        assert all("@" in s for s in data["sources"]) and ENGINE_SOURCES[engine]["repository"] in data["sources"][0]
