"""Exact invariants of the frame, OFDM and header."""

import numpy as np
import pytest
import torch

from hil.phy import FrameBuilder, Header, HeaderError, OfdmConfig, to_full_scale
from hil.phy.coding import conv_encode, interleaver, viterbi_decode
from hil.phy.header import (
    HEADER_BITS,
    crc_ok,
    crc_ok_batch,
    decode_header_bits,
    decode_header_llr,
    encode_header_bits,
    header_symbols,
    parse_header_bits,
)
from hil.phy.ofdm import demodulate, map_resources, modulate
from hil.phy.sequences import header_scrambler, lts_time, sts_time

from .helpers import FP

CFG = OfdmConfig()


def test_default_numerology_is_80211a_like():
    assert (CFG.fft_size, CFG.cp_len, CFG.n_data, len(CFG.pilots)) == (64, 16, 48, 4)
    assert CFG.max_cfo_hz >= 96e3  # +-40 ppm of 2.4 GHz


def test_cyclic_prefix_equals_symbol_tail(gen):
    grid = torch.randn(2, 5, 64, dtype=torch.complex128, generator=gen)
    x = modulate(CFG, grid).reshape(2, 5, 80)
    torch.testing.assert_close(x[..., :16], x[..., -16:], atol=0, rtol=0)


def test_modulate_demodulate_identity(gen):
    grid = torch.randn(3, 7, 64, dtype=torch.complex64, generator=gen)
    x = modulate(CFG, grid)
    cfg0 = OfdmConfig(fft_backoff=0)
    assert (demodulate(cfg0, x, 7) - grid).abs().max() < 1e-5
    # with the FFT window b samples early, each bin turns by exp(-j 2 pi k b / N)
    k = torch.arange(64)
    ph = torch.exp(-2j * torch.pi * k * CFG.fft_backoff / 64).to(torch.complex64)
    assert (demodulate(CFG, x, 7) - grid * ph).abs().max() < 1e-5


def test_resource_map_places_data_and_pilots(gen):
    data = torch.randn(1, 2, 48, dtype=torch.complex64, generator=gen)
    g = map_resources(CFG, data) / np.sqrt(64 / 52)
    torch.testing.assert_close(g[..., CFG.bins(CFG.data_carriers)], data)
    assert torch.all(g[..., CFG.bins(CFG.pilot_carriers)].abs() == 1)
    unused = np.setdiff1d(np.arange(64), CFG.bins(CFG.used))
    assert torch.all(g[..., unused] == 0)


def test_preamble_structure():
    sts, lts = sts_time(CFG), lts_time(CFG)
    assert sts.dtype == np.complex64 and lts.dtype == np.complex64
    np.testing.assert_array_equal(sts[:16], sts[16:32])
    np.testing.assert_array_equal(lts[32:96], lts[96:160])
    np.testing.assert_array_equal(lts[:32], lts[128:160])
    assert abs(np.mean(np.abs(sts) ** 2) - 1) < 1e-5
    assert abs(np.mean(np.abs(lts) ** 2) - 1) < 1e-2


def test_frame_dtype_length_and_differentiable(gen):
    fb = FrameBuilder(CFG)
    s = torch.randn(2, 100, dtype=torch.complex64, generator=gen, requires_grad=True)
    x = fb.build(s)
    assert x.dtype == torch.complex64 and x.shape == (2, CFG.frame_len(100))
    x.abs().pow(2).sum().backward()
    assert s.grad is not None and s.grad.abs().sum() > 0
    h = Header(seq=1, item_id=2, fingerprint=FP, payload_len=100, shape=(3, 8, 8))
    xn = fb.build_numpy(s[0].detach().numpy(), h)
    assert xn.dtype == np.complex64 and xn.shape == (CFG.frame_len(100),)


def test_full_scale_peak_limit_and_papr_clipping(gen):
    fb = FrameBuilder(CFG)
    s = torch.randn(1, 480, dtype=torch.complex64, generator=gen)
    x = fb.build(s)[0].numpy()
    y, st = to_full_scale(x, rms_dbfs=-3.0)
    assert y.dtype == np.complex64
    assert np.abs(y).max() <= 1.0 + 1e-6
    assert st["clipped_fraction"] > 0  # -3 dBFS RMS with ~10 dB PAPR must clip
    y2, st2 = to_full_scale(x, rms_dbfs=-15.0, clip_papr_db=7.0)
    # the clip level is 7 dB above the unclipped RMS
    assert np.abs(y2).max() <= 10 ** ((-15.0 + 7.0) / 20) * (1 + 1e-5)
    assert st2["papr_in_db"] > st2["papr_out_db"] and st2["clipped_fraction"] > 0


def _hdr(**kw):
    d = dict(
        seq=123456,
        item_id=42,
        fingerprint=FP,
        payload_len=512,
        shape=(3, 32, 32),
        chunk_index=1,
        chunk_count=4,
    )
    d.update(kw)
    return Header(**d)


@pytest.mark.parametrize(
    "h",
    [
        _hdr(),
        _hdr(seq=2**32 - 1, item_id=0, shape=(1, 65535, 1), chunk_index=0, chunk_count=1, scheme=7),
    ],
)
def test_header_frame_parse_identity(h):
    assert Header.unpack(h.pack()) == h
    llr = 10.0 * header_symbols(h, CFG).ravel()
    assert decode_header_llr(llr, CFG) == h


