"""One source for the sample rate: the PHY config. Profiles, channel profiles, the wire header and
recordings are checked against it, and a mismatch is a clear error."""

import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hil.apps import tx
from hil.apps.receiver import RateMismatch, Receiver
from hil.apps.sources import Chunk
from hil.channel import check_sample_rate, profile
from hil.jscc.train import ExperimentConfig
from hil.phy import OfdmConfig
from hil.radio.config import ConfigError, RadioConfig, SimConfig

ROOT = Path(__file__).resolve().parents[2]


def test_a_channel_profile_in_hz_takes_the_phy_rate():
    st = profile("two_pluto", 8e6)
    assert {t["kind"]: t.get("sample_rate_hz") for t in st}["cfo"] == 8e6
    assert {t["kind"]: t.get("sample_rate_hz") for t in st}["phase_noise"] == 8e6
    assert profile("awgn") == [{"kind": "awgn"}]  # nothing in Hz: no rate needed
    with pytest.raises(ValueError, match="pass sample_rate_hz"):
        profile("multipath_cfo")
    with pytest.raises(ValueError, match="8 MSps, the PHY at 4 MSps"):
        check_sample_rate(st, 4e6, "here")
    check_sample_rate(st, 8e6, "here")


def test_training_config_refuses_a_channel_at_another_rate():
    ExperimentConfig.from_dict(
        {"phy": {"sample_rate_hz": 8e6}, "channel": {"profile": "two_pluto"}}
    )
    with pytest.raises(ValueError, match="the PHY config is the one source"):
        ExperimentConfig(phy=OfdmConfig(sample_rate_hz=8e6))  # default channel is at 4 MSps


def test_the_sim_channel_runs_at_the_radio_rate():
    cfg = RadioConfig(sample_rate_hz=8e6, sim=SimConfig(channel="multipath_cfo"))
    assert {t["kind"]: t.get("sample_rate_hz") for t in cfg.sim.stages(8e6)}["cfo"] == 8e6
    custom = [{"kind": "cfo", "max_cfo_hz": 100.0, "sample_rate_hz": 4e6}]
    with pytest.raises(ConfigError, match=r"sim\.channel"):
        RadioConfig(sample_rate_hz=8e6, sim=SimConfig(channel=custom))
    st = SimConfig(channel=[{"kind": "cfo", "max_cfo_hz": 100.0}]).stages(8e6)
    assert st[0]["sample_rate_hz"] == 8e6


def test_the_receiver_refuses_a_stream_at_another_rate():
    rx = Receiver(OfdmConfig(), b"\0" * 8, None, [], logging.getLogger("t"))
    z = np.zeros(1000, np.complex64)
    rx.feed(Chunk(z, 0, 0, False, 4e6))
    rx.feed(Chunk(z, None, 0, False, 0.0))  # raw stream: no rate stated
    with pytest.raises(RateMismatch, match=r"2\.5 MSps but the checkpoint's PHY at 4 MSps"):
        rx.feed(Chunk(z, 2000, 0, False, 2.5e6))


def test_tx_refuses_a_rate_the_phy_does_not_run_at():
    with pytest.raises(ValueError, match="disagrees with the checkpoint's PHY"):
        tx.main(["--radio", "tcp://127.0.0.1:9", "--count", "1", "--sample-rate", "8e6"])


def test_link_refuses_a_profile_at_another_rate(tmp_path):
    prof = (ROOT / "firmware_configs/sim_two_pluto.toml").read_text()
    assert "sample_rate_hz = 4e6" in prof
    p = tmp_path / "fast.toml"
    p.write_text(prof.replace("sample_rate_hz = 4e6", "sample_rate_hz = 8e6"))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "hil.cli",
            "link",
            "--profile",
            str(p),
            "--count",
            "1",
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode != 0
    assert "sample_rate_hz = 8e+06, the checkpoint's PHY runs at 4e+06 Hz" in r.stderr


def test_a_checkpoint_exported_for_another_rate_runs_a_link_at_that_rate(tmp_path):
    """hil export --sample-rate: the same weights and numerology with the PHY at 20 MSps (a
    new fingerprint; the document names its source); the 20 MSps sim profile refuses the
    shipped 4 MSps model and runs the exported one: every frame decoded."""
    import json

    from safetensors.numpy import load_file

    from hil.apps.common import shipped_checkpoint
    from hil.jscc.checkpoint import read_meta

    src = shipped_checkpoint()
    out = tmp_path / "k6_20m"
    r = subprocess.run(
        [sys.executable, "-m", "hil.cli", "export", "--checkpoint", str(src), "--out", str(out),
         "--sample-rate", "20e6"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    a, b = read_meta(src), read_meta(out)
    assert b["phy"] == {**a["phy"], "sample_rate_hz": 20e6}
    assert b["fingerprint"] != a["fingerprint"]
    assert b["retargeted_from"] == {"fingerprint": a["fingerprint"], "sample_rate_hz": 4e6}
    wa, wb = load_file(f"{src}.safetensors"), load_file(f"{out}.safetensors")
    assert wa.keys() == wb.keys() and all(np.array_equal(wa[k], wb[k]) for k in wa)
    prof = str(ROOT / "firmware_configs/sim_clean_20msps.toml")

    def link(ckpt):
        return subprocess.run(
            [sys.executable, "-m", "hil.cli", "link", "--profile", prof, "--checkpoint",
             str(ckpt), "--count", "4", "--json", "--out", str(tmp_path / "o")],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    r = link(src)
    assert r.returncode != 0
    assert "sample_rate_hz = 2e+07, the checkpoint's PHY runs at 4e+06 Hz" in r.stderr
    r = link(out)
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads(r.stdout)
    assert s["sample_rate_hz"] == 20e6 and s["counts"]["decoded"] == 4
    assert s["fingerprint"] == b["fingerprint"] and s["psnr_db_mean"] > 25
