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


# --- exact outcomes of small runs whose truth is known (mutation testing, docs/mutation.md)


def _known(acc, seq, kind, pos):
    """A frame whose header was read at ``pos``, with its outcome (None: none yet, e.g. a chunk
    waiting for its siblings)."""
    acc.positions[seq] = pos
    if kind == "decoded":
        acc.decoded.add(seq)
    elif kind == "refused":
        acc.refused.add(seq)
    elif kind == "cut":
        acc.cut[seq] = pos


def test_settle_gives_every_count_exactly():
    missed = []
    acc = Accounting(on_missed=missed.append)
    for seq in range(12):
        acc.sent[seq] = 100 + seq
    _known(acc, 0, "decoded", 0)  # 1: never detected, no failure near it -> missed
    _known(acc, 2, "decoded", 2000)
    _known(acc, 3, "refused", 3000)
    acc.header_failed(4000)  # 4: the one failure between 3 and 5 -> header_failed
    _known(acc, 5, "decoded", 5000)
    _known(acc, 6, "cut", 6000)
    acc.header_failed(7500)  # 7, 8: one failure for two open seqs -> both missed, unattributed
    _known(acc, 9, "decoded", 9000)
    acc.header_failed(10000)  # 10, 11: two failures after the last known frame
    acc.header_failed(11000)
    acc.unexpected, acc.duplicates, acc.cut_unknown = 1, 2, 3
    s = acc.settle()
    assert s["counts"] == {
        "decoded": 4,
        "refused": 1,
        "header_failed": 3,
        "cut": 1,
        "missed": 3,
        "sent": 12,
        "header_failures_seen": 4,
        "header_failures_unattributed": 1,
        "unexpected": 1,
        "duplicates": 2,
        "cut_before_header": 3,
        "balanced": True,
        "sent_inferred": False,
        "seq_jumps": 0,
    }
    kinds = ["decoded", "missed", "decoded", "refused", "header_failed", "decoded", "cut"]
    kinds += ["missed", "missed", "decoded", "header_failed", "header_failed"]
    assert s["status"] == {str(i): k for i, k in enumerate(kinds)}
    assert s["status_not_kept"] == 0
    assert missed == [1, 7, 8]  # the live view hears of each missed seq, in order


def test_settle_of_nothing_is_all_zero():
    s = Accounting().settle()
    assert s == {
        "counts": {
            **dict.fromkeys(("decoded", "refused", "header_failed", "cut", "missed"), 0),
            "sent": 0,
            "header_failures_seen": 0,
            "header_failures_unattributed": 0,
            "unexpected": 0,
            "duplicates": 0,
            "cut_before_header": 0,
            "balanced": True,
            "sent_inferred": False,
            "seq_jumps": 0,
        },
        "status": {},
        "status_not_kept": 0,
    }


def test_a_known_frame_without_an_outcome_bounds_intervals_and_is_missed():
    """Seq 2's header was read but it has no outcome yet (a chunk whose siblings never came):
    it still separates the failure at 1000 (seq 1) from the one at 3000 (seq 3)."""
    acc = Accounting()
    for seq in range(5):
        acc.sent[seq] = 0
    _known(acc, 0, "decoded", 0)
    acc.header_failed(1000)
    _known(acc, 2, None, 2000)
    acc.header_failed(3000)
    _known(acc, 4, "decoded", 4000)
    s = acc.settle()
    assert s["status"] == {
        "0": "decoded",
        "1": "header_failed",
        "2": "missed",
        "3": "header_failed",
        "4": "decoded",
    }
    assert s["counts"]["header_failures_unattributed"] == 0


def test_statuses_kept_non_decoded_first_up_to_twice_keep():
    acc = Accounting(keep=2)
    for seq in range(10):
        acc.sent[seq] = 0
    for seq in range(5):
        _known(acc, seq, "decoded", 1000 * seq)
    s = acc.settle()  # 0..4 decoded, 5..9 missed
    assert s["status"] == {"0": "decoded", "1": "decoded", "5": "missed", "6": "missed"}
    assert s["status_not_kept"] == 6


@pytest.mark.parametrize("kind", ["decoded", "refused", "cut", None])
def test_compact_settles_up_to_the_window_th_newest_frame_exactly(kind):
    acc = Accounting(window=4)
    acc.header_failed(2500)  # between 2 and 3, no open seq: unattributed, settled
    acc.header_failed(5500)  # after the settling point: kept
    for seq in range(9):
        acc.sent[seq] = 0
        _known(acc, seq, kind if seq == 5 else "decoded", 1000 * seq)
        acc.compact()
        if seq == 7:  # 8 = 2 * window known frames: not yet
            assert acc.totals == {} and len(acc.sent) == 8
            assert acc.live() == {
                "decoded": 8 - (kind != "decoded"),
                "refused": int(kind == "refused"),
                "header_failed": 0,
                "cut": int(kind == "cut"),
                "missed": 0,
                "sent": 8,
                "pending": int(kind is None),
                "header_failures_seen": 2,
            }
    # 9 known: everything up to the 4th newest (seq 5) settles
    outcome = kind or "missed"
    expect = {"decoded": 5, "sent": 6}
    expect[outcome] = expect.get(outcome, 0) + 1
    assert acc.totals == expect
    assert acc.floor == (5000, 5)
    assert sorted(acc.sent) == sorted(acc.positions) == sorted(acc.decoded) == [6, 7, 8]
    assert acc.refused == set() and acc.cut == {}
    assert acc.header_failed_at == [5500]
    assert sorted(acc.recent) == [0, 1, 2, 3, 4, 5]
    for name in ("decoded", "refused", "cut", "missed", "header_failed"):
        assert acc.count(name) == expect.get(name, 0) + 3 * (name == "decoded")
    assert acc.live() == {
        "decoded": expect["decoded"] + 3,
        "refused": expect.get("refused", 0),
        "header_failed": 0,
        "cut": expect.get("cut", 0),
        "missed": expect.get("missed", 0),
        "sent": 9,
        "pending": 0,
        "header_failures_seen": 2,
    }


