"""Scheme 253: a photograph's tiles in segments, each interleaved within itself, so the
transmitter streams a segment while it encodes the next and the receiver decodes each segment
as its frames arrive."""

import numpy as np
import pytest
import torch

from hil.jscc.decoders import Decoders
from hil.jscc.images import SEGMENT_FRAMES, Segments, from_tiles, interleave, to_tiles
from hil.phy import MAX_PAYLOAD, FrameEvent
from hil.phy.header import SCHEME_JSCC_SEGMENTED, Header


@pytest.mark.parametrize(
    "n_tiles, k, frame", [(384, 512, 4800), (150, 512, 4800), (7, 512, 4800), (1000, 256, 4800),
                          (97, 500, 1000), (1, 512, 4800)]
)  # fmt: skip
def test_segments_share_the_tiles_out_evenly_within_their_frame_budget(n_tiles, k, frame):
    lay = Segments.of(n_tiles, k, frame)
    sizes = [len(r) for r in lay.tiles]
    assert [t for r in lay.tiles for t in r] == list(range(n_tiles))  # every tile once, in order
    assert max(sizes) - min(sizes) <= 1
    assert all(s * k <= SEGMENT_FRAMES * frame or s == 1 for s in sizes)
    # as few segments as the budget allows: one fewer would overflow it
    assert len(sizes) == 1 or n_tiles * k > (len(sizes) - 1) * SEGMENT_FRAMES * frame
    assert lay.chunk_count == -(-n_tiles * k // frame)
    assert sum(lay.chunk_len(c) for c in range(lay.chunk_count)) == n_tiles * k
    covered = set()
    for s, r in enumerate(lay.tiles):  # a segment's chunks hold exactly its symbols' span
        c = lay.chunks(s)
        assert c.start * frame <= r.start * k < (c.start + 1) * frame
        assert (c.stop - 1) * frame < r.stop * k <= c.stop * frame
        covered |= set(c)
    assert covered == set(range(lay.chunk_count))


def test_a_512x768_photograph_is_six_segments_in_41_frames():
    lay = Segments.of(384, 512, MAX_PAYLOAD)
    assert [len(r) for r in lay.tiles] == [64] * 6 and lay.chunk_count == 41
    assert list(lay.chunks(0)) == list(range(7)) and list(lay.chunks(1)) == list(range(6, 14))


def _frames(lay, s):
    """Every segment's tiles' symbols in air order, one after another, cut into frames."""
    air = np.concatenate([lay.air(i, s[r.start : r.stop]) for i, r in enumerate(lay.tiles)])
    return [air[i : i + lay.frame_symbols] for i in range(0, len(air), lay.frame_symbols)]


def test_segments_join_back_from_their_frames_and_a_lost_frame_is_zeros_with_zero_gain():
    rng = np.random.default_rng(0)
    lay = Segments.of(120, 96, 700)  # 3 segments of 40 tiles, 5.5 frames each
    assert [len(r) for r in lay.tiles] == [40, 40, 40]
    s = (rng.standard_normal((120, 96)) + 1j * rng.standard_normal((120, 96))).astype(np.complex64)
    frames = _frames(lay, s)
    gains = [np.full(len(f), 0.5 + i, np.float32) for i, f in enumerate(frames)]
    assert len(frames) == lay.chunk_count and all(
        len(f) == lay.chunk_len(i) for i, f in enumerate(frames)
    )
    lost = 5  # a frame that straddles segments 0 and 1
    assert lost in lay.chunks(0) and lost in lay.chunks(1)
    for seg, r in enumerate(lay.tiles):
        got = {c: (frames[c], gains[c]) for c in lay.chunks(seg)}
        sym, gain = lay.join(seg, got)
        np.testing.assert_array_equal(sym, s[r.start : r.stop])
        assert gain.min() > 0
        got.pop(lost, None)
        sym, gain = lay.join(seg, got)
        hit = gain == 0
        if lost in lay.chunks(seg):
            assert 0 < hit.sum() < hit.size and np.all(sym[hit] == 0)
            # the lost symbols are spread over the segment's tiles, not whole tiles
            assert hit.any(axis=1).sum() > len(r) // 2 and not hit.all(axis=1).any()
        np.testing.assert_array_equal(sym[~hit], s[r.start : r.stop][~hit])
    with pytest.raises(ValueError, match="holds"):
        lay.join(0, {0: (frames[0][:-1], gains[0][:-1])})
    with pytest.raises(ValueError, match="segment 1 holds"):
        lay.air(1, s[:5])


def _photo(model, h, w, seed=0):
    torch.manual_seed(seed)
    x = torch.rand(3, h, w)
    with torch.inference_mode():
        s = model.encoder(to_tiles(x))
    return x, s


def _events(lay, s, shape, seqs=None):
    frames = _frames(lay, s.numpy())
    return [
        FrameEvent(
            "ok", 0, 0.0, 0.0, 1.0, 1.0,
            header=Header(
                seq=100 + i, item_id=3, fingerprint=b"\0" * 8, payload_len=len(f),
                shape=shape, chunk_index=i, chunk_count=len(frames), scheme=SCHEME_JSCC_SEGMENTED,
            ),
            symbols=f, symbol_gain=np.ones(len(f), np.float32), snr_db=10.0,
        )
        for i, f in enumerate(frames)
    ]  # fmt: skip


def test_each_segment_is_decoded_as_its_frames_arrive_and_the_photograph_is_the_tiles(tiny_cfg):
    from hil.jscc.model import JsccModel

    model = JsccModel(tiny_cfg.model).eval()
    _x, s = _photo(model, 300, 330)  # 10 x 11 tiles of 512 symbols: 2 segments of 55, 12 frames
    n = len(s)
    lay = Segments.of(n, s.shape[1], MAX_PAYLOAD)
    assert [len(r) for r in lay.tiles] == [55, 55] and lay.chunk_count == 12
    with torch.inference_mode():
        want = from_tiles(
            model.decoder(s, torch.full((n,), 10.0), (3, 32, 32), torch.ones(s.shape)).clamp(0, 1),
            (300, 330),
        )
    frames = _events(lay, s, (3, 300, 330))
    decs = Decoders(model)
    jscc = decs.get("jscc")
    calls = []
    real = model.decode_received
    model.decode_received = lambda sym, *a: calls.append(len(sym)) or real(sym, *a)
    first = list(lay.chunks(0))
    assert decs.decode(frames[: first[-1]]) == [] and calls == []  # segment 0 not yet whole
    assert decs.decode([frames[first[-1]]]) == [] and calls == [55]  # now it is: decoded
    (key,) = jscc.segments_done
    assert set(jscc.segments_done[key]) == {0}
    (d,) = decs.decode(frames[first[-1] + 1 :][::-1])  # the rest, in any order
    assert calls == [55, 55] and jscc.segments_done == {}  # segment 0 is not decoded again
    assert d.lost_chunks == 0 and len(d.events) == 12
    assert d.first.header.seq == 100 and [e.header.chunk_index for e in d.events] == list(range(12))
    torch.testing.assert_close(d.image, want)


def test_a_lost_frame_is_concealed_in_its_segments_only(tiny_cfg):
    from hil.jscc.model import JsccModel

    model = JsccModel(tiny_cfg.model).eval()
    _x, s = _photo(model, 300, 330, seed=1)
    lay = Segments.of(len(s), s.shape[1], MAX_PAYLOAD)
    frames = _events(lay, s, (3, 300, 330))
    (clean,) = Decoders(model).decode(frames)
    lost = 9  # segment 1's (frames 5-11; frame 5 is shared)
    assert lost in lay.chunks(1) and lost not in lay.chunks(0)
    decs = Decoders(model)
    assert decs.decode(frames[:lost] + frames[lost + 1 :]) == []
    (d,) = decs.flush()  # the end of the stream: the missing frame is not coming
    assert d.lost_chunks == 1 and len(d.events) == 11
    tiles_clean, tiles_lossy = to_tiles(clean.image), to_tiles(d.image)
    torch.testing.assert_close(tiles_lossy[:55], tiles_clean[:55])  # segment 0 untouched
    diff = (tiles_lossy[55:] - tiles_clean[55:]).abs().flatten(1).amax(1)
    assert (diff > 0).float().mean() > 0.9  # a little of every tile of segment 1, not a few whole


def test_a_frame_whose_length_disagrees_with_the_layout_counts_as_lost(tiny_cfg):
    from hil.jscc.model import JsccModel

    model = JsccModel(tiny_cfg.model).eval()
    _x, s = _photo(model, 64, 64)  # 4 tiles: one segment in one frame of 2048
    lay = Segments.of(4, s.shape[1], MAX_PAYLOAD)
    (f,) = _events(lay, s, (3, 64, 64))
    f.symbols, f.symbol_gain = f.symbols[:-1], f.symbol_gain[:-1]
    (d,) = Decoders(model).decode([f])
    assert d.lost_chunks == 1 and d.image.shape == (3, 64, 64)  # reported, not hidden
    # decoded from nothing received: the same picture as from all-zero symbols
    with torch.inference_mode():
        zeros = model.decode_received(
            torch.zeros(4, s.shape[1], dtype=torch.complex64), torch.full((4,), 10.0),
            (3, 32, 32), torch.zeros(4, s.shape[1]),
        ).clamp(0, 1)  # fmt: skip
    torch.testing.assert_close(d.image, from_tiles(zeros, (64, 64)))


def test_the_transmitter_encodes_a_segment_at_a_time_as_frames_are_taken(tiny_cfg):
    from hil.apps.tx import _Segmented
    from hil.jscc.images import WholeImage, content_id
    from hil.jscc.model import JsccModel

    model = JsccModel(tiny_cfg.model).eval()
    px = (torch.rand(3, 300, 330) * 255).to(torch.uint8)
    im = WholeImage("p.png", content_id(px), px)
    seen = []
    model.encoder.register_forward_hook(lambda _m, inp, _out: seen.append(len(inp[0])))
    frames = _Segmented(model, im)
    assert len(frames) == 12 and seen == []
    it = iter(frames)
    next(it)
    assert seen == [55]  # only the first segment, for the first frame
    rest = list(it)
    assert seen == [55, 55] and len(rest) == 11
    assert list(frames) == [next(iter(frames)), *rest] and seen == [55, 55]  # kept for repeats
    with torch.inference_mode():
        s = model.encoder(to_tiles(im.as_float())).numpy()
    lay = Segments.of(len(s), s.shape[1], MAX_PAYLOAD)
    for got, want in zip(frames, _frames(lay, s), strict=True):
        np.testing.assert_array_equal(got, want)
    # one segment is interleave() of its tiles: what scheme 254 does to the whole image
    np.testing.assert_array_equal(
        np.concatenate(list(frames))[: 55 * s.shape[1]], interleave(s[:55])
    )
