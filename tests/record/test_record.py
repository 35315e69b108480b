"""SigMF recording and replay."""

import json
import threading
import time

import numpy as np
import pytest
import sigmf
from sigmf import SigMFFile

from hil.apps import link, replay, rx
from hil.record import SigMFReader, SigMFWriter, UnsupportedRecording
from hil.transport import free_tcp_endpoint, free_tcp_endpoints


def _x(n, seed=0):
    r = np.random.default_rng(seed)
    return ((r.normal(size=n) + 1j * r.normal(size=n)) * 0.1).astype(np.complex64)


def test_writer_reader_round_trip_with_gaps(tmp_path):
    x = _x(10_000)
    with SigMFWriter(tmp_path / "r", 4e6, 2.4e9, hw="test") as w:
        w.write(x[:3000], 100)
        w.write(x[3000:6000], 3100)
        w.write(x[6000:], 9000, "overflow")  # 2900 samples lost
        w.annotate(50, 10, "frame sent", seq=1)
    r = SigMFReader(tmp_path / "r.sigmf-meta", verify_checksum=True)
    assert r.n == 10_000 and r.sample_rate_hz == 4e6 and r.center_freq_hz == 2.4e9
    assert r.captures == [(0, 100), (6000, 9000)]
    np.testing.assert_array_equal(r.read(0, 10_000), x)
    chunks = list(r.chunks(4096))
    np.testing.assert_array_equal(np.concatenate([c.samples for c in chunks]), x)
    assert [c.new_capture for c in chunks].count(True) == 1
    lost = [a for a in r.annotations() if a["core:label"] == "samples lost"]
    assert lost[0]["hil:lost_samples"] == 2900 and lost[0]["core:sample_start"] == 6000
    meta = json.loads((tmp_path / "r.sigmf-meta").read_text())
    assert meta["global"]["core:datatype"] == "cf32_le" and "core:sha512" in meta["global"]


def _foreign(tmp_path, datatype, data: bytes, hw="ADALM-PLUTO"):
    (tmp_path / "f.sigmf-data").write_bytes(data)
    m = SigMFFile(
        data_file=str(tmp_path / "f.sigmf-data"),
        global_info={
            sigmf.DATATYPE_KEY: datatype,
            sigmf.SAMPLE_RATE_KEY: 1e6,
            sigmf.HW_KEY: hw,
            sigmf.VERSION_KEY: sigmf.__specification__,
        },
    )
    m.add_capture(0, metadata={sigmf.FREQUENCY_KEY: 915e6})
    m.tofile(str(tmp_path / "f"))
    return tmp_path / "f"


def test_pluto_native_ci16_is_accepted_and_scaled(tmp_path):
    iq = np.array([[2048, -1024], [0, 512]], np.int16)
    r = SigMFReader(_foreign(tmp_path, "ci16_le", iq.tobytes()))
    np.testing.assert_allclose(r.read(0, 2), [1 - 0.5j, 0.25j])


def test_ci16_from_other_tools_uses_int16_full_scale(tmp_path):
    iq = np.array([[16384, 0]], np.int16)
    r = SigMFReader(_foreign(tmp_path, "ci16_le", iq.tobytes(), hw="USRP B210"))
    np.testing.assert_allclose(r.read(0, 1), [0.5])


@pytest.mark.parametrize("dt", ["cu8", "ri16_le", "cf64_le"])
def test_unsupported_datatypes_are_refused_clearly(tmp_path, dt):
    with pytest.raises(
        UnsupportedRecording, match=r"not supported; use one of \('cf32_le', 'ci16_le'\)"
    ):
        SigMFReader(_foreign(tmp_path, dt, b"\x00" * 64))


