"""The Pluto twin's server: the libiio network ("text") protocol over TCP, the device behind it.

One thread per connection: the control connection (PRINT, READ, WRITE,
GETTRIG, ...) and one connection per open buffer (OPEN, READBUF/WRITEBUF,
CLOSE), all live at once. Every reply goes out in one ``sendall``; a request
the server cannot honour gets ``-errno`` and the connection carries on; a
connection that breaks the framing (a line longer than 4 KiB, a write larger
than 16 MiB) is closed. A client that disconnects mid-buffer closes its
buffers (a cyclic transmitter stops).

What the commands act on (attributes, buffers, samples, device time, status
registers) is the simulated Pluto in ``device.py``; this module only speaks the
protocol.
"""

from __future__ import annotations

import errno
import logging
import socket
import threading

from ..radio.config import RadioConfig
from .device import Buffer, TwinDevice
from .model import VERSION, IioError

log = logging.getLogger("hil.twin")

DEFAULT_PORT = 30431
MAX_LINE = 4096
MAX_WRITE = 16 << 20  # bytes in one attribute write
MAX_CONNECTIONS = 32


class _Closed(Exception):
    """The peer went away or broke the framing: drop the connection."""


class PlutoTwin:
    """A simulated ADALM-PLUTO served over the libiio network protocol.

    Args:
        cfg: radio configuration whose ``sim`` section is the channel and front end
            (the ``[radio]`` values seed the attributes; clients then set them).
        host, port: where to listen (loopback by default; port 0 picks a free one).
        paced: run device time at the sample rate (as a real Pluto does).
    """

    def __init__(
        self,
        cfg: RadioConfig | None = None,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        paced: bool = False,
    ):
        self.device = TwinDevice(cfg, paced)
        self.stats = self.device.stats
        self.stats.update(connections=0, commands=0, errors=0)
        self._conns: dict[int, socket.socket] = {}
        self._next_id = 0
        self._stop = threading.Event()
        self.sock = socket.create_server((host, port), reuse_port=False)
        self.sock.settimeout(0.2)
        self.host, self.port = self.sock.getsockname()[:2]
        self._thread: threading.Thread | None = None

    @property
    def uri(self) -> str:
        return f"ip:{self.host}:{self.port}"

    # what tests and tools look at, on the device behind the server
    @property
    def engine(self):
        """The sim engine behind the device (``hil.radio.sim.SimEngine``)."""
        return self.device.engine

    @property
    def state(self):
        """The device's attribute state (``model.PlutoState``)."""
        return self.device.state

    @property
    def buffers(self) -> dict[str, Buffer]:
        """Open buffers by device id."""
        return self.device.buffers

    # ----------------------------------------------------------------- serving
    def start(self) -> PlutoTwin:
        self._thread = threading.Thread(target=self.serve_forever, name="twin-accept", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        log.info("Pluto twin listening on %s", self.uri)
        while not self._stop.is_set():
            try:
                conn, peer = self.sock.accept()
            except TimeoutError:
                with self.device.lock:
                    self.device.run_clock()
                continue
            except OSError:
                break
            if len(self._conns) >= MAX_CONNECTIONS:
                log.warning("refusing %s: %d connections open", peer, len(self._conns))
                conn.close()
                continue
            self._next_id += 1
            cid = self._next_id
            self._conns[cid] = conn
            self.stats["connections"] += 1
            threading.Thread(
                target=self._serve_conn, args=(conn, cid), name=f"twin-conn{cid}", daemon=True
            ).start()

    def close(self) -> None:
        self._stop.set()
        self.device.closed.set()  # a push waiting for room in the TX queue gives up at once
        try:
            self.sock.close()
        except OSError:
            pass
        for c in list(self._conns.values()):
            try:
                c.shutdown(socket.SHUT_RDWR)
                c.close()
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=2)
        self.device.close()

    def __enter__(self) -> PlutoTwin:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def _serve_conn(self, conn: socket.socket, cid: int) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        f = conn.makefile("rb", buffering=1 << 16)
        try:
            while not self._stop.is_set():
                line = f.readline(MAX_LINE + 1)
                if not line:
                    break
                if len(line) > MAX_LINE and not line.endswith(b"\n"):
                    log.warning("connection %d: line longer than %d bytes; closing", cid, MAX_LINE)
                    conn.sendall(b"%d\n" % -errno.EINVAL)
                    break
                words = line.decode("ascii", "replace").strip().split()
                if not words:
                    continue  # a blank line gets no reply
                if words[0].upper() in ("EXIT", "QUIT"):
                    break
                self.stats["commands"] += 1
                try:
                    self._command(conn, f, cid, words)
                except IioError as exc:
                    self.stats["errors"] += 1
                    log.debug(
                        "connection %d: %s -> %d (%s)", cid, " ".join(words)[:80], -exc.code, exc
                    )
                    conn.sendall(b"%d\n" % -exc.code)
        except (_Closed, ConnectionError, OSError) as exc:
            log.debug("connection %d closed: %s", cid, exc)
        finally:
            self.device.release(cid)
            self._conns.pop(cid, None)
            try:
                f.close()
                conn.close()
            except OSError:
                pass

    def _command(self, conn: socket.socket, f, cid: int, words: list[str]) -> None:
        cmd, args = words[0].upper(), words[1:]
        send = conn.sendall
        if cmd == "VERSION":
            send(f"{VERSION[0]}.{VERSION[1]}.{VERSION[2]:<7}\n".encode())
        elif cmd == "PRINT":
            send(b"%d\n" % len(self.device.xml) + self.device.xml + b"\n")
        elif cmd == "TIMEOUT":
            _int_arg(args, 1, 0, 2**31 - 1)
            send(b"0\n")
        elif cmd == "READ":
            with self.device.lock:
                value = self.device.attr(args).read().encode()
            send(b"%d\n" % len(value) + value + b"\n")
        elif cmd == "WRITE":
            if len(args) < 3 or not args[-1].isdigit():
                raise IioError(errno.EINVAL, "syntax: WRITE <dev> ... <attr> <bytes>")
            n = int(args[-1])
            if n > MAX_WRITE:
                send(b"%d\n" % -errno.EINVAL)
                raise _Closed(f"attribute write of {n} bytes")
            raw = _read_exact(f, n)
            attr = self.device.attr(args[:-1])
            if attr.write is None:
                raise IioError(errno.EACCES, f"{attr.name} is read-only")
            text = raw.split(b"\0", 1)[0].decode("ascii", "replace").strip()
            with self.device.lock:
                attr.write(text)
            send(b"%d\n" % n)
        elif cmd == "OPEN":
            self._open(cid, args)
            send(b"0\n")
        elif cmd == "CLOSE":
            if len(args) != 1:
                raise IioError(errno.EINVAL, "syntax: CLOSE <dev>")
            dev = self.device.device(args[0])
            with self.device.lock:
                b = self.buffers.get(dev.id)
                if b is None or b.owner != cid:
                    raise IioError(errno.ENXIO, f"{dev.id} is not open")
                self.device.close_buffer(b)
            send(b"0\n")
        elif cmd == "READBUF":
            self._readbuf(conn, cid, args)
        elif cmd == "WRITEBUF":
            self._writebuf(conn, f, cid, args)
        elif cmd == "GETTRIG":
            if len(args) != 1:
                raise IioError(errno.EINVAL, "syntax: GETTRIG <dev>")
            self.device.device(args[0])
            raise IioError(errno.ENOENT, "no trigger")
        elif cmd == "SETTRIG":
            if len(args) not in (1, 2):
                raise IioError(errno.EINVAL, "syntax: SETTRIG <dev> [<trigger>]")
            self.device.device(args[0])
            if len(args) == 2:
                raise IioError(errno.ENOENT, f"no trigger {args[1]}")
            send(b"0\n")
        elif cmd == "SET":
            if len(args) != 3 or args[1].upper() != "BUFFERS_COUNT":
                raise IioError(errno.EINVAL, "syntax: SET <dev> BUFFERS_COUNT <n>")
            dev = self.device.device(args[0])
            self.device.kernel_buffers[dev.id] = _int_arg(args[2:], 1, 1, 64)
            send(b"0\n")
        else:  # ZPRINT, BINARY (libiio 1.x probe), anything else
            raise IioError(errno.EINVAL, f"unknown command {cmd}")

    def _open(self, cid: int, args: list[str]) -> None:
        if len(args) not in (3, 4) or (len(args) == 4 and args[3].upper() != "CYCLIC"):
            raise IioError(errno.EINVAL, "syntax: OPEN <dev> <samples> <mask> [CYCLIC]")
        dev = self.device.device(args[0])
        samples = _int_arg(args[1:2], 1, 1, 2**63)
        self.device.open_buffer(cid, dev, samples, args[2], cyclic=len(args) == 4)

    def _transfer(self, cid: int, args: list[str], output: bool) -> tuple[Buffer, int]:
        """READBUF/WRITEBUF <dev> <bytes> -> (this connection's buffer, byte count): whole
        samples, no more than the buffer holds."""
        if len(args) != 2:
            raise IioError(
                errno.EINVAL, f"syntax: {'WRITEBUF' if output else 'READBUF'} <dev> <bytes>"
            )
        b = self.device.own(cid, args[0], output)
        nbytes = _int_arg(args[1:], 1, 1, 2**63)
        if nbytes % b.sample_bytes or nbytes // b.sample_bytes > b.samples:
            raise IioError(errno.EINVAL, f"{nbytes} bytes: not whole samples within the buffer")
        return b, nbytes

    def _readbuf(self, conn: socket.socket, cid: int, args: list[str]) -> None:
        b, nbytes = self._transfer(cid, args, output=False)
        n = nbytes // b.sample_bytes
        chunk = self.device.read_chunk(b)
        head = b"%s\n" % b.mask.encode()
        done = 0
        while done < n:
            k = min(chunk, n - done)
            payload = self.device.rx_samples(b, k).tobytes()
            conn.sendall(b"%d\n" % len(payload) + head + payload)
            head = b""
            done += k

    def _writebuf(self, conn: socket.socket, f, cid: int, args: list[str]) -> None:
        b, nbytes = self._transfer(cid, args, output=True)
        conn.sendall(b"0\n")
        raw = _read_exact(f, nbytes)
        self.device.tx_samples(b, raw)
        conn.sendall(b"%d\n" % nbytes)


def _int_arg(args: list[str], count: int, lo: int, hi: int) -> int:
    if len(args) != count or not args[-1].isdigit():
        raise IioError(errno.EINVAL, "expected a non-negative integer")
    v = int(args[-1])
    if not lo <= v <= hi:
        raise IioError(errno.EINVAL, f"{v} outside [{lo}, {hi}]")
    return v


def _read_exact(f, n: int) -> bytes:
    out = f.read(n)
    if out is None or len(out) != n:
        raise _Closed(f"peer sent {0 if out is None else len(out)} of {n} bytes")
    return out
