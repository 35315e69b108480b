"""The header's convolutional code: the hard-decision inversion against its definition, the
input checks of the batched paths, the list decoder's list sizes."""

import numpy as np
import pytest

from hil.phy import coding
from hil.phy.coding import (
    MAX_LIST,
    TAIL,
    conv_encode,
    invert_hard,
    invert_hard_batch,
    list_viterbi_decode,
    viterbi_decode,
)

G0 = [1, 0, 1, 1, 0, 1, 1]  # 133 octal, taps on u[n], u[n - 1], ... u[n - 6]
G1 = [1, 1, 1, 1, 0, 0, 1]  # 171 octal


def _toeplitz(taps, n):
    m = np.zeros((n, n), np.int64)
    for i, t in enumerate(taps):
        m += t * np.eye(n, k=-i, dtype=np.int64)
    return m


def test_hard_inversion_is_the_generators_inverse():
    """Against the code's definition as GF(2) Toeplitz matrices: input bits u (zero tail)
    coded as c0 = A u, c1 = B u (mod 2) invert to u; a flip of any single coded bit, in
    either stream, anywhere, is refused. The tap arrays are cached: built afresh here, so
    this tests their construction too (a cache filled before mutmut forks hides it)."""
    coding._tap_arrays.cache_clear()
    rng = np.random.default_rng(3)
    steps = 30
    u = rng.integers(0, 2, size=(8, steps)).astype(np.int64)
    u[:, -TAIL:] = 0
    c = np.empty((8, 2 * steps), np.uint8)
    c[:, 0::2] = (u @ _toeplitz(G0, steps).T) % 2
    c[:, 1::2] = (u @ _toeplitz(G1, steps).T) % 2
    got, ok = invert_hard_batch(c)
    assert ok.all() and got.dtype == np.uint8
    np.testing.assert_array_equal(got, u[:, :-TAIL])
    flips = np.repeat(c[:1], 2 * steps, axis=0)
    flips[np.arange(2 * steps), np.arange(2 * steps)] ^= 1
    assert not invert_hard_batch(flips)[1].any()
    # a stream consistent with both generators whose input has a 1 in any tail position is
    # not a terminated codeword
    u_tail = np.repeat(u[:1], TAIL, axis=0)
    u_tail[np.arange(TAIL), steps - TAIL + np.arange(TAIL)] = 1
    c[:TAIL, 0::2] = (u_tail @ _toeplitz(G0, steps).T) % 2
    c[:TAIL, 1::2] = (u_tail @ _toeplitz(G1, steps).T) % 2
    assert not invert_hard_batch(c[:TAIL])[1].any()


def test_invert_hard_batch_recovers_codewords_and_refuses_the_rest():
    rng = np.random.default_rng(4)
    bits = rng.integers(0, 2, size=(5, 40)).astype(np.uint8)
    coded = np.stack([conv_encode(r) for r in bits])
    got, ok = invert_hard_batch(coded)
    assert ok.all() and got.dtype == np.uint8
    np.testing.assert_array_equal(got, bits)
    bad = coded.copy()
    bad[0, 3] ^= 1  # first stream
    bad[1, 10] ^= 1  # second stream
    bad[2, -1] ^= 1  # the tail
    _, ok = invert_hard_batch(bad)
    assert ok.tolist() == [False, False, False, True, True]
    assert invert_hard(bad[0]) is None
    np.testing.assert_array_equal(invert_hard(coded[3].astype(bool)), bits[3])
    one = conv_encode(np.array([1], np.uint8))  # the shortest codeword: one bit and the tail
    assert len(one) == 2 * (TAIL + 1)
    np.testing.assert_array_equal(invert_hard_batch(one[None])[0], [[1]])
    for shape in ((1, 2 * TAIL), (1, 2 * TAIL + 1), (2 * TAIL + 2,), (1, 1, 14)):
        with pytest.raises(ValueError) as exc:
            invert_hard_batch(np.zeros(shape, np.uint8))
        assert str(exc.value) == f"coded must be [B, L] with even L >= 14, got {shape}"


def test_list_sizes_from_one_to_max_list():
    rng = np.random.default_rng(2)
    bits = rng.integers(0, 2, size=20).astype(np.uint8)
    llr = (1.0 - 2.0 * conv_encode(bits)) * 2 + rng.normal(size=52)
    paths, metric = list_viterbi_decode(llr, 1)
    assert paths.shape == (1, 20) and metric.shape == (1,)
    np.testing.assert_array_equal(paths[0], viterbi_decode(llr))
    paths, metric = list_viterbi_decode(llr, MAX_LIST)
    assert paths.shape == (MAX_LIST, 20) and np.all(np.diff(metric) <= 0)
    np.testing.assert_array_equal(paths[0], viterbi_decode(llr))
    for bad in (0, MAX_LIST + 1, -1):
        with pytest.raises(ValueError) as exc:
            list_viterbi_decode(llr, bad)
        assert str(exc.value) == f"n_list must be in 1..64, got {bad}"


