"""Streaming frame detection and synchronisation (numpy; the per-sample sums compiled
with numba: a detection costs microseconds, not the dispatch of thirty numpy calls).

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
from numba import njit

from .numerology import OfdmConfig
from .sequences import lts_time_symbol


@njit(cache=True, nogil=True)
def _metric_kernel(r, L, W):
    """The block-rate Schmidl-Cox metric of ``StreamSync.metric``: r [n] complex, period
    L, window W blocks -> (M [nb] float64, P [nb] complex128), nb = (n - L) // L - W + 1."""
    nblk = (r.shape[0] - L) // L
    cc = np.zeros(nblk + 1, np.complex128)  # running sums of the blocks' products
    ce = np.zeros(nblk + 1)  # and of their energies
    prev = 0.0
    for i in range(L):
        v = np.complex128(r[i])
        prev += v.real * v.real + v.imag * v.imag
    for j in range(nblk):
        c = 0j
        e = 0.0
        for i in range(j * L, (j + 1) * L):
            v = np.complex128(r[i + L])
            c += np.complex128(r[i]).conjugate() * v
            e += v.real * v.real + v.imag * v.imag
        cc[j + 1] = cc[j] + c
        ce[j + 1] = ce[j] + 0.5 * (prev + e)
        prev = e
    nb = nblk - W + 1
    m = np.empty(nb)
    p = np.empty(nb, np.complex128)
    for j in range(nb):
        q = cc[j + W] - cc[j]
        e = ce[j + W] - ce[j]
        p[j] = q
        m[j] = (q.real * q.real + q.imag * q.imag) / max(e * e, 1e-30)
    return m, p


@njit(cache=True, nogil=True)
def _lts_scores(seg, start, coarse, l1, ll_energy, n):
    """The long-training search of ``StreamSync.refine``: seg [m] complex (samples from
    absolute index ``start``), derotated by the coarse CFO in float64 -> (the derotated
    samples [m] complex128, rho [m - 2 n - n + 1]: at each lag the magnitudes of the two
    symbols' correlations with l1 [n] (added: a residual CFO cannot cancel them), squared,
    over the received energy times ll_energy)."""
    m = seg.shape[0]
    rot = np.empty(m, np.complex128)
    re = np.empty(m)
    im = np.empty(m)
    # the phase exp(-2 pi j coarse (start + i)) by a product per sample, anchored to cos/sin
    # of the exact phase every 64 samples (trigonometry at each sample was half the search)
    step = complex(math.cos(-2.0 * math.pi * coarse), math.sin(-2.0 * math.pi * coarse))
    z = 1.0 + 0j
    for i in range(m):
        if i % 64 == 0:
            ph = -2.0 * math.pi * coarse * (start + i)
            z = complex(math.cos(ph), math.sin(ph))
        rot[i] = np.complex128(seg[i]) * z
        re[i] = rot[i].real
        im[i] = rot[i].imag
        z *= step
    nc = m - n + 1  # correlation lags ("valid")
    # tap by tap over all lags (the inner loop runs along the samples, which vectorises)
    c_re = np.zeros(nc)
    c_im = np.zeros(nc)
    for i in range(n):
        lr, li = l1[i].real, l1[i].imag
        for k in range(nc):
            c_re[k] += re[k + i] * lr + im[k + i] * li
            c_im[k] += im[k + i] * lr - re[k + i] * li
    a = np.empty(nc)
    e = np.empty(nc)
    run = 0.0  # energy of the n samples from k, as a running sum
    for i in range(n):
        run += re[i] * re[i] + im[i] * im[i]
    for k in range(nc):
        a[k] = math.sqrt(c_re[k] * c_re[k] + c_im[k] * c_im[k])
        e[k] = run
        if k + n < m:
            run += re[k + n] * re[k + n] + im[k + n] * im[k + n] - re[k] * re[k] - im[k] * im[k]
    scored = nc - n
    rho = np.empty(scored)
    for k in range(scored):
        rho[k] = (a[k] + a[k + n]) ** 2 / max((e[k] + e[k + n]) * ll_energy, 1e-30)
    return rot, rho