def test_crc_catches_every_single_bit_error():
    raw = np.frombuffer(_hdr().pack(), np.uint8)
    bits = np.unpackbits(raw)
    for i in range(HEADER_BITS):
        b = bits.copy()
        b[i] ^= 1
        with pytest.raises(HeaderError):
            Header.unpack(np.packbits(b).tobytes())


@pytest.mark.parametrize(
    ("data", "match"),
    [(b"", "35 bytes"), (b"\x00" * 35, "CRC"), ("text", "bytes")],
)
def test_bad_header_bytes_give_clear_errors(data, match):
    with pytest.raises(HeaderError, match=match):
        Header.unpack(data)


def test_header_field_validation():
    with pytest.raises(HeaderError, match="chunk_index"):
        _hdr(chunk_index=4, chunk_count=4)
    with pytest.raises(HeaderError, match="fingerprint"):
        _hdr(fingerprint=b"short")
    with pytest.raises(HeaderError, match="seq"):
        _hdr(seq=-1)


def test_conv_code_round_trip_and_corrects_errors(rng):
    bits = rng.integers(0, 2, 300).astype(np.uint8)
    coded = conv_encode(bits)
    llr = 4.0 * (1 - 2.0 * coded)
    flip = rng.choice(len(llr), 12, replace=False)  # scattered hard errors
    llr[flip] *= -1
    np.testing.assert_array_equal(viterbi_decode(llr), bits)


def test_interleaver_spreads_bits_across_subcarriers():
    p = interleaver(572)
    assert len(set(p.tolist())) == 572 and p.min() >= 0 and p.max() < 576  # into 12 x 48
    sym, k = p // 48, p % 48
    for s in range(11):  # each full symbol: 48 consecutive bits, every data index once
        assert sorted(k[sym == s].tolist()) == list(range(48))
        assert (sym[48 * s : 48 * s + 48] == s).all()
    gap = np.abs(np.diff(k[:48]))
    assert np.minimum(gap, 48 - gap).min() == 7  # neighbours 7 data subcarriers apart
    for lag in range(1, 7):  # bits up to 6 apart: >= 6 subcarriers apart
        d = np.abs(k[lag:48] - k[: 48 - lag])
        assert np.minimum(d, 48 - d).min() >= 6, lag
    assert interleaver(100, 49).tolist()[:3] == [0, 8, 16]  # 7 divides 49: stride 8
    with pytest.raises(ValueError):
        interleaver(0)


def test_viterbi_batch_equals_single(rng):
    bits = rng.integers(0, 2, (5, 120)).astype(np.uint8)
    llr = (
        np.stack([4.0 * (1 - 2.0 * conv_encode(b)) for b in bits]) + rng.normal(size=(5, 252)) * 2.5
    )
    batch = viterbi_decode(llr)
    for i in range(5):
        np.testing.assert_array_equal(batch[i], viterbi_decode(llr[i]))


def test_hard_inversion_fast_path(rng):
    from hil.phy.coding import invert_hard

    bits = rng.integers(0, 2, 200).astype(np.uint8)
    coded = conv_encode(bits)
    np.testing.assert_array_equal(invert_hard(coded), bits)
    for i in (0, 17, len(coded) - 1):  # any single error: not a codeword
        bad = coded.copy()
        bad[i] ^= 1
        assert invert_hard(bad) is None


def test_hard_inversion_batched_rows_are_independent(rng):
    """Codewords of random bits, half of them with one bit flipped anywhere (tail included):
    exactly the clean rows are accepted, each with its own input bits."""
    from hil.phy.coding import invert_hard_batch

    bits = rng.integers(0, 2, (40, 104)).astype(np.uint8)
    coded = np.stack([conv_encode(b) for b in bits])
    flipped = np.arange(40) % 2 == 1
    where = rng.integers(0, coded.shape[1], 40)
    coded[flipped, where[flipped]] ^= 1
    out, ok = invert_hard_batch(coded.astype(bool))
    np.testing.assert_array_equal(ok, ~flipped)
    np.testing.assert_array_equal(out[~flipped], bits[~flipped])
    with pytest.raises(ValueError, match="even L"):
        invert_hard_batch(coded[:, :-1])


def test_every_one_byte_corruption_of_the_header_is_refused():
    """Any byte of the 35 (fields and CRC) replaced by any other value: refused, never parsed
    into a different header."""
    good = _hdr().pack()
    for i in range(len(good)):
        for v in range(256):
            if v == good[i]:
                continue
            with pytest.raises(HeaderError):
                Header.unpack(good[:i] + bytes([v]) + good[i + 1 :])


# --- the header's fields, CRC and coding, stated exactly (mutation testing, docs/mutation.md)

_FIELD_MAX = [
    ("version", 255),
    ("scheme", 255),
    ("seq", 2**32 - 1),
    ("item_id", 2**32 - 1),
    ("payload_len", 2**32 - 1),
    ("channels", 255),
    ("height", 65535),
    ("width", 65535),
    ("chunk_count", 65535),
]


def _with(name, v):
    """_hdr() with one field set (shape parts by name; chunk_index stays below the count)."""
    shape = {"channels": 0, "height": 1, "width": 2}
    if name in shape:
        s = [3, 32, 32]
        s[shape[name]] = v
        return _hdr(shape=tuple(s))
    if name == "chunk_count":
        return _hdr(chunk_index=0, chunk_count=v)
    return _hdr(**{name: v})


