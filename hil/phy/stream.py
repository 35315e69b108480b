"""The streaming frame receiver: stream synchronisation (numpy, numba) + the receive path
(``OfdmReceiver``'s steps, compiled: ``compiled.CompiledReceiver``).

``FrameReceiver.push(chunk)`` takes any number of complex64 samples and
returns the frames completed so far as :class:`FrameEvent` records, each either
``ok`` (header decoded, payload equalised) or ``header_error`` (a frame was
detected but its header failed; its reason is given). Nothing raises out of
``push`` for bad stream content; bad *arguments* (wrong dtype or shape) do.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..channel.functional import phase_ramp
from ..convert import to_numpy, to_numpy_real, to_torch
from .coding import MAX_LIST
from .compiled import CompiledReceiver
from .frame import FrameBuilder
from .header import (
    HEADER_LIST,
    Header,
    HeaderError,
    HeaderPrior,
    code_header_bits,
    crc_ok,
    crc_ok_batch,
    decode_header_bits,
    parse_header_bits,
)
from .numerology import OfdmConfig
from .receive import ChannelEstimate, OfdmReceiver, RxResult
from .sync import Detection, StreamSync

DETECT_SPAN = 4096  # samples the detector's metric covers per pass


@dataclass
class FrameEvent:
    """One detected frame.

    Attributes:
        status: "ok" or "header_error".
        frame_start: absolute sample index of the frame start in the stream.
        cfo_hz: total CFO estimate (coarse + fine + residual).
        detector_cfo_hz: the stream detector's part of it (coarse from the short
            training field + fine from the long one), before the receive path's residual.
        sc_metric, lts_metric: detection metrics (0..1).
        header: decoded header (ok only).
        error: why the header failed (header_error only).
        symbols: [k] complex64 equalised payload (ok only).
        symbol_gain: [k] float32 post-equalisation SNR per symbol (linear).
        h: [N] complex64 channel estimate per FFT bin.
        snr_db: Es/N0 estimate; evm_pilots: RMS pilot EVM (linear).
        pilots: [S * P] complex64 equalised pilots of the frame's S OFDM symbols (header and,
            for ok frames, payload), sign-corrected to +1 (ideally all 1 + 0j), for displays.
    """

    status: str
    frame_start: int
    cfo_hz: float
    detector_cfo_hz: float
    sc_metric: float
    lts_metric: float
    header: Header | None = None
    error: str | None = None
    symbols: np.ndarray | None = None
    symbol_gain: np.ndarray | None = None
    h: np.ndarray | None = None
    snr_db: float | None = None
    evm_pilots: float | None = None
    pilots: np.ndarray | None = None


@dataclass
class _Pending:
    """A detected frame on its way through the receiver (the queue's element).

    header: None until the header pass, then the Header or why it failed (HeaderError);
    est: the header pass's channel estimates and this frame's row in them, reused by the
    payload pass (the frame is received once: its long training field is not read twice);
    row: the results, as numpy (set when the frame is done)."""

    det: Detection
    header: Header | HeaderError | None = None
    est: tuple[ChannelEstimate, int] | None = None
    row: dict | None = None


@dataclass
class ReceiverStats:
    samples: int = 0
    detections: int = 0
    rejected: int = 0  # autocorrelation hits without a long training field
    frames: int = 0
    header_errors: int = 0
    nonfinite: int = 0  # samples replaced by 0 because they were NaN/inf
    reread: int = 0  # headers read only with the decision-directed channel estimate
    echoes: int = 0  # failed headers inside a frame read in the same pass: not decoded further
    # seconds spent per stage, to say where the time goes
    seconds: dict = field(
        default_factory=lambda: {"detect": 0.0, "refine": 0.0, "header": 0.0, "payload": 0.0}
    )


class FrameReceiver:
    """Finds, synchronises and receives frames in a continuous stream.

    Args:
        cfg: numerology (must match the transmitter's).
        receiver: the torch receive path; defaults to MMSE + LMMSE smoothing.
        max_payload: largest payload (complex symbols) a header may announce;
            larger ones are treated as header errors instead of waiting forever.
        threshold, lts_threshold: detection thresholds (see ``StreamSync``).
        header_list: paths the list Viterbi decoder tries against the header CRC when the
            best one fails it (``header.HEADER_LIST``; 1 = plain Viterbi).
        fingerprint: the model fingerprint expected in the headers (the receiving decoder's),
            or None: with ``header_prior`` the header decoder holds to it where the plain
            decode fails (frames of other models are still read, without it).
        header_prior: decode failing headers again with what is known of them
            (``header.HeaderPrior``: the version, the high zero bits of a payload length
            <= max_payload, the fingerprint, and what the last header read predicts).
        header_rereads: times a failing header is read again with a decision-directed channel
            estimate (``OfdmReceiver.refine_estimate``: its decoded bits, re-encoded, as
            pilots); 0 turns it off.
        refine_payload: equalise each payload with a channel, noise and SNR estimate that
            takes the frame's header, once it passed its CRC, as known symbols
            (``OfdmReceiver.refine_estimate``); False: the long training field's estimate.
        threads: torch's intra-op threads while ``push`` runs (restored after), or None to
            leave the process's setting. The receive path's tensors are small, so 1 is the
            fastest: a 512x768 photograph's 41 frames took 87 ms with 1 thread and 160 ms
            with 2 on this 2-core machine (the same process's JSCC decoder wants both).
        compiled: run a plain ``OfdmReceiver``'s steps as ``CompiledReceiver`` (numba; the
            same results to float32 rounding, several times faster on the few frames a
            chunk holds); False, or a receiver of another class: the torch module.
    """

    def __init__(
        self,
        cfg: OfdmConfig | None = None,
        receiver: OfdmReceiver | None = None,
        max_payload: int = 1 << 16,
        threshold: float = 0.1,
        lts_threshold: float = 0.35,
        dc_block: bool = True,
        header_list: int = HEADER_LIST,
        fingerprint: bytes | None = None,
        header_prior: bool = True,
        header_rereads: int = 2,
        refine_payload: bool = True,
        threads: int | None = 1,
        compiled: bool = True,
    ):
        self.cfg = cfg or OfdmConfig()
        if threads is not None and int(threads) < 1:
            raise ValueError(f"threads must be >= 1 or None, got {threads}")
        self.threads = None if threads is None else int(threads)
        if not 1 <= int(header_list) <= MAX_LIST:
            raise ValueError(f"header_list must be in 1..{MAX_LIST}, got {header_list}")
        self.header_list = int(header_list)
        if not 0 <= int(header_rereads) <= 8:
            raise ValueError(f"header_rereads must be in 0..8, got {header_rereads}")
        self.header_rereads = int(header_rereads)
        self.refine_payload = bool(refine_payload)
        self.rx = receiver or OfdmReceiver(self.cfg)
        if self.rx.cfg != self.cfg:
            raise ValueError("receiver and FrameReceiver must share one OfdmConfig")
        # the receive path the stream runs (``path``): the compiled twin of a plain
        # OfdmReceiver (the same results, a fraction of the time), else the torch module
        self._fast = (
            CompiledReceiver(self.rx) if compiled and CompiledReceiver.supports(self.rx) else None
        )
        self.path = self._fast or self.rx
        # the compiled path's header pass keeps the bins of the long training field and the
        # header (ChannelEstimate.known_bins): the refinement and the payload reuse them
        self._known = {"known": True} if self._fast is not None else {}
        self.sync = StreamSync(self.cfg, threshold, lts_threshold)
        self.max_payload = int(max_payload)
        self.prior = (
            HeaderPrior(fingerprint, min(self.max_payload, 2**32 - 1)) if header_prior else None
        )
        self.stats = ReceiverStats()
        self._buf = np.zeros(0, np.complex64)
        self._base = 0  # absolute index of _buf[0]
        self._scan = 0  # absolute index where the next detection window starts
        self.dc_block = dc_block
        self._dc = 0j  # running estimate of the RX DC offset
        self._rewound_to = -1  # the last frame end the scan went back to (echo removed)
        self._emitted_end = -1  # end of the last frame emitted with a valid header
        # the frames detected and not yet emitted, in stream order
        self._queue: list[_Pending] = []

    DC_TIME = 1 << 15  # samples: the DC estimate's time constant (8 ms at 4 MSps)

    def _remove_dc(self, chunk: np.ndarray) -> np.ndarray:
        """Subtract a slow running mean: a radio's residual DC offset (fixed in ADC codes, so
        close to the signal when the RX gain is low) biases the short training field's
        autocorrelation. OFDM leaves the DC bin empty, so nothing the frame carries is lost.
        The estimate's time constant (DC_TIME) is far longer than a frame."""
        n = len(chunk)
        # a one-pole average of the block means, slow from the start: a fast start would follow
        # the first frame's own short-term mean and distort it, where a constant offset only
        # touches the empty DC bin
        self._dc += (1.0 - np.exp(-n / self.DC_TIME)) * (complex(chunk.mean()) - self._dc)
        return chunk - np.complex64(self._dc)

    def after_gap(self) -> FrameReceiver:
        """A receiver for the stream after samples were lost: the same receive path, settings
        and DC estimate (a radio's offset does not change with a gap); detection, the queue and
        the stats start afresh. Frames in flight are the caller's to report (``incomplete``)."""
        fr = FrameReceiver(
            self.cfg,
            self.rx,
            self.max_payload,
            self.sync.threshold,
            self.sync.lts_threshold,
            self.dc_block,
            self.header_list,
            header_rereads=self.header_rereads,
            refine_payload=self.refine_payload,
            threads=self.threads,
            compiled=self._fast is not None,
        )
        fr._dc, fr.prior = self._dc, self.prior
        return fr

    @property
    def position(self) -> int:
        """Absolute index one past the last sample pushed."""
        return self._base + len(self._buf)

    def push(self, chunk: np.ndarray) -> list[FrameEvent]:
        """Feed samples ([n] complex64; other complex dtypes are cast, real ones refused);
        returns the frames completed by them, in stream order."""
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
        if self.dc_block and len(chunk):
            chunk = self._remove_dc(chunk)
        self._buf = np.concatenate([self._buf, chunk]) if len(self._buf) else chunk.copy()
        before = torch.get_num_threads()
        if self.threads is not None:
            torch.set_num_threads(self.threads)
        try:
            return self._process()
        finally:
            torch.set_num_threads(before)

    def _process(self) -> list[FrameEvent]:
        """Everything the buffer now allows: detections, headers, payloads; the events."""
        events: list[FrameEvent] = []
        # Detect every frame start available, then receive the headers and the
        # payloads of all complete frames in batches: one call per pass for all of them.
        while True:
            self._detect()
            rescan = self._decode_headers(events)
            done = self._receive_payloads(events)
            if not (done or rescan):
                break
        self._trim()
        return events

    def incomplete(self) -> list[tuple[Detection, Header | None]]:
        """Frames detected but not completed (their samples stopped): detection and header if decoded.

        Call when the stream is cut (a drop, a restart) before replacing this receiver, so
        those frames can be reported as failed rather than vanish.
        """
        return [
            (q.det, q.header if isinstance(q.header, Header) else None)
            for q in self._queue
            if q.row is None
        ]

    # ----------------------------------------------------------------- internals
    def _trim(self) -> None:
        keep_from = self._scan
        if self._queue:
            keep_from = min(keep_from, self._queue[0].det.lts_start)
        drop = keep_from - self._base
        if drop > 0:
            self._buf = self._buf[drop:]
            self._base += drop

    def _detect(self) -> None:
        """Scan from _scan for frame starts; queue each (detection, header=None)."""
        L, sec = self.sync.L, self.stats.seconds
        # after a detection the scan restarts behind its LTS, where the next frame may follow
        # at once: the metric then covers DETECT_SPAN samples (over the whole rest of the
        # buffer every time, it cost as much as all the receiving of dense frames); a span
        # without a hit hands on to the whole rest
        span = DETECT_SPAN
        while True:
            t0 = time.perf_counter()
            r = self._buf[self._scan - self._base :]
            m, p = self.sync.metric(r[:span])
            more = len(r) > span  # samples beyond this span
            sec["detect"] += time.perf_counter() - t0
            if len(m) == 0:
                return
            hits = np.flatnonzero(m > self.sync.threshold)
            if hits.size == 0:
                self._scan += len(m) * L
                if more:
                    span = len(r)
                    continue
                return
            j0 = int(hits[0])
            look = 2 * self.cfg.sts_repeats
            if j0 + look > len(m):
                self._scan += j0 * L
                if more and j0 > 0:  # the span cut the plateau: a fresh span from the hit
                    continue
                return
            span = DETECT_SPAN
            jm = j0 + int(np.argmax(m[j0 : j0 + look]))
            if len(r) < self.sync.needed_after(jm * L):
                self._scan += j0 * L
                return
            t0 = time.perf_counter()
            det = self.sync.refine(r, self._scan, jm * L, complex(p[jm]), float(m[jm]))
            sec["refine"] += time.perf_counter() - t0
            if det is None:
                self.stats.rejected += 1
                self._scan += (jm + 1) * L
                continue
            det.sc_metric = float(m[jm])
            owner = self._inside_known(det)
            if owner is not None:  # an echo of a frame already read (or itself again)
                self.stats.rejected += 1
                self._scan = max(self._scan + (jm + 1) * L, owner)  # on from the frame's end
                continue
            self.stats.detections += 1
            self._queue.append(_Pending(det))
            # header and payload have no STS-like periodicity; keep scanning right after the LTS
            self._scan = det.lts_start + self.cfg.lts_len

    def _decode_headers(self, events: list[FrameEvent]) -> bool:
        """Read the headers of the frames whose header has arrived and drop echoes inside
        decoded frames; True when the scan position went back (detect again)."""
        c = self.cfg
        todo = [
            q
            for q in self._queue
            if q.header is None and self.position >= q.det.lts_start + c.lts_len + c.header_len
        ]
        if todo:
            self._read_headers(todo)
        # a decoded frame owns its extent: detections inside it were echoes of its payload.
        # Every pass, not only one that read a header: a detection queued after its frame's
        # header was read (late in a long payload) is an echo too
        kept, end, rewind = [], -1, None
        for q in self._queue:
            if q.det.frame_start < end:
                self.stats.rejected += 1
                self.stats.detections -= 1
                rewind = end if rewind is None else min(rewind, end)
                continue
            kept.append(q)
            if isinstance(q.header, Header):
                end = q.det.frame_start + c.frame_len(q.header.payload_len)
        self._queue = kept
        if rewind is None or self._scan <= rewind or rewind == self._rewound_to:
            return False
        # the echo moved the scan past what followed it (the detector skips a detection's long
        # training field): forget the detections after the owning frame whose header was not
        # read as valid, and scan again from its end. Valid frames stay queued; the detector
        # skips what falls inside them (_inside_known)
        for q in [
            q
            for q in self._queue
            if q.det.frame_start >= rewind and not isinstance(q.header, Header)
        ]:
            self._queue.remove(q)
            self.stats.detections -= 1
        self._scan = self._rewound_to = rewind
        return True

    def _inside_known(self, det: Detection) -> int | None:
        """The end of the frame whose header was read (queued, or the last emitted) that a
        detection falls inside, or None."""
        c = self.cfg
        if det.frame_start < self._emitted_end:
            return self._emitted_end
        for q in self._queue:
            if isinstance(q.header, Header):
                a = q.det.frame_start
                end = a + c.frame_len(q.header.payload_len)
                if a - c.sts_period <= det.frame_start < end:
                    return end
        return None

    def _read_headers(self, todo: list) -> None:
        c = self.cfg
        t0 = time.perf_counter()
        dets = [q.det for q in todo]
        res = self._receive(dets, 0)
        # plain Viterbi first: a detection inside a frame whose header this pass reads (the
        # detector ran ahead of the header into its payload) is an echo, and the costly
        # decoders (the prior's tiers, the list, the re-reads: several list runs) skip it
        bits = viterbi_decode_batch(res.header_llr, c, 1, None)
        passed = crc_ok_batch(bits)
        parsed: dict[int, Header | HeaderError] = {}  # rows parsed, while their bits stand
        echoes = self._echoes(todo, bits, passed, parsed)
        self.stats.echoes += len(echoes)
        failed = [i for i in range(len(todo)) if not passed[i] and i not in echoes]
        if failed and (self.header_list > 1 or self.prior is not None):
            bits[failed] = viterbi_decode_batch(
                res.header_llr[failed], c, self.header_list, self.prior
            )
            failed = [i for i in failed if not crc_ok(bits[i])]
        est = res.estimate
        refs = [(est, i) for i in range(len(todo))]  # each frame's estimate: batch, row
        segs = None
        if ((failed and self.header_rereads) or self.refine_payload) and not self._known:
            # the headers' samples with the estimate's residual CFO removed, cut once (the
            # compiled path keeps their bins from the header pass instead: known_bins)
            with torch.inference_mode():
                segs = self._segments(dets, 0, est)
        for _ in range(self.header_rereads):
            if not failed:
                break
            # decision-directed: the failed decode's bits, re-encoded, as pilots for a better
            # channel estimate; then the header read again with it
            sub = est.rows(failed)
            with torch.inference_mode():
                x = None if segs is None else segs[failed]
                d = 1.0 - 2.0 * code_header_bits(bits[failed], c).astype(np.float32)
                d = torch.from_numpy(d.reshape(len(failed), c.header_symbols, c.n_data))
                sub = self.path.refine_estimate(x, sub, d, **self._known)
                again = self.path.equalize(x, sub, 0, **self._known).header_llr
            bits[failed] = viterbi_decode_batch(again, c, self.header_list, self.prior)
            for j, i in enumerate(failed):
                if crc_ok(bits[i]):  # its estimate, too, is the better one for the payload
                    refs[i] = (sub, j)
                    self.stats.reread += 1
            failed = [i for i in failed if not crc_ok(bits[i])]
        if self.refine_payload:
            bad = set(failed) | echoes
            self._refine_passed(
                [i for i in range(len(todo)) if i not in bad], bits, segs, est, refs
            )
        rows = None  # as numpy only when a header failed (its event reports the frame)
        for i, q in enumerate(todo):
            try:
                hdr = parsed.get(i) or parse_header_bits(bits[i])
                if isinstance(hdr, HeaderError):
                    raise hdr
                if hdr.payload_len > self.max_payload:
                    raise HeaderError(
                        f"payload_len {hdr.payload_len} exceeds max_payload {self.max_payload}"
                    )
                q.header, q.est = hdr, refs[i]
                if self.prior is not None:
                    self.prior = self.prior.after(hdr)
            except HeaderError as exc:
                q.header = exc
                rows = rows or _rows(res)
                q.row = rows[i]
        self.stats.seconds["header"] += time.perf_counter() - t0

    def _echoes(self, todo: list, bits: np.ndarray, passed: list[bool], parsed: dict) -> set[int]:
        """The rows of ``todo`` whose header failed and whose detection lies inside a frame
        already known (``_inside_known``) or one whose header passed in ``bits`` [B,
        HEADER_BITS] uint8 (``passed``: each row's CRC check): the same extent
        ``_decode_headers`` then drops them for. ``parsed`` gets each passing row's Header
        (or HeaderError), by row."""
        c = self.cfg
        spans = []
        for i, q in enumerate(todo):
            if passed[i]:
                try:
                    hdr = parse_header_bits(bits[i])
                except HeaderError as exc:
                    parsed[i] = exc
                    continue
                parsed[i] = hdr
                n = hdr.payload_len
                if n <= self.max_payload:
                    a = q.det.frame_start
                    spans.append((a - c.sts_period, a + c.frame_len(n)))
        return {
            i
            for i, q in enumerate(todo)
            if not passed[i]
            and (
                self._inside_known(q.det) is not None
                or any(lo <= q.det.frame_start < hi for lo, hi in spans)
            )
        }

    def _refine_passed(self, ok: list[int], bits, segs, est, refs) -> None:
        """Every header that passed its CRC (rows ``ok`` of ``bits``) serves as 576 known
        symbols: the payload gets a channel estimate from 2 + 12 symbols instead of the long
        training field's 2, and noise and SNR estimates from the header's residuals (what
        the decoder conditions on). refs: each frame's (estimate, row), replaced for the
        frames refined."""
        c = self.cfg
        if not ok:
            return
        with torch.inference_mode():
            d = 1.0 - 2.0 * code_header_bits(bits[ok], c).astype(np.float32)
            d = torch.from_numpy(d.reshape(len(ok), c.header_symbols, c.n_data))
            x = None if segs is None else segs[ok]
            sub = self.path.refine_estimate(x, _take(est, ok), d, noise=True, **self._known)
        for j, i in enumerate(ok):
            refs[i] = (sub, j)

    def _receive_payloads(self, events: list[FrameEvent]) -> bool:
        """Receive complete frames and emit events from the head of the queue, in order.

        Returns True if the scan position moved in a way that needs another detection pass.
        """
        c = self.cfg
        ready = [
            q
            for q in self._queue
            if isinstance(q.header, Header)
            and q.row is None
            and self.position >= q.det.frame_start + c.frame_len(q.header.payload_len)
        ]
        by_len: dict[int, list[_Pending]] = {}
        for q in ready:
            by_len.setdefault(q.header.payload_len, []).append(q)
        for k, group in by_len.items():
            t0 = time.perf_counter()
            res = self._receive([q.det for q in group], k, _gather([q.est for q in group]))
            for q, row in zip(group, _rows(res), strict=True):
                q.row, q.est = row, None
            self.stats.seconds["payload"] += time.perf_counter() - t0
        moved = False
        while self._queue and self._queue[0].row is not None:
            q = self._queue.pop(0)
            det, hdr, row = q.det, q.header, q.row
            if isinstance(hdr, HeaderError):
                self.stats.header_errors += 1
                events.append(self._event("header_error", det, row, error=str(hdr)))
            else:
                self.stats.frames += 1
                events.append(self._event("ok", det, row, header=hdr))
                end = det.frame_start + c.frame_len(hdr.payload_len)
                self._emitted_end = max(self._emitted_end, end)
                if end > self._scan:
                    self._scan, moved = end, True
        return moved

    def _receive(
        self, dets: list[Detection], n_payload: int, est: ChannelEstimate | None = None
    ) -> RxResult:
        """Receive the frames of ``dets`` (all with payload k = n_payload): the header pass
        (k = 0, est None) estimates the channel from each long training field; the payload
        pass hands that estimate back (rows in the order of ``dets``) and only equalises."""
        with torch.inference_mode():
            x = self._segments(dets, n_payload, est)
            if est is None:
                return self.path(x, n_payload)
            kw = self._known if est.known_bins is not None else {}
            return self.path.equalize(x, est, n_payload, **kw)

    def _segments(
        self, dets: list[Detection], n_payload: int, est: ChannelEstimate | None
    ) -> torch.Tensor:
        """The frames of ``dets`` from their LTS start, [B, n] complex64, with the detector's
        CFO removed and, given their estimate (rows in the order of ``dets``), its residual
        CFO too."""
        c = self.cfg
        n = c.lts_len + (c.header_symbols + c.payload_symbols(n_payload)) * c.symbol_len
        if self._fast is not None:
            cfo = np.array([det.cfo_norm for det in dets])
            if est is not None:
                cfo = cfo + est.cfo_norm.double().numpy()
            starts = np.array([det.lts_start - self._base for det in dets], np.int64)
            # a payload pass on the header pass's bins reads no sample before the payload
            first = 0
            if est is not None and n_payload and est.known_bins is not None:
                first = c.lts_len + c.header_len
            return self._fast.cut(self._buf, starts, n, cfo, first)
        segs = np.empty((len(dets), n), np.complex64)
        for i, det in enumerate(dets):
            a = det.lts_start - self._base
            segs[i] = self._buf[a : a + n]
        with torch.inference_mode():
            cfo = torch.tensor([-det.cfo_norm for det in dets], dtype=torch.float64)
            if est is not None:  # the receive path's own residual CFO, folded into one ramp
                cfo = cfo - est.cfo_norm.double()
            # the CFO removed with a phase computed in float64; the receive path then runs in
            # the samples' own single precision, as in training (complex128 cost 1.7x the time
            # on batches of frames)
            return to_torch(segs) * phase_ramp(cfo, n).to(torch.complex64)

    def _event(self, status, det: Detection, row: dict, header=None, error=None) -> FrameEvent:
        fs = self.cfg.sample_rate_hz
        return FrameEvent(
            status=status,
            frame_start=det.frame_start,
            cfo_hz=(det.cfo_norm + row["cfo_norm"]) * fs,
            detector_cfo_hz=det.cfo_norm * fs,
            sc_metric=det.sc_metric,
            lts_metric=det.lts_metric,
            header=header,
            error=error,
            h=row["h"],
            snr_db=row["snr_db"],
            evm_pilots=row["evm_pilots"],
            pilots=row["pilots"],
            symbols=row["symbols"] if status == "ok" else None,
            symbol_gain=row["symbol_gain"] if status == "ok" else None,
        )


def _take(est: ChannelEstimate, idx: list[int]) -> ChannelEstimate:
    """``est.rows(idx)``, or est itself where idx is all its rows in order (the common case
    on a clean stream: a copy of every field saved)."""
    if len(idx) == est.h.shape[0] and idx == list(range(len(idx))):
        return est
    return est.rows(idx)


def _gather(refs: list[tuple[ChannelEstimate, int]]) -> ChannelEstimate:
    """The estimates of frames given as (batch estimate, row) in order: one gather per batch
    they came from (frames read in one header pass usually finish in one payload pass)."""
    parts, i = [], 0
    while i < len(refs):
        j = i
        while j < len(refs) and refs[j][0] is refs[i][0]:
            j += 1
        parts.append(_take(refs[i][0], [r for _, r in refs[i:j]]))
        i = j
    return parts[0] if len(parts) == 1 else ChannelEstimate.cat(parts)


def _rows(res: RxResult) -> list[dict]:
    """The rows of a batched result, as numpy (each field converted once for the batch)."""
    h, symbols = to_numpy(res.h), to_numpy(res.symbols)
    gain = to_numpy_real(res.symbol_gain)
    pilots = None if res.pilots is None else to_numpy(res.pilots)
    cfo, snr, evm = (res.cfo_norm.tolist(), res.snr_db.tolist(), res.evm_pilots.tolist())
    return [
        {
            "cfo_norm": cfo[i],
            "h": h[i],
            "snr_db": snr[i],
            "evm_pilots": evm[i],
            "symbols": symbols[i],
            "symbol_gain": gain[i],
            "pilots": None if pilots is None else pilots[i],
        }
        for i in range(len(h))
    ]


def viterbi_decode_batch(
    header_llr: torch.Tensor,
    cfg: OfdmConfig,
    n_list: int = HEADER_LIST,
    prior: HeaderPrior | None = None,
) -> np.ndarray:
    """header_llr [B, header_symbols * n_data] real (float32/float64) -> [B, HEADER_BITS] uint8
    bits (list Viterbi with n_list paths where the best fails the CRC, held to the prior's
    known bits first), or raises nothing: bad rows decode to bits the CRC rejects."""
    return decode_header_bits(to_numpy_real(header_llr, np.float64), cfg, n_list, prior)


def warm_up(cfg: OfdmConfig | None = None) -> None:
    """Run one clean frame through a FrameReceiver (RuntimeError if it is not read): numba
    compiles the kernels on their first call (or loads them from its cache), which a live
    stream must not wait for."""
    cfg = cfg or OfdmConfig()
    h = Header(seq=0, item_id=0, fingerprint=bytes(8), payload_len=48, shape=(3, 4, 4))
    x = FrameBuilder(cfg).build_numpy(np.ones(48, np.complex64), h)
    events = FrameReceiver(cfg).push(
        np.r_[np.zeros(500, np.complex64), x, np.zeros(500, np.complex64)]
    )
    if [e.header for e in events] != [h]:  # a receive path that cannot read a clean frame
        raise RuntimeError(f"the receiver did not read a clean frame: {events}")