@njit(cache=True, nogil=True)
def _captured(rho, i, first, end, half, floor):
    """LTS energy captured within +-half lags of lag i (lags first .. end - 1 only), above
    the floor."""
    tot = 0.0
    for k in range(max(i - half, first), min(i + half + 1, end)):
        tot += max(rho[k] - floor, 0.0)
    return tot


@njit(cache=True, nogil=True)
def _lts_search(seg, start, coarse, l1, ll_energy, n, ext, lags, half):
    """``StreamSync.refine``'s search over ``_lts_scores(seg, start, ...)``: the peak of the
    lags ext .. ext + lags - 1 and the energy captured within +-half of it above their
    median; then the peak moved one period (n) beyond the window where that lag scores
    higher, and the fine CFO between the two long symbols at the final peak. Returns (peak
    lag from seg's start, the energy captured at the first peak, at the final one, fine CFO
    in cycles per sample)."""
    rot, rho = _lts_scores(seg, start, coarse, l1, ll_energy, n)
    scored = ext + lags + n
    floor = np.median(rho[ext : ext + lags])
    i = ext + int(np.argmax(rho[ext : ext + lags]))
    first = _captured(rho, i, ext, ext + lags, half, floor)
    final = first
    for j in (i + n, i - n):
        if 0 <= j < scored and not ext <= j < ext + lags and rho[j] > rho[i]:
            i = j
            final = _captured(rho, j, 0, scored, half, floor)
            break
    acc = 0j
    for m in range(n):
        acc += rot[i + m].conjugate() * rot[i + n + m]
    return i, first, final, math.atan2(acc.imag, acc.real) / (2 * math.pi * n)


def _complex(r: np.ndarray) -> np.ndarray:
    """r as a contiguous complex64 or complex128 array (the kernels are compiled for each;
    other dtypes become complex128)."""
    r = np.asarray(r)
    if r.dtype not in (np.complex64, np.complex128):
        r = r.astype(np.complex128)
    return np.ascontiguousarray(r)


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
        if (len(r) - L) // L < W:
            return np.empty(0), np.empty(0, np.complex128)
        return _metric_kernel(_complex(r), L, W)

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
        seg = r[lo - ext : hi + n + len(self.ll)]
        if len(seg) < ext + lags + n - 1 + len(self.ll):
            return None
        # the two half-length correlations combined non-coherently (a residual CFO cannot
        # decorrelate them), over lags lo - ext .. hi + n. Multipath spreads the LTS over
        # several lags: the gate is the energy captured within +-cp_len of the peak above
        # the search window's median (the noise floor; the LTS occupies at most ~2 cp_len of
        # the 2 search + 1 lags). An LTS in the window: the true peak may lie one period
        # beyond the window's end (_lts_search moves it there).
        i, first, captured, fine = _lts_search(
            _complex(seg), lo - ext, coarse, self.ll[:n], self.ll_energy, n, ext, lags,
            c.cp_len,
        )  # fmt: skip
        self.last_captured = first
        weak = self.strong_sc <= sc_metric < WEAK_SC_MAX
        if first < (self.weak_lts if weak else self.lts_threshold):
            return None
        t = lo - ext + i
        lts_start = t - c.lts_cp
        return Detection(
            frame_start=r0 + lts_start - c.sts_len,
            lts_start=r0 + lts_start,
            cfo_norm=coarse + fine,
            sc_metric=0.0,
            lts_metric=captured,
        )

    def needed_after(self, plateau_pos: int) -> int:
        """Samples needed in r (from index 0) to refine a plateau at ``plateau_pos``."""
        c = self.cfg
        s_est = plateau_pos - ((c.sts_repeats - 1 - self.W) * self.L) // 2
        return s_est + c.sts_len + c.lts_cp + self.search + c.fft_size + len(self.ll) + 1
