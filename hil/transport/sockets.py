"""ZeroMQ socket helpers: loopback-only binds by default, bounded queues, counted drops.

Sample streams use PUSH/PULL (backpressure: a full queue blocks the sender, it
never drops); telemetry and control use JSON messages (never pickle).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import time
from dataclasses import dataclass, field
from urllib.parse import urlparse

import numpy as np
import zmq

from .wire import EOS, SampleHeader, SampleMessage, WireError, decode, decode_raw, encode

log = logging.getLogger("hil.transport")

DEFAULT_HWM = 64  # messages queued per socket before the sender blocks


class EndpointError(ValueError):
    pass


def is_loopback(endpoint: str) -> bool:
    """True for ipc://, inproc:// and tcp:// on 127.0.0.0/8, ::1 or localhost."""
    u = urlparse(endpoint)
    if u.scheme in ("ipc", "inproc"):
        return True
    if u.scheme != "tcp":
        raise EndpointError(
            f"unsupported endpoint {endpoint!r}; use tcp://HOST:PORT, ipc:// or inproc://"
        )
    return is_loopback_host((u.hostname or "").strip("[]"))


def is_loopback_host(host: str) -> bool:
    """True for localhost and addresses in 127.0.0.0/8 or ::1."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(endpoint: str, allow_remote: bool = False, authenticated: bool = False) -> None:
    """Refuse a non-loopback bind unless it is authenticated (CURVE) or explicitly forced."""
    if is_loopback(endpoint) or authenticated:
        return
    if not allow_remote:
        raise EndpointError(
            f"refusing to bind {endpoint}: not a loopback address and not authenticated. "
            "Bind 127.0.0.1, or use CURVE keys (hil keys; --curve-secret/--curve-clients), "
            "or force it (--allow-remote) on a network you trust"
        )
    log.warning(
        "binding %s without authentication (forced): anyone on that network can connect", endpoint
    )


def free_tcp_endpoint(host: str = "127.0.0.1") -> str:
    """A currently free loopback TCP port (for tests and ``hil link``)."""
    return free_tcp_endpoints(1, host)[0]


def free_tcp_endpoints(n: int, host: str = "127.0.0.1") -> list[str]:
    """``n`` currently free loopback TCP ports, all different: each is held until all are
    chosen (ports picked one by one and released may repeat, and one process's two binds to
    one port fail)."""
    held = []
    try:
        for _ in range(n):
            s = socket.socket()
            held.append(s)
            s.bind((host, 0))
        return [f"tcp://{host}:{s.getsockname()[1]}" for s in held]
    finally:
        for s in held:
            s.close()


def make_socket(
    ctx: zmq.Context,
    kind: int,
    endpoint: str,
    *,
    bind: bool,
    hwm: int = DEFAULT_HWM,
    allow_remote: bool = False,
    curve=None,
) -> zmq.Socket:
    """A socket with bounded queues; ``curve`` is a ``CurveServer`` (bind) or ``CurveClient`` (connect)."""
    from .security import CurveClient, CurveServer, apply_client, apply_server

    s = ctx.socket(kind)
    s.setsockopt(zmq.LINGER, 1000)
    s.setsockopt(zmq.SNDHWM, hwm)
    s.setsockopt(zmq.RCVHWM, hwm)
    if bind:
        if curve is not None and not isinstance(curve, CurveServer):
            raise EndpointError("a binding socket takes CurveServer settings")
        check_bind(endpoint, allow_remote, authenticated=curve is not None)
        if curve is not None:
            apply_server(ctx, s, curve)
        s.bind(endpoint)
    else:
        if curve is not None:
            if not isinstance(curve, CurveClient):
                raise EndpointError("a connecting socket takes CurveClient settings")
            apply_client(s, curve)
        s.connect(endpoint)
    return s


@dataclass
class StreamStats:
    """What a sample receiver saw: messages, samples, and everything it dropped or noticed."""

    messages: int = 0
    samples: int = 0
    malformed: int = 0
    malformed_reasons: dict = field(default_factory=dict)
    seq_gaps: int = 0  # messages missing between consecutive sequence numbers
    sample_gaps: int = 0  # samples missing between consecutive sample offsets
    overflow_flags: int = 0
    drop_flags: int = 0
    restarts: int = 0  # sequence numbers going backwards: the sender restarted

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class SampleSender:
    """PUSH side of a sample stream: numbers the messages and tracks the sample offset."""

    def __init__(
        self,
        sock: zmq.Socket,
        stream_id: int = 0,
        sample_rate_hz: float = 0.0,
        center_freq_hz: float = 0.0,
        raw: bool = False,
    ):
        self.sock, self.raw = sock, raw
        self.stream_id, self.rate, self.fc = stream_id, sample_rate_hz, center_freq_hz
        self.seq = 0
        self.offset = 0

    def send(
        self,
        samples: np.ndarray,
        flags: int = 0,
        offset: int | None = None,
        timeout_s: float | None = None,
    ) -> bool:
        """Send one message; blocks while the receiver's queue is full (up to timeout_s). False on timeout.

        samples: [n] complex64 (other dtypes are cast to it; framed mode refuses other shapes).
        """
        samples = np.ascontiguousarray(samples, dtype=np.complex64)
        if samples.ndim != 1:  # raw mode skips encode's check: a 2-D block would go out flat
            raise ValueError(f"samples must be 1-D, got shape {samples.shape}")
        if offset is not None:
            self.offset = offset
        if self.raw:
            parts = [memoryview(samples).cast("B")]
        else:
            h = SampleHeader(self.stream_id, self.seq, self.offset, self.rate, self.fc, flags)
            parts = encode(h, samples)
        if timeout_s is not None and not self.sock.poll(int(timeout_s * 1000), zmq.POLLOUT):
            return False
        self.sock.send_multipart(parts, copy=len(samples) < 4096)
        self.seq += 1
        self.offset += len(samples)
        return True

    def end(self, timeout_s: float | None = None) -> bool:
        return self.send(np.zeros(0, np.complex64), flags=EOS, timeout_s=timeout_s)


class SampleReceiver:
    """PULL side: decodes, validates, counts and drops malformed messages, notices gaps."""

    def __init__(self, sock: zmq.Socket, raw: bool = False, name: str = "samples"):
        self.sock, self.raw, self.name = sock, raw, name
        self.stats = StreamStats()
        self._next_seq: int | None = None
        self._next_off: int | None = None

    def recv(self, timeout_s: float | None = None) -> SampleMessage | None:
        """Next valid message, or None on timeout. Malformed ones are logged, counted, skipped."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not self.sock.poll(None if wait is None else int(wait * 1000)):
                return None
            frames = self.sock.recv_multipart(copy=False)
            try:
                if self.raw:
                    if len(frames) != 1:
                        raise WireError(f"raw mode expects 1 frame, got {len(frames)}")
                    s = decode_raw(frames[0])
                    off = self._next_off or 0
                    msg = SampleMessage(
                        SampleHeader(seq=self._next_seq or 0, sample_offset=off, n_samples=len(s)),
                        s,
                    )
                else:
                    msg = decode(frames)
            except WireError as exc:
                self.stats.malformed += 1
                key = str(exc).split(" ")[0] if len(str(exc)) > 40 else str(exc)
                self.stats.malformed_reasons[key] = self.stats.malformed_reasons.get(key, 0) + 1
                log.warning("%s: dropped malformed message: %s", self.name, exc)
                if deadline is not None and time.monotonic() >= deadline:
                    return None
                continue
            self._account(msg)
            return msg

    def _account(self, msg: SampleMessage) -> None:
        h = msg.header
        st = self.stats
        st.messages += 1
        st.samples += h.n_samples
        if h.flags & 0x01:
            st.overflow_flags += 1
        if h.flags & 0x20:
            st.drop_flags += 1
        if self._next_seq is not None and not self.raw:
            if h.seq < self._next_seq - 1 or (h.seq == 0 and self._next_seq > 1):
                st.restarts += 1
                log.warning(
                    "%s: sequence restarted at %d (expected %d): sender restarted",
                    self.name,
                    h.seq,
                    self._next_seq,
                )
                self._next_off = None
            elif h.seq > self._next_seq:
                st.seq_gaps += h.seq - self._next_seq
                log.warning(
                    "%s: %d message(s) missing before seq %d",
                    self.name,
                    h.seq - self._next_seq,
                    h.seq,
                )
            if self._next_off is not None and h.sample_offset > self._next_off:
                st.sample_gaps += h.sample_offset - self._next_off
        self._next_seq = h.seq + 1
        self._next_off = h.sample_offset + h.n_samples


def send_json(sock: zmq.Socket, obj: dict, topic: bytes | None = None) -> None:
    data = json.dumps(obj, separators=(",", ":")).encode()
    sock.send_multipart([topic, data] if topic is not None else [data])


def recv_json(
    sock: zmq.Socket, timeout_s: float | None = None, max_bytes: int = 1 << 20
) -> dict | None:
    """One JSON object, or None on timeout; malformed JSON is logged and skipped (returns None)."""
    if not sock.poll(None if timeout_s is None else int(timeout_s * 1000)):
        return None
    frames = sock.recv_multipart()
    data = frames[-1]
    if len(data) > max_bytes:
        log.warning("dropped oversized control message (%d bytes)", len(data))
        return None
    try:
        obj = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        log.warning("dropped malformed control message: %s", exc)
        return None
    if not isinstance(obj, dict):
        log.warning("dropped control message that is not an object")
        return None
    return obj
