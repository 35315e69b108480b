"""The receive path compiled (numba), for the stream receiver.

:class:`OfdmReceiver` is the receive path: torch, differentiable, the one training
runs through. In the receiver process it runs without gradients on a few frames at a
time, where each of its ~150 tensor operations costs more in dispatch than in
arithmetic: a batch of one frame costs nearly as much as a batch of thirty.
:class:`CompiledReceiver` computes the same estimates, tracking and equalisation (the
same equations, step by step, with the same options) as loops compiled by numba, in
float64 with complex64/float32 results like the torch path's, and its own FFT (radix
2^2), so one frame costs microseconds. ``FrameReceiver`` uses it where its receiver is a
plain ``OfdmReceiver``; ``tests/phy/test_compiled.py`` holds the two to the same results.

Its methods take and return what ``OfdmReceiver``'s take and return (torch tensors on
the CPU, :class:`ChannelEstimate`, :class:`RxResult`), so either serves the stream. One
addition: the header pass (``__call__`` with no payload) keeps the long training field's
estimate and the header symbols' FFT bins in ``ChannelEstimate.known_bins``, and
``refine_estimate`` / ``equalize`` with ``known=True`` take them instead of transforming
the same samples again.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from numba import njit

from .receive import ChannelEstimate, OfdmReceiver, RxResult
from .sequences import payload_phases, pilot_values

_TWO_PI = 2.0 * math.pi


# ------------------------------------------------------------------------------ kernels
@njit(cache=True, nogil=True)
def _fft(buf, perm, tw, out):
    """Orthonormal FFT of buf [N] complex128 into out [N] complex128, N a power of two
    (OfdmConfig checks it); buf is overwritten. Decimation in frequency, radix 2^2: pairs
    of radix-2 stages fused, three twiddle products per four points (one radix-2 stage
    first where log2 N is odd); the result comes out in bit-reversed order, read back
    through perm, the bit-reversal permutation [N] int64. tw: ``_fft_tables``'s twiddles,
    stage by stage."""
    n = perm.shape[0]
    bits = 0
    while (1 << bits) < n:
        bits += 1
    size = n
    o = 0
    if bits % 2 == 1:
        h = n // 2
        for k in range(h):
            a, b = buf[k], buf[k + h]
            buf[k] = a + b
            buf[k + h] = (a - b) * tw[k]
        o = size = h
    while size >= 4:
        h = size // 4
        for start in range(0, n, size):
            for k in range(h):
                i = start + k
                a0, a1, a2, a3 = buf[i], buf[i + h], buf[i + 2 * h], buf[i + 3 * h]
                s02, d02, s13, d13 = a0 + a2, a0 - a2, a1 + a3, a1 - a3
                jd = complex(d13.imag, -d13.real)  # -j (a1 - a3)
                buf[i] = s02 + s13
                if k == 0:  # the twiddles are 1
                    buf[i + h] = s02 - s13
                    buf[i + 2 * h] = d02 + jd
                    buf[i + 3 * h] = d02 - jd
                else:
                    t = o + 3 * k
                    buf[i + h] = (s02 - s13) * tw[t + 1]
                    buf[i + 2 * h] = (d02 + jd) * tw[t]
                    buf[i + 3 * h] = (d02 - jd) * tw[t + 2]
        o += 3 * h
        size = h
    scale = 1.0 / math.sqrt(n)
    for i in range(n):
        out[i] = buf[perm[i]] * scale


@njit(cache=True, nogil=True)
def _rotation(cfo, inner):
    """inner [N] complex128: exp(-2 pi j cfo i), i < N (a symbol's within-window phases)."""
    for i in range(inner.shape[0]):
        inner[i] = complex(math.cos(_TWO_PI * cfo * i), -math.sin(_TWO_PI * cfo * i))


@njit(cache=True, nogil=True)
def _symbol(x, r, a, cfo, inner, perm, tw, buf, out):
    """out [N] complex128: the FFT of x[r, a : a + N] derotated by exp(-2 pi j cfo m) at
    sample m (counted from x[r, 0]); inner: ``_rotation(cfo)``'s table (unread at cfo 0)."""
    n = perm.shape[0]
    if cfo == 0.0:
        for i in range(n):
            buf[i] = np.complex128(x[r, a + i])
    else:
        outer = complex(math.cos(_TWO_PI * cfo * a), -math.sin(_TWO_PI * cfo * a))
        for i in range(n):
            buf[i] = np.complex128(x[r, a + i]) * (outer * inner[i])
    _fft(buf, perm, tw, out)


@njit(cache=True, nogil=True)
def _lts_ls(x, r, cfo, inner, lts_cp, backoff, used, lts_ref, perm, tw, buf, y1, y2, h):
    """The least-squares estimate of frame r from its long training field, derotated by cfo
    (inner: ``_rotation(cfo)``):
    h [U] complex128 (the two symbols averaged, over the known values lts_ref [U]); returns
    the noise variance per bin from their difference (OfdmReceiver._lts)."""
    n = perm.shape[0]
    s = lts_cp - backoff
    _symbol(x, r, s, cfo, inner, perm, tw, buf, y1)
    _symbol(x, r, s + n, cfo, inner, perm, tw, buf, y2)
    n0 = 0.0
    for u in range(used.shape[0]):
        a, b = y1[used[u]], y2[used[u]]
        h[u] = (a + b) / (2.0 * lts_ref[u])
        d = a - b
        n0 += d.real * d.real + d.imag * d.imag
    return n0 / used.shape[0] / 2.0


@njit(cache=True, nogil=True)
def _on_bins(h_used, sig2, smooth, r_u, r_lam, used, h_out):
    """h_out [N] complex128: h_used [U] on the used bins (zero elsewhere), LMMSE-smoothed
    with LS error variance sig2 when smooth: U diag(lam / (lam + sig2)) U^H h, with r_lam
    in descending order (r_u's columns to match). The eigenvectors whose gain is below 1e-9
    are left out: a uniform delay profile over the CP leaves cp_len + 1 of them (17 of 52)
    above 1e-14, the rest are rounding, and their share is far below float32's."""
    h_out[:] = 0.0
    n_u = used.shape[0]
    if not smooth:
        for u in range(n_u):
            h_out[used[u]] = h_used[u]
        return
    n_keep = 0
    while n_keep < n_u and r_lam[n_keep] >= 1e-9 * (r_lam[n_keep] + sig2):
        n_keep += 1
    coef = np.empty(n_keep, np.complex128)
    for j in range(n_keep):
        acc = 0j
        for u in range(n_u):
            acc += h_used[u] * r_u[u, j].conjugate()
        coef[j] = acc * (r_lam[j] / (r_lam[j] + sig2))
    for u in range(n_u):
        acc = 0j
        for j in range(n_keep):
            acc += coef[j] * r_u[u, j]
        h_out[used[u]] = acc


@njit(cache=True, nogil=True)
def _estimate_kernel(
    x, est_cfo, lts_cp, backoff, used, lts_ref, a, smooth, r_u, r_lam, perm, tw, upd, kb
):
    """OfdmReceiver.estimate for x [B, >= lts_len] complex64 -> cfo [B], h [B, N] complex128,
    n0 [B], snr_db [B]; and where kb [B, 1 + H, P + D] complex128 has rows (not [B, 0, ...]),
    the least-squares estimate into kb[:, 0] (used bin u at column upd[u])."""
    b = x.shape[0]
    n = perm.shape[0]
    n_u = used.shape[0]
    cfo = np.zeros(b)
    h = np.zeros((b, n), np.complex128)
    n0 = np.empty(b)
    snr = np.empty(b)
    buf = np.empty(n, np.complex128)
    y1 = np.empty(n, np.complex128)
    y2 = np.empty(n, np.complex128)
    h_ls = np.empty(n_u, np.complex128)
    inner = np.empty(n, np.complex128)
    for r in range(b):
        if est_cfo:
            acc = 0j
            for i in range(n):
                acc += np.complex128(x[r, lts_cp + i]).conjugate() * np.complex128(
                    x[r, lts_cp + n + i]
                )
            cfo[r] = math.atan2(acc.imag, acc.real) / (_TWO_PI * n)
            _rotation(cfo[r], inner)
        v = _lts_ls(
            x, r, cfo[r], inner, lts_cp, backoff, used, lts_ref, perm, tw, buf, y1, y2, h_ls
        )
        if kb.shape[1] > 0:
            for u in range(n_u):
                kb[r, 0, upd[u]] = h_ls[u]
        v = max(v, 1e-12)
        p = 0.0
        for u in range(n_u):
            p += h_ls[u].real * h_ls[u].real + h_ls[u].imag * h_ls[u].imag
        es = max(p / n_u - v / (2 * a * a), 0.01 * v)
        n0[r] = v
        snr[r] = 10.0 * math.log10(es / v)
        _on_bins(h_ls, v / (2 * a * a), smooth, r_u, r_lam, used, h[r])
    return cfo, h, n0, snr


@njit(cache=True, nogil=True)
def _refine_kernel(
    x,
    n0_in,
    snr_in,
    hdr,
    pv,
    n_h,
    sym_len,
    start,
    lts_len,
    lts_cp,
    backoff,
    used,
    is_pilot,
    col,
    lts_ref,
    a,
    smooth,
    r_u,
    r_lam,
    noise,
    perm,
    tw,
    upd,
    kb,
):
    """OfdmReceiver.refine_estimate for x [B, >= lts_len + header_len] complex64 (its CFO
    removed), hdr [B, H, D] the header's symbols +-1, pv [H, P] the pilots -> h [B, N]
    complex128, n0 [B], snr_db [B]. used[u]'s reference is pv[s, col[u]] where is_pilot[u],
    else hdr[r, s, col[u]]. Where kb [B, 1 + H, P + D] has rows, the long training field's
    estimate and the header's bins are read from it (used bin u at column upd[u]), not
    computed from x (then unread)."""
    b = x.shape[0]
    n = perm.shape[0]
    n_u = used.shape[0]
    h = np.zeros((b, n), np.complex128)
    n0 = n0_in.copy()
    snr = snr_in.copy()
    buf = np.empty(n, np.complex128)
    y1 = np.empty(n, np.complex128)
    y2 = np.empty(n, np.complex128)
    h_ls = np.empty(n_u, np.complex128)
    obs = np.empty((n_h, n_u), np.complex128)
    ref = np.empty((n_h, n_u))
    h_used = np.empty(n_u, np.complex128)
    known = kb.shape[1] > 0
    for r in range(b):
        if known:
            for u in range(n_u):
                h_ls[u] = kb[r, 0, upd[u]]
        else:
            _lts_ls(x, r, 0.0, buf, lts_cp, backoff, used, lts_ref, perm, tw, buf, y1, y2, h_ls)
        for s in range(n_h):
            if not known:
                _symbol(x, r, lts_len + s * sym_len + start, 0.0, buf, perm, tw, buf, y1)
            cpe = 0j
            for u in range(n_u):
                ref[s, u] = pv[s, col[u]] if is_pilot[u] else hdr[r, s, col[u]]
                obs[s, u] = kb[r, 1 + s, upd[u]] if known else y1[used[u]]
                cpe += obs[s, u] * (h_ls[u] * ref[s, u]).conjugate()
            m = max(abs(cpe), 1e-30)
            rot = cpe.conjugate() / m
            for u in range(n_u):
                obs[s, u] *= rot
        for u in range(n_u):
            acc = 0j
            for s in range(n_h):
                acc += obs[s, u] * ref[s, u]
            h_used[u] = (2.0 * h_ls[u] + acc / a) / (2.0 + n_h)
        if noise:
            tot = 0.0
            for s in range(n_h):
                cpe = 0j
                for u in range(n_u):
                    cpe += obs[s, u] * (a * h_used[u] * ref[s, u]).conjugate()
                cpe = cpe / max(abs(cpe), 1e-30)
                for u in range(n_u):
                    d = obs[s, u] - a * h_used[u] * ref[s, u] * cpe
                    tot += d.real * d.real + d.imag * d.imag
            dof = (1.0 - 1.0 / (2 + n_h)) * n_h * n_u
            v = max(tot / dof, 1e-12)
            p = 0.0
            for u in range(n_u):
                p += h_used[u].real * h_used[u].real + h_used[u].imag * h_used[u].imag
            es = max(p / n_u - v / ((2 + n_h) * a * a), 0.01 * v)
            n0[r] = v
            snr[r] = 10.0 * math.log10(es / v)
        # _on_bins's noise model is two observations: n0 scaled to match
        _on_bins(h_used, n0[r] * 2 / (2 + n_h) / (2 * a * a), smooth, r_u, r_lam, used, h[r])
    return h, n0, snr


@njit(cache=True, nogil=True)
def _equalize_kernel(
    x,
    h,
    n0,
    cfo,
    pv,
    descr,
    n_sym,
    n_h,
    n_payload,
    sym_len,
    start,
    lts_len,
    pd,
    n_p,
    pk,
    k_pd,
    a,
    q_phase,
    track,
    smooth_tracking,
    mmse,
    perm,
    tw,
    kb,
    kb_read,
):
    # k_pd: the signed subcarrier index of each of pd's bins (integers, as float64)
    """OfdmReceiver.equalize (after derotating x by cfo [B]) for x [B, >= lts_len + n_sym
    sym_len] complex64, h [B, N] complex, n0 [B] -> payload [B, k] complex128, gain [B, k],
    header LLRs [B, n_h D], pilot EVM [B], tracked pilots [B, n_sym P] complex128.
    kb [B, 1 + n_h, P + D] complex128 (or [B, 0, ...]): the header symbols' bins, read from
    kb[:, 1:] (kb_read; x's header samples then unread) or written there."""
    b = x.shape[0]
    n = perm.shape[0]
    n_pd = pd.shape[0]
    n_d = n_pd - n_p
    pay = np.empty((b, n_payload), np.complex128)
    gain = np.empty((b, n_payload))
    llr = np.empty((b, n_h * n_d))
    evm = np.empty(b)
    pil = np.empty((b, n_sym * n_p), np.complex128)
    buf = np.empty(n, np.complex128)
    y = np.empty(n, np.complex128)
    g = np.empty((n_sym, n_pd), np.complex128)
    hu = np.empty(n_pd, np.complex128)
    p2 = np.empty(n_pd)
    safe = np.empty(n_pd, np.complex128)
    zs = np.empty(n_sym, np.complex128)
    phi = np.empty(n_sym)
    beta = np.empty(n_sym)
    z = np.empty(n_p, np.complex128)
    wgt = np.empty(n_d, np.complex128)
    post = np.empty(n_d)
    inner = np.empty(n, np.complex128)
    k_max = 0
    for j in range(n_pd):
        k_max = max(k_max, abs(int(k_pd[j])))
    step = np.empty(k_max + 1, np.complex128)  # exp(-j beta k), k = 0 .. k_max
    for r in range(b):
        if cfo[r] != 0.0:
            _rotation(cfo[r], inner)
        for s in range(n_sym):
            if kb_read and s < n_h:
                for j in range(n_pd):
                    g[s, j] = kb[r, 1 + s, j]
                continue
            _symbol(x, r, lts_len + s * sym_len + start, cfo[r], inner, perm, tw, buf, y)
            for j in range(n_pd):
                g[s, j] = y[pd[j]]
            if s < n_h and kb.shape[1] > 0:
                for j in range(n_pd):
                    kb[r, 1 + s, j] = g[s, j]
        w_sum = 0.0
        for j in range(n_pd):
            hu[j] = h[r, pd[j]]
            p2[j] = hu[j].real * hu[j].real + hu[j].imag * hu[j].imag
            safe[j] = hu[j] if p2[j] > 1e-20 else complex(1e-10, 0.0)
            if j < n_p:
                w_sum += p2[j]
        if track:
            den = 0.0
            for p in range(n_p):
                den += p2[p] * pk[p] * pk[p]
            den = max(den, 1e-30)
            for s in range(n_sym):
                acc = 0j
                for p in range(n_p):
                    acc += g[s, p] * (hu[p].conjugate() * pv[s, p])
                zs[s] = acc
            if smooth_tracking and n_sym > 1:
                _smooth_phase(zs, n0[r], w_sum, a, q_phase, phi)
            else:
                for s in range(n_sym):
                    phi[s] = math.atan2(zs[s].imag, zs[s].real)
            for s in range(n_sym):
                rot = complex(math.cos(phi[s]), -math.sin(phi[s]))
                num = 0.0
                for p in range(n_p):
                    z[p] = g[s, p] * (hu[p].conjugate() * pv[s, p]) * rot
                    num += p2[p] * pk[p] * math.atan2(z[p].imag, z[p].real)
                beta[s] = num / den
            if smooth_tracking and n_sym > 2:
                _line_fit(beta)
            for s in range(n_sym):
                # exp(-j (phi + beta k)) = exp(-j phi) exp(-j beta)^k (k: integers)
                e = complex(math.cos(beta[s]), -math.sin(beta[s]))
                step[0] = 1.0
                for k in range(1, k_max + 1):
                    step[k] = step[k - 1] * e
                rot = complex(math.cos(phi[s]), -math.sin(phi[s]))
                for j in range(n_pd):
                    k = int(k_pd[j])
                    g[s, j] *= rot * (step[k] if k >= 0 else step[-k].conjugate())
        v = n0[r]
        for d in range(n_d):
            j = n_p + d
            if mmse:
                wgt[d] = hu[j].conjugate() / (a * (p2[j] + v / (a * a)))
            else:
                wgt[d] = 1.0 / (a * safe[j])
            post[d] = a * a * p2[j] / v
        e = 0.0
        for s in range(n_sym):
            for p in range(n_p):
                q = g[s, p] / (a * safe[p])
                d = q - pv[s, p]
                e += d.real * d.real + d.imag * d.imag
                pil[r, s * n_p + p] = q * pv[s, p]
        evm[r] = math.sqrt(e / (n_sym * n_p))
        for s in range(n_h):
            for d in range(n_d):
                if mmse:
                    sc = 4 * post[d] * (post[d] + 1) / max(post[d], 1e-30)
                else:
                    sc = 4 * post[d]
                llr[r, s * n_d + d] = (g[s, n_p + d] * wgt[d]).real * sc
        for i in range(n_payload):
            s, d = n_h + i // n_d, i % n_d
            pay[r, i] = g[s, n_p + d] * wgt[d] * descr[i]
            gain[r, i] = post[d]
    return pay, gain, llr, evm, pil


@njit(cache=True, nogil=True)
def _smooth_phase(zs, n0, pilot_power, a, q_phase, phi):
    """OfdmReceiver._smooth_phase for one frame: zs [S] complex128 -> phi [S] radians."""
    s_n = zs.shape[0]
    acc = 0j
    for s in range(s_n - 1):
        acc += zs[s + 1] * zs[s].conjugate()
    ramp = math.atan2(acc.imag, acc.real)
    var = n0 / max(2 * a * a * pilot_power, 1e-30)
    lam = q_phase / max(var, 1e-12)
    rho = max(1 + lam / 2 - math.sqrt(lam + lam * lam / 4), 1e-30)
    zr = np.empty(s_n, np.complex128)
    for s in range(s_n):
        zr[s] = zs[s] * complex(math.cos(ramp * s), -math.sin(ramp * s))
    powers = np.empty(s_n)
    powers[0] = 1.0
    for d in range(1, s_n):
        powers[d] = powers[d - 1] * rho
    for i in range(s_n):
        acc = 0j
        for j in range(s_n):
            acc += powers[abs(i - j)] * zr[j]
        phi[i] = math.atan2(acc.imag, acc.real) + ramp * i


@njit(cache=True, nogil=True)
def _line_fit(y):
    """Replace y [S] by its least-squares straight line over the index (receive.line_fit)."""
    s_n = y.shape[0]
    mid = (s_n - 1) / 2
    num = 0.0
    den = 0.0
    mean = 0.0
    for s in range(s_n):
        t = s - mid
        num += y[s] * t
        den += t * t
        mean += y[s]
    mean /= s_n
    slope = num / den
    for s in range(s_n):
        y[s] = mean + slope * (s - mid)


@njit(cache=True, nogil=True)
def _cut_derotate(buf, offsets, n, cfo, block, first=0):
    """[B, n] complex64: buf[o : o + n] for each offset o [B] int64, times exp(-2 pi j f m)
    at sample m of the cut (f = cfo [B] float64), the phase computed in float64 once a
    block and once a sample within a block, as channel.functional.phase_ramp does. The
    samples m < first are zeros (not read)."""
    b = offsets.shape[0]
    out = np.empty((b, n), np.complex64)
    inner = np.empty(block, np.complex128)
    head = min(max(first, 0), n)
    for r in range(b):
        for m in range(head):
            out[r, m] = 0
        f = cfo[r]
        _rotation(f, inner)
        o = offsets[r]
        for m0 in range(head - head % block, n, block):
            outer = complex(math.cos(_TWO_PI * f * m0), -math.sin(_TWO_PI * f * m0))
            for i in range(max(head - m0, 0), min(block, n - m0)):
                out[r, m0 + i] = np.complex128(buf[o + m0 + i]) * (outer * inner[i])
    return out


# ------------------------------------------------------------------------------ the class
def _fft_tables(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``_fft``'s tables for size n (a power of two): the bit-reversal permutation [n] int64
    and the twiddles [n / 2 or 0 + 3 (n / 4 + n / 16 + ...)] complex128: exp(-2 pi j k / n),
    k < n / 2, for the radix-2 stage where log2 n is odd; then for each fused stage of size
    m (n, n / 4, ... or n / 2, n / 8, ... down to 4), w^k, w^2k, w^3k for k < m / 4, with
    w = exp(-2 pi j / m)."""
    bits = n.bit_length() - 1
    perm = np.array([int(format(i, f"0{bits}b")[::-1], 2) for i in range(n)], np.int64)
    parts, size = [], n
    if bits % 2 == 1:
        parts.append(np.exp(-2j * np.pi * np.arange(n // 2) / n))
        size = n // 2
    while size >= 4:
        w = np.exp(-2j * np.pi * np.arange(size // 4) / size)
        parts.append(np.stack([w, w**2, w**3], axis=1).ravel())
        size //= 4
    return perm, np.concatenate(parts) if parts else np.zeros(0, np.complex128)


def _np(t) -> np.ndarray:
    return t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)


class CompiledReceiver:
    """``OfdmReceiver``'s inference, compiled: ``__call__`` (forward), ``estimate``,
    ``refine_estimate`` and ``equalize`` with its signatures and results (CPU tensors, in
    complex64/float32 whatever the input's precision), for the receiver process.

    Args:
        rx: the torch receiver whose options (equaliser, smoothing, tracking, CFO, phase
            noise) and constants this one takes.
    """

    def __init__(self, rx: OfdmReceiver):
        if not isinstance(rx, OfdmReceiver):
            raise TypeError(f"rx must be an OfdmReceiver, got {type(rx).__name__}")
        self.rx = rx
        self.cfg = c = rx.cfg
        self._perm, self._tw = _fft_tables(c.fft_size)
        self._used = c.bins(c.used).astype(np.int64)
        pd = np.concatenate([c.pilot_carriers, c.data_carriers])
        self._pd = c.bins(pd).astype(np.int64)
        self._pk = c.pilot_carriers.astype(np.float64)
        self._k_pd = pd.astype(np.float64)
        self._lts_ref = rx.lts_ref.double().numpy()
        # the smoother's eigenvalues in descending order (_on_bins stops at the negligible ones)
        order = np.argsort(-rx.r_lam.double().numpy(), kind="stable")
        self._r_u = np.ascontiguousarray(rx.r_u.numpy().astype(np.complex128)[:, order])
        self._r_lam = np.ascontiguousarray(rx.r_lam.double().numpy()[order])
        pilots = {int(k): i for i, k in enumerate(c.pilot_carriers)}
        data = {int(k): i for i, k in enumerate(c.data_carriers)}
        self._is_pilot = np.array([int(k) in pilots for k in c.used])
        self._col = np.array(
            [pilots[int(k)] if int(k) in pilots else data[int(k)] for k in c.used], np.int64
        )
        self._start = c.cp_len - c.fft_backoff
        col_pd = {int(k): j for j, k in enumerate(pd)}
        self._upd = np.array([col_pd[int(k)] for k in c.used], np.int64)  # used bin -> pd column
        self._kb_none = np.empty((0, 0, len(pd)), np.complex128)  # the kernels' "none"
        self._pilots: dict[int, np.ndarray] = {}
        self._descramble: dict[int, np.ndarray] = {}

    @staticmethod
    def supports(rx) -> bool:
        """Whether ``rx`` is a plain OfdmReceiver (a subclass may change its steps)."""
        return type(rx) is OfdmReceiver

    CACHED = 256  # frame lengths whose pilot and descrambling tables are kept

    def _pv(self, s: int) -> np.ndarray:
        """The pilot values of s symbols, [s, P] float64 (kept per length)."""
        v = self._pilots.get(s)
        if v is None:
            if len(self._pilots) >= self.CACHED:  # a stream of ever new lengths stays bounded
                self._pilots.clear()
            v = self._pilots[s] = np.ascontiguousarray(pilot_values(self.cfg, s))
        return v

    def _descr(self, k: int) -> np.ndarray:
        """The payload's descrambling rotations for k symbols, [k] complex128 (kept per k)."""
        v = self._descramble.get(k)
        if v is None:
            if len(self._descramble) >= self.CACHED:
                self._descramble.clear()
            v = self._descramble[k] = np.conj(payload_phases(k))
        return v

    def _x(self, x, n_payload: int) -> np.ndarray:
        """x checked as OfdmReceiver._frame checks it, as complex64 numpy (no copy from a
        complex64 CPU tensor)."""
        if isinstance(x, torch.Tensor):
            if not torch.is_complex(x) or x.dim() != 2:
                raise ValueError(f"x must be [B, L] complex, got {x.dtype} {tuple(x.shape)}")
            x = x.detach().cpu()
        x = np.asarray(x)
        if not np.iscomplexobj(x) or x.ndim != 2:
            raise ValueError(f"x must be [B, L] complex, got {x.dtype} {x.shape}")
        c = self.cfg
        need = c.lts_len + (c.header_symbols + c.payload_symbols(n_payload)) * c.symbol_len
        if x.shape[-1] < need:
            raise ValueError(f"frame needs {need} samples from the LTS start, got {x.shape[-1]}")
        return np.ascontiguousarray(x, np.complex64)

    def __call__(self, x, n_payload: int, header=None) -> RxResult:
        """OfdmReceiver.forward: x [B, >= lts_len + header_len + S symbol_len] complex
        (tensor or array, any precision) from the LTS start, as received; n_payload k;
        header None or [B, header_symbols, n_data] real +-1 -> RxResult (complex64/float32
        CPU tensors)."""
        xn = self._x(x, n_payload)
        if header is not None:
            est = self.estimate(xn)
            rot = self._derotate(xn, _np(est.cfo_norm).astype(np.float64))
            est = self.refine_estimate(rot, est, header, noise=True)
            return self.equalize(rot, est, n_payload)
        kb = np.empty((xn.shape[0], 1 + self.cfg.header_symbols, len(self._pd)), np.complex128)
        est = self._estimate(xn, kb)
        return self._equalize(xn, est, n_payload, _np(est.cfo_norm).astype(np.float64), kb, False)

    def _derotate(self, x: np.ndarray, cfo: np.ndarray) -> np.ndarray:
        offsets = np.arange(x.shape[0], dtype=np.int64) * x.shape[1]
        return _cut_derotate(x.reshape(-1), offsets, x.shape[1], cfo, 64)

    def estimate(self, x) -> ChannelEstimate:
        """OfdmReceiver.estimate: x [B, >= lts_len] complex (tensor or array, any precision)
        from the LTS start -> ChannelEstimate (float32/complex64 CPU tensors)."""
        c = self.cfg
        if isinstance(x, torch.Tensor):
            x = x.detach().cpu().numpy()
        x = np.asarray(x)
        if not np.iscomplexobj(x) or x.ndim != 2 or x.shape[-1] < c.lts_len:
            raise ValueError(f"x must be [B, >= {c.lts_len}] complex, got {x.dtype} {x.shape}")
        return self._estimate(x, self._kb_none)

    def _estimate(self, x: np.ndarray, kb: np.ndarray) -> ChannelEstimate:
        c, rx = self.cfg, self.rx
        x = np.ascontiguousarray(x, np.complex64)
        cfo, h, n0, snr = _estimate_kernel(
            x, rx.estimate_cfo, c.lts_cp, c.fft_backoff, self._used, self._lts_ref, rx.a,
            rx.smoothing == "lmmse", self._r_u, self._r_lam, self._perm, self._tw, self._upd,
            kb,
        )  # fmt: skip
        return _as_estimate(cfo, h, n0, snr, kb if kb.shape[1] else None)

    def _known(self, est: ChannelEstimate, b: int) -> np.ndarray:
        """est's known_bins, checked against b frames of this numerology."""
        kb = est.known_bins
        shape = (b, 1 + self.cfg.header_symbols, len(self._pd))
        if kb is None:
            raise ValueError(
                "known=True needs an estimate that carries known_bins (the header pass's)"
            )
        if kb.shape != shape or kb.dtype != np.complex128:
            raise ValueError(f"known_bins must be {shape} complex128, got {kb.dtype} {kb.shape}")
        return kb

    def refine_estimate(
        self, x, est: ChannelEstimate, header, noise: bool = False, known: bool = False
    ) -> ChannelEstimate:
        """OfdmReceiver.refine_estimate: x [B, >= lts_len + header_len] complex (tensor or
        array) from the LTS start with est's CFO removed; est the frames' ChannelEstimate;
        header [B, header_symbols, n_data] real +-1 -> ChannelEstimate (float32/complex64
        CPU tensors; noise: also the noise and SNR from the header's residuals).

        known: take the long training field's estimate and the header's bins from
        ``est.known_bins`` (what this path's header pass computed from the same samples);
        x is then not read and may be None."""
        c, rx = self.cfg, self.rx
        hdr = np.ascontiguousarray(_np(header), np.float64)
        if hdr.ndim != 3:
            raise ValueError(
                f"header must be [B, {c.header_symbols}, {c.n_data}] +-1, got {hdr.shape}"
            )
        b = hdr.shape[0]
        if known:
            kb = self._known(est, b)
            xn = np.empty((b, 0), np.complex64)
        else:
            kb = self._kb_none
            xn = self._x(x, 0)
        if hdr.shape != (xn.shape[0], c.header_symbols, c.n_data):
            raise ValueError(
                f"header must be [{xn.shape[0]}, {c.header_symbols}, {c.n_data}] +-1, "
                f"got {hdr.shape}"
            )
        h, n0, snr = _refine_kernel(
            xn, _np(est.n0).astype(np.float64), _np(est.snr_db).astype(np.float64), hdr,
            self._pv(c.header_symbols), c.header_symbols, c.symbol_len, self._start, c.lts_len,
            c.lts_cp, c.fft_backoff, self._used, self._is_pilot, self._col, self._lts_ref,
            rx.a, rx.smoothing == "lmmse", self._r_u, self._r_lam, bool(noise), self._perm,
            self._tw, self._upd, kb,
        )  # fmt: skip
        cfo = _np(est.cfo_norm).astype(np.float32)
        return _as_estimate(cfo, h, n0, snr, est.known_bins)

    def equalize(self, x, est: ChannelEstimate, n_payload: int, known: bool = False) -> RxResult:
        """OfdmReceiver.equalize: x [B, >= lts_len + header_len + S symbol_len] complex
        (tensor or array, any precision) from the LTS start with est's CFO removed; est the
        frames' ChannelEstimate (h [B, N], n0 [B]); n_payload k -> RxResult (complex64/float32
        CPU tensors).

        known: take the header symbols' bins from ``est.known_bins`` (x's header samples are
        then not read; with n_payload 0, x may be None)."""
        if known:
            b = _np(est.n0).shape[0]
            kb = self._known(est, b)
            if x is None and n_payload == 0:
                xn = np.empty((b, 0), np.complex64)
            else:
                xn = self._x(x, n_payload)
            return self._equalize(xn, est, n_payload, np.zeros(b), kb, True)
        xn = self._x(x, n_payload)
        return self._equalize(xn, est, n_payload, np.zeros(xn.shape[0]), self._kb_none, False)

    def _equalize(
        self, xn, est: ChannelEstimate, n_payload: int, cfo, kb: np.ndarray, kb_read: bool
    ) -> RxResult:
        c, rx = self.cfg, self.rx
        b = est.h.shape[0]
        h, n0 = _np(est.h), _np(est.n0)
        if h.shape != (b, c.fft_size) or n0.shape != (b,) or xn.shape[0] != b:
            raise ValueError(
                f"estimate of shape h {h.shape}, n0 {n0.shape} for {xn.shape[0]} frames"
            )
        n_sym = c.header_symbols + c.payload_symbols(n_payload)
        pay, gain, llr, evm, pil = _equalize_kernel(
            xn, np.ascontiguousarray(h, np.complex128), n0.astype(np.float64), cfo,
            self._pv(n_sym), self._descr(n_payload), n_sym, c.header_symbols, n_payload,
            c.symbol_len, self._start, c.lts_len, self._pd, rx.n_pilots, self._pk,
            self._k_pd, rx.a, rx.q_phase, rx.track, rx.smooth_tracking, rx.equalizer == "mmse",
            self._perm, self._tw, kb, kb_read,
        )  # fmt: skip
        t = torch.from_numpy
        return RxResult(
            symbols=t(pay.astype(np.complex64)),
            h=t(np.ascontiguousarray(h, np.complex64)),
            n0=t(n0.astype(np.float32)),
            snr_db=t(_np(est.snr_db).astype(np.float32)),
            cfo_norm=t(_np(est.cfo_norm).astype(np.float32)),
            evm_pilots=t(evm.astype(np.float32)),
            symbol_gain=t(gain.astype(np.float32)),
            header_llr=t(llr.astype(np.float32)),
            pilots=t(pil.astype(np.complex64)),
            known_bins=kb if kb.shape[1] else est.known_bins,
        )

    def cut(
        self, buf: np.ndarray, offsets: np.ndarray, n: int, cfo: np.ndarray, first: int = 0
    ) -> torch.Tensor:
        """[B, n] complex64: buf[o : o + n] for each offset o [B] (int), derotated by
        exp(-2 pi j f m) (f = cfo [B], cycles per sample; m from each cut's first sample),
        the phase in float64: the stream receiver's segments. The samples before ``first``
        are zeros (a payload pass with ``known=True`` does not read the header's)."""
        return torch.from_numpy(
            _cut_derotate(
                np.ascontiguousarray(buf, np.complex64),
                np.asarray(offsets, np.int64),
                int(n),
                np.asarray(cfo, np.float64),
                64,
                int(first),
            )
        )


def _as_estimate(cfo, h, n0, snr, known_bins=None) -> ChannelEstimate:
    t = torch.from_numpy
    return ChannelEstimate(
        cfo_norm=t(np.asarray(cfo, np.float32)),
        h=t(h.astype(np.complex64)),
        n0=t(n0.astype(np.float32)),
        snr_db=t(snr.astype(np.float32)),
        known_bins=known_bins,
    )
