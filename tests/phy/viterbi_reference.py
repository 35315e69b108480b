"""The header decoders as numpy array steps over the whole batch, one trellis step at a
time: the implementation hil.phy.coding ran before its compiled kernels, kept here as the
independent reference the kernels must match bit for bit (tests/phy/test_coding.py)."""

import numpy as np

from hil.phy.coding import (
    MAX_LIST,
    N_STATES,
    TAIL,
    K,
    _known_penalty,
    _llr_batch,
    _trellis,
)


def viterbi_decode_numpy(llr: np.ndarray, known: np.ndarray | None = None) -> np.ndarray:
    """Soft-decision Viterbi on a terminated trellis, vectorised over a batch.

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
    _, out, prev, prev_bit = _trellis()
    b, steps = llr.shape[0], llr.shape[1] // 2
    pen = _known_penalty(known, b, steps)
    half = N_STATES // 2
    # With the newest bit in the state's MSB, state t = (bit, j) has the predecessors
    # 2j and 2j + 1 (j = t mod 32): add-compare-select is a reshape, not a gather.
    pairs = llr.reshape(b, steps, 2)
    sign = 1.0 - 2.0 * out[prev, prev_bit[:, None]]  # [S, 2 preds, 2 bits]
    bm = (pairs.reshape(-1, 2) @ sign.reshape(-1, 2).T).reshape(b, steps, 2, half, 2)
    bm = bm.transpose(1, 0, 2, 3, 4)
    metric = np.full((b, 1, half, 2), -np.inf)
    metric[:, 0, 0, 0] = 0.0
    choice = np.empty((steps, b, N_STATES), np.bool_)
    for t in range(steps):
        cand = metric + bm[t]  # [B, 2 (new bit), 32, 2 (pred)]
        if pen is not None:
            cand = cand + pen[t][:, :, None, None]
        c = cand[..., 1] > cand[..., 0]
        choice[t] = c.reshape(b, N_STATES)
        metric = np.maximum(cand[..., 0], cand[..., 1]).reshape(b, 1, half, 2)
    s = np.zeros(b, np.int64)  # terminated in state 0
    rows = np.arange(b)
    bits = np.empty((b, steps), np.uint8)
    for t in range(steps - 1, -1, -1):
        bits[:, t] = s >> (K - 2)
        s = 2 * (s % half) + choice[t, rows, s]
    bits = bits[:, : steps - TAIL]
    return bits[0] if single else bits


def list_viterbi_decode_numpy(
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
    _, out, prev, prev_bit = _trellis()
    b, steps = llr.shape[0], llr.shape[1] // 2
    sign = 1.0 - 2.0 * out[prev, prev_bit[:, None]]  # [S, 2 preds, 2 bits]
    bm = (llr.reshape(b, steps, 2) @ sign.reshape(-1, 2).T).reshape(b, steps, N_STATES, 2)
    pen = _known_penalty(known, b, steps)
    if pen is not None:  # by the input bit each state's incoming branches shift in
        bm = bm + pen[:, :, prev_bit].transpose(1, 0, 2)[..., None]
    metric = np.full((b, N_STATES, n_list), -np.inf)
    metric[:, 0, 0] = 0.0
    choice = np.empty((steps, b, N_STATES, n_list), np.int16)
    for t in range(steps):
        # candidates into each state: its predecessor p's n_list paths, then the other's
        cand = (metric[:, prev, :] + bm[:, t, :, :, None]).reshape(b, N_STATES, 2 * n_list)
        idx = np.argsort(-cand, axis=-1, kind="stable")[..., :n_list]
        choice[t] = idx
        metric = np.take_along_axis(cand, idx, axis=-1)
    rows = np.arange(b)[:, None]
    s = np.zeros((b, n_list), np.int64)  # terminated in state 0
    r = np.broadcast_to(np.arange(n_list), (b, n_list)).copy()
    bits = np.empty((b, n_list, steps), np.uint8)
    for t in range(steps - 1, -1, -1):
        bits[:, :, t] = s >> (K - 2)
        c = choice[t, rows, s, r]
        s = prev[s, c // n_list]
        r = c % n_list
    bits = bits[:, :, : steps - TAIL]
    final = metric[:, 0, :]
    return (bits[0], final[0]) if single else (bits, final)
