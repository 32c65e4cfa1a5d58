"""``bench serve``: the simulator driven like ``vllm bench serve`` against one serving instance.

Client model (vllm-project/vllm ``vllm/benchmarks/serve.py``, read at commit
009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1, functions ``get_request``, ``benchmark`` and
``calculate_metrics``):

* Send times.  ``request_rate inf``: every request at t = 0.  Otherwise gaps are gamma with
  shape ``b = burstiness`` and scale ``1 / (rate b)`` (b = 1 is Poisson, ``b = inf`` a constant
  ``1 / rate``); the cumulative send times are rescaled so the last one is exactly
  ``num_prompts / rate`` (vLLM's normalisation).  Draws come from the stream ``arrivals`` of
  ``seed``.
* ``max_concurrency N``: a FIFO semaphore; a request sent while N are outstanding starts when
  one completes.  The simulator's closed loop (``CompiledRun.max_in_flight``) releases request i
  at ``max(send_i, the completion that frees a slot)``; latencies run from the release, as
  vLLM's clock starts inside the semaphore.
* Metrics over completed requests: TTFT = first token - release; E2EL = completion - release;
  TPOT = (E2EL - TTFT) / (output - 1) for outputs > 1; the benchmark duration is the last
  completion (the first send is at t >= 0); throughputs divide by it; ``std`` is the
  population standard deviation and percentiles are numpy's linear ones, as vLLM.
* ITL.  vLLM's mean ITL is the sum over requests of (E2EL - TTFT) over the sum of
  (output - 1), which this reproduces exactly.  Median, std and percentiles are over the pooled
  per-request gaps between streamed chunks, as ``calculate_metrics`` pools ``outputs[i].itl``
  and takes ``np.median`` (SGLang's ``bench_serving`` likewise); vLLM streams one chunk per engine
  step, a speculative step's accepted tokens together.  With runtime features (prefix caching,
  which vLLM and SGLang have on by default, SGLang's scheduler, speculative decoding, CUDA-graph
  padding) the feature kernel counts each gap, ``t_emit - the request's previous chunk``, in a
  histogram of relative bin width 1.2e-4 (0.1 ms up to 1.6 s gaps; ``fleetplan.sim._kernels.features.itl``):
  a decode step left out of a prefill batch, or a preemption's wait, is in the gap.  The featureless
  kernel's step log gives each token past a request's first the duration of the step that produced
  it (the same gap unless the request was preempted).  ``itl_percentiles_method`` says which.
* The chat endpoint's role chunk (``backend`` ``openai-chat``).  vLLM's and SGLang's chat servers stream a
  first chunk carrying only the assistant role (``content ""``) in the same iteration as the first token's chunk
  (vLLM ``vllm/entrypoints/openai/serving_chat.py``, ``chat_completion_stream_generator``: "Send first response
  for each request.n (index) with the role", then the iteration's outputs; SGLang
  ``python/sglang/srt/entrypoints/openai/serving_chat.py``, ``_generate_chat_stream``: "First chunk with role"),
  and the client (vLLM ``vllm/benchmarks/lib/endpoint_request_func.py``,
  ``async_request_openai_chat_completions``) times every chunk with ``choices``: TTFT at the role chunk, then
  one ITL entry per later chunk.  So each request's ITL list has one more gap, role -> first token, of about
  0 s: vLLM's mean ITL is the decode time over ``chunks + 1`` per request and the pooled median and percentiles
  include one zero gap per completed request (for 4 outputs, 1 gap in 4: the published median ITL is the 1/3
  quantile of the decode gaps).  TTFT (the first token's iteration either way) and TPOT (over the usage's
  ``completion_tokens - 1``) do not change.  The completions endpoints (``vllm``, ``openai``) stream no role
  chunk.
* The chat template's tokens (``backend`` ``openai-chat``).  The chat server renders the message through the
  model's chat template before tokenising it (vLLM ``serving_chat.py`` ``_preprocess_chat``, or openai-harmony for
  gpt-oss; SGLang ``serving_chat.py``), so the engine prefills ``prompt + t`` tokens, ``t`` the template's tokens
  around one user message (role markers, and the default system message where the template writes one:
  gpt-oss 65 of them, Qwen3 8; ``ModelConfig.chat_template_tokens``, each bundled value's derivation in the
  model file's ``_chat_template_source``), while the client counts the text it sent: ``total_input_tokens`` and
  the input throughputs stay the dataset's lengths (vLLM ``calculate_metrics`` sums each request's
  ``prompt_len``).  ``chat_template_tokens`` overrides the model's count; a model without one (a config.json
  the catalog does not annotate) must be given it.  The completions endpoints send the text as it is.

Requests rejected by the instance (longer than ``max_model_len``) count as failed, like
vLLM's HTTP errors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from fleetplan import rng as fp_rng
from fleetplan.bench.datasets import DatasetSpec, sample_lengths
from fleetplan.bench.instance import EngineArgs, serving_fleet
from fleetplan.errors import ConfigError
from fleetplan.sim.api_server import with_api_servers
from fleetplan.sim.compile import CompiledRun, compile_fleet, compile_requests
from fleetplan.sim.engine import run_compiled, uses_feature_kernel
from fleetplan.sim.features.compile import compile_features
from fleetplan.sim.spec import FleetSpec, Level

__all__ = ["BenchServeConfig", "BenchServeResult", "CLIENT_BACKENDS", "METRICS", "ITL_METHOD", "ITL_METHOD_STREAMED",
           "chat_template_tokens", "run_bench_serve", "send_times_s"]

METRICS = ("ttft", "tpot", "itl", "e2el")
#: ``vllm bench serve``'s streaming text backends (its ``backend`` names); ``openai-chat`` streams a role chunk first.
CLIENT_BACKENDS = ("vllm", "openai", "openai-chat")
CHAT_BACKEND = "openai-chat"
DEFAULT_PERCENTILE_METRICS = ("ttft", "tpot", "itl")  # vLLM's default for generation
ITL_METHOD = "step log (each token's ITL = the duration of the step that produced it; mean exact)"
ITL_METHOD_STREAMED = ("pooled gaps between each request's streamed chunks (feature kernel's histogram, bins of "
                       "1.2e-4 relative width; mean exact)")


def send_times_s(n: int, request_rate_per_s: float, burstiness: float, rng: np.random.Generator) -> np.ndarray:
    """vLLM's send times (s) of ``n`` requests (module docstring)."""
    if math.isinf(request_rate_per_s):
        return np.zeros(n)
    if math.isinf(burstiness):
        gaps = np.full(n, 1.0 / request_rate_per_s)
    else:
        gaps = rng.gamma(shape=burstiness, scale=1.0 / (request_rate_per_s * burstiness), size=n)
    cum = np.cumsum(gaps)
    if cum[-1] > 0:
        cum *= (n / request_rate_per_s) / cum[-1]
    return cum


