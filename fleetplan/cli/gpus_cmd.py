"""``fleetplan gpus``: inspect the GPU catalog (specs, prices, sources)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from fleetplan.cli.errors import FleetplanGroup
from fleetplan.cli.options import format_option, gpu_profiles_option, price_option
from fleetplan.cli.tables import emit_table
from fleetplan.hardware import GpuProfile, load_catalog
from fleetplan.hardware.profile import SPEC_FIELDS
from fleetplan.units import s_to_ms

ABSENT_TEXT = "none"


def _num(value: float | None, fmt: str = "{:g}") -> str:
    return ABSENT_TEXT if value is None else fmt.format(value)


_GROUP_EXAMPLES = """\b
Examples:
  fleetplan gpus list
  fleetplan gpus show h100
  fleetplan gpus list --gpu-profiles my_gpus.toml --price a100=1.79
"""
_LIST_EXAMPLES = """\b
Examples:
  fleetplan gpus list
  fleetplan gpus list --gpu-profiles my_gpus.toml
  fleetplan gpus list --price h100=2.49 --price a10g=0.75
  fleetplan gpus list --format csv > gpus.csv
"""
_SHOW_EXAMPLES = """\b
Examples:
  fleetplan gpus show h100
  fleetplan gpus show A100-80GB --price a100=1.79
  fleetplan gpus show MyAccel --gpu-profiles my_gpus.toml
  fleetplan gpus show h100 --format json
"""


@click.group(cls=FleetplanGroup, epilog=_GROUP_EXAMPLES)
def gpus() -> None:
    """Inspect the GPU catalog: specs, default prices, calibration and sources."""


@gpus.command("list", epilog=_LIST_EXAMPLES)
@gpu_profiles_option
@price_option
@format_option
def list_gpus(gpu_profiles: Path | None, prices: tuple[tuple[str, float], ...], fmt: str) -> None:
    """One row per GPU: memory, dense TFLOPS, price, availability, calibration."""
    catalog = load_catalog(gpu_profiles, dict(prices))
    table = Table(title="GPU catalog (TFLOPS dense; 'none' = not available on this GPU)")
    for header in ("name", "aliases", "BF16 TFLOPS", "FP8 TFLOPS", "mem GiB", "mem TB/s", "$/GPU-h",
                   "availability", "calibrated"):
        table.add_column(header, justify="left" if header in ("name", "aliases") else "right")
    for p in catalog:
        table.add_row(
            p.name, ", ".join(p.aliases) or "-", _num(p.bf16_tflops), _num(p.fp8_tflops), _num(p.hbm_gib),
            _num(p.hbm_tb_per_s), _num(p.price_usd_per_h, "{:.2f}"), _num(p.availability, "{:.4f}"),
            "yes" if p.calibrated else "no",
        )
    emit_table(table, fmt)


_SPEC_UNITS = {
    "bf16_tflops": "TFLOPS", "fp8_tflops": "TFLOPS", "hbm_gib": "GiB", "hbm_tb_per_s": "TB/s",
    "nvlink_gb_per_s": "GB/s", "network_gbps": "Gb/s", "gpus_per_node": "GPUs", "tdp_w": "W", "idle_w": "W",
    "price_usd_per_h": "USD/GPU-h", "failure_rate_per_day": "/node-day", "mttr_days": "days",
}


def _with_unit(value: float | None, unit: str) -> str:
    return ABSENT_TEXT if value is None else f"{value:g} {unit}"


def _show_rows(p: GpuProfile) -> list[tuple[str, str, str]]:
    src = p.sources
    rows = [("aliases", ", ".join(p.aliases) or "-", "catalog file")]
    rows += [(f, _with_unit(getattr(p, f), _SPEC_UNITS[f]), src[f]) for f in SPEC_FIELDS]
    rows.append(("availability", _num(p.availability, "{:.4f}"),
                 "eq. 6: 1 / (1 + failure_rate_per_day x mttr_days)"))
    if p.serving is not None:
        s = p.serving
        for key, value in (
            ("model", s.model), ("iter_base_ms (W)", f"{s_to_ms(s.iter_base_s):g} ms"),
            ("iter_per_seq_ms (H)", f"{s_to_ms(s.iter_per_seq_s):g} ms"), ("kv_blocks", f"{s.kv_blocks}"),
            ("block_size_tokens", f"{s.block_size_tokens}"), ("chunk_tokens", f"{s.chunk_tokens}"),
            ("ref_context_tokens", f"{s.ref_context_tokens}"),
            ("n_max(ref_context)", f"{s.n_max(s.ref_context_tokens)}"),
        ):
            field_key = "serving." + key.split(" ")[0]
            rows.append((f"serving.{key}", value, src.get(field_key, src["serving"])))
    if p.power is not None:
        c = p.power
        for key, value in (("k", f"{c.k:g}"), ("x0_log2_batch", f"{c.x0_log2_batch:g}"),
                           ("floor_w", f"{c.floor_w:g} W"), ("nominal_w", f"{c.nominal_w:g} W")):
            rows.append((f"power.{key}", value, src.get(f"power.{key}", src["power"])))
    return rows


@gpus.command("show", epilog=_SHOW_EXAMPLES)
@click.argument("name")
@gpu_profiles_option
@price_option
@format_option
def show_gpu(name: str, gpu_profiles: Path | None, prices: tuple[tuple[str, float], ...], fmt: str) -> None:
    """Every field of one GPU (by name or alias) with its source."""
    profile = load_catalog(gpu_profiles, dict(prices)).get(name)
    table = Table(title=f"{profile.name}: {profile.description}")
    table.add_column("field")
    table.add_column("value", justify="right")
    table.add_column("source", overflow="fold")
    for row in _show_rows(profile):
        table.add_row(*row)
    emit_table(table, fmt)
