"""The separation baseline: source fitting, 5G LDPC + QAM, scheme ids, curves, and a digital frame
through the full link."""

import math

import numpy as np
import pytest
import torch
from scipy.special import erfc

from tests import needs

needs.module("sionna.phy", "pip install -e '.[baseline]'")

from hil.baseline import (
    CODECS,
    MCS_TABLE,
    DigitalCodec,
    best_fit,
    mcs_by_key,
    parse_scheme,
    scheme_id,
)
from hil.baseline.evaluate import adaptive, bound_curve, cliff_snr, digital_curves, max_drop_per_db
from hil.baseline.source import decode, to_uint8
from hil.channel import profile
from hil.jscc.data import fixed_tiles, open_dataset
from hil.phy import Header, OfdmConfig
from hil.phy.header import decode_header_llr, encode_header_bits


@pytest.fixture(scope="module")
def tiles():
    return fixed_tiles(open_dataset("builtin", "test"), 32, 12)[0]


def _awgn(x, snr_db, gen):
    no = 10 ** (-snr_db / 10)
    n = torch.randn(x.shape, generator=gen) + 1j * torch.randn(x.shape, generator=gen)
    return x + (n * math.sqrt(no / 2)).to(x.dtype), torch.full(x.shape, no)


@pytest.mark.parametrize("key", [m.key for m in MCS_TABLE])
def test_ldpc_qam_round_trip_is_error_free_at_high_snr(key):
    codec = DigitalCodec(MCS_TABLE[mcs_by_key(key)], 512)
    rng = np.random.default_rng(1)
    payloads = [
        bytes(rng.integers(0, 256, rng.integers(0, codec.capacity + 1), dtype=np.uint8))
        for _ in range(8)
    ]
    x = codec.encode(payloads)
    assert x.shape == (8, 512) and x.dtype == torch.complex64
    assert abs(float((x.abs() ** 2).mean()) - 1.0) < 0.05  # unit energy, like the JSCC payload
    y, no = _awgn(x, 30.0, torch.Generator().manual_seed(0))
    assert codec.decode(y, no) == payloads


def test_low_snr_is_an_erasure_not_garbage():
    codec = DigitalCodec(MCS_TABLE[mcs_by_key("64QAM-8/9")], 512)
    payloads = [bytes(range(200))] * 16
    y, no = _awgn(codec.encode(payloads), 5.0, torch.Generator().manual_seed(0))
    assert codec.decode(y, no) == [None] * 16  # CRC-32 catches every failed codeword


@pytest.mark.parametrize(
    "bits, snr_db, theory",
    [
        (1, 4.0, lambda es: 0.5 * erfc(math.sqrt(es))),  # BPSK on the real axis of complex noise
        (2, 8.0, lambda es: 0.5 * erfc(math.sqrt(es / 2))),
        (4, 14.0, lambda es: 3 / 8 * erfc(math.sqrt(es / 10))),
        (6, 20.0, lambda es: 7 / 24 * erfc(math.sqrt(es / 42))),
    ],
)
def test_uncoded_qam_ber_matches_theory(bits, snr_db, theory):
    from sionna.phy.mapping import Demapper, Mapper

    ctype = "pam" if bits == 1 else "qam"
    mapper, demapper = Mapper(ctype, bits), Demapper("app", ctype, bits, hard_out=True)
    g = torch.Generator().manual_seed(3)
    b = torch.randint(0, 2, (200, 6000), generator=g).float()
    x = mapper(b)
    y, no = _awgn(x.to(torch.complex64), snr_db, g)
    ber = float((demapper(y, no) != b).float().mean())
    expect = theory(10 ** (snr_db / 10))
    assert abs(ber - expect) / expect < 0.1, (ber, expect)