@pytest.mark.parametrize(("name", "hi"), _FIELD_MAX)
def test_each_field_takes_its_full_range_and_not_one_more(name, hi):
    if name != "version":  # any other version is refused by unpack (test below)
        h = _with(name, hi)
        assert Header.unpack(h.pack()) == h
    for bad in (hi + 1, -1):
        with pytest.raises(HeaderError) as e:
            _with(name, bad)
        assert str(e.value) == f"{name}={bad} outside 0..{hi}"


def test_chunk_index_range_and_shape_messages():
    h = _hdr(chunk_index=65534, chunk_count=65535)
    assert Header.unpack(h.pack()) == h
    with pytest.raises(HeaderError) as e:
        _hdr(chunk_index=65536, chunk_count=65535)
    assert str(e.value) == "chunk_index=65536 outside 0..65535"
    with pytest.raises(HeaderError) as e:
        _hdr(shape=(3, 32))
    assert str(e.value) == "shape must be (C, H, W), got (3, 32)"


def test_unpack_error_messages_are_exact():
    good = _hdr().pack()
    with pytest.raises(HeaderError) as e:
        Header.unpack("x" * 35)
    assert str(e.value) == "header must be bytes, got str"
    with pytest.raises(HeaderError) as e:
        Header.unpack(good[:-1] + bytes([good[-1] ^ 1]))
    assert str(e.value) == "header CRC mismatch"
    with pytest.raises(HeaderError) as e:
        Header.unpack(_hdr(version=1).pack())
    assert str(e.value) == "header format version 1, this receiver speaks 3"


def test_headers_whose_crc_has_the_top_bit_set_are_accepted(monkeypatch):
    """The CRC is unsigned: about half of all headers have CRC >= 2**31. They parse from bytes,
    decode on the fast hard-decision path when clean (Viterbi never called) and through
    Viterbi with one hard error."""
    import hil.phy.header as hh

    calls = []

    def spy(llr):
        calls.append(len(llr))
        return viterbi_decode(llr)

    monkeypatch.setattr(hh, "viterbi_decode", spy)
    high = 0
    for seq in range(16):
        h = _hdr(seq=seq)
        raw = h.pack()
        high += raw[hh.BODY_LEN] >= 0x80
        assert Header.unpack(raw) == h
        clean = _coded_llr(h)
        np.testing.assert_array_equal(hh.decode_header_bits(clean[None], CFG)[0], _truth_bits(h))
        assert calls == []
        clean[interleaver(572)[5]] *= -1  # one hard error: not a codeword, Viterbi decides
        np.testing.assert_array_equal(hh.decode_header_bits(clean[None], CFG)[0], _truth_bits(h))
        assert calls == [1]
        calls.clear()
    assert 4 <= high <= 12


def test_to_dict():
    assert _hdr(scheme=3).to_dict() == {
        "seq": 123456,
        "item_id": 42,
        "fingerprint": "0102030405060708",
        "payload_len": 512,
        "shape": [3, 32, 32],
        "chunk_index": 1,
        "chunk_count": 4,
        "scheme": 3,
        "version": 3,
    }


def test_header_bits_and_symbols_are_exact():
    from hil.phy.header import encode_header_bits

    h = _hdr()
    bits = encode_header_bits(h, CFG)
    assert bits.dtype == np.uint8 and bits.shape == (CFG.header_symbols * CFG.n_data,)
    coded = conv_encode(np.unpackbits(np.frombuffer(h.pack(), np.uint8)))
    p = interleaver(572)
    scr = header_scrambler(bits.size)  # m_{i mod 127}: the pilots' m-sequence, as bits
    assert np.array_equal(scr[:8], [0, 0, 0, 0, 1, 1, 1, 0]) and np.array_equal(
        scr[127:135], scr[:8]
    )
    np.testing.assert_array_equal(bits[p] ^ scr[p], coded)
    pad = np.setdiff1d(np.arange(bits.size), p)
    assert pad.size == 4 and np.array_equal(bits[pad], scr[pad])  # zero padding, scrambled
    sym = header_symbols(h, CFG)
    assert sym.shape == (CFG.header_symbols, CFG.n_data)
    np.testing.assert_array_equal(sym.ravel(), np.where(bits == 1, -1.0, 1.0))


def test_header_capacity_exact_fit_and_the_shortfall_message():
    from types import SimpleNamespace

    from hil.phy.header import decode_header_bits, encode_header_bits

    exact = SimpleNamespace(header_symbols=11, n_data=52)  # 572 coded bits, no padding
    h = _hdr()
    bits = encode_header_bits(h, exact)
    assert bits.shape == (572,)
    llr = 1.0 - 2.0 * bits[None].astype(np.float64)
    assert Header.unpack(np.packbits(decode_header_bits(llr, exact)[0]).tobytes()) == h
    with pytest.raises(ValueError) as e:
        encode_header_bits(h, OfdmConfig(header_symbols=11))
    assert str(e.value) == (
        "header needs 572 coded bits but 11 symbols carry 528; raise header_symbols to 12"
    )


def _coded_llr(h, scale=1.0):
    from hil.phy.header import encode_header_bits

    return scale * (1.0 - 2.0 * encode_header_bits(h, CFG).astype(np.float64))


def _truth_bits(h):
    return np.unpackbits(np.frombuffer(h.pack(), np.uint8))


