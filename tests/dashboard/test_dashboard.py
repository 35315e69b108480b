"""The live view: its state model, the server's answers to good and bad requests, pages that
stall, and a real headless Chromium watching a sim link."""

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import zmq

from hil.dashboard.server import Dashboard, State
from hil.dashboard.tap import TOPIC_RADIO, TOPIC_RX, Spectrum, Tap, points
from hil.transport.sockets import free_tcp_endpoint, free_tcp_endpoints
from tests.needs import module, tools

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ state and tap
def test_state_applies_frames_and_counts_malformed_messages():
    st = State()
    st.apply(TOPIC_RX, {"type": "frame", "status": "decoded", "seq": 1, "snr_db": 12.5})
    st.apply(TOPIC_RX, {"type": "frame", "status": "missed", "seq": 2})
    st.apply(TOPIC_RX, {"type": "frame", "status": "exploded", "seq": 3})  # unknown status
    st.apply(TOPIC_RX, {"type": "frame", "status": "decoded", "snr_db": "high"})  # not a number
    st.apply(TOPIC_RX, {"no": "type"})
    st.apply(TOPIC_RX, ["not", "a", "dict"])
    st.apply(TOPIC_RADIO, {"type": "radio", "rx_gain_db": 40.0, "nested": {"dropped": 1}})
    assert st.malformed == 4
    seen: dict = {}
    d = st.delta(seen)
    assert [f["status"] for f in d["frames"]] == ["decoded", "missed"]
    assert d["radio"] == {"type": "radio", "rx_gain_db": 40.0}  # scalars only
    d2 = st.delta(seen)  # nothing new: nothing resent
    assert "frames" not in d2 and "radio" not in d2
    st.apply(TOPIC_RX, {"type": "frame", "status": "cut", "seq": 4})
    assert [f["seq"] for f in st.delta(seen)["frames"]] == [4]


def test_spectrum_puts_a_tone_in_its_bin_and_dc_in_the_middle():
    sp = Spectrum(nfft=1024, bins=256)
    n = np.arange(4096)
    sp.push((0.5 * np.exp(2j * np.pi * (128 / 1024) * n)).astype(np.complex64))
    db = np.array(sp.db())
    assert len(db) == 256
    assert int(np.argmax(db)) == 128 + 32  # +fs/8 -> a quarter of the way right of DC
    assert db.max() - np.median(db) > 40
    sp2 = Spectrum()
    sp2.push(np.full(2048, 0.3, np.complex64))
    assert int(np.argmax(sp2.db())) == 128
    sp2.push(np.full(100, np.nan, np.complex64))  # short or non-finite segments are skipped
    with pytest.raises(ValueError):
        Spectrum(nfft=1000, bins=256)


def test_points_thins_evenly_and_drops_non_finite():
    z = np.arange(2000) + 1j * np.arange(2000)
    p = points(z, 100)
    assert len(p) == 100 and p[0] == [0.0, 0.0] and p[-1] == [1999.0, 1999.0]
    assert points(np.array([1 + 1j, np.nan])) == [[1.0, 1.0]]
    assert points(None) == []


def test_tap_never_blocks_without_a_subscriber():
    tap = Tap(free_tcp_endpoint())
    t = time.monotonic()
    for i in range(20000):
        tap.publish(TOPIC_RX, {"type": "frame", "status": "decoded", "seq": i})
    assert time.monotonic() - t < 10  # a blocking send would never return
    assert tap.sent == 20000
    tap.close(0)


