"""Raw IQ out for GNU Radio: hil radio --raw-out and hil replay --raw send bare complex64."""

import json
import threading

import numpy as np
import pytest
import zmq

from hil.apps import replay, rx
from hil.record import SigMFReader
from hil.transport import free_tcp_endpoint

from .trio import run_trio


def _collect(ep, kind, got, done):
    ctx = zmq.Context()
    s = ctx.socket(kind)
    if kind == zmq.SUB:
        s.setsockopt(zmq.SUBSCRIBE, b"")
    s.setsockopt(zmq.RECONNECT_IVL, 10)
    s.connect(ep)
    while not done.is_set() or s.poll(300):
        if s.poll(100):
            frames = s.recv_multipart()
            got.append((len(frames), frames[0]))
    s.close(0)
    ctx.term()


@pytest.mark.parametrize("kind", ["push", "pub"])
def test_radio_raw_out_is_the_rx_stream_without_headers(tmp_path, kind):
    """What a zeromq.pull_source reads from --raw-out equals, sample for sample, what rx records
    from the framed stream: one ZMQ frame per block, complex64, no header in the stream."""
    ep = free_tcp_endpoint()
    got, done = [], threading.Event()
    sock = zmq.PULL if kind == "push" else zmq.SUB
    t = threading.Thread(target=_collect, args=(ep, sock, got, done))
    t.start()
    rc, s = run_trio(
        tmp_path,
        count=3,
        radio_extra=("--raw-out", ep, "--raw-out-kind", kind),
        rx_extra=("--record", str(tmp_path / "r")),
    )
    done.set()
    t.join(30)
    assert rc == {"radio": 0, "rx": 0, "tx": 0} and s["counts"]["decoded"] == 3
    assert got and all(n == 1 for n, _ in got)  # bare: a single frame, never a header part
    raw = np.concatenate([np.frombuffer(f, np.complex64) for _, f in got])
    reader = SigMFReader(tmp_path / "r")
    rec = reader.read(0, reader.n)
    assert b"HILS" not in b"".join(f for _, f in got[:4])  # the wire magic never appears
    # the reader connects within ms of the bind; it may miss blocks before that, never after
    assert len(raw) >= len(rec) - 65536 * 2 and len(raw) <= len(rec)
    np.testing.assert_array_equal(raw, rec[len(rec) - len(raw) :])


def test_replay_raw_feeds_rx_raw(tmp_path):
    """A recording replayed raw (as GNU Radio would send it) decodes in rx --raw, counted from
    the headers' seqs, and the run ends cleanly when the stream stops."""
    _, s = run_trio(tmp_path, count=4, rx_extra=("--record", str(tmp_path / "r")))
    assert s["counts"]["decoded"] == 4
    ep = free_tcp_endpoint()
    t = threading.Thread(target=replay.main, args=([str(tmp_path / "r"), "--rx", ep, "--raw"],))
    t.start()
    summary = tmp_path / "raw.json"
    code = rx.main(
        ["--radio", ep, "--raw", "--count", "4", "--summary", str(summary), "--idle-timeout", "2"]
    )
    t.join(30)
    r = json.loads(summary.read_text())
    assert code == 0
    c = r["counts"]
    assert c["sent_inferred"] and (c["sent"], c["decoded"]) == (4, 4)