def test_decode_header_bits_batch_mixes_fast_path_viterbi_and_garbage(monkeypatch):
    """Row 0 clean (hard decisions are a codeword), row 1 with three hard errors (Viterbi
    corrects them), row 2 noise: output [3, HEADER_BITS] uint8, rows 0 and 1 the truth, and
    only the rows that need it go through Viterbi."""
    import hil.phy.header as hh

    calls = []

    def spy(llr):
        calls.append(len(llr))
        return viterbi_decode(llr)

    monkeypatch.setattr(hh, "viterbi_decode", spy)
    h0, h1 = _hdr(seq=7), _hdr(seq=8)
    noisy = _coded_llr(h1)
    noisy[interleaver(572)[[20, 200, 400]]] *= -1
    junk = np.random.default_rng(3).normal(size=noisy.shape)
    out = hh.decode_header_bits(np.stack([_coded_llr(h0), noisy, junk]), CFG)
    assert out.dtype == np.uint8 and out.shape == (3, HEADER_BITS)
    np.testing.assert_array_equal(out[0], _truth_bits(h0))
    np.testing.assert_array_equal(out[1], _truth_bits(h1))
    with pytest.raises(HeaderError):
        hh.parse_header_bits(out[2])
    assert calls == [2]  # rows 1 and 2 together
    calls.clear()
    # weak but clean LLRs (|llr| = 0.5) still take the fast path and decode exactly
    np.testing.assert_array_equal(
        hh.decode_header_bits(_coded_llr(h0, 0.5)[None], CFG)[0], _truth_bits(h0)
    )
    assert calls == []


def test_decode_header_bits_erasures_and_huge_llrs():
    """Non-finite LLRs are erasures (zero), not votes; finite LLRs near the float64 limit
    saturate instead of overflowing the path metrics."""
    from hil.phy.header import decode_header_bits

    h = _hdr(seq=99)
    truth = _truth_bits(h)
    llr = _coded_llr(h, 1e-3)
    perm = interleaver(572)
    ones = perm[np.flatnonzero(llr[perm] < 0)][::3]  # every third coded 1: ~16 % erased
    for bad in (np.inf, np.nan):
        x = llr.copy()
        x[ones] = bad
        np.testing.assert_array_equal(decode_header_bits(x[None], CFG)[0], truth)
    x = _coded_llr(h, 1e308)
    x[perm[[10, 300]]] *= -1
    np.testing.assert_array_equal(decode_header_bits(x[None], CFG)[0], truth)


def test_decode_header_bits_shape_errors():
    from hil.phy.header import decode_header_bits

    for bad in (np.zeros(576), np.zeros((1, 575))):
        with pytest.raises(ValueError) as e:
            decode_header_bits(bad, CFG)
        assert str(e.value) == f"expected [B, 576] header LLRs, got {bad.shape}"


def test_decode_header_llr_errors_and_float_bits():
    from hil.phy.header import parse_header_bits

    with pytest.raises(HeaderError) as e:
        decode_header_llr(np.zeros(5), CFG)
    assert str(e.value) == "expected 576 header LLRs, got 5"
    llr = _coded_llr(_hdr())
    llr[3] = np.nan
    with pytest.raises(HeaderError) as e:
        decode_header_llr(llr, CFG)
    assert str(e.value) == "non-finite header LLRs"
    # hard bits given as floats (a thresholded tensor) parse like uint8 bits
    assert parse_header_bits(_truth_bits(_hdr()).astype(np.float32)) == _hdr()


# --- the convolutional code against its definition (mutation testing, docs/mutation.md)


def test_conv_code_impulse_response_is_the_generators():
    """One 1 then the six-zero tail: the output pairs are the taps of 133 and 171 (octal),
    1011011 and 1111001, as in 802.11a. (The trellis is built afresh: it is cached.)"""
    from hil.phy import coding

    coding._trellis.cache_clear()
    g0, g1 = [1, 0, 1, 1, 0, 1, 1], [1, 1, 1, 1, 0, 0, 1]
    expect = [b for pair in zip(g0, g1, strict=True) for b in pair]
    np.testing.assert_array_equal(conv_encode(np.array([1])), expect)
    coded = conv_encode(np.array([1, 0, 1]))  # linear: the sum of shifted impulse responses
    shifted = np.zeros(2 * 9, np.uint8)
    shifted[0:14] ^= np.array(expect, np.uint8)
    shifted[4:18] ^= np.array(expect, np.uint8)
    np.testing.assert_array_equal(coded, shifted)


def test_viterbi_shapes_and_input_errors():
    bits = np.array([1, 0, 1, 1], np.uint8)
    llr = 1.0 - 2.0 * conv_encode(bits)
    single = viterbi_decode(llr)
    assert single.shape == (4,) and single.dtype == np.uint8
    np.testing.assert_array_equal(single, bits)
    np.testing.assert_array_equal(viterbi_decode(llr[None].repeat(2, 0)), [bits, bits])
    np.testing.assert_array_equal(viterbi_decode(1.0 - 2.0 * conv_encode([1])), [1])
    # (a 1-D input is reported with its batch axis added)
    for bad, shape in (((12,), (1, 12)), ((15,), (1, 15)), ((2, 12), (2, 12)), ((1, 2, 14),) * 2):
        with pytest.raises(ValueError) as e:
            viterbi_decode(np.zeros(bad))
        assert str(e.value) == f"llr must be [L] or [B, L] with even L >= 14, got {shape}"


def test_viterbi_prefers_the_stronger_evidence():
    """Soft decisions: two weak wrong LLRs lose against the strong right ones of a codeword."""
    bits = np.random.default_rng(9).integers(0, 2, 40).astype(np.uint8)
    llr = 5.0 * (1.0 - 2.0 * conv_encode(bits))
    llr[[3, 4]] = -0.1 * np.sign(llr[[3, 4]])
    np.testing.assert_array_equal(viterbi_decode(llr), bits)