def test_known_bits_hold_the_search_to_them():
    """Bits given as known come out as given, whatever the channel said of them; a consistent
    prior on a clean codeword changes nothing; both decoders take one prior for all rows or
    one per row."""
    rng = np.random.default_rng(11)
    u = rng.integers(0, 2, (3, 40))
    llr = np.stack([4.0 * (1 - 2.0 * conv_encode(r)) for r in u])
    known = np.full(40, -1)
    known[5:15] = u[0, 5:15]
    assert np.array_equal(viterbi_decode(llr[0], known), u[0])
    flipped = 1 - u[0, 5:15]
    known[5:15] = flipped  # against strong evidence: the path still carries them
    assert np.array_equal(viterbi_decode(llr[0], known)[5:15], flipped)
    per_row = np.full((3, 40), -1)
    per_row[:, :4] = 1
    got = viterbi_decode(llr, per_row)
    assert (got[:, :4] == 1).all()
    paths, metric = list_viterbi_decode(llr, 4, per_row)
    assert (paths[:, :, :4] == 1).all() and np.isfinite(metric).all()
    assert np.array_equal(list_viterbi_decode(llr[0], 4, u[0])[0][0], u[0])
    # an erased stretch is filled in by the prior alone
    noisy = llr[0].copy()
    noisy[20:50] = 0.0
    known = np.full(40, -1)
    known[8:26] = u[0, 8:26]
    assert np.array_equal(viterbi_decode(noisy, known), u[0])


@pytest.mark.parametrize(
    ("known", "match"),
    [
        (np.full(39, -1), r"\[40\] .* got \(39,\)$"),
        (np.full(40, 2), r"-1, 0, 1, got \(40,\)$"),
        (np.full((2, 40), -1), r"\[1, 40\] .* got \(2, 40\)$"),
    ],
)
def test_known_bits_shape_and_values_are_checked(known, match):
    llr = 1.0 - 2.0 * conv_encode(np.zeros(40, np.uint8))
    with pytest.raises(ValueError, match=match):
        viterbi_decode(llr, known)
    with pytest.raises(ValueError, match=match):
        list_viterbi_decode(llr, 2, known)


def test_conv_encode_walks_the_trellis_row_by_row_and_in_batches():
    """The shift-register form (every row at once) gives what walking the decoder's own
    trellis from state 0 gives, bit by bit; one row or a batch; the all-zero word and a lone
    one are the code's impulse response (133, 171 octal interleaved). The trellis cache is
    cleared first, so its construction is what is tested (the decoders use it; the encoder
    does not)."""
    coding._trellis.cache_clear()
    nxt, out, _, _ = coding._trellis()
    rng = np.random.default_rng(9)
    bits = rng.integers(0, 2, size=(6, 57))
    walked = []
    for r in bits:
        s, c = 0, []
        for b in [*r, *[0] * TAIL]:
            c += list(out[s, b])
            s = nxt[s, b]
        walked.append(c)
    np.testing.assert_array_equal(conv_encode(bits), np.array(walked, np.uint8))
    np.testing.assert_array_equal(conv_encode(bits[2].astype(bool)), walked[2])
    impulse = conv_encode(np.array([1]))
    a = [int(c) for c in f"{0o133:07b}"]
    b = [int(c) for c in f"{0o171:07b}"]
    np.testing.assert_array_equal(impulse, np.ravel(np.column_stack([a, b])))
    with pytest.raises(ValueError, match="bits must be"):
        conv_encode(np.zeros((1, 2, 3), np.uint8))


@pytest.mark.parametrize("integer_llrs", [False, True])
def test_compiled_decoders_match_the_numpy_reference(integer_llrs):
    """The compiled kernels against the numpy search they replaced, bit for bit, with and
    without known bits; integer LLRs make exact ties common, so the tie-breaking (the first
    predecessor, the first list where paths are equal) is checked too."""
    from tests.phy.viterbi_reference import list_viterbi_decode_numpy, viterbi_decode_numpy

    rng = np.random.default_rng(11)
    bits = rng.integers(0, 2, size=(6, 40)).astype(np.uint8)
    llr = (1.0 - 2.0 * conv_encode(bits)) + rng.normal(scale=1.2, size=(6, 92))
    if integer_llrs:
        llr = np.round(llr * 2)
    known = np.full((6, 40), -1)
    known[:, :12] = bits[:, :12]
    known[2, 20] = 1 - bits[2, 20]  # a wrong prior: paths must still follow it
    for kn in (None, known, known[0]):
        np.testing.assert_array_equal(viterbi_decode(llr, kn), viterbi_decode_numpy(llr, kn))
        row = kn[3] if kn is not None and kn.ndim == 2 else kn
        np.testing.assert_array_equal(
            viterbi_decode(llr[3], row), viterbi_decode_numpy(llr[3], row)
        )
        for n_list in (1, 3, MAX_LIST):
            got = list_viterbi_decode(llr, n_list, kn)
            ref = list_viterbi_decode_numpy(llr, n_list, kn)
            np.testing.assert_array_equal(got[1], ref[1])
            reached = np.isfinite(ref[1])  # ranks no path reaches carry no bits
            np.testing.assert_array_equal(got[0][reached], ref[0][reached])