def test_live_counts_before_anything_settles():
    acc = Accounting()
    for seq in range(6):
        acc.sent[seq] = 0
    _known(acc, 0, "decoded", 0)
    _known(acc, 2, "decoded", 2000)
    _known(acc, 3, "refused", 3000)
    _known(acc, 4, "cut", 4000)
    acc.cut[2] = 2100  # cut and then decoded after all (a retransmission): decoded
    _known(acc, 99, "decoded", 9900)  # not in the manifest: not counted as sent
    acc.header_failed(1000)
    assert acc.live() == {
        "decoded": 2,
        "refused": 1,
        "header_failed": 0,
        "cut": 1,
        "missed": 0,
        "sent": 6,
        "pending": 2,
        "header_failures_seen": 1,
    }
    assert (acc.count("decoded"), acc.count("refused"), acc.count("cut")) == (3, 1, 2)
    assert acc.count("missed") == 0


def test_seen_and_the_recent_cap():
    acc = Accounting(window=4)
    assert not acc.seen(7)
    acc.refused.add(7)
    assert acc.seen(7) and not acc.seen(8)
    acc = Accounting(window=4)
    for seq in range(200):
        acc.sent[seq] = 0
        _known(acc, seq, "decoded", 1000 * seq)
        acc.compact()
    assert len(acc.recent) == 8 * 4
    settled = acc.floor[1]
    assert acc.seen(settled) and acc.seen(settled - 31) and not acc.seen(settled - 32)


def test_records_keep_the_first_records_and_exact_running_means():
    from hil.apps.accounting import Records

    seen = []
    r = Records(keep=2)
    assert r.mean("psnr_db") is None and r.mean("snr_db") is None
    r.on_add = seen.append
    recs = [
        {"status": "decoded", "snr_db": 10.0, "cfo_hz": 100.0, "psnr_db": 30.0, "ssim": 0.9},
        {"status": "refused", "seq": 1},
        {"status": "decoded", "snr_db": 20.0, "cfo_hz": -50.0},  # no reference: not scored
        {"status": "decoded", "snr_db": 0.0, "cfo_hz": 250.0, "psnr_db": 20.0, "ssim": 0.5},
        {"status": "header_failed", "snr_db": 99.0, "cfo_hz": 99.0},
    ]
    for rec in recs:
        r.add(rec)
    assert seen == recs
    assert r.items == recs[:2] and r.not_kept == 3
    assert r.n == {"decoded": 3, "scored": 2}
    assert r.sums == {"psnr_db": 50.0, "ssim": 1.4, "snr_db": 30.0, "cfo_hz": 300.0}
    assert r.mean("psnr_db") == 25.0 and r.mean("ssim") == pytest.approx(0.7, abs=1e-15)
    assert r.mean("snr_db") == 10.0 and r.mean("cfo_hz") == 100.0
    assert Records().keep == 2000
    Records().add(recs[0])  # no live view attached: nothing to call


def _inferred(seqs, **kw):
    """The receiver's order: a duplicate is spotted first, then the header counts as read."""
    acc = Accounting(inferred=True, **kw)
    for pos, s in enumerate(seqs):
        if acc.seen(s):
            acc.duplicates += 1
            continue
        acc.observed(s)
        _known(acc, s, "decoded", 100 * pos)
        acc.compact()
    return acc


def test_inferred_sent_fills_gaps_up_to_max_jump_and_counts_longer_jumps():
    acc = _inferred([1000, 1001, 1003, 1103, 1300, 1600], max_jump=100)
    c = acc.settle()["counts"]
    # 1000..1103 filled in (a jump of exactly max_jump is still filled); 1300, 1600 jumped
    assert (c["sent"], c["decoded"], c["missed"], c["seq_jumps"]) == (106, 6, 100, 2)


def test_inferred_seqs_up_to_the_settled_floor_are_not_sent_again():
    acc = _inferred(range(20), window=2)
    floor = acc.floor[1]
    assert floor > 0
    before = dict(acc.sent)
    for s in (floor, floor - 1, 0):
        acc.observed(s)  # a late header at or below the floor: already settled
    assert acc.sent == before
    c = acc.settle()["counts"]
    assert (c["sent"], c["decoded"], c["balanced"]) == (20, 20, True)