def test_hard_inversion_needs_the_zero_tail():
    from hil.phy.coding import invert_hard

    bits = np.array([1, 1, 0, 1, 0, 0, 1], np.uint8)
    # a codeword of bits + 100000 without its own tail: the last six inputs are not zero
    open_end = conv_encode(np.r_[bits, 1, 0, 0, 0, 0, 0])[:-12]
    assert len(open_end) == 2 * (len(bits) + 6)
    assert invert_hard(open_end) is None
    np.testing.assert_array_equal(invert_hard(conv_encode(bits)), bits)


def test_repetition_reference_code():
    from hil.phy.coding import repetition_decode, repetition_encode

    np.testing.assert_array_equal(repetition_encode(np.array([1, 0, 1])), [1, 1, 0, 0, 1, 1])
    np.testing.assert_array_equal(repetition_encode([1, 0], times=3), [1, 1, 1, 0, 0, 0])
    assert repetition_encode([1, 0]).dtype == np.uint8
    llr = np.array([2.0, -3.0, -1.0, 0.5, 0.0, 0.0])
    out = repetition_decode(llr)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, [1, 1, 0])  # sums -1, -0.5, 0 (a tie is a 0)
    np.testing.assert_array_equal(repetition_decode(llr, times=3), [1, 0])


def test_interleaver_definition_small():
    from hil.phy.coding import interleaver, interleaver_step

    # n_data 10: stride 7, bit i -> 10 (i // 10) + 7 i mod 10
    np.testing.assert_array_equal(interleaver(13, 10), [0, 7, 4, 1, 8, 5, 2, 9, 6, 3, 10, 17, 14])
    assert [interleaver_step(d) for d in (48, 49, 14, 52, 1)] == [7, 8, 9, 7, 7]
    p = interleaver(40)  # default 48 data subcarriers, one partial symbol
    np.testing.assert_array_equal(p[:8], [0, 7, 14, 21, 28, 35, 42, 1])


def test_code_takes_bits_of_any_dtype():
    from hil.phy.coding import invert_hard

    bits = np.array([1, 0, 0, 1, 1, 0, 1], np.uint8)
    coded = conv_encode(bits)
    np.testing.assert_array_equal(conv_encode(bits.astype(np.float32)), coded)
    np.testing.assert_array_equal(conv_encode(bits.astype(bool)), coded)
    out = invert_hard(coded.astype(np.float64))
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, bits)


def test_viterbi_knows_the_encoder_starts_in_state_zero():
    """The first two coded pairs very reliable, the rest weak: from any other start state the
    best path would flip an early bit to match them."""
    bits = np.random.default_rng(4).integers(0, 2, 30).astype(np.uint8)
    sign = 1.0 - 2.0 * conv_encode(bits)
    llr = 1.0 * sign
    llr[:4] = 100.0 * sign[:4]
    np.testing.assert_array_equal(viterbi_decode(llr), bits)


def test_list_viterbi_paths_are_distinct_ranked_and_scored(rng):
    from hil.phy.coding import list_viterbi_decode

    bits = rng.integers(0, 2, (6, 90)).astype(np.uint8)
    llr = np.stack([2.0 * (1 - 2.0 * conv_encode(b)) for b in bits]) + rng.normal(size=(6, 192)) * 2
    paths, metric = list_viterbi_decode(llr, 8)
    assert paths.shape == (6, 8, 90) and metric.shape == (6, 8) and paths.dtype == np.uint8
    np.testing.assert_array_equal(paths[:, 0], viterbi_decode(llr))  # path 0: the Viterbi path
    assert np.isfinite(metric).all() and (np.diff(metric, axis=1) <= 1e-9).all()
    for i in range(6):
        assert len({p.tobytes() for p in paths[i]}) == 8  # eight different paths
        for r in (0, 3, 7):  # the metric is the correlation of the path's codeword
            c = 1 - 2.0 * conv_encode(paths[i, r])
            assert metric[i, r] == pytest.approx((c * llr[i]).sum())
    one, m1 = list_viterbi_decode(llr[0], 8)  # unbatched
    np.testing.assert_array_equal(one, paths[0])
    np.testing.assert_array_equal(m1, metric[0])
    # 2 input bits: only 4 paths exist; the other ranks are marked -inf
    short, ms = list_viterbi_decode(2.0 * (1 - 2.0 * conv_encode(np.array([1, 0]))), 8)
    assert np.isfinite(ms).sum() == 4 and len({p.tobytes() for p in short[:4]}) == 4
    for bad in (0, 65):
        with pytest.raises(ValueError, match="n_list"):
            list_viterbi_decode(llr, bad)


def test_list_viterbi_reads_headers_the_viterbi_path_gets_wrong(rng):
    """Headers at Es/N0 -1.5 dB per BPSK symbol (bench_phy.py --only header: the list
    decoder halves the header error rate or better there); no wrong header is accepted."""
    cfg = OfdmConfig()
    n, n0 = 200, 10**0.15
    plain = listed = wrong = 0
    for i in range(n):
        h = _hdr(seq=int(rng.integers(1 << 31)), item_id=i)
        x = 1 - 2.0 * encode_header_bits(h, cfg).astype(np.float64)
        llr = (4 * (x + rng.normal(size=x.shape) * np.sqrt(n0 / 2)) / n0)[None]
        for n_list, count in ((1, "plain"), (16, "listed")):
            try:
                got = parse_header_bits(decode_header_bits(llr, cfg, n_list)[0])
            except HeaderError:
                continue
            if got != h:
                wrong += 1
            elif count == "plain":
                plain += 1
            else:
                listed += 1
    assert wrong == 0
    assert listed >= plain  # the list only adds headers
    assert n - listed <= 0.6 * (n - plain), (plain, listed)


