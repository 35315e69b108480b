"""The package as a user installs it: a wheel built from this checkout, installed into a fresh
folder, runs the link with nothing from the source tree (profiles and checkpoints are package
data)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_installed_wheel_runs_the_link(tmp_path):
    wheels, target, run = tmp_path / "wheels", tmp_path / "site", tmp_path / "run"
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("hil-*.whl")
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    run.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import hil, hil.radio.config as c; print(hil.__file__); print(c.profiles_dir())",
        ],
        cwd=run,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert all(Path(w).is_relative_to(target) for w in where), where  # not the source tree
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "hil.cli",
            "link",
            "--count",
            "4",
            "--json",
            "--out",
            str(run / "out"),
        ],
        cwd=run,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads(r.stdout)
    assert Path(s["checkpoint"]).is_relative_to(target)
    assert Path(s["profile"]) == target / "hil/profiles/sim_two_pluto.toml"
    assert s["counts"]["sent"] == 4 and s["counts"]["decoded"] >= 3