def test_bit_budget_is_never_exceeded(tiles):
    for mcs in MCS_TABLE:
        codec = DigitalCodec(mcs, 512)
        assert codec.capacity == codec.k // 8 - 6 and codec.k == int(512 * mcs.bits * mcs.rate)
        for img in tiles.numpy():
            f = best_fit(img, codec.capacity)
            if f is not None:
                assert len(f[1]) <= codec.capacity
                assert decode(f[1], img.shape) is not None
        with pytest.raises(ValueError, match="budget"):
            codec.encode([bytes(codec.capacity + 1)])


def test_source_fit_takes_the_best_quality_that_fits(tiles):
    img = tiles[0].numpy()
    small, large = best_fit(img, 120), best_fit(img, 400)
    assert small is not None and large is not None and len(small[1]) <= 120
    ref = to_uint8(img).astype(np.float32).transpose(2, 0, 1) / 255

    def err(b):
        return float(np.mean((decode(b, img.shape) - ref) ** 2))

    assert err(large[1]) < err(small[1])
    assert best_fit(img, 10) is None  # nothing fits 10 bytes: the image is not sent


def test_scheme_ids_round_trip_through_the_header():
    cfg = OfdmConfig()
    seen = set()
    for mi in range(len(MCS_TABLE)):
        for codec in range(len(CODECS)):
            s = scheme_id(mi, codec)
            assert s != 0 and s not in seen and parse_scheme(s) == (mi, codec)
            seen.add(s)
            h = Header(
                seq=1,
                item_id=2,
                fingerprint=b"12345678",
                payload_len=512,
                shape=(3, 32, 32),
                scheme=s,
            )
            llr = 1.0 - 2.0 * encode_header_bits(h, cfg).astype(float)  # noiseless soft bits
            assert decode_header_llr(llr * 10, cfg) == h
    with pytest.raises(ValueError):
        parse_scheme(0)
    with pytest.raises(ValueError, match="unknown MCS"):
        mcs_by_key("256QAM-1/2")


