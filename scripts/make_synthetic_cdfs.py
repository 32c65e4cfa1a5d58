"""Write the bundled synthetic CDFs ``cdfs/lmsys.json`` and ``cdfs/agent_heavy.json``.

Both are analytic (no sampling, no seed): a truncated log-normal mixture is fitted to
published figures and its exact CDF is written at a fine breakpoint grid (24 points per
octave, plus every common split threshold).  Totals only: neither source gives a
prompt/output split, so ``fleetplan`` applies ``DEFAULT_INPUT_FRACTION``.

lmsys (LMSYS-Chat-1M, Zheng et al., ICLR 2024), total tokens per request:
    Figures used, all from inference-fleet-sim (Chen et al., arXiv:2603.16054, 2026), section 3.3
    ("long-tailed to 65K tokens; F(4,096) ~ 0.984") and Table 1, whose short-pool
    share alpha_s is F(B_short) of the same CDF:
        F(512) = 0.638, F(1024) = 0.831, F(2048) = 0.948, F(4096) = 0.984,
        F(8192) = 0.997, F(12288) = 0.999; maximum 65,536 tokens.
    Model: two log-normal components truncated to (0, 65536], fitted by least
    squares on the probit of F (F(4096) weighted x10, the headline figure).

agent_heavy (synthetic coding-agent mix, inference-fleet-sim section 3.3):
    Paper figures: 46% of requests above 4K tokens, heavy tail to 300K tokens.
    Components (weights and medians as in inference-fleet-sim's agent-heavy mixture):
        RAG pipelines (Lewis et al., 2020)        35%, median 1,800 tokens
        SWE-bench tasks (Jimenez et al., 2024)    40%, median 10,000 tokens, sigma 1.0
        function calling, BFCL (Yan et al., 2024) 25%, median 3,000 tokens
    The RAG and BFCL log-sigma (shared) is solved so that P(L > 4096) = 0.46 exactly
    after truncation to (0, 300000]; SWE-bench sigma 1.0 gives the heavy tail
    (about 1% of requests above 64K).

Run from the repository root:  python scripts/make_synthetic_cdfs.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy import optimize, special

from fleetplan.paths import cdfs_dir
from fleetplan.workload import SPLIT_THRESHOLDS_TOKENS, write_cdf_json

POINTS_PER_OCTAVE = 24
GRID_START_TOKENS = 8
FRACTION_DECIMALS = 10
SCRIPT = "python scripts/make_synthetic_cdfs.py"

LMSYS_TABLE1_F = {512: 0.638, 1024: 0.831, 2048: 0.948, 4096: 0.984, 8192: 0.997, 12288: 0.999}
LMSYS_MAX_TOKENS = 65536
LMSYS_HEADLINE_WEIGHT = 10.0  # F(4096) is the figure the paper states in its text

AGENT_MAX_TOKENS = 300_000
AGENT_TARGET_ABOVE_4K = 0.46
AGENT_SPLIT_TOKENS = 4096
AGENT_SWE_SIGMA = 1.0
# (weight, median tokens) of RAG, SWE-bench, BFCL
AGENT_COMPONENTS = ((0.35, 1800.0), (0.40, 10000.0), (0.25, 3000.0))


def lognormal_mixture_cdf(x, weights, medians, sigmas, max_tokens: float) -> np.ndarray:
    """CDF of a log-normal mixture truncated to (0, max_tokens]."""
    x = np.minimum(np.asarray(x, dtype=np.float64), max_tokens)

    def raw(v):
        z = [(np.log(v) - np.log(m)) / s for m, s in zip(medians, sigmas, strict=True)]
        return sum(w * special.ndtr(zi) for w, zi in zip(weights, z, strict=True))

    return raw(x) / raw(max_tokens)


def grid(max_tokens: int) -> np.ndarray:
    """Geometric breakpoints (POINTS_PER_OCTAVE per doubling) plus split thresholds and max."""
    n_oct = np.log2(max_tokens / GRID_START_TOKENS)
    geo = GRID_START_TOKENS * 2.0 ** (np.arange(int(n_oct * POINTS_PER_OCTAVE) + 1) / POINTS_PER_OCTAVE)
    thresholds = [t for t in SPLIT_THRESHOLDS_TOKENS if t <= max_tokens]
    pts = np.concatenate((np.round(geo), thresholds, [max_tokens]))
    return np.unique(pts[pts <= max_tokens]).astype(np.int64)


def points(cdf_values: np.ndarray, tokens: np.ndarray) -> list[list[float]]:
    f = np.maximum.accumulate(np.round(cdf_values, FRACTION_DECIMALS))
    f[-1] = 1.0
    first = max(int(np.searchsorted(f, 0.0, side="right")) - 1, 0)  # keep one leading zero point
    return [[int(t), float(v)] for t, v in zip(tokens[first:], f[first:], strict=True)]


def fit_lmsys() -> tuple[dict, dict]:
    xs = np.array(sorted(LMSYS_TABLE1_F), dtype=np.float64)
    target = np.array([LMSYS_TABLE1_F[int(x)] for x in xs])
    weight = np.where(xs == 4096, LMSYS_HEADLINE_WEIGHT, 1.0)

    def model(theta):
        w = special.expit(theta[0])
        return lognormal_mixture_cdf(xs, (w, 1 - w), np.exp(theta[1:3]), np.exp(theta[3:5]), LMSYS_MAX_TOKENS)

    def resid(theta):
        f = np.clip(model(theta), 1e-12, 1 - 1e-12)
        return weight * (special.ndtri(f) - special.ndtri(target))

    theta0 = np.array([1.0, np.log(250.0), np.log(2000.0), np.log(1.0), np.log(1.0)])
    sol = optimize.least_squares(resid, theta0, method="lm", xtol=1e-12, ftol=1e-12)
    w = float(special.expit(sol.x[0]))
    params = {
        "weights": [w, 1 - w],
        "medians_tokens": [float(v) for v in np.exp(sol.x[1:3])],
        "sigmas": [float(v) for v in np.exp(sol.x[3:5])],
    }
    return params, dict(zip([str(int(x)) for x in xs], model(sol.x).tolist(), strict=True))


def solve_agent_sigma() -> float:
    weights = [w for w, _ in AGENT_COMPONENTS]
    medians = [m for _, m in AGENT_COMPONENTS]

    def gap(s):
        sig = (s, AGENT_SWE_SIGMA, s)
        f = lognormal_mixture_cdf(AGENT_SPLIT_TOKENS, weights, medians, sig, AGENT_MAX_TOKENS)
        return (1.0 - f) - AGENT_TARGET_ABOVE_4K

    return float(optimize.brentq(gap, 0.1, 3.0, xtol=1e-12))


def build(out_dir: Path) -> list[Path]:
    written = []
    params, fitted = fit_lmsys()
    tok = grid(LMSYS_MAX_TOKENS)
    f = lognormal_mixture_cdf(
        tok, params["weights"], params["medians_tokens"], params["sigmas"], LMSYS_MAX_TOKENS
    )
    lmsys = {
        "source": "LMSYS-Chat-1M (Zheng et al., ICLR 2024); fitted to figures published in "
        "inference-fleet-sim (Chen et al., arXiv:2603.16054, 2026), section 3.3 and Table 1",
        "license": "synthetic; derived from published figures only (no dataset rows)",
        "n_samples": None,
        "generated_by": SCRIPT,
        "provenance": {
            "method": "2-component log-normal mixture truncated to (0, 65536], least squares on probit(F)",
            "published_F": {str(k): v for k, v in LMSYS_TABLE1_F.items()},
            "fitted_F": fitted,
            "max_tokens": LMSYS_MAX_TOKENS,
            "parameters": params,
            "split": "totals only; prompt/output split by input_fraction",
        },
        "cdf": points(f, tok),
    }
    written.append(write_cdf_json(out_dir / "lmsys.json", lmsys))

    sigma = solve_agent_sigma()
    weights = [w for w, _ in AGENT_COMPONENTS]
    medians = [m for _, m in AGENT_COMPONENTS]
    sigmas = [sigma, AGENT_SWE_SIGMA, sigma]
    tok = grid(AGENT_MAX_TOKENS)
    f = lognormal_mixture_cdf(tok, weights, medians, sigmas, AGENT_MAX_TOKENS)
    agent = {
        "source": "synthetic agent-heavy mix; in the style of inference-fleet-sim "
        "(Chen et al., arXiv:2603.16054, 2026) section 3.3, not from a production trace",
        "license": "synthetic (no dataset rows)",
        "n_samples": None,
        "generated_by": SCRIPT,
        "provenance": {
            "method": "3-component log-normal mixture truncated to (0, 300000]",
            "components": [
                {
                    "name": "RAG (Lewis et al., 2020)",
                    "weight": weights[0],
                    "median_tokens": medians[0],
                    "sigma": sigmas[0],
                },
                {
                    "name": "SWE-bench (Jimenez et al., 2024)",
                    "weight": weights[1],
                    "median_tokens": medians[1],
                    "sigma": sigmas[1],
                },
                {
                    "name": "function calling, BFCL (Yan et al., 2024)",
                    "weight": weights[2],
                    "median_tokens": medians[2],
                    "sigma": sigmas[2],
                },
            ],
            "target": "P(L > 4096) = 0.46 (paper section 3.3); RAG/BFCL sigma solved to meet it",
            "max_tokens": AGENT_MAX_TOKENS,
            "split": "totals only; prompt/output split by input_fraction",
        },
        "cdf": points(f, tok),
    }
    written.append(write_cdf_json(out_dir / "agent_heavy.json", agent))
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=None, help="default: the bundled cdfs/ directory")
    args = parser.parse_args()
    for path in build(args.out_dir or cdfs_dir()):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
