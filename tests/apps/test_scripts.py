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
    # PSNR compared image by image on the images decoded at both gains: the means over eight frames
    # move by half a dB from run to run (each frame sees its own noise and phase-noise draw), while
    # the codec gains only about a dB from 4 to 14 dB here, so the means alone make a flaky test
    low, high = (per_frame(tmp_path / f"jscc_txgain_{g}") for g in (-20, -10))
    both = sorted(set(low) & set(high))
    assert len(both) >= 4
    gains = sorted(high[i] - low[i] for i in both)
    assert gains[len(gains) // 2] > 0  # the median image gains
    assert (tmp_path / "psnr_vs_snr.png").exists()


def per_frame(run: Path) -> dict[int, float]:
    """item id -> PSNR from a link run's psnr_per_frame.csv"""
    lines = (run / "psnr_per_frame.csv").read_text().splitlines()
    head = lines[0].split(",")
    i_item, i_psnr = head.index("item_id"), head.index("psnr_db")
    return {int(f[i_item]): float(f[i_psnr]) for f in (ln.split(",") for ln in lines[1:])}
