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
    """``hil.phy.coding.viterbi_decode`` (the same arguments and result), vectorised over
    the batch: add-compare-select for every row at once, one trellis step at a time."""
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
    """``hil.phy.coding.list_viterbi_decode`` (the same arguments and result), vectorised
    over the batch: each state's 2 n_list candidates ranked by a stable sort, one trellis
    step at a time."""
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
