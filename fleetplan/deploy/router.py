"""The between-pool router as configuration of an existing gateway: vLLM Semantic Router.

vLLM Semantic Router (github.com/vllm-project/semantic-router, the project the core paper's fleet
simulator lives in) routes on *context signals*: ``routing.signals.context`` rules with ``min_tokens``
/ ``max_tokens`` (a string token count, ``"8K"`` style) match a request whose estimated prompt length
lies in ``[min, max]``; ``routing.decisions`` send a matching request (``rules.conditions`` of ``type:
context``) to a logical model (``modelRefs``) that ``providers.models`` binds to a backend endpoint (the
pool's Service).  Read from its config structs at commit ``SEMANTIC_ROUTER_COMMIT``:
``src/semantic-router/pkg/config/canonical_config.go`` (the v0.3 ``CanonicalConfig``),
``signal_config.go`` (``ContextRule``, ``TokenCount``), ``decision_config.go`` (``Decision``,
``RuleNode``, ``ModelRef``), ``canonical_providers.go`` and ``plugin_config.go``
(``ContextCompressionPluginConfig``); its classifier counts ``ceil(bytes / 4)`` of the prompt text
(``pkg/classification/context_classifier.go``).

**Translating the bands.**  fleetplan's pools split requests by *prompt + output* tokens; the router
sees the prompt only (the output is not known when it routes).  Each band edge ``B`` (total tokens)
becomes the prompt edge ``b`` that sends the same share of requests below it:
``b = F_prompt⁻¹(F_total(B))`` (quantile matching on the workload's prompt and total CDFs), which for a
workload given as totals with a fixed prompt share ``f`` is ``b = f · B``.  So every pool receives the
traffic share it was verified with, but not the same requests: a short prompt with a long answer can go
to a smaller pool than the simulator sent it to, where the engine's ``max_model_len`` (the pool's
``B``) caps prompt + output (vLLM stops the answer at the limit, or rejects a request whose ``max_tokens``
does not fit).  Pools are tried from the longest band down (``priority``), and the largest pool is the
default model, so nothing is left unrouted.

**Compress-and-route.**  A candidate sized with the compress router squeezes totals in ``(B, γB]`` to
``B`` in the smaller pool.  The gateway spelling is a decision for prompts in ``(b, γb]`` that goes to
that pool with Semantic Router's ``context_compression`` decision plugin, ``budget.target_tokens = b``
and ``reserve_output_tokens = B - b`` (mode ``always``): the prompt is shortened to ``b`` before the
pool sees it.  The simulator squeezes exactly; the plugin's extractive compression is the gateway's
approximation of it.

Other gateways (compared in the deploy README): the Gateway API Inference Extension (InferencePool +
endpoint picker) and llm-d's scheduler pick an *endpoint within one pool* (queue depth, KV-cache
utilisation, prefix affinity) -- they would replace the in-pool ``least_outstanding`` router, not the
length split; Envoy AI Gateway routes on headers and model names (``AIGatewayRoute`` rules), with no
prompt-length match, so a length split there needs a header set upstream.  Semantic Router is the one
of these that matches on prompt length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["SEMANTIC_ROUTER_COMMIT", "Band", "prompt_edges", "semantic_router_config"]

SEMANTIC_ROUTER_COMMIT = "3d48f8c9cc0d5b15067ce324a03ec6cc25f192c3"
ROUTER_PORT = 8899  # the listener port of Semantic Router's shipped recipes


@dataclass(frozen=True)
class Band:
    """One pool as the router sees it: prompt tokens in ``[min_prompt_tokens, max_prompt_tokens]``
    (translated, module docstring), its endpoint and its context limit."""

    pool: str
    min_prompt_tokens: int
    max_prompt_tokens: int
    endpoint: str  # host:port of the pool's Service
    max_model_len_tokens: int
    compress_to_tokens: int | None = None  # compress-and-route: prompts up to compress_max squeezed to this
    compress_max_prompt_tokens: int | None = None
    compress_reserve_tokens: int | None = None


def prompt_edges(edges_tokens: list[int], total_cdf: Any = None, prompt_cdf: Any = None,
                 prompt_share: float | None = None) -> list[int]:
    """Prompt-token edges sending the same share of requests below each total-token edge (module
    docstring): ``prompt_share · B`` for a totals-only workload, else ``F_prompt⁻¹(F_total(B))``."""
    if prompt_share is not None:
        return [int(prompt_share * b) for b in edges_tokens]
    out = []
    for b in edges_tokens:
        u = min(float(total_cdf.cdf(float(b))), 1.0)
        out.append(int(float(prompt_cdf.quantile(u))))
    return out


def _count(tokens: int) -> str:
    return str(int(tokens))  # TokenCount is a string ("8K" style); plain digits parse exactly


def semantic_router_config(bands: list[Band], served_model: str) -> dict[str, Any]:
    """Semantic Router's v0.3 configuration routing each band to its pool (module docstring)."""
    signals, decisions, models, cards = [], [], [], []
    n = len(bands)
    for i, band in enumerate(bands):
        logical = f"{served_model}@{band.pool}"
        signal = f"fleet_{band.pool}"
        signals.append({"name": signal, "min_tokens": _count(band.min_prompt_tokens),
                        "max_tokens": _count(band.max_prompt_tokens),
                        "description": f"prompts routed to pool {band.pool} (translated length band)"})
        decisions.append({"name": f"to_{band.pool}", "description": f"length band of pool {band.pool}",
                          "priority": 100 + 10 * (n - i),
                          "rules": {"operator": "AND", "conditions": [{"type": "context", "name": signal}]},
                          "modelRefs": [{"model": logical}]})
        if band.compress_to_tokens is not None:
            squeeze = f"fleet_{band.pool}_compress"
            signals.append({"name": squeeze, "min_tokens": _count(band.max_prompt_tokens + 1),
                            "max_tokens": _count(band.compress_max_prompt_tokens),
                            "description": f"compress-and-route band of pool {band.pool}: squeezed to its limit"})
            decisions.append({
                "name": f"compress_to_{band.pool}", "description": f"compress-and-route into pool {band.pool}",
                "priority": 105 + 10 * (n - i),
                "rules": {"operator": "AND", "conditions": [{"type": "context", "name": squeeze}]},
                "modelRefs": [{"model": logical}],
                "plugins": [{"type": "context_compression", "configuration": {
                    "enabled": True, "mode": "always",
                    "budget": {"target_tokens": band.compress_to_tokens,
                               "reserve_output_tokens": band.compress_reserve_tokens}}}],
            })
        models.append({"name": logical, "provider_model_id": served_model, "api_format": "openai",
                       "backend_refs": [{"name": f"fleet-{band.pool}", "endpoint": band.endpoint,
                                         "protocol": "http", "type": "vllm", "weight": 1}]})
        cards.append({"name": logical, "context_window_size": band.max_model_len_tokens,
                      "description": f"fleetplan pool {band.pool}"})
    return {
        "version": "v0.3",
        "listeners": [{"name": f"http-{ROUTER_PORT}", "address": "0.0.0.0", "port": ROUTER_PORT, "timeout": "600s"}],
        "providers": {"defaults": {"default_model": models[-1]["name"]}, "models": models},
        "routing": {"modelCards": cards, "signals": {"context": signals}, "decisions": decisions},
    }