@dataclass(frozen=True)
class BenchServeConfig:
    """The client flags of ``vllm bench serve`` (vLLM's names; rates in requests/s)."""

    dataset: DatasetSpec = DatasetSpec()
    num_prompts: int = 1000
    request_rate_per_s: float = math.inf
    burstiness: float = 1.0
    max_concurrency: int | None = None
    seed: int = 0
    percentile_metrics: tuple[str, ...] = DEFAULT_PERCENTILE_METRICS
    metric_percentiles: tuple[float, ...] = (99.0,)
    backend: str = "vllm"
    chat_template_tokens: int | None = None  # the chat endpoint's template tokens; None = the model's

    def __post_init__(self) -> None:
        if self.backend not in CLIENT_BACKENDS:
            raise ConfigError(f"`backend` {self.backend!r} is not one of {', '.join(CLIENT_BACKENDS)} (the client's "
                              "streaming text backends)", param="backend", value=self.backend)
        t = self.chat_template_tokens
        if t is not None:
            if isinstance(t, bool) or not isinstance(t, int) or t < 0:
                raise ConfigError(f"`chat_template_tokens` {t!r} must be an integer >= 0 (the tokens the chat "
                                  "template adds around one user message)", param="chat_template_tokens", value=t)
            if self.backend != CHAT_BACKEND:
                raise ConfigError(f"`chat_template_tokens` {t} applies to the chat endpoint only; the `backend` "
                                  f"{self.backend} sends the prompt text as it is: drop it, or give the "
                                  f"`backend` {CHAT_BACKEND}", param="chat_template_tokens", value=t)
        n = self.num_prompts
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"`num_prompts` {n!r} must be an integer >= 1", param="num_prompts", value=n)
        rate = self.request_rate_per_s
        if not isinstance(rate, int | float) or isinstance(rate, bool) or math.isnan(rate) or rate <= 0:
            raise ConfigError(f"`request_rate_per_s` {rate!r} must be > 0 requests/s, or inf (all at once)",
                              param="request_rate_per_s", value=rate)
        b = self.burstiness
        if not isinstance(b, int | float) or isinstance(b, bool) or math.isnan(b) or b <= 0:
            raise ConfigError(f"`burstiness` {b!r} must be > 0 (1 = Poisson, < 1 burstier, > 1 more regular)",
                              param="burstiness", value=b)
        c = self.max_concurrency
        if c is not None and (isinstance(c, bool) or not isinstance(c, int) or c < 1):
            raise ConfigError(f"`max_concurrency` {c!r} must be an integer >= 1", param="max_concurrency", value=c)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"`seed` {self.seed!r} must be an integer >= 0", param="seed", value=self.seed)
        for m in self.percentile_metrics:
            if m not in METRICS:
                raise ConfigError(f"`percentile_metrics` {m!r} is not one of {','.join(METRICS)}",
                                  param="percentile_metrics", value=m)
        if not self.percentile_metrics:
            raise ConfigError("`percentile_metrics` is empty; give e.g. ttft,tpot,itl", param="percentile_metrics")
        for p in self.metric_percentiles:
            if not isinstance(p, int | float) or not 0 <= p <= 100:
                raise ConfigError(f"`metric_percentiles` {p!r} must be in [0, 100], e.g. 50,90,99",
                                  param="metric_percentiles", value=p)