def test_list_decoding_in_batches_matches_one_by_one(rng):
    """More failed headers than one list-decoding batch (32; at Es/N0 -2.5 dB most Viterbi
    paths fail the CRC): every row decoded as alone, and the list reads some of them."""
    cfg = OfdmConfig()
    n0 = 10**0.25
    llrs = []
    for i in range(48):
        x = 1 - 2.0 * encode_header_bits(_hdr(item_id=i), cfg).astype(np.float64)
        llrs.append(4 * (x + rng.normal(size=x.shape) * np.sqrt(n0 / 2)) / n0)
    llr = np.stack(llrs)
    batch = decode_header_bits(llr, cfg)
    plain = decode_header_bits(llr, cfg, n_list=1)
    crc = [crc_ok(b) for b in plain]
    assert crc.count(False) > 32
    assert sum(crc_ok(b) for b in batch) > crc.count(True)
    for i in range(48):
        np.testing.assert_array_equal(batch[i], decode_header_bits(llr[i : i + 1], cfg)[0])


def test_a_list_of_two_paths_is_a_list(rng):
    """n_list = 2 already decodes again: it reads headers whose Viterbi path fails the CRC."""
    cfg = OfdmConfig()
    n0 = 10**0.25
    llr = np.stack(
        [
            4 * (x + rng.normal(size=x.shape) * np.sqrt(n0 / 2)) / n0
            for x in (
                1 - 2.0 * encode_header_bits(_hdr(item_id=i), cfg).astype(np.float64)
                for i in range(100)
            )
        ]
    )
    plain = sum(crc_ok(b) for b in decode_header_bits(llr, cfg, n_list=1))
    two = sum(crc_ok(b) for b in decode_header_bits(llr, cfg, n_list=2))
    assert two > plain


def test_header_from_dict_inverts_to_dict():
    h = _hdr()
    d = h.to_dict()
    assert Header.from_dict(d) == h
    assert Header.from_dict(dict(d, shape=list(h.shape))) == h
    with pytest.raises(ValueError):
        Header.from_dict(dict(d, fingerprint="zz" * 8))
    with pytest.raises(HeaderError):
        Header.from_dict(dict(d, payload_len=-1))


def test_header_prior_names_exactly_the_bits_a_receiver_knows():
    from hil.phy.header import HEADER_BITS, PLAUSIBLE, HeaderPrior, _field_bits, _tiers

    h = Header(
        seq=70_000,
        item_id=3 << 16 | 9,
        fingerprint=FP,
        payload_len=480,
        shape=(3, 40, 24),
        chunk_index=2,
        chunk_count=5,
        scheme=7,
    )
    bits = np.unpackbits(np.frombuffer(h.pack(), np.uint8))
    bare = HeaderPrior().known_bits()
    assert bare.shape == (HEADER_BITS,) and np.array_equal(np.flatnonzero(bare >= 0), range(8))
    assert np.array_equal(bare[:8], bits[:8])  # the version
    p = HeaderPrior(FP, max_payload=4800).after(h)
    assert (p.last, p.fingerprint, p.max_payload) == (h, FP, 4800)
    static, hist = p.known_bits(history=False), p.known_bits()
    for kn in (static, hist):
        assert np.array_equal(kn[kn >= 0], bits[kn >= 0])
    # version 8, fingerprint 64, payload_len's 19 high zero bits (4800 < 2^13)
    assert (static >= 0).sum() == 8 + 64 + 19
    assert np.array_equal(np.flatnonzero(static[144:176] >= 0), range(19))
    # and from the last header: scheme 8, seq and item id high halves 16 + 16, all 32 of
    # payload_len, shape 40, chunk count 16; never the CRC, the low halves, the chunk index
    assert (hist >= 0).sum() == 8 + 64 + 8 + 16 + 16 + 32 + 40 + 16
    never = [(16 + 16, 16), (48 + 16, 16), _field_bits(9), (HEADER_BITS - 32, 32)]
    assert all((hist[a : a + n] == -1).all() for a, n in never)
    # the plausible tier: the static bits and the high zeros of PLAUSIBLE's fields (seq and
    # item id under 2^24, at most 3 channels, sides under 8192, fewer than 4096 chunks),
    # never the last header's
    plaus = p.known_bits(history=False, plausible=True)
    assert (plaus >= 0).sum() == (static >= 0).sum() + 8 + 8 + 6 + 3 + 3 + 4 + 4
    assert np.array_equal(plaus[static >= 0], static[static >= 0])
    assert np.array_equal(plaus[plaus >= 0], bits[plaus >= 0])  # h lies within the bounds
    for index, zeros in PLAUSIBLE.items():
        at, n = _field_bits(index)
        assert (plaus[at : at + zeros] == 0).all() and (plaus[at + zeros : at + n] == -1).all()
    assert np.array_equal(p.known_bits(history=True, plausible=True)[plaus >= 0], plaus[plaus >= 0])
    assert [t.tolist() for t in _tiers(p)] == [hist.tolist(), plaus.tolist(), static.tolist()]
    cold = HeaderPrior(FP, max_payload=4800)  # no last header: no history tier
    assert [t.tolist() for t in _tiers(cold)] == [plaus.tolist(), static.tolist()]
    with pytest.raises(ValueError, match="fingerprint"):
        HeaderPrior(b"short")
    with pytest.raises(ValueError, match="max_payload"):
        HeaderPrior(max_payload=2**32)
    with pytest.raises(ValueError, match="last"):
        HeaderPrior(last=h.pack())


