"""``--rate-profile`` / ``--peak-window-s`` and the peak-and-valley figures (``optimize``, ``whatif``).

Apart from ``horizon_options`` so that ``optimize`` imports neither the horizon planner nor its reports
unless a rate profile is given (start-up time of the README command).
"""

from __future__ import annotations

import click

from fleetplan.errors import ConfigError

__all__ = ["PEAK_OPTIONS", "peak_valley_doc", "print_peak_valley", "rate_profile_from_options"]


PEAK_OPTIONS = (
    click.option("--rate-profile", default=None,
                 help="A rate profile in place of --lam: a CSV of timestamp,rate, or 'workload' for the daily profile "
                 "`workloads fit` saved; the fleet is sized for the busiest --peak-window-s."),
    click.option("--peak-window-s", type=click.FloatRange(min=0, min_open=True), default=None,
                 help="Window of the busiest rate with --rate-profile, seconds [default: 3600]."),
)


def rate_profile_from_options(text: str | None, window_s: float | None, lam: float | None, workload):
    """(profile, window seconds) or (None, None) without --rate-profile."""
    if text is None:
        if window_s is not None:
            raise ConfigError("--peak-window-s applies to --rate-profile only: add --rate-profile or drop it")
        return None, None
    from fleetplan.plan.peak import DEFAULT_WINDOW_S, hourly_profile, read_rate_profile_csv

    if lam is not None:
        raise ConfigError("--rate-profile replaces --lam (the fleet is sized for the busiest window): give one")
    if text.strip().lower() == "workload":
        if workload.arrival_stats is None:
            raise ConfigError(f"--rate-profile workload: {workload.name} has no saved daily profile; refit its trace "
                              "with `fleetplan workloads fit` or give --rate-profile FILE.csv")
        profile = hourly_profile(workload.arrival_stats.hourly_rates_per_s, f"{workload.name} hourly profile")
    else:
        profile = read_rate_profile_csv(text)
    return profile, DEFAULT_WINDOW_S if window_s is None else window_s


def peak_valley_doc(request, fleet, profile, window_s: float, gpu_profiles, price_overrides) -> dict:
    """The rate profile's peak-and-valley figures as a JSON-ready dict."""
    from fleetplan.hardware import load_catalog
    from fleetplan.hardware.procurement import load_gpu_prices
    from fleetplan.plan.peak import peak_valley
    from fleetplan.report.horizon import peak_valley_dict

    catalog = load_catalog(gpu_profiles, dict(price_overrides) if price_overrides else None)
    types = tuple(sorted({p.gpu for p in fleet.pools}))
    return peak_valley_dict(peak_valley(request, fleet, profile, window_s, load_gpu_prices(catalog, types)))


def print_peak_valley(console, doc: dict) -> None:
    u = doc["utilisation"]
    console.print(f"Rate profile {doc['profile']}: busiest {doc['window_s']:g} s window from t = "
                  f"{doc['peak_starts_at_s']:g} s at {doc['peak_lam_per_s']:.4g} req/s (sized for it); utilisation of "
                  f"the fleet's capacity over the profile: min {min(u):.0%}, mean {sum(u) / len(u):.0%}, "
                  f"max {max(u):.0%}.")
    console.print("Utilisation per interval: " + " ".join(f"{x:.0%}" for x in u))
    peak = ", ".join(f"{n}x {g}" for g, n in doc["peak_gpus"].items())
    base = ", ".join(f"{n}x {g}" for g, n in doc["base_gpus"].items())
    console.print(f"Owning the peak fleet ({peak}) all day: ${doc['all_owned_usd_per_day']:,.0f}/day; owning {base} "
                  "and renting the rest on demand at each interval: "
                  f"${doc['base_plus_on_demand_usd_per_day']:,.0f}/day "
                  "(owned = amortised capex, or reserved for rent-only GPUs; on-demand = catalog price).")