def test_curves_fast_path(tiles):
    snrs = [0.0, 10.0, 25.0]
    idx = [mcs_by_key("QPSK-1/3"), mcs_by_key("16QAM-3/4")]
    d = digital_curves(tiles, OfdmConfig(), profile("awgn"), snrs, 512, idx)
    hi = d["16QAM-3/4"]
    assert (
        hi["by_snr"][25.0]["delivered"] == hi["sent"] > 0.9
    )  # above its cliff: every image intact
    assert hi["by_snr"][0.0]["delivered"] == 0  # below: none
    assert hi["by_snr"][25.0]["psnr_db"] > 30 > hi["by_snr"][0.0]["psnr_db"]
    assert cliff_snr(hi) == 25.0
    ad = adaptive(d, snrs)
    for s in snrs:
        assert ad[s]["psnr_db"] == max(v["by_snr"][s]["psnr_db"] for v in d.values())
    b = bound_curve(tiles, 512, snrs)
    assert b[0.0]["bytes"] == 64 and b[25.0]["bytes"] == int(512 * math.log2(1 + 10**2.5) // 8)
    assert b[0.0]["psnr_db"] < b[10.0]["psnr_db"] < b[25.0]["psnr_db"]
    assert max_drop_per_db({0.0: {"psnr_db": 10}, 1.0: {"psnr_db": 14}, 2.0: {"psnr_db": 15}}) == 4


def test_digital_frames_decode_through_the_full_sim_link(tmp_path):
    from tests.apps.trio import run_trio

    results, s = run_trio(tmp_path, count=6, tx_extra=("--scheme", "16QAM-3/4"))
    assert results == {"radio": 0, "rx": 0, "tx": 0}
    c = s["counts"]
    assert c["sent"] == 6 and c["decoded"] == 6 and c["balanced"]
    recs = [r for r in s["per_frame"] if r["status"] == "decoded"]
    mi = mcs_by_key("16QAM-3/4")
    assert all(r["scheme"] in {scheme_id(mi, c) for c in range(len(CODECS))} for r in recs)
    assert s["psnr_db_mean"] > 30  # every payload intact on the clean profile


@pytest.mark.parametrize("codec", CODECS)
def test_each_codec_round_trips_within_budget(codec, tiles):
    """Every source codec alone: the fitted bitstream fits, decodes to the same shape, and a
    larger budget never scores worse. Whole-image budgets (a 128x128 crop of four tiles at the
    QPSK-1/2 budget of 16 tiles) are where AVIF and HEIF fit at all."""
    from hil.baseline.source import fit

    img = np.concatenate(
        [np.concatenate([tiles[0].numpy(), tiles[1].numpy()], 2),
         np.concatenate([tiles[2].numpy(), tiles[3].numpy()], 2)], 1
    )  # fmt: skip
    img8 = to_uint8(img)
    ref = img8.astype(np.float32).transpose(2, 0, 1) / 255
    errs = []
    for budget in (700, 2000):
        b = fit(img8, codec, budget)
        assert b is not None and len(b) <= budget
        out = decode(b, img.shape)
        assert out is not None and out.shape == img.shape
        errs.append(float(np.mean((out - ref) ** 2)))
    assert errs[1] < errs[0]
    assert fit(img8, codec, 40) is None


@pytest.mark.parametrize("where", ["payload", "crc"])
def test_a_flipped_bit_with_a_valid_length_is_an_erasure(where):
    """The CRC-32 alone must catch it: the length field is left intact, so the length check
    cannot; every position of the payload (or the CRC) is tried."""
    codec = DigitalCodec(MCS_TABLE[mcs_by_key("16QAM-1/2")], 512)
    payload = bytes(range(40))
    bits = codec.framed_bits(payload)
    assert codec.unframe(bits) == payload
    span = range(16, 16 + 8 * len(payload)) if where == "payload" else range(16 + 320, 16 + 352)
    for i in span:
        b = bits.copy()
        b[i] = 1 - b[i]
        assert codec.unframe(b) is None, i


# --- exact framing, segmentation and parameters (mutation testing, docs/mutation.md)


def test_mcs_keys_scheme_bytes_and_their_messages():
    assert mcs_by_key(" qpsk 1/2 ") == 2 and mcs_by_key("64qam-8/9") == 7
    with pytest.raises(ValueError) as e:
        mcs_by_key("256QAM 1/2")
    keys = "BPSK-1/3, QPSK-1/3, QPSK-1/2, QPSK-3/4, 16QAM-1/2, 16QAM-3/4, 64QAM-2/3, 64QAM-8/9"
    assert str(e.value) == f"unknown MCS '256QAM 1/2'; one of {keys}"
    from hil.baseline.digital import is_digital_scheme, is_whole_scheme

    assert scheme_id(0, 0) == 1 and scheme_id(7, 3) == 32
    assert scheme_id(0, 0, whole=True) == 33 and scheme_id(7, 3, whole=True) == 64
    assert [is_digital_scheme(s) for s in (0, 1, 32, 33, 64, 65)] == [False] + [True] * 4 + [False]
    assert [is_whole_scheme(s) for s in (1, 32, 33, 64, 65)] == [False, False, True, True, False]
    assert parse_scheme(scheme_id(5, 2, whole=True)) == (5, 2)
    for mi, c in ((8, 0), (0, 4), (-1, 0), (0, -1)):
        with pytest.raises(ValueError) as e:
            scheme_id(mi, c)
        assert str(e.value) == f"no scheme for MCS index {mi}, codec index {c}"
    for s in (0, 65):
        with pytest.raises(ValueError) as e:
            parse_scheme(s)
        assert str(e.value) == f"scheme {s} is not a digital scheme"


def test_missing_sionna_says_how_to_install_it(monkeypatch):
    import sys

    from hil.baseline.digital import _sionna

    monkeypatch.setitem(sys.modules, "sionna.phy.fec.ldpc", None)
    with pytest.raises(ImportError) as e:
        _sionna()
    assert str(e.value) == (
        "the separation baseline needs Sionna's 5G LDPC: pip install -e '.[baseline]' "
        "(sionna-no-rt, PyTorch-based)"
    )


@pytest.mark.parametrize("key", [m.key for m in MCS_TABLE])
def test_encode_is_sionnas_5g_chain_with_the_bit_interleaver_of_the_modulation(key):
    """Rate-matched 5G LDPC with the 5G bit interleaver for the modulation order (none for
    BPSK), then Gray QAM: the codec's symbols are exactly that chain's."""
    from sionna.phy.fec.ldpc import LDPC5GEncoder
    from sionna.phy.mapping import Mapper

    mcs = MCS_TABLE[mcs_by_key(key)]
    codec = DigitalCodec(mcs, 512)
    ((k, n),) = codec.segments
    payloads = [b"", bytes(range(15))]
    u = torch.from_numpy(np.stack([codec.framed_bits(p) for p in payloads]))
    enc = LDPC5GEncoder(k, n, num_bits_per_symbol=mcs.bits if mcs.bits > 1 else None)
    ref = Mapper("pam" if mcs.bits == 1 else "qam", mcs.bits)(enc(u)).to(torch.complex64)
    assert torch.equal(codec.encode(payloads), ref)
    assert all(dec.num_iter == 20 for _, dec in codec._codes.values())


def test_framed_bits_layout_and_scrambler():
    """The frame's information bits: length u16, payload, CRC-32, zero padding, XOR a fixed
    pseudo-random sequence (part of the format: recordings made earlier must still decode)."""
    import struct
    import zlib

    codec = DigitalCodec(MCS_TABLE[mcs_by_key("QPSK-1/2")], 512)
    assert np.packbits(codec.scramble[:64].astype(np.uint8)).tobytes().hex() == "10a18aeb062cc54a"
    payload = b"hello"
    bits = codec.framed_bits(payload)
    assert bits.dtype == np.float32 and bits.shape == (codec.k,)
    plain = np.abs(bits - codec.scramble).astype(np.uint8)
    framed = struct.pack(">H", 5) + payload + struct.pack(">I", zlib.crc32(payload))
    assert np.packbits(plain).tobytes() == framed + bytes(codec.k // 8 - len(framed))
    assert codec.unframe(bits.astype(np.int64)) == payload  # any dtype of 0/1 bits
    with pytest.raises(ValueError) as e:
        codec.framed_bits(bytes(codec.capacity + 1))
    assert (
        str(e.value)
        == f"{codec.capacity + 1} bytes exceed the {codec.capacity}-byte budget of QPSK 1/2"
    )


def test_long_budgets_split_into_near_equal_codewords():
    """50000 64QAM-8/9 symbols: 266666 information bits need 32 codewords of at most 8448;
    the symbols are shared out as evenly as possible. The length field is unsigned 16 bits."""
    codec = DigitalCodec(MCS_TABLE[mcs_by_key("64QAM-8/9")], 50000)
    assert codec.segments == [(8336, 9378)] * 16 + [(8330, 9372)] * 16
    assert codec.k == 266656 and codec.capacity == 33326
    big = bytes(range(256)) * 130  # 33280 bytes: the length needs all 16 bits
    assert codec.unframe(codec.framed_bits(big)) == big


def test_three_codewords_round_trip_at_any_precision():
    """16897 QPSK-1/2 symbols: three codewords (5633 + 5632 + 5632 bits), concatenated in order,
    decoded from complex128 symbols and float64 noise variances (one BP iteration is plenty
    here)."""
    codec = DigitalCodec(MCS_TABLE[mcs_by_key("QPSK-1/2")], 16897, num_iter=1)
    assert codec.segments == [(5633, 11266), (5632, 11264), (5632, 11264)]
    assert all(dec.num_iter == 1 for _, dec in codec._codes.values())
    payloads = [bytes(range(256)) * 7 + b"tail", b"xy"]
    x = codec.encode(payloads)
    assert x.shape == (2, 16897) and x.dtype == torch.complex64
    no = torch.full(x.shape, 1e-3, dtype=torch.float64)
    assert codec.decode(x.to(torch.complex128), no) == payloads