def test_header_prior_reads_headers_the_plain_decoder_loses_and_never_a_wrong_one(monkeypatch):
    """BPSK coded header bits at -2.5 dB Es/N0 (AWGN): the decoder held to the receiver's
    prior reads more headers than without it (measured: 140 of 300 without, 218 with what is
    known of every header, 278 with what is plausible of any header too, 292 with the last
    header's); headers of another model (a fingerprint the prior does not expect, nor its
    last header) are read as well as without a prior, and no header is ever read wrong."""
    from hil.phy import header as hdr_mod
    from hil.phy.header import HeaderPrior

    full = hdr_mod._tiers

    def implausible(prior):  # the tiers without the plausible one
        return [t for t in full(prior) if not np.array_equal(t, prior.known_bits(False, True))]

    cfg = OfdmConfig()
    rng = np.random.default_rng(3)
    other = b"\xaa" * 8
    last = Header(seq=7, item_id=1, fingerprint=FP, payload_len=480, shape=(3, 8, 8))
    static = HeaderPrior(FP, max_payload=4800)
    for fp in (FP, other):
        hs = [
            Header(seq=i, item_id=i // 4, fingerprint=fp, payload_len=480, shape=(3, 8, 8))
            for i in range(300)
        ]
        s = np.stack([1.0 - 2.0 * encode_header_bits(h, cfg) for h in hs])
        sigma2 = 10 ** (2.5 / 10) / 2  # per real dimension: Es/N0 = 1 / (2 sigma2)
        y = s + rng.normal(size=s.shape) * np.sqrt(sigma2)
        llr = 2 * y / sigma2
        counts = []
        runs = ((None, full), (static, implausible), (static, full), (static.after(last), full))
        for p, tiers in runs:
            monkeypatch.setattr(hdr_mod, "_tiers", tiers)
            ok = 0
            for h, b in zip(hs, decode_header_bits(llr, cfg, prior=p), strict=True):
                try:
                    got = parse_header_bits(b)
                except HeaderError:
                    continue
                assert got == h
                ok += 1
            counts.append(ok)
        if fp == FP:
            assert counts[1] >= counts[0] + 40 and counts[2] >= counts[1] + 40, counts
            assert counts[3] >= counts[2] + 10, counts
        else:
            assert counts[3] == counts[2] == counts[1] == counts[0], counts


@pytest.mark.parametrize("payload", ["flat", "ramp"])
def test_structured_content_does_not_pile_up_into_peaks_full_scale_clips(payload):
    """Frame format 3 rotates the payload by the scrambler: a flat JSCC tile (every symbol
    equal) and a phase ramp across the subcarriers, behind a header of mostly zero fields, stay under 12 dB PAPR, so hil tx's -12 dBFS RMS clips none of them.
    With the rotation undone beforehand (the waveform format 2 sent) the same payloads clip."""
    from hil.phy.sequences import payload_phases

    k = 480
    s = {
        "flat": np.ones(k),
        "ramp": np.exp(2j * np.pi * np.arange(k) / 7),
    }[payload].astype(np.complex64)
    h = Header(seq=0, item_id=0, fingerprint=bytes(8), payload_len=k, shape=(3, 32, 32))
    fb = FrameBuilder(CFG)
    _, st = to_full_scale(fb.build_numpy(s, h), -12.0)
    assert st["papr_in_db"] < 12.0 and st["clipped_fraction"] == 0.0, st
    unrotated = (s * np.conj(payload_phases(k))).astype(np.complex64)
    _, st2 = to_full_scale(fb.build_numpy(unrotated, h), -12.0)
    assert st2["papr_in_db"] > 14.0 and st2["clipped_fraction"] > 0.002, st2


def test_code_header_bits_one_row_or_many_and_the_shape_check():
    """Raw bits -> the bits on the air, for one header [HEADER_BITS] or a batch [B, HEADER_BITS],
    a CRC that fails coded as it is; any other shape is refused with its shape named."""
    from hil.phy.header import HEADER_BITS, code_header_bits

    hs = [_hdr(item_id=i) for i in range(3)]
    raw = np.stack([np.unpackbits(np.frombuffer(h.pack(), np.uint8)) for h in hs])
    one = code_header_bits(raw[1], CFG)
    assert one.dtype == np.uint8 and one.shape == (CFG.header_symbols * CFG.n_data,)
    assert np.array_equal(one, encode_header_bits(hs[1], CFG))
    many = code_header_bits(raw.astype(np.int64), CFG)
    assert many.dtype == np.uint8 and many.shape == (3, CFG.header_symbols * CFG.n_data)
    for i, h in enumerate(hs):
        assert np.array_equal(many[i], encode_header_bits(h, CFG))
    bad = raw[0].copy()
    bad[-1] ^= 1  # the CRC no longer matches: still coded, bit for bit
    coded = code_header_bits(bad, CFG)
    assert (coded != one).sum() > 0 and not crc_ok(bad)
    for shape in [(HEADER_BITS - 1,), (2, HEADER_BITS + 1), (1, 2, HEADER_BITS), ()]:
        with pytest.raises(ValueError) as e:
            code_header_bits(np.zeros(shape, np.uint8), CFG)
        assert str(e.value) == (f"bits must be [{HEADER_BITS}] or [B, {HEADER_BITS}], got {shape}")


def test_header_prior_checks_its_fields_at_the_bounds():
    from hil.phy.header import HEADER_BITS, HeaderPrior

    assert HeaderPrior(max_payload=2**32 - 1).known_bits()[144:176].tolist() == [-1] * 32
    assert HeaderPrior(max_payload=0).known_bits()[144:176].tolist() == [0] * 32
    assert (HeaderPrior(max_payload=1).known_bits()[144:176] == 0).sum() == 31
    for bad, msg in [
        ({"fingerprint": bytearray(8)}, "fingerprint must be 8 bytes or None, got bytearray"),
        ({"fingerprint": bytes(7)}, "fingerprint must be 8 bytes or None"),
        ({"fingerprint": bytes(9)}, "fingerprint must be 8 bytes or None"),
        ({"max_payload": -1}, "max_payload must be in 0..2^32 - 1, got -1"),
        ({"max_payload": 2**32}, "max_payload must be in 0..2^32 - 1, got 4294967296"),
        ({"last": "h"}, "last must be a Header or None, got str"),
    ]:
        with pytest.raises(ValueError) as e:
            HeaderPrior(**bad)
        assert str(e.value).startswith(msg), (bad, str(e.value))
    # no fingerprint: its 64 bits stay unknown, with or without a last header
    h = _hdr()
    kn = HeaderPrior(max_payload=4800).after(h).known_bits()
    assert (kn[80:144] == -1).all() and kn.shape == (HEADER_BITS,) and kn.dtype == np.int64
    bits = np.unpackbits(np.frombuffer(h.pack(), np.uint8))
    assert np.array_equal(kn[kn >= 0], bits[kn >= 0])
    assert HeaderPrior(FP, 4800).after(h).after(_hdr(seq=9)).last == _hdr(seq=9)


def test_scrambled_llrs_are_descrambled_by_sign_only():
    """The receiver flips the sign of each LLR the scrambler inverted and changes nothing else:
    noisy LLRs decode to exactly what the Viterbi decoder makes of them descrambled by hand."""
    from hil.phy.header import HEADER_BITS

    rng = np.random.default_rng(8)
    cap = CFG.header_symbols * CFG.n_data
    x = np.stack([1 - 2.0 * encode_header_bits(_hdr(item_id=i), CFG) for i in range(24)])
    llr = 2 * (x + rng.normal(size=x.shape)) / 1.0  # about 0 dB: many paths differ
    perm = interleaver(2 * (HEADER_BITS + 6), CFG.n_data)
    by_hand = viterbi_decode((llr * (1.0 - 2.0 * header_scrambler(cap)))[:, perm])
    got = decode_header_bits(llr, CFG, n_list=1)
    slow = [i for i in range(len(x)) if not crc_ok(got[i])]  # rows the fast path did not take
    assert len(slow) > 5
    assert np.array_equal(got[slow], by_hand[slow])


def test_the_static_prior_still_reads_when_the_last_header_does_not_match():
    """A last header from another image (other shape and payload length) predicts wrong bits:
    its tier fails the CRC, and the frames are read as well as with the static tier alone;
    when the first tier reads every failing header the decoder stops there and returns them."""
    from hil.phy.header import HeaderPrior

    rng = np.random.default_rng(31)
    hs = [
        Header(seq=i, item_id=i // 4, fingerprint=FP, payload_len=480, shape=(3, 8, 8))
        for i in range(120)
    ]
    s = np.stack([1.0 - 2.0 * encode_header_bits(h, CFG) for h in hs])
    sigma2 = 10 ** (2.5 / 10) / 2
    llr = 2 * (s + rng.normal(size=s.shape) * np.sqrt(sigma2)) / sigma2
    static = HeaderPrior(FP, max_payload=4800)
    other = Header(seq=5, item_id=1, fingerprint=FP, payload_len=96, shape=(3, 64, 48))

    def read(prior, n_list=16):
        return [crc_ok(b) for b in decode_header_bits(llr, CFG, n_list=n_list, prior=prior)]

    alone, mismatched = read(static), read(static.after(other))
    assert alone == mismatched and sum(alone) > sum(read(None)) + 10
    # without the list decoder, only the Viterbi path held to each tier reads them
    assert read(static.after(other), n_list=1) == read(static, n_list=1)
    assert sum(read(static, n_list=1)) > sum(read(None, n_list=1)) + 10
    # a batch the first tier reads completely: decoded bits come back for every row
    match = static.after(hs[0])
    ok = [i for i, v in enumerate(read(match, n_list=1)) if v]
    plain = read(None, n_list=1)
    rows = [i for i in ok if not plain[i]][:3]
    out = decode_header_bits(llr[rows], CFG, n_list=1, prior=match)
    assert out.shape == (len(rows), 280) and all(crc_ok(b) for b in out)


def test_crc_ok_batch_is_crc_ok_row_by_row():
    rng = np.random.default_rng(11)
    good = [
        np.unpackbits(np.frombuffer(Header(i, i, bytes(8), 48, (3, 4, 4)).pack(), np.uint8))
        for i in range(5)
    ]
    bits = np.array([*good, *rng.integers(0, 2, (5, HEADER_BITS), dtype=np.uint8)])
    bits[1, 40] ^= 1  # one flipped bit fails
    want = [crc_ok(b) for b in bits]
    assert want == [True, False, True, True, True] + [False] * 5
    assert crc_ok_batch(bits) == want
    assert crc_ok_batch(bits[:0]) == []
    with pytest.raises(ValueError, match="bits must be"):
        crc_ok_batch(bits[:, :-8])
