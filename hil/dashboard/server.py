"""``hil dashboard``: a live web view of the link, served on loopback.

It subscribes to the processes' telemetry (the radio's ``--telemetry`` and the receiver's,
ZeroMQ PUB), keeps the latest state, and pushes it to each open page over a WebSocket ten
times a second. Every page gets its own sender: a stalled browser delays only itself, and it
gets the newest state when it wakes, never a backlog. The WebSocket only carries state out.

Nothing the browser sends changes the radio unless the dashboard was started with ``control``
(the radio's ``--control`` endpoint): then, and only then, ``POST /control`` takes a JSON
request (``hil.radio.control``: RX/TX gain, LO), checks it here, and forwards it to the radio,
which checks it again against its own configuration before anything reaches the device. A
control request must be ``application/json`` and, when the browser names an ``Origin``, come
from the dashboard's own page (another site open in the same browser cannot post one).

Security: binds 127.0.0.1 unless ``allow_remote``; a remote bind needs ``allow_remote`` and
then every request must carry the token printed at start (``?token=``). Requests are small
GETs: bodies over ``MAX_REQUEST`` bytes are refused.
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import json
import logging
import os
import secrets
import time
from importlib import resources
from pathlib import Path

import zmq
import zmq.asyncio
from aiohttp import WSMsgType, web

from ..radio.control import ControlError, parse_request
from ..transport.sockets import is_loopback_host
from .tap import TOPIC_RADIO, TOPIC_RX

log = logging.getLogger("hil.dashboard")

MAX_REQUEST = 16 * 1024
MAX_MESSAGE = 1 << 20  # largest telemetry message accepted from a process
FRAMES_KEPT = 600  # per-frame records kept for the time series
PUSH_PERIOD = 0.1  # s between state pushes to a page
CONTROL_TIMEOUT = 3.0  # s the radio has to answer a control request
STATIC = {
    "/": ("index.html", "text/html"),
    "/app.js": ("app.js", "application/javascript"),
    "/style.css": ("style.css", "text/css"),
}
STATUSES = ("decoded", "detected", "header_failed", "refused", "cut", "missed")


class State:
    """The latest of everything, with a version per part so a page gets only what changed."""

    def __init__(self):
        self.version = collections.Counter()
        self.radio: dict = {}
        self.rx: dict = {}  # the receiver's latest counts and stream statistics
        self.spectrum: list | None = None
        self.constellation: dict = {}
        self.images: dict = {}
        self.frames: collections.deque = collections.deque(maxlen=FRAMES_KEPT)
        self.frame_index = 0  # records seen in all (the deque keeps the newest)
        self.summary: dict | None = None
        self.malformed = 0
        self.started = time.time()

    def apply(self, topic: bytes, msg: dict) -> None:
        """One telemetry message; anything malformed is counted and ignored."""
        if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
            self.malformed += 1
            return
        t = msg["type"]
        if topic == TOPIC_RADIO and t == "radio":
            self.radio = _scalars(msg)
            self.version["radio"] += 1
        elif topic == TOPIC_RX and t == "frame":
            rec = _frame_record(msg)
            if rec is None:
                self.malformed += 1
                return
            self.frames.append(rec)
            self.frame_index += 1
            self.version["frames"] += 1
        elif topic == TOPIC_RX and t == "status":
            self.rx = {
                k: v for k, v in msg.items() if k in ("counts", "stream", "receiver", "meta")
            }
            self.version["rx"] += 1
        elif topic == TOPIC_RX and t == "spectrum" and _numbers(msg.get("db")):
            self.spectrum = msg["db"][:4096]
            self.version["spectrum"] += 1
        elif topic == TOPIC_RX and t == "constellation":
            self.constellation = {
                k: msg[k] for k in ("seq", "payload", "pilots", "evm") if k in msg
            }
            self.version["constellation"] += 1
        elif topic == TOPIC_RX and t == "image":
            self.images = {k: msg[k] for k in ("seq", "item_id", "rx", "tx") if k in msg}
            self.version["images"] += 1
        elif topic == TOPIC_RX and t == "summary":
            self.summary = {k: msg.get(k) for k in ("counts", "psnr_db_mean", "ssim_mean")}
            self.rx["counts"] = msg.get("counts", self.rx.get("counts"))
            self.version["rx"] += 1
            self.version["summary"] += 1
        else:
            self.malformed += 1

    def delta(self, seen: dict) -> dict:
        """What changed since ``seen`` (versions, updated in place), as one JSON-able dict."""
        out: dict = {"t": round(time.time() - self.started, 2), "malformed": self.malformed}
        for part in ("radio", "rx", "spectrum", "constellation", "images", "summary"):
            if self.version[part] != seen.get(part):
                seen[part] = self.version[part]
                out[part] = getattr(self, part)
        first = seen.get("frame_index", 0)
        if self.frame_index != first:
            new = self.frame_index - first
            out["frames"] = list(self.frames)[-min(new, len(self.frames)) :]
            seen["frame_index"] = self.frame_index
        return out


def _numbers(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, (int, float)) for x in v)


def _scalars(msg: dict) -> dict:
    return {k: v for k, v in msg.items() if isinstance(v, (int, float, str, bool)) and len(k) < 64}


def _frame_record(msg: dict) -> dict | None:
    status = msg.get("status")
    if status not in STATUSES:
        return None
    rec = {"status": status}
    for k in ("seq", "snr_db", "cfo_hz", "evm_pilots", "psnr_db", "ssim", "time"):
        v = msg.get(k)
        if v is not None:
            if not isinstance(v, (int, float)):
                return None
            rec[k] = v
    return rec


class Dashboard:
    """The server: telemetry subscribers plus the web app (``start``/``stop``, or ``run``)."""

    def __init__(
        self,
        endpoints: list[str],
        host: str = "127.0.0.1",
        port: int = 8750,
        allow_remote: bool = False,
        token: str | None = None,
        control: str | None = None,
    ):
        if not endpoints:
            raise ValueError("the dashboard needs at least one telemetry endpoint")
        loopback = is_loopback_host(host)
        if not loopback and not allow_remote:
            raise ValueError(
                f"refusing to serve the dashboard on {host}: pass --allow-remote (a token is then "
                "required in the URL)"
            )
        self.token = token or (None if loopback else secrets.token_urlsafe(18))
        self.endpoints = endpoints
        self.control = control  # the radio's control endpoint; None: read-only
        self._control_sock: zmq.asyncio.Socket | None = None
        self._control_lock = asyncio.Lock()
        self.host, self.port = host, port
        self.state = State()
        self.pages = 0
        self._runner: web.AppRunner | None = None
        self._tasks: list[asyncio.Task] = []
        self.ctx = zmq.asyncio.Context()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        q = f"/?token={self.token}" if self.token else "/"
        return f"http://{host}:{self.port}{q}"

    # ------------------------------------------------------------------ web
    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_REQUEST, middlewares=[self._guard])
        for path in STATIC:
            app.router.add_get(path, self._static)
        app.router.add_get("/ws", self._ws)
        app.router.add_get("/state.json", self._state_json)
        app.router.add_post("/control", self._control)
        return app

    @web.middleware
    async def _guard(self, request: web.Request, handler):
        if request.method != "GET" and not (
            request.method == "POST" and request.path == "/control" and self.control
        ):
            raise web.HTTPMethodNotAllowed(
                request.method,
                ["GET"],
                text="the dashboard is read-only (start it with --control to change settings)\n",
            )
        if self.token is not None:
            given = request.query.get("token", "")
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                raise web.HTTPForbidden(text="missing or wrong token\n")
        return await handler(request)

    async def _static(self, request: web.Request) -> web.Response:
        name, ctype = STATIC[request.path]
        body = (resources.files("hil.dashboard") / "static" / name).read_bytes()
        return web.Response(body=body, content_type=ctype, headers={"Cache-Control": "no-store"})

    async def _state_json(self, request: web.Request) -> web.Response:
        return web.json_response({**self.state.delta({}), "control": self.control is not None})

    async def _control(self, request: web.Request) -> web.Response:
        """``POST /control``: a settings change, checked, forwarded to the radio, its answer."""
        if request.content_type != "application/json":
            raise web.HTTPUnsupportedMediaType(text="control requests are application/json\n")
        origin = request.headers.get("Origin")
        if origin is not None and origin != f"{request.scheme}://{request.host}":
            raise web.HTTPForbidden(text=f"control from another origin ({origin}) refused\n")
        try:
            want = parse_request(await request.read())
        except ControlError as exc:
            return web.json_response({"ok": False, "error": str(exc)}, status=400)
        body = {"set": want} if want is not None else {"get": True}
        async with self._control_lock:  # REQ/REP: one request at a time
            if self._control_sock is None:
                self._control_sock = self._control_socket()
            try:
                await self._control_sock.send_json(body)
                if not await self._control_sock.poll(int(CONTROL_TIMEOUT * 1000)):
                    raise TimeoutError
                reply = await self._control_sock.recv_json()
            except (TimeoutError, zmq.ZMQError, ValueError) as exc:
                self._control_sock.close(0)  # a REQ that lost its answer cannot send again
                self._control_sock = None
                log.warning("control: no answer from the radio at %s (%r)", self.control, exc)
                return web.json_response(
                    {"ok": False, "error": f"the radio at {self.control} did not answer"},
                    status=504,
                )
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            return web.json_response({"ok": False, "error": "malformed answer"}, status=502)
        log.info("control %s: %s", body, "ok" if reply["ok"] else reply.get("error"))
        return web.json_response(reply, status=200 if reply["ok"] else 400)

    def _control_socket(self) -> zmq.asyncio.Socket:
        sock = self.ctx.socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE)
        sock.connect(self.control)
        return sock

    async def _ws(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(heartbeat=10.0, max_msg_size=MAX_REQUEST)
        await ws.prepare(request)
        self.pages += 1
        seen: dict = {}
        reader = asyncio.create_task(self._drain(ws))
        try:
            while not ws.closed and not reader.done():
                first = not seen
                d = self.state.delta(seen)
                if first:
                    d["control"] = self.control is not None
                # a stalled page blocks only this coroutine; when it wakes it gets the newest state
                await asyncio.wait_for(ws.send_str(json.dumps(d, separators=(",", ":"))), 30)
                await asyncio.sleep(PUSH_PERIOD)
        except (TimeoutError, ConnectionResetError, RuntimeError) as exc:
            log.info("page dropped: %s", exc)
        finally:
            reader.cancel()
            self.pages -= 1
            await ws.close()
        return ws

    @staticmethod
    async def _drain(ws: web.WebSocketResponse) -> None:
        """Pages send nothing that matters; read (and discard) so pings and close work."""
        async for msg in ws:
            if msg.type == WSMsgType.ERROR:
                break

    # ------------------------------------------------------------ telemetry
    async def _subscribe(self, endpoint: str) -> None:
        sock = self.ctx.socket(zmq.SUB)
        sock.setsockopt(zmq.RCVHWM, 256)
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SUBSCRIBE, b"")
        sock.connect(endpoint)
        try:
            while True:
                frames = await sock.recv_multipart()
                if len(frames) != 2:
                    self.state.malformed += 1
                    continue
                try:
                    msg = json.loads(frames[1])
                except (ValueError, UnicodeDecodeError):
                    self.state.malformed += 1
                    continue
                self.state.apply(frames[0], msg)
        finally:
            sock.close()

    # ------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        self._tasks = [asyncio.create_task(self._subscribe(e)) for e in self.endpoints]
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        if self.port == 0:
            self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._control_sock is not None:
            self._control_sock.close(0)
        if self._runner is not None:
            await self._runner.cleanup()
        self.ctx.term()

    async def run(self, stop: asyncio.Event, url_file: Path | None = None) -> None:
        await self.start()
        print(f"dashboard at {self.url}", flush=True)
        if url_file is not None:
            # written aside, then renamed: a reader polling for the file (hil link, the tests)
            # finds it whole, never created and still empty
            part = url_file.with_name(url_file.name + ".part")
            part.write_text(self.url + "\n")
            os.replace(part, url_file)
        try:
            await stop.wait()
        finally:
            await self.stop()
