"""The separation baseline for whole photographs: frame sizes, block framing, codewords that
stand alone (any order, duplicates, losses), and a truncated bitstream where bytes are lost."""

import struct

import numpy as np
import pytest
import torch

from hil.baseline.digital import DigitalCodec
from hil.baseline.source import best_fit, encode, to_uint8
from hil.baseline.whole import (
    BLOCK_HEADER,
    GREY,
    WholeCodec,
    assemble,
    decode_image,
    frame_sizes,
)
from hil.jscc.data import load_image, skimage_data_dir
from hil.phy import MAX_PAYLOAD


@pytest.fixture(scope="module")
def cat():
    return load_image(skimage_data_dir() / "chelsea.png").float().numpy() / 255.0  # [3, 300, 451]


def clean(frames):
    """Frames as a noiseless channel gives them: the symbols, a post-equalisation SNR of 30 dB."""
    return [(f, np.full(len(f), 1e3, np.float32)) for f in frames]


def test_frames_are_few_and_even_never_a_stub():
    assert frame_sizes(100) == [100]
    assert frame_sizes(MAX_PAYLOAD) == [MAX_PAYLOAD]
    assert frame_sizes(MAX_PAYLOAD + 1) == [2401, 2400]
    s = frame_sizes(76800)
    assert len(s) == 16 and sum(s) == 76800 and max(s) - min(s) <= 1 and max(s) <= MAX_PAYLOAD
    with pytest.raises(ValueError):
        frame_sizes(0)


def test_block_framing_round_trips_and_a_corrupted_codeword_fails_alone():
    c = DigitalCodec(WholeCodec(7).mcs, 4800)  # 64QAM 8/9: several codewords in one frame
    caps = c.block_capacity
    segs = c.segments
    assert len(caps) > 1 and [k // 8 - 4 for k, _ in segs] == caps
    blocks = [bytes([i + 1]) * (cap - i) for i, cap in enumerate(caps)]  # short ones padded
    padded = [b + bytes(cap - len(b)) for b, cap in zip(blocks, caps, strict=True)]
    x = c.encode_blocks(blocks)
    assert x.shape == (4800,) and x.dtype == torch.complex64  # the documented dtype
    no = torch.full((1, 4800), 1e-3)
    assert c.decode_blocks(x[None], no) == [padded]
    y = x.clone()
    y[:100] = -y[:100]  # the first codeword's symbols ruined
    got = c.decode_blocks(y[None], no)[0]
    assert got[0] is None and got[1:] == padded[1:]
    with pytest.raises(ValueError, match=rf"^{len(caps) - 1} blocks for {len(caps)} codewords$"):
        c.encode_blocks(blocks[:-1])
    with pytest.raises(
        ValueError, match=rf"^a {caps[0] + 1}-byte block exceeds its codeword's {caps[0]} bytes$"
    ):
        c.encode_blocks([bytes(caps[0] + 1), *blocks[1:]])


def test_a_whole_photograph_round_trips_through_frames_in_any_order_with_duplicates(cat):
    wc = WholeCodec(3)  # QPSK 3/4
    n = 76800  # the JSCC's symbols for 451x300 as 32x32 tiles at k/n 1/6
    _codec, data = best_fit(cat, wc.capacity(n), codecs=("jpeg", "webp"))
    frames = wc.encode(data, n)
    assert [len(f) for f in frames] == frame_sizes(n)
    per_frame = wc.decode_frames(clean(frames))
    blocks = [b for fr in per_frame for b in fr]
    a = assemble(blocks[::-1] + blocks[:5])  # reversed, five codewords twice
    assert a.complete and a.data == data and a.missing == 0 and a.length == len(data)
    img, intact = decode_image(a, cat.shape)
    assert intact and img.shape == cat.shape
    assert 10 * np.log10(1 / np.mean((img - cat) ** 2)) > 30
    with pytest.raises(ValueError):
        wc.encode(bytes(wc.capacity(n) + 1), n)


def test_codewords_state_their_place_so_a_lost_frame_truncates_the_bitstream_there(cat):
    wc = WholeCodec(2)
    n = 76800
    data = encode(to_uint8(cat), "jpeg", 30)
    assert len(data) <= wc.capacity(n)
    per_frame = wc.decode_frames(clean(wc.encode(data, n)))
    first_offset = per_frame[3][0][1]
    kept = [b for i, fr in enumerate(per_frame) if i != 3 for b in fr]
    a = assemble(kept)
    assert not a.complete and a.length == len(data) and a.data == data[:first_offset]
    assert a.missing == sum(len(b[2]) for b in per_frame[3] if b[1] < len(data))
    img, intact = decode_image(a, cat.shape)  # JPEG decodes the first rows, greys the rest
    assert not intact
    rows = img[:, :20]
    assert np.mean((rows - cat[:, :20]) ** 2) < 0.01 and np.allclose(
        img[:, -5:], img[0, -1, -1], atol=0.02
    )


def test_nothing_or_an_undecodable_bitstream_is_mid_grey():
    a = assemble([])
    assert not a.complete and a.length == 0
    img, intact = decode_image(a, (3, 8, 8))
    assert not intact and np.all(img == GREY)
    junk = assemble([(10, 0, b"not an img")])
    assert junk.complete
    img, intact = decode_image(junk, (3, 8, 8))
    assert not intact and np.all(img == GREY)


def test_a_codeword_disagreeing_on_the_length_is_outvoted():
    good = [(6, 0, b"abc"), (6, 3, b"def")]
    a = assemble([*good, (99, 0, b"zzz")])
    assert a.complete and a.data == b"abcdef"
    assert struct.calcsize(">II") == BLOCK_HEADER


def test_random_digital_frames_never_bring_the_decoder_down():
    """Headers that passed their CRC but make no sense: payload sizes no 5G LDPC code of the
    MCS fits (before: ValueError out of the receiver), whole-photograph frames of clashing
    sizes, seqs colliding on (item, first seq). Each such photograph shows mid-grey, not
    intact; the codecs kept stay bounded."""
    import hil.baseline.receive as R
    from hil.jscc.decoders import Decoders

    from ..frames import random_frame

    rng = np.random.default_rng(3)
    decs = Decoders(None)
    out = []
    for _ in range(80):  # a few payload sizes: each new one builds a codec
        out += decs.decode([random_frame(rng, range(1, 65), 3, [3, 47, 480, 4800])])
    out += decs.flush()
    assert len(out) > 30
    assert not any(d.intact for d in out)  # noise decodes to no picture
    for d in out:
        assert tuple(d.image.shape) == tuple(d.first.header.shape)
    assert len(decs.get("digital").codecs) <= R.MAX_CODECS
