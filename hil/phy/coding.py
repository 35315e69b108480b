"""Convolutional code (K = 7, generators 133/171 octal, rate 1/2) with soft Viterbi decoding.

The industry-standard code of 802.11a and DVB (Odenwalder). Used for the frame
header, whose few hundred bits must survive down to 0 dB SNR; the measured
header-error-rate curve against a repetition code of the same rate is printed
by ``scripts/bench_phy.py --header``.

LLR convention: llr = log P(bit = 0) / P(bit = 1); BPSK maps bit b to 1 - 2b,
so llr = 4 Re(y) / N0 for unit-energy symbols.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numba import njit

K = 7
G = (0o133, 0o171)
N_STATES = 1 << (K - 1)
TAIL = K - 1
MAX_LIST = 64  # most paths per state list_viterbi_decode keeps


def _parity(v: int) -> int:
    return bin(v).count("1") & 1


@lru_cache(maxsize=1)
def _trellis():
    """For each (state, input): next state and the two output bits.

    The state holds the last K-1 input bits, newest in the most significant
    position; the register for the generators is (input, state bits).
    """
    nxt = np.zeros((N_STATES, 2), np.int64)
    out = np.zeros((N_STATES, 2, 2), np.int64)
    for s in range(N_STATES):
        for b in (0, 1):
            reg = (b << (K - 1)) | s
            nxt[s, b] = reg >> 1
            out[s, b] = [_parity(reg & g) for g in G]
    # predecessor table for add-compare-select: each state has two predecessors
    prev = np.zeros((N_STATES, 2), np.int64)
    prev_bit = np.zeros(N_STATES, np.int64)
    count = np.zeros(N_STATES, np.int64)
    for s in range(N_STATES):
        for b in (0, 1):
            t = nxt[s, b]
            prev[t, count[t]] = s
            prev_bit[t] = b
            count[t] += 1
    half = N_STATES // 2
    if not (
        np.array_equal(prev[:, 0], 2 * (np.arange(N_STATES) % half))
        and np.array_equal(prev[:, 1], prev[:, 0] + 1)
        and np.array_equal(prev_bit, np.arange(N_STATES) // half)
    ):
        raise RuntimeError("trellis layout differs from what viterbi_decode assumes")
    return nxt, out, prev, prev_bit


def conv_encode(bits: np.ndarray) -> np.ndarray:
    """bits: [n] or [B, n] {0,1}, any integer or bool dtype -> [2 (n + 6)] or [B, 2 (n + 6)]
    uint8 coded bits, terminated with six zero tail bits (the encoder starts in state 0).

    Each output stream is the XOR of the input shifted by the generator's taps (generator
    bit K-1-i taps u[n - i], as in ``_trellis``), for every row at once."""
    u = np.asarray(bits)
    if u.ndim not in (1, 2):
        raise ValueError(f"bits must be [n] or [B, n], got shape {u.shape}")
    single = u.ndim == 1
    u = np.atleast_2d(u).astype(np.uint8)
    rows, n = u.shape
    pad = np.zeros((rows, TAIL), np.uint8)
    u = np.concatenate([pad, u, pad], axis=1)  # u[n - i] at column TAIL + n - i
    length = n + TAIL
    coded = np.empty((rows, 2 * length), np.uint8)
    for j, g in enumerate(G):
        acc = np.zeros((rows, length), np.uint8)
        for i in range(K):
            if (g >> (K - 1 - i)) & 1:
                acc ^= u[:, TAIL - i : TAIL - i + length]
        coded[:, j::2] = acc
    return coded[0] if single else coded


def _llr_batch(llr: np.ndarray) -> tuple[np.ndarray, bool]:
    """[L] or [B, L] coded-bit LLRs (any real precision) -> ([B, L] float64, whether the input
    was one row); L must be even and hold at least one input bit and the tail."""
    llr = np.asarray(llr, np.float64)
    single = llr.ndim == 1
    if single:
        llr = llr[None]
    if llr.ndim != 2 or llr.shape[1] % 2 or llr.shape[1] < 2 * (TAIL + 1):
        raise ValueError(
            f"llr must be [L] or [B, L] with even L >= {2 * (TAIL + 1)}, got {llr.shape}"
        )
    return llr, single


def _known_penalty(known: np.ndarray | None, b: int, steps: int) -> np.ndarray | None:
    """Input bits known before decoding -> [steps, B, 2] path-metric penalties: -inf for the
    input value a known bit rules out, 0 elsewhere (the tail's steps are free: termination
    already forces them).

    known: None, or [n] / [B, n] integers (n = steps - TAIL): -1 where the bit is unknown,
    else its value 0 or 1 ([n] applies to every row)."""
    if known is None:
        return None
    k = np.asarray(known)
    n = steps - TAIL
    if k.ndim == 1:
        k = np.broadcast_to(k, (b, k.shape[0]))
    if k.shape != (b, n) or not np.isin(k, (-1, 0, 1)).all():
        raise ValueError(f"known must be [{n}] or [{b}, {n}] of -1, 0, 1, got {np.shape(known)}")
    pen = np.zeros((steps, b, 2))
    pen[:n, :, 1][k.T == 0] = -np.inf  # a known 0 rules out the branches that shift in a 1
    pen[:n, :, 0][k.T == 1] = -np.inf
    return pen


@lru_cache(maxsize=1)
def _branch_signs() -> np.ndarray:
    """[N_STATES, 2, 2] float64: for each state t = (bit, j) and each of its predecessors
    2j and 2j + 1 (the newest bit in the state's MSB), the BPSK signs (1 - 2c) of the two
    coded bits on the branch between them: a branch's metric is signs . (llr0, llr1)."""
    _, out, prev, prev_bit = _trellis()
    return np.ascontiguousarray(1.0 - 2.0 * out[prev, prev_bit[:, None]])


@njit(cache=True, nogil=True)
def _viterbi_kernel(llr, pen, sign):
    """llr [B, 2 steps] float64, pen [steps, B, 2] float64 (0 or -inf by the input bit),
    sign from ``_branch_signs`` -> [B, steps] uint8 input bits (tail included).

    Add-compare-select per target state, the survivor from predecessor 2j + 1 only where it
    is strictly better (ties go to 2j), then the traceback from state 0."""
    b, steps = llr.shape[0], llr.shape[1] // 2
    half = N_STATES // 2
    bits = np.empty((b, steps), np.uint8)
    choice = np.empty((steps, N_STATES), np.uint8)
    m = np.empty(N_STATES)
    nm = np.empty(N_STATES)
    for r in range(b):
        m[:] = -np.inf
        m[0] = 0.0
        for t in range(steps):
            l0, l1 = llr[r, 2 * t], llr[r, 2 * t + 1]
            for ns in range(N_STATES):
                p0 = 2 * (ns % half)
                pb = pen[t, r, ns // half]
                c0 = m[p0] + (sign[ns, 0, 0] * l0 + sign[ns, 0, 1] * l1) + pb
                c1 = m[p0 + 1] + (sign[ns, 1, 0] * l0 + sign[ns, 1, 1] * l1) + pb
                if c1 > c0:
                    choice[t, ns] = 1
                    nm[ns] = c1
                else:
                    choice[t, ns] = 0
                    nm[ns] = c0
            m, nm = nm, m
        s = 0  # terminated in state 0
        for t in range(steps - 1, -1, -1):
            bits[r, t] = s // half
            s = 2 * (s % half) + choice[t, s]
    return bits


@njit(cache=True, nogil=True)
def _list_viterbi_kernel(llr, pen, sign, n_list):
    """The parallel list Viterbi search of ``list_viterbi_decode``: -> bits [B, n_list, steps]
    uint8 (tail included), metrics [B, n_list] float64.

    Each state's list stays sorted, best first; adding a branch metric keeps it sorted, so
    a state's new list is the merge of its two predecessors' lists (the first's paths before
    the second's where equal: the order of a stable sort of the 2 n_list candidates)."""
    b, steps = llr.shape[0], llr.shape[1] // 2
    half = N_STATES // 2
    bits = np.empty((b, n_list, steps), np.uint8)
    final = np.empty((b, n_list))
    choice = np.empty((steps, N_STATES, n_list), np.int16)
    m = np.empty((N_STATES, n_list))
    nm = np.empty((N_STATES, n_list))
    for r in range(b):
        m[:, :] = -np.inf
        m[0, 0] = 0.0
        for t in range(steps):
            l0, l1 = llr[r, 2 * t], llr[r, 2 * t + 1]
            for ns in range(N_STATES):
                p0 = 2 * (ns % half)
                pb = pen[t, r, ns // half]
                a0 = sign[ns, 0, 0] * l0 + sign[ns, 0, 1] * l1 + pb
                a1 = sign[ns, 1, 0] * l0 + sign[ns, 1, 1] * l1 + pb
                i = 0
                j = 0
                for k in range(n_list):
                    if j >= n_list or (i < n_list and m[p0, i] + a0 >= m[p0 + 1, j] + a1):
                        nm[ns, k] = m[p0, i] + a0
                        choice[t, ns, k] = i
                        i += 1
                    else:
                        nm[ns, k] = m[p0 + 1, j] + a1
                        choice[t, ns, k] = n_list + j
                        j += 1
            m, nm = nm, m
        for k in range(n_list):
            final[r, k] = m[0, k]
            s, rank = 0, k  # terminated in state 0
            for t in range(steps - 1, -1, -1):
                bits[r, k, t] = s // half
                c = choice[t, s, rank]
                s = 2 * (s % half) + c // n_list
                rank = c % n_list
    return bits, final


def _penalty(known: np.ndarray | None, b: int, steps: int) -> np.ndarray:
    """``_known_penalty`` as the kernels take it: zeros where nothing is known."""
    pen = _known_penalty(known, b, steps)
    return np.zeros((steps, b, 2)) if pen is None else pen


def viterbi_decode(llr: np.ndarray, known: np.ndarray | None = None) -> np.ndarray:
    """Soft-decision Viterbi on a terminated trellis, for each row of a batch (compiled:
    about 30 us a header, against about 3 ms for the same search as numpy array steps).

    Args:
        llr: [2 (n + 6)] or [B, 2 (n + 6)] log-likelihood ratios of the coded bits, real
            (any precision; computed in float64).
        known: input bits known a priori (a header's version, the expected model
            fingerprint): [n] or [B, n] integers, -1 unknown, else 0 or 1. The search then
            only follows paths that carry them: fewer unknowns, a stronger code.
    Returns:
        [n] or [B, n] decoded bits (uint8).
    """
    llr, single = _llr_batch(llr)
    b, steps = llr.shape[0], llr.shape[1] // 2
    pen = _penalty(known, b, steps)
    bits = _viterbi_kernel(np.ascontiguousarray(llr), pen, _branch_signs())[:, : steps - TAIL]
    return bits[0] if single else bits


def list_viterbi_decode(
    llr: np.ndarray, n_list: int, known: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The ``n_list`` most likely input sequences through the terminated trellis, best first
    (the parallel list Viterbi algorithm, Seshadri and Sundberg 1994).

    Each state keeps its n_list best paths instead of one: add-compare-select ranks the
    2 n_list candidates from its two predecessors. With an outer check (the header's CRC-32)
    the receiver takes the best path that passes it, which wins back part of the gap between
    the Viterbi decoder and maximum-likelihood decoding of the concatenated code. Path 0 is
    what ``viterbi_decode`` returns (up to ties).

    Args:
        llr: [2 (n + 6)] or [B, 2 (n + 6)] LLRs of the coded bits, real (any precision;
            computed in float64).
        n_list: paths kept per state, 1..MAX_LIST (64).
        known: input bits known a priori, as for ``viterbi_decode``.
    Returns:
        bits [L, n] or [B, L, n] uint8 and path metrics [L] or [B, L] float64 (correlation,
        larger is better; -inf for a rank no distinct path reaches: ignore its bits).
    """
    if not 1 <= int(n_list) <= MAX_LIST:
        raise ValueError(f"n_list must be in 1..{MAX_LIST}, got {n_list}")
    n_list = int(n_list)
    llr, single = _llr_batch(llr)
    b, steps = llr.shape[0], llr.shape[1] // 2
    pen = _penalty(known, b, steps)
    bits, final = _list_viterbi_kernel(np.ascontiguousarray(llr), pen, _branch_signs(), n_list)
    bits = bits[:, :, : steps - TAIL]
    return (bits[0], final[0]) if single else (bits, final)


def _taps(g: int) -> list[int]:
    """A generator's taps on u[n - i], i = 0 .. K - 1."""
    return [(g >> (K - 1 - i)) & 1 for i in range(K)]


@lru_cache(maxsize=1)
def _tap_arrays() -> tuple[np.ndarray, np.ndarray]:
    """The two generators' taps as ``_invert_kernel`` takes them: [K] uint8 each, made once
    (the inversion runs on every batch of headers)."""
    return np.array(_taps(G[0]), np.uint8), np.array(_taps(G[1]), np.uint8)


@njit(cache=True, nogil=True)
def _invert_kernel(c, g0, g1, tail):
    """c [B, 2 steps] uint8 hard bits -> (u [B, steps] uint8, ok [B] bool): the input bits
    that make the first stream (u[n] = c0[n] xor the first generator's other taps on u's
    past: its constant term is 1), and whether the second stream and the zero tail agree."""
    b, steps = c.shape[0], c.shape[1] // 2
    k = g0.shape[0]
    u = np.zeros((b, steps), np.uint8)
    ok = np.ones(b, np.bool_)
    for r in range(b):
        for n in range(steps):
            v = c[r, 2 * n]
            for i in range(1, min(k, n + 1)):
                v ^= g0[i] & u[r, n - i]
            u[r, n] = v
            w = 0
            for i in range(min(k, n + 1)):
                w ^= g1[i] & u[r, n - i]
            if w != c[r, 2 * n + 1] or (n >= steps - tail and v):
                ok[r] = False
                break
    return u, ok


def invert_hard_batch(coded: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fast path, batched: the input bits of the rows whose hard decisions form a codeword.

    The first generator has a non-zero constant term, so its output stream is invertible
    over GF(2) (its recursion, compiled); the second stream and the zero tail then check it.
    When hard decisions contain no error (most headers above ~10 dB), this replaces the
    Viterbi search; the caller falls back to it for the other rows.
    coded: [B, 2 (n + 6)] hard bits {0,1} (any integer, bool or float dtype holding 0/1) ->
    (bits [B, n] uint8, meaningful where ok; ok [B] bool).
    """
    c = np.asarray(coded)
    if c.ndim != 2 or c.shape[1] % 2 or c.shape[1] < 2 * (TAIL + 1):
        raise ValueError(f"coded must be [B, L] with even L >= {2 * (TAIL + 1)}, got {c.shape}")
    u, ok = _invert_kernel(np.ascontiguousarray(c, np.uint8), *_tap_arrays(), TAIL)
    return u[:, :-TAIL], ok


def invert_hard(coded: np.ndarray) -> np.ndarray | None:
    """One row of ``invert_hard_batch``: coded [2 (n + 6)] hard bits {0,1} (any integer dtype;
    read as uint8) -> [n] uint8 input bits, or None when they are not a codeword."""
    bits, ok = invert_hard_batch(np.asarray(coded)[None])
    return bits[0] if ok[0] else None


def repetition_encode(bits: np.ndarray, times: int = 2) -> np.ndarray:
    """Reference code of the same rate for the header-error comparison.

    bits: [n] {0,1} (any integer dtype) -> [times * n] uint8, each bit repeated in place.
    """
    return np.repeat(np.asarray(bits, np.uint8), times)


def repetition_decode(llr: np.ndarray, times: int = 2) -> np.ndarray:
    """llr: [times * n] real LLRs (any precision), repeats adjacent -> [n] uint8 bits."""
    return (np.asarray(llr).reshape(-1, times).sum(1) < 0).astype(np.uint8)


def interleaver_step(n_data: int) -> int:
    """The subcarrier stride of ``interleaver``: the smallest s >= 7 coprime with n_data
    (7 for the default 48 data subcarriers)."""
    s = 7
    while math.gcd(s, n_data) != 1:
        s += 1
    return s


@lru_cache(maxsize=8)
def interleaver(n: int, n_data: int = 48) -> np.ndarray:
    """Where each of n coded bits goes among the header's OFDM symbols of n_data data
    subcarriers: bit i to position p = n_data * (i // n_data) + (s * i) % n_data, s =
    ``interleaver_step(n_data)`` (OFDM symbol p // n_data, data index p % n_data).

    Each run of n_data coded bits fills one symbol, adjacent bits s data subcarriers apart
    (7 of 48: bits up to 6 apart never share a coherence band of the two-Pluto multipath),
    so a frequency-selective fade hits scattered bits of a Viterbi error event, not a burst
    of them. The earlier 16-column block interleaver put 36 consecutive coded bits on only
    3 subcarriers (its columns lined up with the 48 of a symbol), worth 30 points of
    header success at 0 dB on the two-Pluto profile (scripts/bench_phy.py).

    Returns [n] int64 distinct positions in 0..n_data * ceil(n / n_data) - 1 (where n is
    not a multiple of n_data, the last symbol's unused positions are padding); cached: do
    not modify.
    """
    if n < 1 or n_data < 1:
        raise ValueError(f"interleaver needs n >= 1 and n_data >= 1, got {n}, {n_data}")
    i = np.arange(n, dtype=np.int64)
    return n_data * (i // n_data) + (interleaver_step(n_data) * i) % n_data
