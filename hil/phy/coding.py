"""Convolutional code (K = 7, generators 133/171 octal, rate 1/2) with soft Viterbi decoding.

The industry-standard code of 802.11a and DVB (Odenwalder). Used for the frame
header, whose few hundred bits must survive down to 0 dB SNR; the measured
header-error-rate curve against a repetition code of the same rate is printed
by ``scripts/bench_phy.py --header``.

LLR convention: llr = log P(bit = 0) / P(bit = 1); BPSK maps bit b to 1 - 2b,
so llr = 4 Re(y) / N0 for unit-energy symbols.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

K = 7
G = (0o133, 0o171)
N_STATES = 1 << (K - 1)
TAIL = K - 1


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
    return nxt, out, prev, prev_bit


def conv_encode(bits: np.ndarray) -> np.ndarray:
    """bits: [n] {0,1} -> [2 (n + 6)] coded bits, terminated with six zero tail bits."""
    nxt, out, _, _ = _trellis()
    bits = np.concatenate([np.asarray(bits, np.int64), np.zeros(TAIL, np.int64)])
    coded = np.empty(2 * len(bits), np.uint8)
    s = 0
    for i, b in enumerate(bits):
        coded[2 * i : 2 * i + 2] = out[s, b]
        s = nxt[s, b]
    return coded


def viterbi_decode(llr: np.ndarray) -> np.ndarray:
    """Soft-decision Viterbi. llr: [2 (n + 6)] -> [n] decoded bits (terminated trellis)."""
    llr = np.asarray(llr, np.float64)
    if llr.ndim != 1 or len(llr) % 2 or len(llr) < 2 * (TAIL + 1):
        raise ValueError(f"llr must be 1-D with an even length >= {2 * (TAIL + 1)}, got {llr.shape}")
    _, out, prev, prev_bit = _trellis()
    steps = len(llr) // 2
    pairs = llr.reshape(steps, 2)
    # correlation metric: sum over the two coded bits of (1 - 2 c) * llr / 2, maximised
    sign = 1.0 - 2.0 * out[prev, prev_bit[:, None]]  # [S, 2 preds, 2 bits]
    metric = np.full(N_STATES, -np.inf)
    metric[0] = 0.0
    choice = np.empty((steps, N_STATES), np.int8)
    for t in range(steps):
        cand = metric[prev] + sign @ pairs[t]  # [S, 2]
        c = np.argmax(cand, axis=1)
        choice[t] = c
        metric = cand[np.arange(N_STATES), c]
    s = 0  # terminated in state 0
    bits = np.empty(steps, np.int64)
    for t in range(steps - 1, -1, -1):
        bits[t] = prev_bit[s]
        s = prev[s, choice[t, s]]
    return bits[: steps - TAIL].astype(np.uint8)


def repetition_encode(bits: np.ndarray, times: int = 2) -> np.ndarray:
    """Reference code of the same rate for the header-error comparison."""
    return np.repeat(np.asarray(bits, np.uint8), times)


def repetition_decode(llr: np.ndarray, times: int = 2) -> np.ndarray:
    return (np.asarray(llr).reshape(-1, times).sum(1) < 0).astype(np.uint8)


@lru_cache(maxsize=8)
def interleaver(n: int, cols: int = 16) -> np.ndarray:
    """Block interleaver permutation of length n: write rows of ``cols``, read columns.

    Spreads adjacent coded bits across subcarriers and symbols so that a
    frequency-selective fade does not hit a burst of them.
    """
    rows = -(-n // cols)
    idx = np.arange(rows * cols).reshape(rows, cols).T.ravel()
    return idx[idx < n]