# ------------------------------------------------------------------ the server
@pytest.fixture
def served(tmp_path):
    """A dashboard process fed by a PUB socket this test owns."""
    ep = free_tcp_endpoint()
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.bind(ep)
    url_file = tmp_path / "url"
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "hil.cli", "dashboard", "--telemetry", ep, "--port", "0"),
            *("--url-file", str(url_file), "--max-seconds", "120"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    end = time.monotonic() + 60
    while not url_file.exists() and time.monotonic() < end and proc.poll() is None:
        time.sleep(0.05)
    assert url_file.exists(), proc.stdout.read().decode()[-2000:] if proc.poll() is not None else ""
    url = url_file.read_text().strip().rstrip("/")
    yield url, pub, proc
    proc.terminate()
    proc.wait(10)
    pub.close(0)
    ctx.term()


def _get(url, method="GET", data=None, headers=None):
    req = urllib.request.Request(url, method=method, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_server_answers_pages_and_refuses_bad_requests(served):
    url, _pub, proc = served
    code, body = _get(url + "/")
    assert code == 200 and b'<canvas id="constellation"' in body
    assert _get(url + "/app.js")[0] == 200 and _get(url + "/style.css")[0] == 200
    assert _get(url + "/../../etc/passwd")[0] == 404
    assert _get(url + "/nope")[0] == 404
    assert _get(url + "/", "POST", b"x")[0] == 405  # read-only
    code, body = _get(
        url + "/control",
        "POST",
        b'{"set": {"tx_gain_db": -20}}',
        {"Content-Type": "application/json"},
    )
    assert code == 405 and b"--control" in body  # no settings change without --control
    assert _get(url + "/", "PUT", b"x" * (1 << 20))[0] in (405, 413)
    # a request line or header far too big, and raw garbage: refused, the server lives on
    host, port = url.removeprefix("http://").split(":")
    for raw in (b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\n\r\n", b"\x00\xff garbage\r\n\r\n"):
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(raw)
            assert s.recv(100).split(b" ")[1].startswith(b"4")
    code, body = _get(url + "/state.json")
    assert code == 200 and json.loads(body)["malformed"] == 0
    assert proc.poll() is None


def test_remote_binds_need_allow_remote_and_then_a_token():
    with pytest.raises(ValueError, match="--allow-remote"):
        Dashboard(["tcp://127.0.0.1:1"], host="0.0.0.0")
    d = Dashboard(["tcp://127.0.0.1:1"], host="0.0.0.0", allow_remote=True)
    assert d.token and len(d.token) >= 20 and f"token={d.token}" in d.url
    assert Dashboard(["tcp://127.0.0.1:1"]).token is None  # loopback: no token
    with pytest.raises(ValueError):
        Dashboard([])


def test_token_is_checked_on_every_path():
    async def go():
        from aiohttp.test_utils import TestClient, TestServer

        d = Dashboard(["tcp://127.0.0.1:1"], token="s3cret-token")
        async with TestClient(TestServer(d.app())) as c:
            for path in ("/", "/app.js", "/state.json", "/ws"):
                assert (await c.get(path)).status == 403
                assert (await c.get(path + "?token=wrong")).status == 403
            assert (await c.get("/?token=s3cret-token")).status == 200
            ws = await c.ws_connect("/ws?token=s3cret-token")
            assert "t" in json.loads((await ws.receive()).data)
            await ws.close()

    asyncio.run(go())


def test_a_stalled_page_does_not_hold_up_another(served):
    """One WebSocket client that never reads while frames pour in; another still gets them."""
    url, pub, proc = served
    host, port = url.removeprefix("http://").split(":")

    async def go():
        import aiohttp

        stalled = socket.create_connection((host, int(port)))
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.sendall(
            b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        time.sleep(0.5)
        got = []
        async with aiohttp.ClientSession() as s, s.ws_connect(url + "/ws") as ws:
            big = [round(float(v), 1) for v in np.linspace(-100, 0, 4096)]
            t_end = time.monotonic() + 6
            seq = 0
            while time.monotonic() < t_end:
                for _ in range(20):
                    pub.send_multipart(
                        [
                            TOPIC_RX,
                            json.dumps({"type": "frame", "status": "decoded", "seq": seq}).encode(),
                        ]
                    )
                    seq += 1
                pub.send_multipart([TOPIC_RX, json.dumps({"type": "spectrum", "db": big}).encode()])
                try:
                    m = await asyncio.wait_for(ws.receive(), 0.2)
                    if m.type == aiohttp.WSMsgType.TEXT:
                        got.extend(f["seq"] for f in json.loads(m.data).get("frames", []))
                except TimeoutError:
                    pass
        stalled.close()
        return seq, got

    time.sleep(0.5)  # the SUB socket connects
    sent, got = asyncio.run(go())
    assert len(got) > 0.5 * sent and got == sorted(got), (sent, len(got))
    assert proc.poll() is None


# ------------------------------------------------------------------ --control
@pytest.fixture
def controlled(tmp_path):
    """A sim ``hil radio --settings`` (its RX stream drained here) and a dashboard with
    ``--control`` on that endpoint and the radio's telemetry."""
    # the dashboard's port too: one the kernel gave it could be one of these, not yet bound
    ep_tx, ep_rx, ep_tel, ep_set, ep_dash = free_tcp_endpoints(5)
    radio = subprocess.Popen(
        [
            *(sys.executable, "-m", "hil.cli", "radio", "--tx", ep_tx, "--rx", ep_rx),
            *("--telemetry", ep_tel, "--settings", ep_set, "--serve", "--max-seconds", "300"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    ctx = zmq.Context()
    drain = ctx.socket(zmq.PULL)
    drain.connect(ep_rx)
    stop = threading.Event()

    def pull():
        while not stop.is_set():
            if drain.poll(100):
                drain.recv_multipart()

    t = threading.Thread(target=pull, daemon=True)
    t.start()
    url_file = tmp_path / "url"
    dash = subprocess.Popen(
        [
            *(sys.executable, "-m", "hil.cli", "dashboard", "--telemetry", ep_tel),
            *("--port", ep_dash.rsplit(":", 1)[1]),
            *("--control", ep_set, "--url-file", str(url_file), "--max-seconds", "120"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    end = time.monotonic() + 60
    while not url_file.exists() and time.monotonic() < end and dash.poll() is None:
        time.sleep(0.05)
    assert url_file.exists(), dash.stdout.read().decode()[-2000:] if dash.poll() is not None else ""
    url = url_file.read_text().strip().rstrip("/")
    # written whole (aside, then renamed): a poller never reads it empty
    assert url.startswith("http://127.0.0.1:") and not url_file.with_name("url.part").exists()
    yield url, radio, dash
    for p in (dash, radio):
        p.terminate()
        p.wait(10)
    stop.set()
    t.join(5)
    drain.close(0)
    ctx.term()


def _radio_state(url, key, want, timeout=20.0):
    end = time.monotonic() + timeout
    got = None
    while time.monotonic() < end:
        got = json.loads(_get(url + "/state.json")[1]).get("radio", {}).get(key)
        if got == want:
            return got
        time.sleep(0.2)
    return got


def test_control_changes_the_radio_only_with_checked_values(controlled):
    url, radio, dash = controlled
    js = {"Content-Type": "application/json"}
    assert json.loads(_get(url + "/state.json")[1])["control"] is True
    assert _radio_state(url, "tx_gain_db", -10.0) == -10.0  # the profile's, in telemetry
    code, body = _get(url + "/control", "POST", b'{"set": {"tx_gain_db": -23.5}}', js)
    assert code == 200, body
    a = json.loads(body)
    assert a["ok"] and a["settings"]["tx_gain_db"] == -23.5
    assert _radio_state(url, "tx_gain_db", -23.5) == -23.5  # the radio runs with it
    code, body = _get(url + "/control", "POST", b'{"get": true}', js)
    assert code == 200 and json.loads(body)["settings"]["tx_gain_db"] == -23.5
    # refused by the dashboard's own check (never forwarded), then by the radio's
    for req, where in (
        (b'{"set": {"tx_gain_db": 5}}', "outside"),
        (b'{"set": {"sample_rate_hz": 1e6}}', "cannot set"),
        (b'{"set": {"tx_gain_db": NaN}}', "finite"),
        (b"{garbage", "not JSON"),
        (b'{"set": {"tx_gain_db": -20.1}}', "0.25"),  # the radio's step check
        (b'{"set": {"lo_hz": 100e6}}', "AD9364"),  # the radio's firmware-mode LO range
    ):
        code, body = _get(url + "/control", "POST", req, js)
        assert code == 400 and where in json.loads(body)["error"], (req, body)
    code, _ = _get(url + "/control", "POST", b'{"get": true}', {"Content-Type": "text/plain"})
    assert code == 415  # a form post from another page cannot be JSON without a preflight
    code, _ = _get(
        url + "/control", "POST", b'{"get": true}', {**js, "Origin": "http://evil.example"}
    )
    assert code == 403
    assert _get(url + "/control", "POST", b"x" * (1 << 20), js)[0] == 413
    assert _radio_state(url, "tx_gain_db", -23.5) == -23.5  # nothing refused was applied
    # the radio gone: a clear answer, and the dashboard lives on
    radio.terminate()
    radio.wait(10)
    code, body = _get(url + "/control", "POST", b'{"get": true}', js)
    assert code == 504 and b"did not answer" in body
    assert dash.poll() is None


# ------------------------------------------------------------------ a real browser
@pytest.mark.slow
@tools("chromium", "chromedriver", install="sudo apt-get install chromium chromium-driver")
def test_chromium_watches_a_sim_link(tmp_path):
    """A sim link with the dashboard, seen by headless Chromium: the spectrum, waterfall,
    constellation, per-frame series and images are drawn, the counters advance while frames
    flow, the control panel changes the radio's TX gain, and the page ends on the receiver's
    own final counts. The screenshot is kept."""
    webdriver = module("selenium.webdriver", "pip install -e .[test]")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    out = tmp_path / "link"
    # 150 frames 50 ms apart: 7.5 s of paced air, so the radio still streams (and answers the
    # control request) when a cold Chromium on a fresh machine has taken seconds to start
    link = subprocess.Popen(
        [
            *(sys.executable, "-m", "hil.cli", "link", "--count", "150", "--pace"),
            *("--gap", "200000", "--dashboard", "--dashboard-port", "0", "--dashboard-hold", "8"),
            "--dashboard-control",
            *("--out", str(out), "--json"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    url_file = out / "dashboard.url"
    end = time.monotonic() + 90
    while not url_file.exists() and time.monotonic() < end and link.poll() is None:
        time.sleep(0.1)
    assert url_file.exists(), link.stderr.read().decode()[-3000:] if link.poll() else "no url"
    opts = Options()
    opts.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1180,1000"):
        opts.add_argument(arg)
    browser = webdriver.Chrome(options=opts, service=Service("/usr/bin/chromedriver"))
    try:
        browser.get(url_file.read_text().strip())

        def hil():
            return browser.execute_script("return window.hil")

        samples = []
        tx_gain = None
        end = time.monotonic() + 120
        while link.poll() is None and time.monotonic() < end:
            h = hil()
            if h and h.get("counts"):
                samples.append(h["counts"]["decoded"])
                if tx_gain is None and "tx_gain_db" in h["radio"]:
                    # the control panel, as a user would: a new TX gain typed in and applied
                    tx_gain = h["radio"]["tx_gain_db"] - 1.5
                    box = browser.find_element("id", "ctl-tx_gain_db")
                    assert float(box.get_attribute("value")) == tx_gain + 1.5  # filled in
                    box.clear()
                    box.send_keys(str(tx_gain))
                    browser.find_element("id", "ctl-apply").click()
            time.sleep(0.5)
        stdout, stderr = link.communicate(timeout=60)
        assert link.returncode == 0, stderr.decode()[-3000:]
        summary = json.loads(stdout)
        # while frames flowed, the page's counter advanced through several values
        assert len(set(samples)) >= 3 and samples == sorted(samples), samples
        h = hil()
        assert h["control"] and h["lastControl"]["ok"], h["lastControl"]
        assert h["radio"]["tx_gain_db"] == tx_gain  # the radio ran with what the page set
        assert browser.find_element("id", "ctl-result").text == "set tx_gain_db"
        for part in ("spectrum", "waterfall", "constellation", "series", "images"):
            assert h["draws"][part] > 0, (part, h["draws"])
        assert h["draws"]["spectrum"] >= 10
        lit = browser.execute_script(
            """const out = {};
            for (const id of ["spectrum", "waterfall", "constellation", "series"]) {
              const c = document.getElementById(id);
              const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
              let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
              out[id] = n;
            }
            return out;"""
        )
        assert all(v > 500 for v in lit.values()), lit
        # it ends on the receiver's own summary
        assert h["summary"]["counts"] == summary["counts"], (h["summary"], summary["counts"])
        c = summary["counts"]
        text = browser.find_element("id", "accounting").text
        assert text.startswith(f"sent {c['sent']} = decoded {c['decoded']} + ")
        assert (
            browser.find_element("id", "img-rx")
            .get_attribute("src")
            .startswith("data:image/png;base64,")
        )
        # the artefact: under $HIL_TEST_ARTEFACTS when set (CI keeps it), else the test's tmp
        shot = Path(os.environ.get("HIL_TEST_ARTEFACTS", tmp_path)) / "dashboard.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(shot))
        assert shot.stat().st_size > 20_000
    finally:
        browser.quit()
        if link.poll() is None:
            link.kill()
