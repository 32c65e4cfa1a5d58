"""Engine launch commands for one pool, in the engine's own spelling (vLLM or SGLang).

Every flag states a limit the simulator verified, so the engine runs the fleet that was checked:

=====================================  ===============================  =====================================
verified (fleet file)                  vLLM (``vllm serve MODEL``)      SGLang (``python -m sglang.launch_server``)
=====================================  ===============================  =====================================
tensor / pipeline parallel size        ``--tensor-parallel-size``,      ``--tp-size``, ``--pp-size``
                                       ``--pipeline-parallel-size``
attention data-parallel ranks D        ``--data-parallel-size``         ``--dp-size``,
                                                                        ``--enable-dp-attention``
                                                                        (``--tp-size`` = TP x D)
expert parallel over the TP (x D)      ``--enable-expert-parallel``     ``--ep-size`` (= TP x D)
group
``max_num_seqs``                       ``--max-num-seqs``               ``--max-running-requests``
``max_num_batched_tokens`` (per step)  ``--max-num-batched-tokens``     ``--chunked-prefill-size`` and
                                                                        ``--max-prefill-tokens``
``max_context_tokens``                 ``--max-model-len``              ``--context-length``
``kv_blocks`` x ``block_size``         ``--num-gpu-blocks-override``,   ``--max-total-tokens`` (tokens)
                                       ``--block-size``
weights / KV cache FP8                 ``--quantization fp8``,          ``--quantization fp8``,
                                       ``--kv-cache-dtype fp8``         ``--kv-cache-dtype fp8_e4m3``
memory share of the KV budget          ``--gpu-memory-utilization``     ``--mem-fraction-static``
no prefix cache (simulated without)    ``--no-enable-prefix-caching``   ``--disable-radix-cache``
MTP speculative decoding, k drafts     ``--speculative-config``         ``--speculative-algorithm EAGLE``,
                                       ``{"method": M,``                ``--speculative-num-steps k``,
                                       ``"num_speculative_tokens": k}`` ``--speculative-eagle-topk 1``,
                                                                        ``--speculative-num-draft-tokens k+1``
other speculative decoding             ``--speculative-config JSON``    (not exported: one-line error)
=====================================  ===============================  =====================================

**MTP** (a pool the planner ran with the model's own multi-token-prediction heads, ``plan.placement``'s
"mtp1" variants; the fleet file's ``speculative_config`` method ``mtp``/``deepseek_mtp``), in each engine's
spelling at the version ``ENGINE_SOURCES`` names (``Speculation``):

* vLLM: ``method`` is the MTP method of the model's HuggingFace ``model_type`` (``VLLM_MTP_METHODS``:
  ``deepseek_mtp`` for DeepSeek-V3/R1/V3.2, ``glm4_moe_mtp`` for GLM-4.5/4.6, ``qwen3_next_mtp``, ``mimo_mtp``,
  ``ernie_mtp``).  vLLM consolidated these into one ``"mtp"`` method (vllm-project/vllm#25232, merged the
  week of the v0.11.0 release, 2025-09/10); the per-model names stay accepted after it as deprecated aliases
  rewritten to ``mtp`` (``MTPModelTypes`` in ``vllm/config/speculative.py`` still lists them), and before it
  they were the only spelling, so the per-model name starts on v0.11 whichever side of that change the
  image is.  The acceptance rates are the simulator's assumption, never an engine setting.
* SGLang: DeepSeek's and GLM's MTP (NextN) heads run through its EAGLE path
  (``server_args._handle_speculative_decoding``: ``NEXTN`` is rewritten to ``EAGLE``): ``k`` draft steps of
  top-1 chains, ``k + 1`` draft tokens verified (SGLang's speculative-decoding documentation, DeepSeek MTP
  example; its speculative flags are in the tests' ``data/sglang_flags.json``).  ``--max-running-requests``
  is written, so the EAGLE path's default of 48 running requests (``server_args``) does not replace the
  verified limit.
* A model whose MTP the engine version does not run (``VLLM_MTP_METHODS``, ``SGLANG_MTP_MODEL_TYPES``:
  MiniMax-M2.x's ``num_mtp_modules`` on either) is one line naming the model and the fix (a candidate
  without "mtp", or a plan with MTP off).

**Data-parallel attention** (``data_parallel_size`` D > 1, from ``models``' ``Parallelism(tp, dp, ep)``,
e.g. DeepSeek-V3 on H100 at ``tp1 dp16 ep16``): the fleet's limits are the instance's, every rank's
together (``perf.dp_instance``: the simulator runs an instance as one engine whose batch is split evenly
over its ranks, its KV blocks and chunk budget the ranks' sum).  vLLM applies ``--max-num-seqs``,
``--max-num-batched-tokens`` and ``--num-gpu-blocks-override`` per DP rank (vLLM's
``docs/serving/data_parallel_deployment.md``: "``--max-num-seqs`` applies per DP rank"; each DP engine
has its own KV cache), so they are written per rank by ``perf.dp_instance``'s rules, the ones the
recommendation line prints: ``--max-num-seqs`` ``per_rank_limit`` (``floor(n_max / D)``: the instance's
``n_max`` is its KV cache's ``floor(D b / c)``, so a rank's share is its own cache's ``floor(b / c)``),
``--max-num-batched-tokens`` ``per_rank_token_budget`` (a rank's decodes plus a whole chunk), and the KV
blocks divided by D (rounded up: a rank never holds less cache than verified).  SGLang with
``--enable-dp-attention`` divides ``--chunked-prefill-size`` and ``--max-running-requests`` by
``--dp-size`` itself (``server_args._handle_data_parallelism``; the pool configurator's
``max_running_requests // dp_size``), so those stay the instance's; ``--max-prefill-tokens`` (one rank
scheduler's prefill batch, not divided) and ``--max-total-tokens`` are written per rank.  That SGLang caps
each attention rank's own KV pool at ``--max-total-tokens`` is read from its model runner's behaviour and
not re-checked at the commit in ``ENGINE_SOURCES``; were it the instance's, the engine would hold a
smaller cache than verified (the re-check command cannot show it: confirm on the engine's start-up line).  One
instance is one endpoint: vLLM's API server balances requests over its ranks (internal load
balancing); across nodes node 0 runs ``--data-parallel-size-local L --data-parallel-address LEADER
--data-parallel-rpc-port`` and node r the same with ``--headless --data-parallel-start-rank r L`` (vLLM's
data-parallel deployment guide; ``--headless`` is ``make_arg_parser``'s, ``vllm/entrypoints/openai/
cli_args.py`` at the commit in ``ENGINE_SOURCES``); SGLang runs ``--nnodes/--node-rank/--dist-init-addr``
as for any multi-node instance.

The KV budget was derived at a memory share of ``GPU_MEMORY_UTILIZATION`` (``plan.placement``'s
``gpu_memory_utilization``, vLLM's default 0.9); pinning the block count makes the engine hold exactly
the verified cache (vLLM fails at start-up when the memory does not hold it, instead of serving a
smaller cache).  An instance wider than one node (``gpus_per_node``) runs one launch line per node:
vLLM through a Ray cluster (``ray start --head`` on the leader, ``ray start --address`` on the workers,
then ``vllm serve ... --distributed-executor-backend ray`` on the leader: vLLM's multi-node serving
guide); SGLang with ``--nnodes N --node-rank r --dist-init-addr LEADER:PORT`` on every node.
Flag names were checked against the engines' argument parsers at the commits in ``ENGINE_SOURCES``
(the tests hold the flag lists).

``{model}`` and ``{leader}`` in an argument are placeholders the caller fills: the model (a
HuggingFace repository, or an environment variable when the plan had no served model) and the
leader node's address.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from fleetplan.errors import ConfigError
from fleetplan.names import NameRegistry
from fleetplan.perf.dp_instance import per_rank_limit, per_rank_token_budget, sglang_chunked_prefill_total

__all__ = ["DP_RPC_PORT", "ENGINE_SOURCES", "GPU_MEMORY_UTILIZATION", "PORT", "SGLANG_MTP_MODEL_TYPES",
           "VLLM_MTP_METHODS", "Engine", "LaunchLine", "PoolServe", "Speculation", "launch_lines", "speculation_of"]

PORT = 8000
HEALTH_PATH = "/health"  # vLLM's and SGLang's OpenAI servers: 200 once the engine serves
#: Share of GPU memory the KV budget was derived with (plan.placement's default, vLLM's default).
GPU_MEMORY_UTILIZATION = 0.9
RAY_PORT = 6379
SGLANG_DIST_PORT = 5000
DP_RPC_PORT = 13345  # vLLM data-parallel handshake on the leader (its guide's example port)


class Engine(NameRegistry):
    """Serving engine whose launch commands ``fleetplan deploy`` writes."""

    VLLM = "vllm"
    SGLANG = "sglang"

    @classmethod
    def kind(cls) -> str:
        return "engine"


#: Where each engine's flag names were read, and the container image of that version.
ENGINE_SOURCES = {
    Engine.VLLM: {
        "repository": "vllm-project/vllm",
        "files": ["vllm/engine/arg_utils.py@99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b (EngineArgs.add_cli_args)",
                  "vllm/entrypoints/openai/cli_args.py@005223338608bc94fd165a4f976c102a57bd1fc4 (FrontendArgs)"],
        "version": "v0.11 (arg_utils deprecations are 'removed in v0.12.0')",
        "image": "vllm/vllm-openai:v0.11.0",
    },
    Engine.SGLANG: {
        "repository": "sgl-project/sglang",
        "files": ["python/sglang/srt/server_args.py@001067fffe33427bee0ed2f007fb7551a1d76b44 (ServerArgs fields)"],
        "version": "main at that commit",
        "image": "lmsysorg/sglang:latest",
    },
}


#: vLLM's MTP ``method`` by the served model's HuggingFace ``model_type`` (module docstring): the draft modules
#: are ``vllm/model_executor/models/{deepseek,glm4_moe,qwen3_next,mimo,ernie}_mtp.py``; the names are
#: ``MTPModelTypes`` of ``vllm/config/speculative.py`` (vllm-project/vllm, read 2026-12-07).
VLLM_MTP_METHODS = {
    "deepseek_v3": "deepseek_mtp",
    "deepseek_v32": "deepseek_mtp",
    "glm4_moe": "glm4_moe_mtp",
    "qwen3_next": "qwen3_next_mtp",
    "mimo": "mimo_mtp",
    "ernie4_5_moe": "ernie_mtp",
}
#: ``model_type`` values whose MTP (NextN) heads SGLang runs through ``--speculative-algorithm EAGLE``
#: (``python/sglang/srt/models/deepseek_nextn.py``, ``glm4_moe_nextn.py``, ``qwen3_next_mtp.py``).
SGLANG_MTP_MODEL_TYPES = frozenset({"deepseek_v3", "deepseek_v32", "glm4_moe", "qwen3_next"})
#: The fleet file's (the simulator's) method names of MTP (``sim.features.speculative``).
MTP_METHODS = frozenset({"mtp", "deepseek_mtp"})
#: Keys of the fleet file's speculative table that vLLM's ``--speculative-config`` takes (the acceptance
#: rates are the simulator's assumption about the model, not an engine setting).
VLLM_SPECULATIVE_KEYS = ("method", "num_speculative_tokens", "model", "draft_tensor_parallel_size")


@dataclass(frozen=True)
class Speculation:
    """A pool's speculative decoding as verified: the fleet file's ``speculative_config`` (``table``, the
    engine keys only) and the served model's HuggingFace ``model_type`` (None: not known), which names the MTP
    method at the engine's version (module docstring)."""

    table: tuple[tuple[str, object], ...]
    model_type: str | None = None

    @property
    def method(self) -> str:
        return str(dict(self.table).get("method", "")).strip().lower().replace("-", "_")

    @property
    def is_mtp(self) -> bool:
        return self.method in MTP_METHODS

    @property
    def num_speculative_tokens(self) -> int:
        return int(dict(self.table)["num_speculative_tokens"])

    def _unsupported(self, pool: str, engine: str) -> ConfigError:
        what = ("a model whose config.json is not bundled (its model_type names the MTP method)"
                if self.model_type is None else f"a model of model_type {self.model_type!r}")
        return ConfigError(f"pool {pool!r} runs MTP, but {engine} at the version deploy targets "
                           f"({ENGINE_SOURCES[Engine.parse(engine)]['version']}) runs no MTP heads of {what}; export "
                           "a candidate without 'mtp' in its GPU type, or re-plan with MTP off",
                           param="engine", value=engine)

    def vllm_json(self, pool: str) -> str:
        """vLLM's ``--speculative-config`` value: MTP with the model's method name, else the table as given."""
        table = dict(self.table)
        if self.is_mtp:
            if self.model_type not in VLLM_MTP_METHODS:
                raise self._unsupported(pool, "vllm")
            table = {"method": VLLM_MTP_METHODS[self.model_type], "num_speculative_tokens": self.num_speculative_tokens}
        return json.dumps(table, separators=(",", ":"))

    def sglang_flags(self, pool: str) -> list[str]:
        """SGLang's MTP flags (module docstring); other speculative methods are not exported."""
        if not self.is_mtp:
            raise ConfigError(f"pool {pool!r} runs speculative decoding ({self.vllm_json(pool)}); its SGLang spelling "
                              "is exported for MTP only: use `engine` 'vllm'", param="engine", value="sglang")
        if self.model_type not in SGLANG_MTP_MODEL_TYPES:
            raise self._unsupported(pool, "sglang")
        k = self.num_speculative_tokens
        return ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", str(k), "--speculative-eagle-topk", "1",
                "--speculative-num-draft-tokens", str(k + 1)]


