"""Streaming frame detection and synchronisation (numpy).

Takes arbitrary-sized chunks of a continuous complex64 stream and finds frames:

1. Detection and coarse CFO by the Schmidl & Cox (1997) autocorrelation of
   the periodic short training field, evaluated on blocks of one STS period:
   per-sample products conj(r[n]) r[n + L] are summed per block (cheap, at the
   sample rate), the window sums and the metric M = abs(P)^2 / R^2 run at
   1/L of the rate. M is near 1 on the STS plateau at high SNR, (S/(S+N))^2 in
   noise (0.25 at 0 dB, 0.11 at -3 dB), and about 1/(W L) on noise alone. The
   threshold (0.1) is set from the false-alarm curve that
   ``scripts/bench_phy.py --only detection`` prints: about 250 noise windows in
   1e8 samples pass it, and the long-training gate below rejects every one.
2. Fine timing by cross-correlating the coarse-corrected samples with the
   known long training symbol, the two symbols' correlation magnitudes added
   (non-coherently, so a residual CFO cannot cancel them) and normalised by
   the received energy: 1 for a clean frame, ~1/64 on noise. Multipath
   spreads that over several lags, so the gate is the correlation energy
   captured within +-cp_len of the peak above the window's median: about
   0.5-1 for frames at 0-10 dB through an 8-tap channel, 0.17 (at most 0.28
   in 300 trials) on noise, 0.02 on a tone plus DC. Below ``lts_threshold``
   (0.35) the detection is rejected (tones and DC offsets also give a high
   autocorrelation metric), unless the autocorrelation metric itself lies in
   [``strong_sc``, ``WEAK_SC_MAX``) = [0.15 (or threshold if higher), 0.8): then a capture down to
   ``weak_lts`` (0.25, or lts_threshold if lower) is accepted. Noise alone
   reaches 0.15 about once in 1e8 samples; frames near 0 dB through the
   two-Pluto multipath capture 0.28-0.35 now and then, with a metric near 0.25;
   a constant (a DC offset, or digital silence after DC removal) or a tone
   gives a metric near 1, and a frame with a metric that high is well above
   0 dB and captures far more than lts_threshold.
3. Fine CFO from the phase between the two long training symbols (Moose 1994).

The coarse range is +-fs / (2 L) (L = sts_period); the fine stage then
resolves the remainder to within +-fs / (2 N).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .numerology import OfdmConfig
from .sequences import lts_time_symbol


def _ramp(f: float, n: int, start: int, block: int = 64) -> np.ndarray:
    """exp(j 2 pi f m) for m = start .. start + n - 1 -> [n] complex128, as a per-block phasor
    times a within-block one (n / block + block exponentials rather than n)."""
    q = -(-n // block)
    outer = np.exp(2j * np.pi * f * (start + block * np.arange(q)))
    inner = np.exp(2j * np.pi * f * np.arange(block))
    return (outer[:, None] * inner[None, :]).reshape(-1)[:n]


def _window_sums(p: np.ndarray, n: int) -> np.ndarray:
    """Sums of p over every window of n consecutive samples: [len(p) - n + 1] (float64)."""
    c = np.concatenate([[0.0], np.cumsum(p, dtype=np.float64)])
    return c[n:] - c[:-n]


def _median(v: np.ndarray) -> float:
    """np.median of a 1-D array, by partition (a tenth of np.median's overhead on ~100 values)."""
    m = len(v) // 2
    if len(v) % 2:
        return float(np.partition(v, m)[m])
    lo_hi = np.partition(v, [m - 1, m])
    return float(0.5 * (lo_hi[m - 1] + lo_hi[m]))


WEAK_SC_MAX = 0.8  # a Schmidl-Cox metric this high is a constant or a tone, or a strong frame


@dataclass
class Detection:
    """A frame found in the stream.

    Attributes:
        frame_start: absolute sample index of the frame's first (STS) sample.
        lts_start: absolute index of the long training field.
        cfo_norm: coarse + fine CFO in cycles per sample.
        sc_metric: Schmidl-Cox metric at the plateau (0..1).
        lts_metric: LTS correlation energy captured around the timing peak (about 0..1).
    """

    frame_start: int
    lts_start: int
    cfo_norm: float
    sc_metric: float
    lts_metric: float


class StreamSync:
    """Incremental detector; feed with :meth:`find`, which looks at ``buf`` from ``scan_from``.

    The owner (``FrameReceiver``) keeps the sample buffer; this class keeps the
    detection constants and does the maths.
    """

    def __init__(
        self,
        cfg: OfdmConfig,
        threshold: float = 0.1,
        lts_threshold: float = 0.35,
        strong_sc: float | None = None,
        weak_lts: float | None = None,
    ):
        if not 0 < threshold < 1 or not 0 <= lts_threshold < 1:
            raise ValueError("thresholds must lie in (0, 1)")
        strong_sc = max(0.15, threshold) if strong_sc is None else strong_sc
        weak_lts = min(0.25, lts_threshold) if weak_lts is None else weak_lts
        if not threshold <= strong_sc <= 1 or not 0 <= weak_lts <= lts_threshold:
            raise ValueError(
                f"need threshold <= strong_sc <= 1 and 0 <= weak_lts <= lts_threshold, got "
                f"strong_sc={strong_sc}, weak_lts={weak_lts}"
            )
        self.strong_sc, self.weak_lts = strong_sc, weak_lts
        self.cfg = cfg
        self.L = cfg.sts_period
        self.W = cfg.sts_repeats - 4  # window in blocks: leaves a plateau of ~4 block positions
        self.threshold = threshold
        self.lts_threshold = lts_threshold
        sym = lts_time_symbol(cfg).astype(np.complex128)
        self.ll = np.concatenate([sym, sym])
        self.ll_energy = float(np.sum(np.abs(self.ll) ** 2))
        self.search = 4 * self.L  # +- samples around the predicted LTS position
        self.last_captured = 0.0

    def metric(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Block-rate Schmidl-Cox metric for windows starting at r[0], r[L], ...

        r: [n] complex (complex64 from the stream; any precision, sums in complex128/float64).
        Returns (M [nb] float64, P [nb] complex128) for every window fully inside r (both
        empty when r is shorter than a window).
        """
        L, W = self.L, self.W
        nblk = (len(r) - L) // L
        if nblk < W:
            return np.empty(0), np.empty(0, np.complex128)
        n = nblk * L
        prod = np.conj(r[:n]) * r[L : n + L]
        cb = prod.reshape(nblk, L).sum(1, dtype=np.complex128)
        pw = (
            (r[: n + L].real ** 2 + r[: n + L].imag ** 2)
            .reshape(nblk + 1, L)
            .sum(1, dtype=np.float64)
        )
        eb = 0.5 * (pw[:-1] + pw[1:])
        cc = np.concatenate([[0], np.cumsum(cb)])
        ce = np.concatenate([[0], np.cumsum(eb)])
        p = cc[W:] - cc[:-W]
        e = ce[W:] - ce[:-W]
        m = (p.real**2 + p.imag**2) / np.maximum(e * e, 1e-30)
        return m, p

    def refine(
        self, r: np.ndarray, r0: int, plateau_pos: int, p: complex, sc_metric: float = 0.0
    ) -> Detection | None:
        """Fine timing and CFO around a plateau at r index ``plateau_pos`` (r0 = absolute index of r[0]).

        Returns None if the LTS is not there (false alarm) or not yet in ``r``
        (the caller checks :meth:`needed_after` first).

        r: [n] complex (complex64 from the stream; any precision, computed in complex128);
        p: the window's autocorrelation P (a Python complex); sc_metric: its metric M, which
        lowers the long-training gate to ``weak_lts`` where it lies in [strong_sc, WEAK_SC_MAX).
        """
        c = self.cfg
        coarse = math.atan2(p.imag, p.real) / (2 * math.pi * self.L)
        # plateau windows start in [s, s + (repeats - 1 - W) L]; take the middle
        s_est = plateau_pos - ((c.sts_repeats - 1 - self.W) * self.L) // 2
        t_pred = s_est + c.sts_len + c.lts_cp
        lo = max(t_pred - self.search, 0)
        hi = t_pred + self.search
        lags = hi - lo + 1
        # the LTS repeats every fft_size samples, so a plateau estimate off by more than the
        # search finds a half-aligned peak one period from the true one (the quiet gap before
        # a frame extends the plateau early): the lags one period beyond each end are scored
        # too, and the peak moves there when it is higher
        n = self.cfg.fft_size
        ext = min(n, lo)  # lags before lo (none before the buffer's start)
        seg = r[lo - ext : hi + n + len(self.ll)].astype(np.complex128)
        if len(seg) < ext + lags + n - 1 + len(self.ll):
            return None
        seg = seg * _ramp(-coarse, len(seg), lo - ext)
        l1 = self.ll[:n]
        c1 = np.correlate(seg, l1, mode="valid")  # half-length correlations, combined
        e1 = _window_sums(seg.real**2 + seg.imag**2, n)  # non-coherently so that a
        scored = ext + lags + n  # lags scored, from lo - ext
        a1, a2 = (
            np.abs(c1[:scored]),
            np.abs(c1[n : n + scored]),
        )  # residual CFO cannot decorrelate them
        en = e1[:scored] + e1[n : n + scored]
        rho_all = (a1 + a2) ** 2 / np.maximum(en * self.ll_energy, 1e-30)
        rho = rho_all[ext : ext + lags]  # the search window
        # Multipath spreads the LTS over several lags: gate on the energy captured
        # within +-cp_len of the peak above the window's median (the noise floor;
        # the LTS occupies at most ~2 cp_len of the 2 search + 1 lags).
        floor = _median(rho)

        def captured_at(i: int, first: int, end: int) -> float:  # of lags first .. end - 1
            w = rho_all[max(i - c.cp_len, first) : min(i + c.cp_len + 1, end)]
            return float(np.clip(w - floor, 0, None).sum())

        i = int(np.argmax(rho)) + ext  # in rho_all
        captured = self.last_captured = captured_at(i, ext, ext + lags)
        weak = self.strong_sc <= sc_metric < WEAK_SC_MAX
        gate = self.weak_lts if weak else self.lts_threshold
        if captured < gate:
            return None
        # an LTS in the window: the true peak may lie one period beyond the window's end
        for j in (i + n, i - n):
            if 0 <= j < scored and not ext <= j < ext + lags and rho_all[j] > rho_all[i]:
                i, captured = j, captured_at(j, 0, scored)
                break
        t = lo - ext + i
        a = seg[i : i + c.fft_size]
        b = seg[i + c.fft_size : i + 2 * c.fft_size]
        fine = np.angle(np.vdot(a, b)) / (2 * np.pi * c.fft_size)
        lts_start = t - c.lts_cp
        return Detection(
            frame_start=r0 + lts_start - c.sts_len,
            lts_start=r0 + lts_start,
            cfo_norm=float(coarse + fine),
            sc_metric=0.0,
            lts_metric=captured,
        )

    def needed_after(self, plateau_pos: int) -> int:
        """Samples needed in r (from index 0) to refine a plateau at ``plateau_pos``."""
        c = self.cfg
        s_est = plateau_pos - ((c.sts_repeats - 1 - self.W) * self.L) // 2
        return s_est + c.sts_len + c.lts_cp + self.search + c.fft_size + len(self.ll) + 1
