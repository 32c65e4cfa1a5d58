"""The fabric that carries a PDD fleet's KV transfers: a leaf-spine network, a path policy, and
which host each prefill and decode instance sits on (``PddSpec.network``).

With a ``FabricSpec`` each prefill-to-decode KV transfer is a flow from the prefill
instance's host to the decode instance's host whose rate is its max-min fair share of the
links (``fleetplan.sim.network``; kernel ``fleetplan.sim._kernels.pdd.network``), so concurrent
transfers slow each other and that feeds back into TTFT and decode start.  The fabric's
links then set the transfer rate: ``KvTransferSpec.bandwidth_bytes_per_s`` is not used (its
latency, KV bytes per token and layer-wise streaming are).  ``load_fabric_toml`` reads one
from a TOML file (a fabric file).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from fleetplan.errors import ConfigError
from fleetplan.sim.network import LeafSpineFabric, PathPolicy, path_policy

__all__ = ["FabricSpec", "load_fabric_toml"]


def _hosts(name: str, value) -> tuple[int, ...] | None:
    if value is None:
        return None
    hosts = tuple(value)
    if not hosts or any(isinstance(h, bool) or not isinstance(h, int) or h < 0 for h in hosts):
        raise ConfigError(f"fabric {name} = {value!r} must list one host index >= 0 per instance")
    return hosts


@dataclass(frozen=True)
class FabricSpec:
    """Leaf-spine ``fabric``, ``path_policy`` (``ecmp`` or ``reservation``), and the host of each
    prefill instance (``prefill_hosts``; default ``0..P-1``) and decode instance
    (``decode_hosts``; default ``P..P+D-1``).  Several instances may share a host; a prefill and a
    decode instance may not (their KV would not cross the fabric).  Checked against the pools by
    ``PddSpec``."""

    fabric: LeafSpineFabric
    path_policy: PathPolicy = PathPolicy.ECMP
    prefill_hosts: tuple[int, ...] | None = None
    decode_hosts: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.fabric, LeafSpineFabric):
            raise ConfigError(f"fabric must be a LeafSpineFabric, got {type(self.fabric).__name__}")
        object.__setattr__(self, "path_policy", path_policy(self.path_policy))
        object.__setattr__(self, "prefill_hosts", _hosts("prefill_hosts", self.prefill_hosts))
        object.__setattr__(self, "decode_hosts", _hosts("decode_hosts", self.decode_hosts))

    def hosts(self, n_prefill: int, n_decode: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """``(prefill host of each prefill instance, decode host of each decode instance)``, checked."""
        pf = self.prefill_hosts if self.prefill_hosts is not None else tuple(range(n_prefill))
        dec = self.decode_hosts if self.decode_hosts is not None else tuple(range(n_prefill, n_prefill + n_decode))
        for name, hosts, n in (("prefill_hosts", pf, n_prefill), ("decode_hosts", dec, n_decode)):
            if len(hosts) != n:
                raise ConfigError(f"fabric {name} lists {len(hosts)} hosts for {n} instances; give one per instance")
            bad = [h for h in hosts if h >= self.fabric.n_hosts]
            if bad:
                raise ConfigError(f"fabric {name} names host {bad[0]} but the fabric has hosts "
                                  f"0..{self.fabric.n_hosts - 1}; add leaves or renumber")
        shared = sorted(set(pf) & set(dec))
        if shared:
            raise ConfigError(f"host {shared[0]} holds both a prefill and a decode instance; their KV would not "
                              f"cross the fabric: give disjoint prefill_hosts and decode_hosts")
        return pf, dec


_KEYS = {"n_leaves", "hosts_per_leaf", "n_spines", "host_link_gbps", "spine_link_gbps", "path_policy",
         "prefill_hosts", "decode_hosts"}


def load_fabric_toml(path: str | Path) -> FabricSpec:
    """A ``FabricSpec`` from the ``[fabric]`` table of a TOML file (keys: ``n_leaves``,
    ``hosts_per_leaf``, ``n_spines``, ``host_link_gbps``, ``spine_link_gbps``, ``path_policy``,
    ``prefill_hosts``, ``decode_hosts``)."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"fabric file {path}: {exc}; give a readable TOML file with a [fabric] table") from exc
    table = data.get("fabric")
    if not isinstance(table, dict):
        raise ConfigError(f"fabric file {path} has no [fabric] table; add one (keys: {', '.join(sorted(_KEYS))})")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ConfigError(f"fabric file {path}: unknown key {unknown[0]!r}; use {', '.join(sorted(_KEYS))}")
    geometry = {k: table[k] for k in ("n_leaves", "hosts_per_leaf", "n_spines", "host_link_gbps", "spine_link_gbps")
                if k in table}
    try:
        fabric = LeafSpineFabric(**geometry)
    except TypeError as exc:
        raise ConfigError(f"fabric file {path}: {exc}; give n_leaves, hosts_per_leaf and n_spines") from exc
    return FabricSpec(fabric, table.get("path_policy", PathPolicy.ECMP.value), table.get("prefill_hosts"),
                      table.get("decode_hosts"))
