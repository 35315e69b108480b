"""The receiver's accounting: settling as the run goes gives the same answer as settling at the end,
with memory that does not grow with the run."""

import numpy as np
import pytest

from hil.apps.accounting import Accounting


def _run(acc: Accounting, n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    pos = 0
    for seq in range(n):
        acc.sent[seq] = seq % 7
        pos += int(rng.integers(1000, 2000))
        r = rng.random()
        if r < 0.80:
            acc.positions[seq] = pos
            acc.decoded.add(seq)
        elif r < 0.85:
            acc.positions[seq] = pos
            acc.refused.add(seq)
        elif r < 0.88:
            acc.positions[seq] = pos
            acc.cut[seq] = pos
        elif r < 0.95:
            acc.header_failed(pos)
        # else: missed, never detected
        if rng.random() < 0.01:
            acc.header_failed(pos + 500)  # a false header detection nobody sent
        acc.compact()
    return acc.settle()


@pytest.mark.parametrize("seed", [0, 1])
def test_incremental_settling_matches_settling_at_the_end(seed):
    n = 6000
    whole = _run(Accounting(keep=10**6, window=10**6), n, seed)
    inc_acc = Accounting(keep=100, window=64)
    inc = _run(inc_acc, n, seed)
    assert inc["counts"] == whole["counts"]
    assert inc["counts"]["balanced"] and inc["counts"]["sent"] == n
    assert inc["counts"]["header_failed"] > 0 and inc["counts"]["missed"] > 0
    # bounded: statuses kept up to the cap, the rest counted; pending state no bigger than the window
    assert len(inc["status"]) <= 2 * 100 and inc["status_not_kept"] == n - len(inc["status"])
    assert all(whole["status"][k] == v for k, v in inc["status"].items())
    assert len(inc_acc.recent) <= 8 * 64


def test_pending_state_stays_within_the_window():
    acc = Accounting(keep=10, window=32)
    sizes = []
    for seq in range(5000):
        acc.sent[seq] = 0
        acc.positions[seq] = seq * 100
        acc.decoded.add(seq)
        acc.compact()
        sizes.append(len(acc.sent) + len(acc.positions) + len(acc.decoded))
    assert max(sizes[1000:]) <= 3 * (2 * 32 + 1)
    assert acc.seen(4990) and acc.seen(4800)  # recent settled seqs still recognised as duplicates
    assert acc.settle()["counts"]["decoded"] == 5000


@pytest.mark.parametrize(("keep", "window"), [(10**6, 10**6), (50, 16)])
def test_each_category_counted_exactly_when_the_truth_is_known(keep, window):
    """Every other frame decoded; between them, in turn, one refused, one cut by a sample drop,
    one whose header failed, one never detected: each isolated between two known frames, so
    the true category of every seq is known and the counts must match it exactly."""
    acc = Accounting(keep=keep, window=window)
    truth, pos = {}, 0
    cycle = ("refused", "cut", "header_failed", "missed")
    for seq in range(4000):
        acc.sent[seq] = seq
        pos += 1500
        kind = "decoded" if seq % 2 == 0 else cycle[(seq // 2) % 4]
        truth[seq] = kind
        if kind == "decoded":
            acc.positions[seq] = pos
            acc.decoded.add(seq)
        elif kind == "refused":
            acc.positions[seq] = pos
            acc.refused.add(seq)
        elif kind == "cut":
            acc.positions[seq] = pos
            acc.cut[seq] = pos
        elif kind == "header_failed":
            acc.header_failed(pos)
        acc.compact()
    s = acc.settle()
    c = s["counts"]
    assert c["decoded"] == 2000
    for k in cycle:
        assert c[k] == 500, (k, c)
    assert c["sent"] == 4000 and c["balanced"]
    assert all(truth[int(k)] == v for k, v in s["status"].items()), "a seq in the wrong category"