@dataclass(frozen=True, eq=False)
class BenchServeResult:
    """Per-request outcome arrays (seconds; completed and failed) and vLLM's summary metrics."""

    config: BenchServeConfig
    engine: EngineArgs
    fleet: FleetSpec
    prompt_tokens: np.ndarray  # the client's count (the dataset's); the engine prefills chat_template_tokens more
    output_tokens: np.ndarray
    send_s: np.ndarray
    start_s: np.ndarray  # release (after the client's semaphore)
    ttft_s: np.ndarray  # NaN when failed
    e2el_s: np.ndarray  # NaN when failed
    completed: np.ndarray  # bool
    metrics: MappingProxyType = field(hash=False)  # vLLM's result keys -> values (ms where vLLM has ms)
    chat_template_tokens: int = 0  # added to each prompt by the chat endpoint's template (module docstring)


def _percentile_word(p: float) -> str:
    return str(int(p)) if int(p) == p else str(p)


def _weighted_percentile(values: np.ndarray, counts: np.ndarray, q: float) -> float:
    """``np.percentile(np.repeat(values, counts), q)`` (linear) without expanding the sample."""
    order = np.argsort(values, kind="stable")
    v, cum = values[order], np.cumsum(counts[order])
    h = (cum[-1] - 1) * q / 100.0
    lo = int(math.floor(h))
    at = np.searchsorted(cum, [lo, min(lo + 1, cum[-1] - 1)], side="right")
    return float(v[at[0]] + (h - lo) * (v[at[1]] - v[at[0]]))


