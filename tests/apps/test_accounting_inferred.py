"""Accounting without a manifest: sent is inferred from the headers read."""

from hil.apps.accounting import Accounting


def run(seqs, **kw):
    acc = Accounting(inferred=True, **kw)
    for pos, s in enumerate(seqs):
        acc.observed(s)
        if acc.seen(s):
            acc.duplicates += 1
            continue
        acc.positions[s] = pos * 100
        acc.decoded.add(s)
        acc.compact()
    return acc.settle()["counts"]


def test_gaps_between_the_lowest_and_highest_seq_are_missed():
    c = run([10, 11, 14, 15])
    assert (c["sent"], c["decoded"], c["missed"], c["balanced"]) == (6, 4, 2, True)
    assert c["sent_inferred"] and c["seq_jumps"] == 0


def test_reordered_and_duplicated_frames_add_nothing_sent():
    c = run([0, 2, 1, 2, 3])
    assert (c["sent"], c["decoded"], c["missed"], c["duplicates"]) == (4, 4, 0, 1)


def test_a_jump_beyond_the_limit_is_counted_not_filled_in():
    c = run([0, 1, 1000], max_jump=100)
    assert (c["sent"], c["decoded"], c["missed"], c["seq_jumps"]) == (3, 3, 0, 1)


def test_long_runs_settle_as_they_go_with_the_same_counts():
    seqs = [s for s in range(3000) if s % 7]
    c = run(seqs, window=64)
    assert c["sent"] == 2999 - 0 and c["decoded"] == len(seqs)  # 1..2999: 0 is a multiple of 7
    assert c["missed"] == c["sent"] - c["decoded"] and c["balanced"]


def test_with_a_manifest_nothing_is_inferred():
    acc = Accounting()
    acc.observed(5)
    assert acc.sent == {} and not acc.settle()["counts"]["sent_inferred"]
