"""The bench scripts run against the simulated Pluto."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_bench_session_self_test_on_sim():
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts/bench_session.py"), "--backend", "sim"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[PASS] loopback self-test" in r.stdout and "FAIL" not in r.stdout


@pytest.mark.slow
def test_ota_sweep_on_sim(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts/ota_sweep.py"),
            "--radio",
            "sim",
            "--tx-gains=-20,-10",
            "--count",
            "8",
            "--schemes",
            "jscc,QPSK-3/4",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    rows = json.loads((tmp_path / "sweep.json").read_text())
    assert [(row["scheme"], row["tx_gain_db"]) for row in rows] == [
        ("jscc", -20.0),
        ("jscc", -10.0),
        ("QPSK-3/4", -20.0),
        ("QPSK-3/4", -10.0),
    ]
    assert all(row["decoded"] > 0 for row in rows)  # both schemes' frames decode on the same radio
    # 10 dB more TX gain: the estimated SNR rises by nearly as much (the profile's phase noise,
    # IQ imbalance and DC cap the estimate a little at the top), and PSNR does not fall
    assert 7 < rows[1]["snr_est_db"] - rows[0]["snr_est_db"] < 12
    assert rows[1]["psnr_db"] > rows[0]["psnr_db"]
    assert (tmp_path / "psnr_vs_snr.png").exists()