def _stats(values: np.ndarray, weights: np.ndarray | None, percentiles: tuple[float, ...]) -> dict[str, float]:
    """mean, median, std and percentiles (ms) as vLLM computes them (``np.*(values or 0)``); ``weights``: each
    value counted that many times (the ITL samples, module docstring)."""
    if weights is not None:
        keep = weights > 0
        values, weights = values[keep], weights[keep].astype(np.int64)
    if values.size == 0:
        values, weights = np.zeros(1), None
    if weights is None:
        out = {"mean": float(np.mean(values)), "median": float(np.median(values)), "std": float(np.std(values))}
        for p in percentiles:
            out[f"p{_percentile_word(p)}"] = float(np.percentile(values, p))
    else:
        total = float(np.sum(weights))
        mean = float(np.sum(values * weights) / total)
        out = {"mean": mean, "median": _weighted_percentile(values, weights, 50.0),
               "std": math.sqrt(float(np.sum(weights * (values - mean) ** 2)) / total)}
        for p in percentiles:
            out[f"p{_percentile_word(p)}"] = _weighted_percentile(values, weights, p)
    return {k: 1e3 * v for k, v in out.items()}


def _metrics(cfg: BenchServeConfig, prompt: np.ndarray, output: np.ndarray, start_s: np.ndarray,
             ttft_s: np.ndarray, e2el_s: np.ndarray, done: np.ndarray,
             step_log: tuple[np.ndarray, np.ndarray] | None, accepted: np.ndarray,
             itl_method: str = ITL_METHOD) -> dict[str, object]:
    duration_s = float(np.max(start_s[done] + e2el_s[done])) if done.any() else 0.0
    n_done = int(done.sum())
    total_in, total_out = int(prompt[done].sum()), int(output[done].sum())
    per = 1.0 / duration_s if duration_s > 0 else math.nan
    out: dict[str, object] = {
        "duration": duration_s,
        "completed": n_done,
        "failed": int((~done).sum()),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": n_done * per,
        "request_goodput": None,
        "output_throughput": total_out * per,
        "total_token_throughput": (total_in + total_out) * per,
    }
    multi = done & (output > 1)
    tpot = (e2el_s[multi] - ttft_s[multi]) / (output[multi] - 1)
    decode_s = e2el_s[multi] - ttft_s[multi]
    emissions = np.maximum(output[multi] - 1 - accepted[multi], 1).astype(np.int64)  # streamed chunks
    itl = (decode_s / emissions, emissions) if step_log is None else step_log
    role_gaps = n_done if cfg.backend == CHAT_BACKEND else 0  # the role chunk's ~0 s gap (module docstring)
    if role_gaps:
        itl = (np.append(itl[0], 0.0), np.append(itl[1], role_gaps))
    series = {
        "ttft": (ttft_s[done], None),
        "tpot": (tpot, None),
        "itl": itl,
        "e2el": (e2el_s[done], None),
    }
    for name in cfg.percentile_metrics:
        values, weights = series[name]
        for key, value in _stats(values, weights, cfg.metric_percentiles).items():
            out[f"{key}_{name}_ms"] = value
    if "itl" in cfg.percentile_metrics:
        n_chunks = int(np.sum(emissions)) + role_gaps  # vLLM's mean ITL: all decode time over all later chunks
        out["mean_itl_ms"] = 1e3 * float(np.sum(decode_s)) / n_chunks if n_chunks else 0.0
        out["itl_percentiles_method"] = itl_method if step_log is not None else (
            "per-request mean gap between streamed chunks (no gap log; spread approximate)")
    return out


