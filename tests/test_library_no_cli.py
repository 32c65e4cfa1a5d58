"""The library knows nothing of its command line: no CLI flag spellings outside ``fleetplan/cli``.

The library names parameters as its Python API spells them (``rate_per_s``, ``slo_ttft_s``) and
errors carry them as structured fields (``fleetplan.errors``); ``fleetplan.cli.errors.render_error``
respells them with the flags of ``fleetplan.cli.options.FLAG_OF_PARAM``.  This test reads every
string literal and docstring of every module outside ``fleetplan/cli`` (``ast``, so comments and
code are not text) and fails naming ``file:line`` for each ``--flag`` it finds.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import fleetplan

PACKAGE = Path(fleetplan.__file__).resolve().parent
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")

#: Data-parallel-attention flags of vLLM and SGLang (``fleetplan.deploy.engines``).
DP_FLAGS = ("--data-parallel-size", "--dp-size", "--enable-dp-attention", "--data-parallel-size-local",
            "--data-parallel-address", "--data-parallel-rpc-port", "--data-parallel-start-rank", "--headless")

#: (module path under fleetplan/, flag) -> why the library must spell it.  Keep it short.
ALLOWED: dict[tuple[str, str], str] = {
    ("exec/ray_exec.py", "--head"): "`ray start --head`: the command the user runs to start a Ray cluster",
    **{("perf/parallelism.py", flag): "Parallelism.flags() writes the vLLM command line (vllm serve's flags) "
                                      "of a placement, which the user passes to vLLM"
       for flag in ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size",
                    "--enable-expert-parallel")},
    **{("plan/deployment.py", flag): "reads the vLLM parallelism flags a calibrated profile records"
       for flag in ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size",
                    "--enable-expert-parallel")},
    # fleetplan deploy writes engine launch lines: vLLM's, SGLang's and Ray's own flags (tests/deploy checks each
    # against the engine's argument list), and a README whose re-check is a `fleetplan simulate` command line
    # (tests/deploy parses it with the CLI)
    **{("deploy/engines.py", flag): "engine launch lines (vLLM, SGLang, Ray spellings)" for flag in (
        "--pp-size", "--tensor-parallel-size", "--tp-size", "--pipeline-parallel-size", "--enable-expert-parallel",
        "--ep-size", "--max-num-seqs", "--max-running-requests", "--chunked-prefill-size", "--max-num-batched-tokens",
        "--max-prefill-tokens", "--context-length", "--max-model-len", "--max-total-tokens",
        "--num-gpu-blocks-override",
        "--block-size", "--quantization", "--kv-cache-dtype", "--gpu-memory-utilization", "--mem-fraction-static",
        "--disable-radix-cache", "--no-enable-prefix-caching", "--enable-prefix-caching", "--speculative-config",
        "--speculative-algorithm", "--speculative-num-steps", "--speculative-eagle-topk",
        "--speculative-num-draft-tokens", "--address", "--head", "--block", "--distributed-executor-backend",
        "--dist-init-addr", "--nnodes", "--node-rank", "--host", "--port", "--served-model-name", "--model-path",
        *DP_FLAGS)},
    ("deploy/kubernetes.py", "--node-rank"): "SGLang's flag, given LWS's worker index in a manifest",
    **{("deploy/kubernetes.py", flag): "vLLM's data-parallel worker flags, its first rank from LWS's worker index"
       for flag in ("--headless", "--data-parallel-start-rank")},
    # the README's data-parallel note explains each engine's limits in its own flags; AFD_NOTE names SGLang's flag
    **{("deploy/readme.py", flag): "the deployment README's data-parallel note (engine flags) and AFD note"
       for flag in (*DP_FLAGS, "--enable-expert-parallel", "--max-num-batched-tokens", "--max-num-seqs",
                    "--num-gpu-blocks-override", "--chunked-prefill-size", "--ep-size", "--max-prefill-tokens",
                    "--max-running-requests", "--max-total-tokens", "--tp-size", "--afd-role")},
    **{("deploy/readme.py", flag): "the deployment README's MTP note (engine flags, the re-plan's acceptance)"
       for flag in ("--speculative-config", "--speculative-algorithm", "--speculative-num-steps",
                    "--speculative-eagle-topk", "--mtp-acceptance")},
    **{("deploy/dynamo.py", flag): "Dynamo's vLLM worker arguments (vLLM's flags and Dynamo's --is-prefill-worker)"
       for flag in ("--is-prefill-worker", "--max-num-seqs", "--host", "--port", "--model")},
    **{("deploy/readme.py", flag): "the deployment README's re-check command (fleetplan simulate) and kubectl line"
       for flag in ("--fleet", "--workload", "--lam", "--replications", "--sim-requests", "--seed", "--slo-ttft",
                    "--slo-tpot", "--input-fraction", "--arrival", "--cv", "--model", "--weight-dtype",
                    "--kv-cache-dtype", "--max-model-len", "--perf-profile", "--from-literal", "--binding",
                    "--latency-ms", "--policy", "--bandwidth-gb-per-s", "--prefill-max-num-batched-tokens")},
}

#: Docstrings in modules other helpers own this round (runtime features, PDD, kernels: only their
#: error messages could change here).  Reword them (vLLM's ``speculative_config``, "a served model")
#: and empty this list once that work has landed.
PENDING: dict[tuple[str, str], str] = {}  # places still to reword (none)


def _flags(tree: ast.AST):
    """(line, flag) of every flag spelling in a string constant, f-string parts and docstrings included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for m in FLAG.finditer(node.value):
                yield node.lineno + node.value.count("\n", 0, m.start()), m.group()


def library_flags() -> list[tuple[str, int, str]]:
    """(module, line, flag) of every CLI flag spelling in a string of a library module."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("cli/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, flag in _flags(tree):
            if (rel, flag) not in ALLOWED and (rel, flag) not in PENDING:
                found.append((rel, line, flag))
    return sorted(set(found))


def test_library_spells_no_cli_flags() -> None:
    found = library_flags()
    assert not found, "CLI flag spellings in the library (name the API parameter in backticks instead, and " \
        "map it to its flag in fleetplan.cli.options.FLAG_OF_PARAM):\n" + "\n".join(
            f"fleetplan/{rel}:{line}: {flag}" for rel, line, flag in found)


def test_allow_list_is_live() -> None:
    """Every allow-list entry still matches something, so a fixed spelling leaves the list."""
    seen = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        seen |= {(rel, flag) for _, flag in _flags(tree)}
    stale = (set(ALLOWED) | set(PENDING)) - seen
    assert not stale, sorted(stale)


def test_every_mapped_parameter_has_a_flag_the_cli_declares() -> None:
    """The CLI's table maps parameter names to flags some command really has."""
    from fleetplan.cli.options import FLAG_OF_COMMAND, FLAG_OF_PARAM

    cli_text = "\n".join(p.read_text(encoding="utf-8") for p in (PACKAGE / "cli").rglob("*.py"))
    declared = set(re.findall(r"[\"'](--[a-z0-9-]+)[\"'/]", cli_text))
    spelt = {c.flag for c in FLAG_OF_PARAM.values()} | {c.flag for t in FLAG_OF_COMMAND.values() for c in t.values()}
    assert not spelt - declared, sorted(spelt - declared)