def speculation_of(features: dict, model_type: str | None) -> Speculation | None:
    """The ``Speculation`` of a ``[pool.features]`` table (None without a ``speculative_config``)."""
    spec = features.get("speculative_config")
    if spec is None:
        return None
    table = json.loads(spec) if isinstance(spec, str) else dict(spec)
    return Speculation(tuple((k, table[k]) for k in VLLM_SPECULATIVE_KEYS if k in table), model_type)


@dataclass(frozen=True)
class PoolServe:
    """What one pool's engines run (every figure from the verified fleet)."""

    pool: str
    served_model_name: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    expert_parallel: bool
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len_tokens: int
    kv_blocks: int
    block_size_tokens: int
    gpus_per_node: int
    weight_fp8: bool = False
    kv_cache_fp8: bool = False
    prefix_caching: bool = False
    speculation: Speculation | None = None
    data_parallel_size: int = 1  # attention data-parallel ranks D of one instance (module docstring)

    @property
    def gpus_per_instance(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size

    def rank_max_num_seqs(self) -> int:
        """One DP rank's ``max_num_seqs`` (``perf.dp_instance.per_rank_limit``, the recommendation line's)."""
        return per_rank_limit(self.max_num_seqs, self.data_parallel_size)

    def rank_token_budget(self) -> int:
        """One DP rank's token budget: its own decodes plus a whole chunk
        (``perf.dp_instance.per_rank_token_budget``; the instance's budget without DP)."""
        if self.data_parallel_size == 1:
            return self.max_num_batched_tokens
        return per_rank_token_budget(self.max_num_batched_tokens, self.max_num_seqs, self.data_parallel_size)

    def server_chunked_prefill(self) -> int:
        """SGLang's server-wide ``--chunked-prefill-size`` (``perf.dp_instance.sglang_chunked_prefill_total``:
        it divides the value over ``--dp-size`` ranks, so each rank's chunk times the ranks)."""
        if self.data_parallel_size == 1:
            return self.max_num_batched_tokens
        return sglang_chunked_prefill_total(self.max_num_batched_tokens, self.max_num_seqs, self.data_parallel_size)

    def rank_kv_blocks(self) -> int:
        """One attention rank's KV blocks (rounded up: a rank never holds less cache than verified)."""
        return -(-self.kv_blocks // self.data_parallel_size)

    @property
    def ranks_per_node(self) -> int:
        """Data-parallel ranks on one node of the instance."""
        return self.data_parallel_size // self.n_nodes

    @property
    def n_nodes(self) -> int:
        """Nodes one instance spans."""
        return math.ceil(self.gpus_per_instance / self.gpus_per_node)

    @property
    def gpus_per_pod(self) -> int:
        """GPUs each node (pod) of an instance holds."""
        return self.gpus_per_instance // self.n_nodes

    def __post_init__(self) -> None:
        if self.max_num_seqs < self.data_parallel_size:
            raise ConfigError(f"pool {self.pool!r}: max_num_seqs {self.max_num_seqs} is below its "
                              f"{self.data_parallel_size} data-parallel ranks, so a rank's share (rounded down, as "
                              "verified) is no sequence; give the pool at least one sequence per rank",
                              param="max_num_seqs", value=self.max_num_seqs)
        if self.data_parallel_size > 1 and self.pipeline_parallel_size > 1:
            raise ConfigError(f"pool {self.pool!r}: data-parallel attention with pipeline parallelism is not exported "
                              "(vLLM and SGLang launch DP ranks of one stage); give the pool one of them",
                              param="parallelism")
        if self.data_parallel_size > 1 and self.data_parallel_size % self.n_nodes:
            raise ConfigError(f"pool {self.pool!r}: {self.data_parallel_size} data-parallel ranks do not split evenly "
                              f"over {self.n_nodes} nodes of {self.gpus_per_node} GPUs; use a rank count whose GPUs "
                              "fill whole nodes", param="parallelism")
        if self.n_nodes > 1 and self.gpus_per_instance % self.n_nodes:
            raise ConfigError(f"pool {self.pool!r}: {self.gpus_per_instance} GPUs per instance do not split evenly "
                              f"over {self.n_nodes} nodes of {self.gpus_per_node}; use a parallelism whose GPUs fill "
                              "whole nodes",
                              param="parallelism")


@dataclass(frozen=True)
class LaunchLine:
    """One process to start: on node ``node_rank`` of an instance (0: the leader, which serves HTTP)."""

    node_rank: int
    argv: tuple[str, ...]
    then: tuple[str, ...] = ()  # a second command on the same node (vLLM leader: vllm serve after ray start)


def _vllm(s: PoolServe, multi_node: bool) -> list[str]:
    argv = ["vllm", "serve", "{model}", "--host", "0.0.0.0", "--port", str(PORT),
            "--served-model-name", s.served_model_name,
            "--tensor-parallel-size", str(s.tensor_parallel_size)]
    if s.pipeline_parallel_size > 1:
        argv += ["--pipeline-parallel-size", str(s.pipeline_parallel_size)]
    if s.data_parallel_size > 1:
        argv += ["--data-parallel-size", str(s.data_parallel_size)]
    if s.expert_parallel:
        argv.append("--enable-expert-parallel")
    argv += ["--max-num-seqs", str(s.rank_max_num_seqs()),
             "--max-num-batched-tokens", str(s.rank_token_budget()),
             "--max-model-len", str(s.max_model_len_tokens), "--block-size", str(s.block_size_tokens),
             "--num-gpu-blocks-override", str(s.rank_kv_blocks()),
             "--gpu-memory-utilization", str(GPU_MEMORY_UTILIZATION)]
    if s.weight_fp8:
        argv += ["--quantization", "fp8"]
    if s.kv_cache_fp8:
        argv += ["--kv-cache-dtype", "fp8"]
    argv.append("--enable-prefix-caching" if s.prefix_caching else "--no-enable-prefix-caching")
    if s.speculation is not None:
        argv += ["--speculative-config", s.speculation.vllm_json(s.pool)]
    if multi_node and s.data_parallel_size == 1:
        argv += ["--distributed-executor-backend", "ray"]
    return argv


def _sglang(s: PoolServe) -> list[str]:
    dp = s.data_parallel_size
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "{model}", "--host", "0.0.0.0",
            "--port", str(PORT), "--served-model-name", s.served_model_name,
            "--tp-size", str(s.tensor_parallel_size * dp)]
    if s.pipeline_parallel_size > 1:
        argv += ["--pp-size", str(s.pipeline_parallel_size)]
    if dp > 1:
        argv += ["--dp-size", str(dp), "--enable-dp-attention"]
    if s.expert_parallel:
        argv += ["--ep-size", str(s.tensor_parallel_size * dp)]
    argv += ["--max-running-requests", str(s.max_num_seqs),
             "--chunked-prefill-size", str(s.server_chunked_prefill()),
             "--max-prefill-tokens", str(s.rank_token_budget()),
             "--context-length", str(s.max_model_len_tokens),
             "--max-total-tokens", str(s.rank_kv_blocks() * s.block_size_tokens),
             "--mem-fraction-static", str(GPU_MEMORY_UTILIZATION)]
    if s.weight_fp8:
        argv += ["--quantization", "fp8"]
    if s.kv_cache_fp8:
        argv += ["--kv-cache-dtype", "fp8_e4m3"]
    if not s.prefix_caching:
        argv.append("--disable-radix-cache")
    if s.speculation is not None:
        argv += s.speculation.sglang_flags(s.pool)
    return argv


def _vllm_data_parallel(s: PoolServe) -> tuple[LaunchLine, ...]:
    """One ``vllm serve`` per node of a multi-node data-parallel instance (module docstring)."""
    local = s.ranks_per_node
    serve = [*_vllm(s, True), "--data-parallel-size-local", str(local), "--data-parallel-address", "{leader}",
             "--data-parallel-rpc-port", str(DP_RPC_PORT)]
    return (LaunchLine(0, tuple(serve)),
            *(LaunchLine(r, (*serve, "--headless", "--data-parallel-start-rank", str(r * local)))
              for r in range(1, s.n_nodes)))


def launch_lines(engine: Engine | str, s: PoolServe) -> tuple[LaunchLine, ...]:
    """The processes one instance of pool ``s`` starts, one per node (module docstring)."""
    engine = Engine.parse(engine)
    nodes = s.n_nodes
    if engine is Engine.VLLM:
        if nodes > 1 and s.data_parallel_size > 1:
            return _vllm_data_parallel(s)
        serve = tuple(_vllm(s, nodes > 1))
        if nodes == 1:
            return (LaunchLine(0, serve),)
        head = ("ray", "start", "--head", f"--port={RAY_PORT}")
        workers = tuple(LaunchLine(r, ("ray", "start", f"--address={{leader}}:{RAY_PORT}", "--block"))
                        for r in range(1, nodes))
        return (LaunchLine(0, head, serve), *workers)
    base = _sglang(s)
    if nodes == 1:
        return (LaunchLine(0, tuple(base)),)
    return tuple(LaunchLine(r, (*base, "--nnodes", str(nodes), "--node-rank", str(r),
                                "--dist-init-addr", f"{{leader}}:{SGLANG_DIST_PORT}")) for r in range(nodes))
