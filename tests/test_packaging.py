"""The wheel carries cdfs/ and gpu_profiles/ and works outside the repository."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_installs_and_runs_outside_the_repo(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(REPO)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    wheel = next(dist.glob("fleetplan-*.whl"))
    env_dir = tmp_path / "venv"
    # A fresh environment that sees this interpreter's dependencies (numpy, numba, ...) through
    # a .pth line, so no network is needed; the wheel itself is installed into it without
    # dependencies.  .pth files inside that directory (the editable install of the repository)
    # are not processed, so only the wheel's copy of fleetplan is importable.
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(site, "_fleetplan_test_deps.pth").write_text("\n".join(sorted(deps)) + "\n")
    subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", str(wheel)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    exe = env_dir / "bin" / "fleetplan"
    env = {**os.environ, "COLUMNS": "200"}
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    wl = subprocess.run(
        [str(exe), "workloads", "list"], cwd=outside, env=env, capture_output=True, text=True, timeout=300
    )
    assert wl.returncode == 0, wl.stderr
    for name in ("lmsys", "azure_conv", "azure_code", "agent_heavy"):
        assert name in wl.stdout
    gp = subprocess.run([str(exe), "gpus", "list"], cwd=outside, env=env, capture_output=True, text=True, timeout=300)
    assert gp.returncode == 0, gp.stderr
    for name in ("A100-80GB", "H100-SXM", "MI300X"):
        assert name in gp.stdout
    where = subprocess.run(
        [str(py), "-c", "import fleetplan.paths as p; print(p.cdfs_dir())"],
        cwd=outside,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "_data" in where.stdout and str(REPO) not in where.stdout
