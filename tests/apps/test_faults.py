"""Faults with real processes: the radio process killed and restarted mid-run."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hil.transport import free_tcp_endpoint

ROOT = Path(__file__).resolve().parents[2]


def _hil(*args, log):
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    return subprocess.Popen(
        [sys.executable, "-m", "hil.cli", *map(str, args)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )


@pytest.mark.slow
def test_radio_killed_and_restarted_mid_run(tmp_path):
    prof = tmp_path / "paced.toml"
    prof.write_text(
        'name = "paced"\n[radio]\nbackend = "sim"\nrx_buffer_size = 8192\n'
        '[radio.sim]\nchannel = "awgn"\nnoise_dbfs = -42.0\npaced = true\n'
    )
    ep_tx, ep_rx, ep_ctrl = free_tcp_endpoint(), free_tcp_endpoint(), free_tcp_endpoint()
    logs = {n: open(tmp_path / f"{n}.log", "w") for n in ("radio1", "radio2", "rx", "tx")}
    radio = ["radio", "--profile", prof, "--tx", ep_tx, "--rx", ep_rx]
    procs = {"radio1": _hil(*radio, log=logs["radio1"])}
    procs["rx"] = _hil(
        "rx",
        "--radio",
        ep_rx,
        "--control",
        ep_ctrl,
        "--count",
        40,
        "--summary",
        tmp_path / "s.json",
        "--idle-timeout",
        30,
        log=logs["rx"],
    )
    # 40 frames paced at ~250 ms of airtime each: about 10 s on the air
    procs["tx"] = _hil(
        "tx",
        "--radio",
        ep_tx,
        "--control",
        ep_ctrl,
        "--count",
        40,
        "--gap",
        1_000_000,
        "--pace",
        log=logs["tx"],
    )
    try:
        # kill the radio once the receiver reports a few decoded frames (it logs every 2 s)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            logs["rx"].flush()
            text = (tmp_path / "rx.log").read_text()
            if any(int(n) >= 3 for n in re.findall(r"frames: (\d+) decoded", text)):
                break
            time.sleep(0.1)
        procs["radio1"].send_signal(signal.SIGKILL)
        procs["radio1"].wait(10)
        time.sleep(0.5)
        procs["radio2"] = _hil(*radio, log=logs["radio2"])
        assert procs["tx"].wait(120) == 0
        assert procs["rx"].wait(120) == 0
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        for f in logs.values():
            f.close()
    s = json.loads((tmp_path / "s.json").read_text())
    c = s["counts"]
    # every frame sent is accounted for: delivered, or reported missed; none silently absent
    assert c["sent"] == 40 and c["balanced"]
    assert c["decoded"] + c["missed"] + c["header_failed"] == 40
    assert c["decoded"] >= 10  # the run went on after the restart
    assert s["receiver"]["resyncs"] >= 1  # the receiver noticed the radio's new stream
    missed = [int(k) for k, v in s["frame_status"].items() if v == "missed"]
    decoded = [int(k) for k, v in s["frame_status"].items() if v == "decoded"]
    if (
        missed
    ):  # what was lost was lost in the gap, not scattered: decoded frames exist on both sides
        assert min(decoded) < min(missed) or max(decoded) > max(missed)
