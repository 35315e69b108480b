"""GNU Radio both ways over ZeroMQ, with real GNU Radio (system python3, gr-zeromq):
GNU Radio -> hil rx --raw, and hil radio --raw-out -> GNU Radio."""

import json
import subprocess
import textwrap
import time

import numpy as np
import pytest

from hil.apps import rx
from hil.record import SigMFReader
from hil.transport import free_tcp_endpoint

from .. import needs
from .trio import run_trio

GR_PYTHON = "/usr/bin/python3"


def _have_gnuradio() -> bool:
    try:
        r = subprocess.run(
            [GR_PYTHON, "-c", "from gnuradio import gr, zeromq, blocks"],
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


pytestmark = [
    pytest.mark.skipif(
        not needs.REQUIRE_ALL and not _have_gnuradio(),
        reason="GNU Radio (gr-zeromq) for /usr/bin/python3 is missing: sudo apt-get install gnuradio",
    ),
    pytest.mark.slow,
    pytest.mark.timeout(300),
]


def _frames(tmp_path, count):
    """A raw complex64 file of ``count`` JSCC frames of the built-in test tiles (seq = item)."""
    from hil.apps.common import items, shipped_checkpoint
    from hil.apps.tx import encode_items
    from hil.jscc.checkpoint import load_checkpoint
    from hil.phy import FrameBuilder, Header, to_full_scale

    model, phy, doc, _ = load_checkpoint(shipped_checkpoint())
    sym = encode_items(model, items("builtin", 32, count)[0])
    fb = FrameBuilder(phy)
    parts = [np.zeros(2000, np.complex64)]
    for i, s in enumerate(sym):
        h = Header(i, i, bytes.fromhex(doc["fingerprint"]), len(s), (3, 32, 32))
        parts += [to_full_scale(fb.build_numpy(s, h))[0], np.zeros(600, np.complex64)]
    x = np.concatenate(parts)
    x += (np.random.default_rng(1).normal(size=(len(x), 2)) @ [1, 1j] * 0.003).astype(np.complex64)
    path = tmp_path / "frames.c64"
    x.astype(np.complex64).tofile(path)
    return path


def _gr(tmp_path, name, body):
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(body))
    return script


def test_gnu_radio_push_sink_into_rx_raw(tmp_path):
    """blocks.file_source -> zeromq.push_sink (GNU Radio binds) -> hil rx --raw: every frame
    decoded and counted from the headers, and rx ends cleanly when GNU Radio stops sending."""
    path = _frames(tmp_path, 6)
    ep = free_tcp_endpoint()
    script = _gr(
        tmp_path,
        "push",
        f"""
        import time
        from gnuradio import blocks, gr, zeromq
        tb = gr.top_block()
        src = blocks.file_source(gr.sizeof_gr_complex, {str(path)!r}, False)
        thr = blocks.throttle(gr.sizeof_gr_complex, 2e6)
        sink = zeromq.push_sink(gr.sizeof_gr_complex, 1, {ep!r}, 100, False, -1)
        tb.connect(src, thr, sink)
        tb.start()
        tb.wait()
        time.sleep(2.0)  # let the last messages out before the socket closes
        """,
    )
    gr_proc = subprocess.Popen([GR_PYTHON, str(script)], stderr=subprocess.PIPE, text=True)
    summary = tmp_path / "s.json"
    try:
        code = rx.main(
            [
                "--radio",
                ep,
                "--raw",
                "--count",
                "6",
                "--summary",
                str(summary),
                "--idle-timeout",
                "3",
            ]
        )
    finally:
        err = gr_proc.communicate(timeout=60)[1]
    assert gr_proc.returncode == 0, err
    s = json.loads(summary.read_text())
    assert code == 0
    c = s["counts"]
    assert c["sent_inferred"] and (c["sent"], c["decoded"], c["missed"]) == (6, 6, 0)
    assert s["psnr_db_mean"] > 24


def test_radio_raw_out_into_gnu_radio_pull_source(tmp_path):
    """hil radio --raw-out -> zeromq.pull_source -> blocks.file_sink: the file GNU Radio writes
    is the RX stream rx recorded, sample for sample, with no header bytes in it."""
    ep = free_tcp_endpoint()
    out, stop = tmp_path / "gr.c64", tmp_path / "stop"
    script = _gr(
        tmp_path,
        "pull",
        f"""
        import os, time
        from gnuradio import blocks, gr, zeromq
        tb = gr.top_block()
        src = zeromq.pull_source(gr.sizeof_gr_complex, 1, {ep!r}, 100, False, -1)
        sink = blocks.file_sink(gr.sizeof_gr_complex, {str(out)!r}, False)
        sink.set_unbuffered(True)
        tb.connect(src, sink)
        tb.start()
        open({str(tmp_path / "started")!r}, "w").close()
        end = time.time() + 120
        while not os.path.exists({str(stop)!r}) and time.time() < end:
            time.sleep(0.05)
        tb.stop()
        tb.wait()
        """,
    )
    gr_proc = subprocess.Popen([GR_PYTHON, str(script)], stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 60
        while not (tmp_path / "started").exists() and time.monotonic() < end:
            time.sleep(0.05)
        assert (tmp_path / "started").exists(), "the GNU Radio flowgraph did not start"
        rc, s = run_trio(
            tmp_path,
            count=3,
            radio_extra=("--raw-out", ep, "--raw-out-wait", "30"),
            rx_extra=("--record", str(tmp_path / "r")),
        )
        time.sleep(1.0)  # the flowgraph drains its socket
    finally:
        stop.touch()
        err = gr_proc.communicate(timeout=60)[1]
    assert gr_proc.returncode == 0, err
    assert rc == {"radio": 0, "rx": 0, "tx": 0} and s["counts"]["decoded"] == 3
    got = np.fromfile(out, np.complex64)
    reader = SigMFReader(tmp_path / "r")
    rec = reader.read(0, reader.n)
    # the radio waited for GNU Radio's source to connect (--raw-out-wait): nothing is missed
    assert len(got) == len(rec), (len(got), len(rec))
    np.testing.assert_array_equal(got, rec)