def test_missing_or_invalid_metadata(tmp_path):
    with pytest.raises(UnsupportedRecording, match="not found"):
        SigMFReader(tmp_path / "nothing")
    (tmp_path / "bad.sigmf-meta").write_text('{"global": {}}')
    (tmp_path / "bad.sigmf-data").write_bytes(b"")
    with pytest.raises(UnsupportedRecording):
        SigMFReader(tmp_path / "bad")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A live sim link (clean profile) recorded to SigMF, with its per-frame results."""
    d = tmp_path_factory.mktemp("rec")
    from pathlib import Path

    prof = str(Path(__file__).resolve().parents[2] / "firmware_configs/sim_clean.toml")
    rc = link.main(
        [
            "--count",
            "12",
            "--profile",
            prof,
            "--out",
            str(d / "live"),
            "--record",
            str(d / "rec"),
            "--json",
        ]
    )
    assert rc == 0
    live = [json.loads(line) for line in (d / "live/frames.jsonl").read_text().splitlines()]
    assert len(live) == 12
    return d, live


def _frames(summary):
    keys = ("seq", "item_id", "frame_start", "snr_db", "cfo_hz", "evm_pilots", "psnr_db", "ssim")
    return sorted(
        ({k: r[k] for k in keys} for r in summary["per_frame"] if r["status"] == "decoded"),
        key=lambda r: r["seq"],
    )


def _live(live):
    keys = ("seq", "item_id", "frame_start", "snr_db", "cfo_hz", "evm_pilots", "psnr_db", "ssim")
    return sorted(({k: r[k] for k in keys} for r in live), key=lambda r: r["seq"])


def test_replay_gives_identical_results(recorded, tmp_path):
    d, live = recorded
    ep = free_tcp_endpoint()
    t = threading.Thread(target=replay.main, args=([str(d / "rec"), "--rx", ep],))
    t.start()
    assert rx.main(["--radio", ep, "--count", "12", "--summary", str(tmp_path / "s.json")]) == 0
    t.join(60)
    s = json.loads((tmp_path / "s.json").read_text())
    assert _frames(s) == _live(live)


def test_offline_decoding_of_the_recording_is_identical(recorded, tmp_path):
    d, live = recorded
    assert (
        rx.main(
            ["--recording", str(d / "rec"), "--count", "12", "--summary", str(tmp_path / "s.json")]
        )
        == 0
    )
    s = json.loads((tmp_path / "s.json").read_text())
    assert _frames(s) == _live(live)


def test_annotations_match_ground_truth(recorded):
    d, live = recorded
    r = SigMFReader(d / "rec")
    sent = sorted(
        (a for a in r.annotations() if a["core:label"] == "frame sent"), key=lambda a: a["hil:seq"]
    )
    det = {a["hil:seq"]: a for a in r.annotations() if a["core:label"] == "frame detected (ok)"}
    assert [a["hil:seq"] for a in sent] == list(range(12))
    assert [a["hil:item_id"] for a in sent] == list(range(12))
    for a in sent:  # clean channel: the receiver's timing is exact, and so are the sent offsets
        assert det[a["hil:seq"]]["core:sample_start"] == a["core:sample_start"]
        assert a["core:sample_count"] == 2160 and abs(a["hil:true_snr_db"] - 20.0) < 1.0
    live_starts = sorted(r_["frame_start"] for r_ in live)
    assert sorted(a["hil:device_offset"] for a in sent) == live_starts


def test_recording_metadata_has_radio_settings(recorded):
    d, _ = recorded
    r = SigMFReader(d / "rec")
    assert r.global_field("hil:radio_profile") == "sim_clean"
    assert r.global_field("hil:rx_gain_db") == 40.0 and r.global_field("hil:tx_gain_db") == -10.0
    assert "sim backend" in r.global_field("core:hw")
    assert r.center_freq_hz == 2.4e9
    assert r.meta.get_captures()[0]["core:datetime"].startswith("20")


def test_injected_drops_recorded_as_annotations(tmp_path):
    prof = tmp_path / "drops.toml"
    prof.write_text(
        'name = "drops"\n[radio]\nbackend = "sim"\nrx_buffer_size = 16384\n'
        '[radio.sim]\nchannel = "awgn"\nnoise_dbfs = -42.0\ndrop_every = 4\ndrop_samples = 777\n'
    )
    rc = link.main(
        [
            "--count",
            "6",
            "--profile",
            str(prof),
            "--out",
            str(tmp_path / "live"),
            "--record",
            str(tmp_path / "rec"),
            "--json",
        ]
    )
    summary = json.loads((tmp_path / "live/summary.json").read_text())
    assert rc == 0 and summary["counts"]["balanced"]
    r = SigMFReader(tmp_path / "rec")
    lost = [a for a in r.annotations() if a["core:label"] == "samples lost"]
    assert lost and all(a["hil:lost_samples"] == 777 for a in lost)
    assert len(lost) == summary["receiver"]["resyncs"] and len(r.captures) == len(lost) + 1
    assert sum(a["hil:lost_samples"] for a in lost) == summary["receiver"]["lost_samples"]


def test_hil_record_captures_a_radio_for_n_frames(tmp_path):
    """`hil record` against a running radio process: stops after --frames, annotates what it saw."""
    from hil.apps import record, tx

    ep_tx, ep_rx, ep_ctrl, ep_truth = free_tcp_endpoints(4)
    import subprocess
    import sys

    # a real radio process: once the recorder has what it wants it leaves, and the sim radio
    # waits for a receiver that went away until it is told to stop
    radio_proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hil.cli",
            "radio",
            "--tx",
            ep_tx,
            "--rx",
            ep_rx,
            "--truth",
            ep_truth,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    out = {}
    t_rec = threading.Thread(
        target=lambda: out.__setitem__(
            "rc",
            record.main(
                [
                    "--radio",
                    ep_rx,
                    "--out",
                    str(tmp_path / "cap"),
                    "--frames",
                    "3",
                    "--control",
                    ep_ctrl,
                    "--truth",
                    ep_truth,
                ]
            ),
        )
    )
    t_rec.start()
    try:
        assert (
            tx.main(["--radio", ep_tx, "--control", ep_ctrl, "--count", "6", "--gap", "20000"]) == 0
        )
        t_rec.join(60)
    finally:
        radio_proc.terminate()
        radio_proc.wait(30)
    assert out["rc"] == 0
    r = SigMFReader(tmp_path / "cap")
    det = [a for a in r.annotations() if a["core:label"].startswith("frame detected")]
    assert len(det) >= 3 and r.n > 0
    assert r.global_field("hil:radio_profile") == "default-sim"


def test_replay_feeds_the_live_view_as_it_was_seen_live(recorded, tmp_path):
    """hil replay -> hil rx --telemetry: the dashboard's feed carries every frame of the
    recording with the live run's values, and ends on the receiver's summary."""
    import zmq

    from hil.dashboard.server import State

    d, live = recorded
    ep, tel = free_tcp_endpoints(2)
    state = State()
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.setsockopt(zmq.RECONNECT_IVL, 10)  # connects within 10 ms of the receiver binding
    done = threading.Event()

    def listen():
        sub.connect(tel)
        while not done.is_set() or sub.poll(200):
            if sub.poll(100):
                topic, data = sub.recv_multipart()
                state.apply(topic, json.loads(data))

    lt = threading.Thread(target=listen)
    lt.start()
    result = {}
    args = [
        "--radio",
        ep,
        "--count",
        "12",
        "--telemetry",
        tel,
        "--summary",
        str(tmp_path / "s.json"),
    ]
    t_rx = threading.Thread(target=lambda: result.setdefault("rc", rx.main(args)))
    t_rx.start()
    # a PUB drops what it publishes before a subscriber is connected: the receiver binds its
    # telemetry at start, the subscriber connects, and only then does the replay send samples
    time.sleep(1.5)
    t = threading.Thread(target=replay.main, args=([str(d / "rec"), "--rx", ep],))
    t.start()
    t.join(60)
    t_rx.join(60)
    rc = result.get("rc")
    done.set()
    lt.join(10)
    sub.close(0)
    ctx.term()
    assert rc == 0
    s = json.loads((tmp_path / "s.json").read_text())
    assert state.malformed == 0
    assert state.summary["counts"] == s["counts"]
    seen = {f["seq"]: f for f in state.frames if f["status"] == "decoded"}
    for r in _live(live):
        assert seen[r["seq"]]["snr_db"] == r["snr_db"] and seen[r["seq"]]["psnr_db"] == r["psnr_db"]
    assert state.spectrum is not None and len(state.constellation["payload"]) > 100
    assert state.images["rx"].startswith("data:image/png;base64,")
