"""The streaming frame receiver: stream synchronisation (numpy) + the torch receive path.

``FrameReceiver.push(chunk)`` takes any number of complex64 samples and
returns the frames completed so far as :class:`FrameEvent` records, each either
``ok`` (header decoded, payload equalised) or ``header_error`` (a frame was
detected but its header failed; its reason is given). Nothing raises out of
``push`` for bad stream content; bad *arguments* (wrong dtype or shape) do.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..convert import to_numpy, to_torch
from .header import Header, HeaderError, decode_header_llr
from .numerology import OfdmConfig
from .receive import OfdmReceiver, RxResult
from .sync import Detection, StreamSync


@dataclass
class FrameEvent:
    """One detected frame.

    Attributes:
        status: "ok" or "header_error".
        frame_start: absolute sample index of the frame start in the stream.
        cfo_hz: total CFO estimate (coarse + fine + residual).
        sc_metric, lts_metric: detection metrics (0..1).
        header: decoded header (ok only).
        error: why the header failed (header_error only).
        symbols: [k] complex64 equalised payload (ok only).
        symbol_gain: [k] float32 post-equalisation SNR per symbol (linear).
        h: [N] complex64 channel estimate per FFT bin.
        snr_db: Es/N0 estimate; evm_pilots: RMS pilot EVM (linear).
    """

    status: str
    frame_start: int
    cfo_hz: float
    sc_metric: float
    lts_metric: float
    header: Header | None = None
    error: str | None = None
    symbols: np.ndarray | None = None
    symbol_gain: np.ndarray | None = None
    h: np.ndarray | None = None
    snr_db: float | None = None
    evm_pilots: float | None = None


@dataclass
class ReceiverStats:
    samples: int = 0
    detections: int = 0
    rejected: int = 0  # autocorrelation hits without a long training field
    frames: int = 0
    header_errors: int = 0
    nonfinite: int = 0  # samples replaced by 0 because they were NaN/inf
    extra: dict = field(default_factory=dict)


class FrameReceiver:
    """Finds, synchronises and receives frames in a continuous stream.

    Args:
        cfg: numerology (must match the transmitter's).
        receiver: the torch receive path; defaults to MMSE + LMMSE smoothing.
        max_payload: largest payload (complex symbols) a header may announce;
            larger ones are treated as header errors instead of waiting forever.
        threshold, lts_threshold: detection thresholds (see ``StreamSync``).
    """

    def __init__(
        self,
        cfg: OfdmConfig | None = None,
        receiver: OfdmReceiver | None = None,
        max_payload: int = 1 << 16,
        threshold: float = 0.5,
        lts_threshold: float = 0.35,
    ):
        self.cfg = cfg or OfdmConfig()
        self.rx = receiver or OfdmReceiver(self.cfg)
        if self.rx.cfg != self.cfg:
            raise ValueError("receiver and FrameReceiver must share one OfdmConfig")
        self.sync = StreamSync(self.cfg, threshold, lts_threshold)
        self.max_payload = int(max_payload)
        self.stats = ReceiverStats()
        self._buf = np.zeros(0, np.complex64)
        self._base = 0  # absolute index of _buf[0]
        self._scan = 0  # absolute index where the next detection window starts
        self._pending: Detection | None = None
        self._header: Header | None = None

    @property
    def position(self) -> int:
        """Absolute index one past the last sample pushed."""
        return self._base + len(self._buf)

    def push(self, chunk: np.ndarray) -> list[FrameEvent]:
        """Feed samples ([n] complex64); returns the frames completed by them."""
        chunk = np.asarray(chunk)
        if chunk.ndim != 1:
            raise ValueError(f"chunk must be 1-D, got shape {chunk.shape}")
        if chunk.dtype != np.complex64:
            if not np.iscomplexobj(chunk):
                raise TypeError(f"chunk must be complex64, got {chunk.dtype}")
            chunk = chunk.astype(np.complex64)
        bad = ~np.isfinite(chunk)
        if bad.any():
            chunk = np.where(bad, np.complex64(0), chunk)
            self.stats.nonfinite += int(bad.sum())
        self.stats.samples += len(chunk)
        self._buf = np.concatenate([self._buf, chunk]) if len(self._buf) else chunk.copy()
        events: list[FrameEvent] = []
        while self._step(events):
            pass
        self._trim()
        return events

    # ----------------------------------------------------------------- internals
    def _trim(self) -> None:
        keep_from = self._scan if self._pending is None else min(self._scan, self._pending.lts_start)
        drop = keep_from - self._base
        if drop > 0:
            self._buf = self._buf[drop:]
            self._base += drop

    def _step(self, events: list[FrameEvent]) -> bool:
        """One unit of progress; False when more samples are needed."""
        c, L = self.cfg, self.sync.L
        if self._pending is None:
            r = self._buf[self._scan - self._base :]
            m, p = self.sync.metric(r)
            if len(m) == 0:
                return False
            hits = np.flatnonzero(m > self.sync.threshold)
            if hits.size == 0:
                self._scan += len(m) * L
                return False
            j0 = int(hits[0])
            look = 8
            if j0 + look > len(m):
                self._scan += j0 * L
                return False
            jm = j0 + int(np.argmax(m[j0 : j0 + look]))
            if len(r) < self.sync.needed_after(jm * L):
                self._scan += j0 * L
                return False
            det = self.sync.refine(r, self._scan, jm * L, complex(p[jm]))
            if det is None:
                self.stats.rejected += 1
                self._scan += (jm + 1) * L
                return True
            det.sc_metric = float(m[jm])
            self.stats.detections += 1
            self._pending, self._header = det, None
        det = self._pending
        if self._header is None:
            if self.position < det.lts_start + c.lts_len + c.header_len:
                return False
            res = self._receive(det, 0)
            try:
                hdr = decode_header_llr(to_numpy_real(res.header_llr[0]), c)
                if hdr.payload_len > self.max_payload:
                    raise HeaderError(f"payload_len {hdr.payload_len} exceeds max_payload {self.max_payload}")
            except HeaderError as exc:
                self.stats.header_errors += 1
                events.append(self._event("header_error", det, res, error=str(exc)))
                self._scan = det.lts_start + c.lts_len
                self._pending = None
                return True
            self._header = hdr
        hdr = self._header
        end = det.frame_start + c.frame_len(hdr.payload_len)
        if self.position < end:
            return False
        res = self._receive(det, hdr.payload_len)
        self.stats.frames += 1
        events.append(self._event("ok", det, res, header=hdr))
        self._scan = end
        self._pending = None
        return True

    def _receive(self, det: Detection, n_payload: int) -> RxResult:
        c = self.cfg
        n = c.lts_len + (c.header_symbols + c.payload_symbols(n_payload)) * c.symbol_len
        i = det.lts_start - self._base
        seg = self._buf[i : i + n].astype(np.complex128)
        seg = seg * np.exp(-2j * np.pi * det.cfo_norm * np.arange(n))
        with torch.inference_mode():
            return self.rx(to_torch(seg[None]), n_payload)

    def _event(self, status, det: Detection, res: RxResult, header=None, error=None) -> FrameEvent:
        fs = self.cfg.sample_rate_hz
        ev = FrameEvent(
            status=status,
            frame_start=det.frame_start,
            cfo_hz=(det.cfo_norm + float(res.cfo_norm[0])) * fs,
            sc_metric=det.sc_metric,
            lts_metric=det.lts_metric,
            header=header,
            error=error,
            h=to_numpy(res.h[0]),
            snr_db=float(res.snr_db[0]),
            evm_pilots=float(res.evm_pilots[0]),
        )
        if status == "ok":
            ev.symbols = to_numpy(res.symbols[0])
            ev.symbol_gain = res.symbol_gain[0].float().numpy().copy()
        return ev


def to_numpy_real(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy()
