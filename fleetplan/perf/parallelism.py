"""How one serving replica is sharded over GPUs, and the rules a model imposes on it.

Frontier (Feng et al. 2026, arXiv:2605.21312, §3.2, "Parallel primitives") describes a replica by
its pipeline size ``pp``, an attention domain ``(tp_attn, dp_attn)`` and an FFN domain
``(tp_ffn, ep_ffn)``.  A role hosting both domains (co-located, prefill, decode) must
span one device set per stage:

    tp_attn * dp_attn = tp_ffn * ep_ffn                               (Frontier eq. 1)

and its world size is ``W_R = pp * tp_attn * dp_attn`` (Frontier eq. 2).

``Parallelism`` is written in vLLM's vocabulary and resolved to the two domains:

* ``tp`` (vLLM ``tensor_parallel_size``) and ``dp`` (``data_parallel_size``) give the
  attention domain ``(tp, dp)``: heads sharded over ``tp`` GPUs, each of ``dp`` ranks
  holding its own batch and KV cache.  Dense FFN layers and shared experts are sharded
  like attention.
* ``ep`` is the expert-parallel size of the routed experts.  As in vLLM, the experts
  span all ``tp * dp`` GPUs of a stage: ``ep_ffn = ep`` and ``tp_ffn = tp * dp / ep``
  (``enable_expert_parallel`` sets ``ep = tp * dp``; without it ``ep = 1`` and each
  expert is split ``tp * dp`` ways).  So ``ep`` must divide ``tp * dp``.
* ``tp_attn, dp_attn, tp_ffn, ep_ffn`` state the domains explicitly (SGLang
  ``enable_dp_attention`` layouts, Frontier configs): all four or none, eq. 1 must
  hold and ``tp_attn * dp_attn`` must equal ``tp * dp``.  ``ep`` is then 1 or ``ep_ffn``.

Model rules (``check_model``): query heads divisible by ``tp_attn``; GQA KV heads
divisible by ``tp_attn`` or ``tp_attn`` divisible by KV heads (each KV head then
replicated ``tp_attn / n_kv_heads`` times, as vLLM does; MLA's latent KV is replicated
on every attention GPU); routed experts divisible by ``ep_ffn``; expert width divisible
by ``tp_ffn``; ``ep > 1`` only for MoE models; ``pp <= n_layers``.  ``pp`` need not
divide ``n_layers``: stages follow vLLM's ``get_pp_indices`` (``pp_stage_layers``).
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetplan.errors import ConfigError
from fleetplan.models import AttentionKind, ModelConfig

__all__ = ["Parallelism", "pp_stage_layers", "valid_tensor_parallel_sizes"]

DOMAIN_FIELDS = ("tp_attn", "dp_attn", "tp_ffn", "ep_ffn")


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name}={value!r} must be an integer >= 1", param=name, value=value)


@dataclass(frozen=True)
class Parallelism:
    """Sharding of one replica (see the module docstring for the rules).

    Attributes
    ----------
    tp, pp, dp, ep : int
        Tensor, pipeline, data and expert parallel sizes (vLLM meaning).
    tp_attn, dp_attn, tp_ffn, ep_ffn : int or None
        Explicit attention and FFN domains (Frontier eq. 1); all four or none.
    """

    tp: int
    pp: int = 1
    dp: int = 1
    ep: int = 1
    tp_attn: int | None = None
    dp_attn: int | None = None
    tp_ffn: int | None = None
    ep_ffn: int | None = None

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "ep"):
            _positive_int(name, getattr(self, name))
        given = [name for name in DOMAIN_FIELDS if getattr(self, name) is not None]
        if given and len(given) != len(DOMAIN_FIELDS):
            missing = [n for n in DOMAIN_FIELDS if n not in given]
            raise ConfigError(f"parallelism gives {', '.join(given)} but not {', '.join(missing)}: "
                              f"state all four of tp_attn, dp_attn, tp_ffn, ep_ffn or none")
        stage_gpus = self.tp * self.dp
        if not given:
            if stage_gpus % self.ep:
                raise ConfigError(f"expert parallel size ep={self.ep} must divide tp*dp={stage_gpus} (the GPUs "
                                  f"of a stage); use ep in {{1, ..., {stage_gpus}}} dividing it, or ep=tp*dp "
                                  f"as `enable_expert_parallel` does", param="ep", value=self.ep)
            return
        for name in DOMAIN_FIELDS:
            _positive_int(name, getattr(self, name))
        attn, ffn = self.tp_attn * self.dp_attn, self.tp_ffn * self.ep_ffn
        if attn != ffn:
            raise ConfigError(f"tp_attn*dp_attn={self.tp_attn}*{self.dp_attn}={attn} must equal "
                              f"tp_ffn*ep_ffn={self.tp_ffn}*{self.ep_ffn}={ffn} (Frontier eq. 1: both domains "
                              f"span the same GPUs); change tp_ffn or ep_ffn")
        if attn != stage_gpus:
            raise ConfigError(f"tp_attn*dp_attn={attn} must equal tp*dp={stage_gpus}, the GPUs of one stage; "
                              f"set tp={attn} and dp=1 to state the domains alone")
        if self.ep not in (1, self.ep_ffn):
            raise ConfigError(f"ep={self.ep} conflicts with ep_ffn={self.ep_ffn}; leave ep=1 or set it to ep_ffn")

    @classmethod
    def vllm(cls, tensor_parallel_size: int = 1, pipeline_parallel_size: int = 1, data_parallel_size: int = 1,
             enable_expert_parallel: bool = False) -> Parallelism:
        """From vLLM's engine arguments: ``enable_expert_parallel`` gives ``ep = tp * dp``."""
        tp, dp = tensor_parallel_size, data_parallel_size
        _positive_int("tensor_parallel_size", tp)
        _positive_int("data_parallel_size", dp)
        return cls(tp=tp, pp=pipeline_parallel_size, dp=dp, ep=tp * dp if enable_expert_parallel else 1)

    # ---- resolved domains ---------------------------------------------------------------------
    @property
    def attn_tp(self) -> int:
        """GPUs sharing one attention computation (heads split)."""
        return self.tp_attn if self.tp_attn is not None else self.tp

    @property
    def attn_dp(self) -> int:
        """Independent attention ranks per stage, each with its own batch and KV cache."""
        return self.dp_attn if self.dp_attn is not None else self.dp

    @property
    def ffn_ep(self) -> int:
        """GPUs the routed experts are spread over."""
        return self.ep_ffn if self.ep_ffn is not None else self.ep

    @property
    def ffn_tp(self) -> int:
        """Ways each routed expert's width is split."""
        return self.tp_ffn if self.tp_ffn is not None else self.tp * self.dp // self.ep

    @property
    def gpus_per_replica(self) -> int:
        """World size of one replica, ``pp * tp_attn * dp_attn`` (Frontier eq. 2)."""
        return self.pp * self.attn_tp * self.attn_dp

    def flags(self) -> str:
        """The vLLM command-line spelling, e.g. ``--tensor-parallel-size 8 --enable-expert-parallel``."""
        parts = [f"--tensor-parallel-size {self.tp}"]
        if self.pp > 1:
            parts.append(f"--pipeline-parallel-size {self.pp}")
        if self.dp > 1:
            parts.append(f"--data-parallel-size {self.dp}")
        if self.tp_attn is not None:
            parts.append(f"(attention tp={self.tp_attn} dp={self.dp_attn}, ffn tp={self.tp_ffn} ep={self.ep_ffn})")
        elif self.ep > 1:
            parts.append("--enable-expert-parallel" if self.ep == self.tp * self.dp else f"(ep={self.ep})")
        return " ".join(parts)

    # ---- model rules ----------------------------------------------------------------------------
    def kv_heads_per_gpu(self, model: ModelConfig) -> int:
        """KV heads each attention GPU stores (MLA: its one latent, replicated: 1)."""
        if model.attention is AttentionKind.MLA:
            return 1
        return max(1, model.n_kv_heads // self.attn_tp)

    def check_model(self, model: ModelConfig) -> None:
        """Raise ``ConfigError`` naming the first rule ``model`` breaks under this sharding."""
        where = f"{model.name} at {self.flags()}"
        tp = self.attn_tp
        if model.n_heads % tp:
            raise ConfigError(f"{where}: {model.n_heads} attention heads are not divisible by tensor parallel size "
                              f"{tp}; use one of {_join(valid_tensor_parallel_sizes(model))}")
        kv = model.n_kv_heads
        if model.attention is AttentionKind.GQA and kv % tp and tp % kv:
            raise ConfigError(f"{where}: {kv} KV heads and tensor parallel size {tp} must divide one another "
                              f"(shard or replicate whole KV heads); use one of "
                              f"{_join(valid_tensor_parallel_sizes(model))}")
        if self.pp > model.n_layers:
            raise ConfigError(f"{where}: `pipeline_parallel_size` {self.pp} exceeds the {model.n_layers} layers",
                              param="pipeline_parallel_size", value=self.pp)
        if not model.is_moe:
            if self.ep > 1:
                raise ConfigError(f"{where}: expert parallelism (ep={self.ep}) needs an MoE model; "
                                  f"{model.name} is dense: drop `enable_expert_parallel`", param="ep", value=self.ep)
            return
        if model.n_experts % self.ffn_ep:
            raise ConfigError(f"{where}: {model.n_experts} routed experts are not divisible by expert parallel "
                              f"size {self.ffn_ep}; use an expert parallel size in {_join(_divisors(model.n_experts))}")
        if model.moe_intermediate_size % self.ffn_tp:
            raise ConfigError(f"{where}: expert width {model.moe_intermediate_size} is not divisible by the "
                              f"expert tensor split {self.ffn_tp}; enable expert parallelism or use a smaller "
                              f"tp*dp")


def pp_stage_layers(n_layers: int, pp: int) -> tuple[int, ...]:
    """Layers per pipeline stage, vLLM ``get_pp_indices``: ``n_layers // pp`` each, and the
    remainder one each to the stages before the last, from the second-to-last backwards."""
    _positive_int("pp", pp)
    if pp > n_layers:
        raise ConfigError(f"`pipeline_parallel_size` {pp} exceeds the {n_layers} layers",
                          param="pipeline_parallel_size", value=pp)
    parts = [n_layers // pp] * pp
    for i in range(2, n_layers % pp + 2):
        parts[-i] += 1
    return tuple(parts)


def valid_tensor_parallel_sizes(model: ModelConfig) -> tuple[int, ...]:
    """Attention tensor-parallel sizes ``model`` allows: divisors of the query heads that
    also shard or replicate whole KV heads (any divisor for MLA)."""
    kv = model.n_kv_heads
    return tuple(
        t for t in _divisors(model.n_heads)
        if model.attention is AttentionKind.MLA or kv % t == 0 or t % kv == 0
    )


def _divisors(n: int) -> tuple[int, ...]:
    return tuple(d for d in range(1, n + 1) if n % d == 0)


def _join(values: tuple[int, ...]) -> str:
    return ", ".join(str(v) for v in values)
