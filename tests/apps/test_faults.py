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

from hil.transport import free_tcp_endpoints

from .trio import run_trio

ROOT = Path(__file__).resolve().parents[2]


def _hil(*args, log):
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    return subprocess.Popen(
        [sys.executable, "-m", "hil.cli", *map(str, args)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )


class _Procs:
    """hil processes, each with a log in tmp_path; whatever still runs at the end is killed."""

    def __init__(self, tmp_path):
        self.tmp, self.procs, self.logs = tmp_path, {}, {}

    def start(self, name, *args):
        self.logs[name] = open(self.tmp / f"{name}.log", "w")
        self.procs[name] = _hil(*args, log=self.logs[name])
        return self.procs[name]

    def __getitem__(self, name):
        return self.procs[name]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        for f in self.logs.values():
            f.close()


def _paced_profile(tmp_path):
    prof = tmp_path / "paced.toml"
    prof.write_text(
        'name = "paced"\n[radio]\nbackend = "sim"\nrx_buffer_size = 8192\n'
        '[radio.sim]\nchannel = "awgn"\nnoise_dbfs = -42.0\npaced = true\n'
    )
    return prof


def _radio_args(tmp_path, ep_tx, ep_rx):
    return ["radio", "--profile", _paced_profile(tmp_path), "--tx", ep_tx, "--rx", ep_rx]


def _rx_args(ep_rx, ep_ctrl, summary):
    return [
        "rx",
        "--radio",
        ep_rx,
        "--control",
        ep_ctrl,
        "--count",
        40,
        "--summary",
        summary,
        "--idle-timeout",
        30,
    ]


def _paced_tx_args(ep_tx, ep_ctrl):
    """40 frames paced at ~250 ms of airtime each: about 10 s on the air."""
    return [
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
    ]


def _wait_decoded(path, n, timeout=60):
    """Until the receiver's log reports n decoded frames (it logs every 2 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and any(
            int(k) >= n for k in re.findall(r"frames: (\d+) decoded", path.read_text())
        ):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
def test_radio_killed_and_restarted_mid_run(tmp_path):
    ep_tx, ep_rx, ep_ctrl = free_tcp_endpoints(3)
    radio = _radio_args(tmp_path, ep_tx, ep_rx)
    with _Procs(tmp_path) as procs:
        procs.start("radio1", *radio)
        procs.start("rx", *_rx_args(ep_rx, ep_ctrl, tmp_path / "s.json"))
        procs.start("tx", *_paced_tx_args(ep_tx, ep_ctrl))
        _wait_decoded(tmp_path / "rx.log", 3)  # kill the radio once a few frames are through
        procs["radio1"].send_signal(signal.SIGKILL)
        procs["radio1"].wait(10)
        time.sleep(0.5)
        procs.start("radio2", *radio)
        assert procs["tx"].wait(120) == 0
        assert procs["rx"].wait(120) == 0
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


@pytest.mark.slow
def test_tx_killed_and_restarted_rx_carries_on(tmp_path):
    ep_tx, ep_rx, ep_ctrl = free_tcp_endpoints(3)
    tx = _paced_tx_args(ep_tx, ep_ctrl)
    with _Procs(tmp_path) as procs:
        procs.start("radio", *_radio_args(tmp_path, ep_tx, ep_rx))
        procs.start("rx", *_rx_args(ep_rx, ep_ctrl, tmp_path / "s.json"))
        procs.start("tx1", *tx)
        assert _wait_decoded(tmp_path / "rx.log", 3)
        procs["tx1"].send_signal(signal.SIGKILL)
        procs["tx1"].wait(10)
        procs.start("tx2", *tx[:-1], "--count", 5, "--first-seq", 1000)  # a new run, new seqs
        assert procs["tx2"].wait(120) == 0
        assert procs["rx"].wait(120) == 0
    s = json.loads((tmp_path / "s.json").read_text())
    status = s["frame_status"]
    assert all(
        status[str(k)] == "decoded" for k in range(1000, 1005)
    )  # the restarted transmitter's frames
    assert s["counts"]["balanced"] and s["counts"]["duplicates"] == 0
    first_run = [int(k) for k in status if int(k) < 1000]
    assert (
        sum(status[str(k)] == "decoded" for k in first_run) >= 3
    )  # and the first run's frames before the kill


@pytest.mark.slow
def test_rx_killed_and_restarted_resumes_on_next_frame(tmp_path):
    ep_tx, ep_rx, ep_ctrl = free_tcp_endpoints(3)
    with _Procs(tmp_path) as procs:
        procs.start("radio", *_radio_args(tmp_path, ep_tx, ep_rx))
        procs.start("rx1", *_rx_args(ep_rx, ep_ctrl, tmp_path / "s1.json"))
        procs.start("tx", *_paced_tx_args(ep_tx, ep_ctrl))
        assert _wait_decoded(tmp_path / "rx1.log", 3)
        procs["rx1"].send_signal(signal.SIGKILL)
        procs["rx1"].wait(10)
        procs.start("rx2", *_rx_args(ep_rx, ep_ctrl, tmp_path / "s2.json"))
        assert procs["tx"].wait(120) == 0
        assert procs["rx2"].wait(120) == 0
    s = json.loads((tmp_path / "s2.json").read_text())
    c = s["counts"]
    decoded = sorted(int(k) for k, v in s["frame_status"].items() if v == "decoded")
    # the new receiver picks up the stream and decodes every frame from its start on, through the last one
    assert decoded and decoded[-1] == 39
    assert decoded == list(range(decoded[0], 40)) or len(decoded) >= 40 - decoded[0] - 1
    assert c["balanced"]


@pytest.mark.parametrize(
    "error", [OSError(19, "No such device"), TimeoutError(110, "libiio timeout")]
)
def test_pluto_gone_mid_stream_exits_nonzero_silent_partial_results_kept(
    tmp_path, monkeypatch, error
):
    """The Pluto backend's device fails mid-stream: clear message, TX silenced, exit code 4, rx keeps what it got."""
    from hil.apps import radio
    from hil.radio.pluto import PlutoRadio

    from ..radio.fake_pluto import FakePluto

    fakes = []

    class FailingFake(FakePluto):
        """Paced like hardware: rx() waits for its buffer, tx() for room in the kernel's buffers."""

        def rx(self):
            if self.rx_calls >= 16:
                raise error
            time.sleep(self.rx_buffer_size / self.sample_rate)
            return super().rx()

        def tx(self, data):
            time.sleep(len(data) / self.sample_rate)
            return super().tx(data)

    def open_failing(cfg):
        f = FailingFake()
        fakes.append(f)
        return PlutoRadio(cfg, device=f)

    monkeypatch.setattr(radio, "open_radio", open_failing)
    out, s = run_trio(
        tmp_path,
        count=20,
        tx_extra=("--gap", "60000"),
        radio_args=("--backend", "pluto", "--uri", "ip:fake"),
        idle_timeout=None,
        join_s=60,
        wait_for_rx=False,
    )
    assert out["tx"] == 0
    assert out["radio"] == 4  # non-zero: the device failed
    assert not fakes[0].transmitting and fakes[0].destroyed_tx >= 1  # transmitter left silent
    c = s["counts"]
    assert 0 < c["decoded"] < 20 and c["balanced"], (
        c,
        s["receiver"],
        s["per_frame"][:5],
    )  # partial results kept and accounted
    assert s["end_of_stream"]  # the radio ended the stream cleanly after the failure


def test_slow_receiver_slows_the_sim_pipeline_with_bounded_queues(tmp_path):
    """A receiver that stops reading: the free-running sim radio blocks instead of queueing without bound."""
    import threading

    import zmq

    from hil.apps import radio
    from hil.transport import SampleReceiver, make_socket, recv_json
    from hil.transport.sockets import DEFAULT_HWM

    prof = tmp_path / "small.toml"
    prof.write_text(
        '[radio]\nbackend = "sim"\nrx_buffer_size = 4096\n[radio.sim]\nchannel = "awgn"\n'
    )
    ep_tx, ep_rx, ep_tel = free_tcp_endpoints(3)
    t = threading.Thread(
        target=radio.main,
        daemon=True,
        args=(
            [
                "--profile",
                str(prof),
                "--tx",
                ep_tx,
                "--rx",
                ep_rx,
                "--telemetry",
                ep_tel,
                "--max-seconds",
                "30",
            ],
        ),
    )
    t.start()
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"radio")
    sub.connect(ep_tel)
    pull = make_socket(ctx, zmq.PULL, ep_rx, bind=False)
    rxs = SampleReceiver(pull)
    assert rxs.recv(timeout_s=10) is not None  # the radio is running; now the receiver stalls
    time.sleep(3.0)
    produced, blocked = 0, False
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        m = recv_json(sub, timeout_s=0.5)
        if m is not None:
            produced = max(produced, m["device_samples"])
            blocked |= m["rx_blocked"]
    sub.close(0)
    pull.close(0)
    ctx.term()
    blocks = produced / 4096
    # Free-running, 3 s would be thousands of blocks; blocked, it is what the queues hold: the two
    # ZeroMQ high-water marks plus what the kernel's loopback TCP buffers take (their maxima).
    tcp = sum(int(open(f"/proc/sys/net/ipv4/tcp_{k}").read().split()[2]) for k in ("rmem", "wmem"))
    bound = 2 * DEFAULT_HWM + tcp / (8 * 4096) + 16
    assert 0 < blocks <= bound, (blocks, bound)
    assert blocked  # and the radio says so in its telemetry
