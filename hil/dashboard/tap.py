"""The processes' side of the bench view: a telemetry tap that never blocks the data path.

A ``Tap`` is a ZeroMQ PUB socket with a short send queue: ``publish`` never waits. With no
dashboard connected the messages go nowhere; with a slow one, the queue fills and further
messages are dropped (and counted) rather than slowing the receiver. What goes out is small:
the spectrum is computed here and reduced to ``Spectrum.bins`` values, the constellation to a
few hundred points, images to PNGs of the link's item size.
"""

from __future__ import annotations

import base64
import io
import json
import time

import numpy as np
import zmq

from ..transport.sockets import make_socket

TOPIC_RX = b"rx"
TOPIC_RADIO = b"radio"
MAX_POINTS = 512  # constellation points per message


class Tap:
    """Non-blocking JSON publisher (``topic``, one JSON object per message)."""

    def __init__(self, endpoint: str, hwm: int = 64):
        self.ctx = zmq.Context()  # its own: the process's other sockets end on their own terms
        self.sock = make_socket(self.ctx, zmq.PUB, endpoint, bind=True)
        self.sock.setsockopt(zmq.SNDHWM, hwm)
        self.sent = 0

    def publish(self, topic: bytes, obj: dict) -> None:
        """Queue one message; a PUB socket never blocks: at the high-water mark (a slow
        subscriber) ZeroMQ drops it, and with no subscriber it goes nowhere."""
        data = json.dumps(obj, separators=(",", ":")).encode()
        self.sock.send_multipart([topic, data], flags=zmq.NOBLOCK)
        self.sent += 1

    def close(self, linger_ms: int = 500) -> None:
        """Linger a little: the final summary should reach a connected dashboard."""
        self.sock.close(linger=linger_ms)
        self.ctx.term()


class Every:
    """True at most once per ``period`` seconds (rate limits for the tap's messages)."""

    def __init__(self, period: float):
        self.period = period
        self.last = float("-inf")

    def __call__(self) -> bool:
        now = time.monotonic()
        if now - self.last < self.period:
            return False
        self.last = now
        return True


class Spectrum:
    """Averaged power spectrum of the RX stream, decimated here: the dashboard gets ``bins``
    values in dBFS (DC in the middle), never the samples.

    ``push`` looks at one ``nfft``-sample segment per call (the stream's chunks arrive far
    faster than a screen refreshes, so a segment per chunk is a fair, cheap sample of it) and
    keeps an exponential average of the Hann-windowed periodogram."""

    def __init__(self, nfft: int = 1024, bins: int = 256, alpha: float = 0.3):
        if nfft % bins:
            raise ValueError(f"nfft={nfft} must be a multiple of bins={bins}")
        self.nfft, self.bins, self.alpha = nfft, bins, alpha
        self.win = np.hanning(nfft).astype(np.float32)
        self.norm = float(np.sum(self.win) ** 2)
        self.avg: np.ndarray | None = None

    def push(self, samples: np.ndarray) -> None:
        if len(samples) < self.nfft:
            return
        seg = samples[-self.nfft :].astype(np.complex64, copy=False)
        if not np.all(np.isfinite(seg)):
            return
        p = np.abs(np.fft.fftshift(np.fft.fft(seg * self.win))) ** 2 / self.norm
        p = p.reshape(self.bins, -1).mean(1)
        self.avg = p if self.avg is None else (1 - self.alpha) * self.avg + self.alpha * p

    def db(self) -> list[float] | None:
        if self.avg is None:
            return None
        return [round(v, 1) for v in (10 * np.log10(self.avg + 1e-20)).tolist()]


def points(z: np.ndarray | None, n: int = MAX_POINTS) -> list[list[float]]:
    """Up to n complex points as [[re, im], ...] (evenly thinned), rounded for the wire."""
    if z is None or len(z) == 0:
        return []
    z = np.asarray(z)
    if len(z) > n:
        z = z[np.linspace(0, len(z) - 1, n).astype(int)]
    z = z[np.isfinite(z)]
    return np.round(np.stack([z.real, z.imag], 1), 3).tolist()


PREVIEW_SIDE = 320  # the live view's images: a whole photograph is shown at most this large


def png_data_url(img, max_side: int = PREVIEW_SIDE) -> str:
    """[3, H, W] float image in [0, 1] (tensor or array) -> a PNG data: URL, scaled down (never
    up) to ``max_side`` pixels on its long side: the page gets a preview, not a photograph."""
    from PIL import Image

    a = np.asarray(img, dtype=np.float32)
    a = (np.clip(a, 0, 1).transpose(1, 2, 0) * 255 + 0.5).astype(np.uint8)
    im = Image.fromarray(a)
    if max(im.size) > max_side:
        im.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


class RxTap:
    """What ``hil rx --telemetry`` publishes, rate-limited: every frame's record as it is
    settled, the spectrum ten times a second, the latest constellation and image pair five
    times a second, counts and stream statistics five times a second, the summary at the end.
    """

    def __init__(self, endpoint: str):
        self.tap = Tap(endpoint)
        self.spectrum = Spectrum()
        self._spec, self._status, self._pic = Every(0.1), Every(0.2), Every(0.2)

    def frame(self, rec: dict) -> None:
        keep = ("status", "seq", "snr_db", "cfo_hz", "evm_pilots", "psnr_db", "ssim", "time")
        self.tap.publish(TOPIC_RX, {"type": "frame", **{k: rec[k] for k in keep if k in rec}})

    def samples(self, x: np.ndarray) -> None:
        """A chunk of the stream: one segment of it joins the spectrum, ten times a second
        (a screen shows no more; the receiver pays for no more)."""
        if self._spec():
            self.spectrum.push(x)
            db = self.spectrum.db()
            if db is not None:
                self.tap.publish(TOPIC_RX, {"type": "spectrum", "db": db})

    def decoded(self, event, img, ref) -> None:
        """The newest decoded frame's constellation and images (at most 5 per second)."""
        if not self._pic():
            return
        h = event.header
        self.tap.publish(
            TOPIC_RX,
            {
                "type": "constellation",
                "seq": h.seq,
                "payload": points(event.symbols),
                "pilots": points(event.pilots, 256),
                "evm": event.evm_pilots,
            },
        )
        msg = {"type": "image", "seq": h.seq, "item_id": h.item_id, "rx": png_data_url(img)}
        if ref is not None:
            msg["tx"] = png_data_url(ref)
        self.tap.publish(TOPIC_RX, msg)

    def status_due(self) -> bool:
        """Time for a status message (call before building its arguments)."""
        return self._status()

    def status(self, counts: dict, stream: dict, receiver: dict, meta: dict) -> None:
        self.tap.publish(
            TOPIC_RX,
            {
                "type": "status",
                "counts": counts,
                "stream": stream,
                "receiver": receiver,
                "meta": meta,
            },
        )

    def summary(self, summary: dict) -> None:
        self.tap.publish(
            TOPIC_RX,
            {
                "type": "summary",
                "counts": summary["counts"],
                "psnr_db_mean": summary["psnr_db_mean"],
                "ssim_mean": summary["ssim_mean"],
            },
        )

    def close(self) -> None:
        self.tap.close()