def chat_template_tokens(engine: EngineArgs, cfg: BenchServeConfig) -> int:
    """Tokens the server adds to each prompt: under the chat endpoint ``cfg.chat_template_tokens``, else the
    model's count (``ModelConfig.chat_template_tokens``); 0 for the completions endpoints (module docstring).

    Raises
    ------
    ConfigError
        The chat endpoint with a model whose template size is unknown and none given.
    """
    if cfg.backend != CHAT_BACKEND:
        return 0
    if cfg.chat_template_tokens is not None:
        return cfg.chat_template_tokens
    known = engine.model.chat_template_tokens
    if known is None:
        raise ConfigError(f"`chat_template_tokens` is not known for the model {engine.model.name}: the chat endpoint "
                          "prefills its chat template's tokens around each message; give `chat_template_tokens` "
                          "(e.g. 8 for <|im_start|>user ... <|im_start|>assistant), or use a completions backend",
                          param="chat_template_tokens")
    return known


def run_bench_serve(engine: EngineArgs, cfg: BenchServeConfig,
                    lengths: tuple[np.ndarray, np.ndarray] | None = None) -> BenchServeResult:
    """Simulate ``vllm bench serve`` with ``cfg`` against ``engine`` (module docstring).

    ``lengths = (prompt_tokens, output_tokens)`` replays known per-request lengths (e.g. a result
    JSON's ``input_lens`` / ``output_lens``) instead of sampling ``cfg.dataset``.
    """
    if not isinstance(engine, EngineArgs) or not isinstance(cfg, BenchServeConfig):
        raise ConfigError("run_bench_serve needs EngineArgs and a BenchServeConfig")
    fleet = serving_fleet(engine)
    if lengths is None:
        prompt, output = sample_lengths(cfg.dataset, cfg.num_prompts, fp_rng.stream(cfg.seed, "lengths"))
    else:
        prompt, output = (np.asarray(a, dtype=np.int64) for a in lengths)
        if prompt.shape != (cfg.num_prompts,) or output.shape != (cfg.num_prompts,) or prompt.min() < 1 \
                or output.min() < 1:
            raise ConfigError(f"lengths must be two arrays of {cfg.num_prompts} integers >= 1 (one per prompt)")
    template = chat_template_tokens(engine, cfg)
    send = send_times_s(cfg.num_prompts, float(cfg.request_rate_per_s), float(cfg.burstiness),
                        fp_rng.stream(cfg.seed, "arrivals"))
    requests = compile_requests(fleet, send, prompt + template, output, fp_rng.stream(cfg.seed, "routing"))
    run = CompiledRun(fleet=compile_fleet(fleet), requests=requests, horizon_s=math.inf,
                      features=compile_features(fleet, cfg.seed), max_in_flight=int(cfg.max_concurrency or 0),
                      log_steps="itl" in cfg.percentile_metrics)
    run = with_api_servers(fleet, run)  # open loop: the API server stage before the engine (fleetplan.sim.api_server)
    rate = float(cfg.request_rate_per_s) if math.isfinite(cfg.request_rate_per_s) else 1.0  # labels only
    sim = run_compiled(fleet, run, Level.ITERATION, rate, warmup_fraction=0.0)
    frame = sim.requests
    done = (frame["status"] == "done").to_numpy()
    start = frame["release_s"].to_numpy(dtype=np.float64)
    ttft = np.where(done, frame["ttft_s"].to_numpy(dtype=np.float64), np.nan)
    e2el = np.where(done, frame["e2e_s"].to_numpy(dtype=np.float64), np.nan)
    accepted = frame["accepted"].to_numpy(dtype=np.int64)
    metrics = _metrics(cfg, prompt, output, start, ttft, e2el, done, sim.step_log, accepted,
                       ITL_METHOD_STREAMED if uses_feature_kernel(run) else ITL_METHOD)
    return BenchServeResult(cfg, engine, fleet, prompt, output, send, start, ttft, e2el, done,
                            MappingProxyType(metrics), template)
