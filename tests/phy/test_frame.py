"""Exact invariants of the frame, OFDM and header."""

import numpy as np
import pytest
import torch

from hil.phy import FrameBuilder, Header, HeaderError, OfdmConfig, to_full_scale
from hil.phy.coding import conv_encode, interleaver, viterbi_decode
from hil.phy.header import HEADER_BITS, decode_header_llr, header_symbols
from hil.phy.ofdm import demodulate, map_resources, modulate
from hil.phy.sequences import lts_time, sts_time

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


def test_interleaver_is_a_permutation():
    p = interleaver(572)
    assert sorted(p.tolist()) == list(range(572))


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
