"""Decoders by scheme byte: the registry, routing, and the JSCC's chunk reassembly."""

import typing

import numpy as np
import pytest
import torch

import hil.baseline.receive  # noqa: F401 (registers the digital schemes, as the receiver does)
from hil.baseline.digital import is_digital_scheme, scheme_id
from hil.jscc.decoders import Decoders, JsccDecoder, register, scheme_name
from hil.phy import FrameEvent
from hil.phy.header import Header

from ..frames import random_frame, received


def test_every_scheme_byte_has_one_owner_or_none():
    # whole, tiled in segments, tiled, tiled without the rotation
    assert scheme_name(0) == scheme_name(253) == scheme_name(254) == scheme_name(255) == "jscc"
    for s in range(1, 253):
        assert scheme_name(s) == ("digital" if is_digital_scheme(s) else None)
    assert scheme_name(scheme_id(0, 0)) == "digital"
    with pytest.raises(ValueError):
        scheme_name(256)
    with pytest.raises(ValueError):
        scheme_name(-1)


def test_a_name_registers_once():
    with pytest.raises(ValueError, match="already registered"):
        register("jscc", lambda s: False, JsccDecoder)


class FakeModel:
    """Decoder = the mean of the received symbols' real parts, per image, as a constant image:
    reassembly order and grouping show in the output."""

    class cfg:
        @staticmethod
        def n_symbols(shape):
            return 6

    @staticmethod
    def decoder(sym, snr, shape, gain):
        v = torch.stack([torch.arange(6.0) @ s.real / 100 for s in sym])
        return v[:, None, None, None].expand(len(sym), *shape).clone()

    def decode_received(self, sym, snr, shape, gain):  # as JsccModel's, with no range to clamp to
        return self.decoder(sym, snr, shape, gain)


def event(seq, item, symbols, index=0, count=1, scheme=0):
    h = Header(
        seq=seq,
        item_id=item,
        fingerprint=b"\0" * 8,
        payload_len=len(symbols),
        shape=(3, 2, 2),
        chunk_index=index,
        chunk_count=count,
        scheme=scheme,
    )
    return received(h, symbols)


def test_chunks_reassembled_in_chunk_order_whatever_the_arrival_order():
    dec = JsccDecoder(FakeModel())
    # item 7 in three chunks (seq 10, 11, 12), arriving 12, 10, then 11 beside a whole item 3
    assert dec.decode([event(12, 7, [5, 6], 2, 3)]) == []
    assert dec.decode([event(10, 7, [1, 2], 0, 3)]) == []
    out = dec.decode([event(11, 7, [3, 4], 1, 3), event(13, 3, [0, 0, 0, 0, 0, 1])])
    by_item = {d.first.header.item_id: d for d in out}
    assert set(by_item) == {3, 7}
    whole = by_item[7]
    assert [e.header.chunk_index for e in whole.events] == [0, 1, 2]
    assert whole.first.header.seq == 10
    # symbols in chunk order 1..6: sum(i * s_i) = 0*1 + 1*2 + 2*3 + 3*4 + 4*5 + 5*6 = 70
    assert float(whole.image[0, 0, 0]) == pytest.approx(0.70)
    assert float(by_item[3].image[0, 0, 0]) == pytest.approx(0.05)
    assert dec.chunks.pending == {}


def test_pending_images_are_bounded_the_oldest_concealed():
    dec = JsccDecoder(FakeModel(), max_pending=4, reorder_window=10**6)
    out = []
    for i in range(10):
        out += dec.decode([event(100 * i, i, [1, 2], 0, 3)])
    assert len(dec.chunks.pending) == 4 and min(k[0] for k in dec.chunks.pending) == 6
    assert [d.first.header.item_id for d in out] == [0, 1, 2, 3, 4, 5]
    assert all(d.lost_chunks == 2 for d in out)


class GainModel(FakeModel):
    """FakeModel that keeps the symbol gains it was given."""

    gains: typing.ClassVar[list] = []

    @classmethod
    def decoder(cls, sym, snr, shape, gain):
        cls.gains.append(gain.clone())
        return FakeModel.decoder(sym, snr, shape, gain)


def test_an_image_with_a_lost_frame_is_decoded_at_the_end_with_zeros_for_it():
    dec = JsccDecoder(GainModel())
    assert dec.decode([event(10, 7, [1, 2], 0, 3), event(12, 7, [5, 6], 2, 3)]) == []
    (d,) = dec.flush()
    assert d.lost_chunks == 1 and [e.header.chunk_index for e in d.events] == [0, 2]
    # [1, 2, 0, 0, 5, 6]: 0*1 + 1*2 + 4*5 + 5*6 = 52
    assert float(d.image[0, 0, 0]) == pytest.approx(0.52)
    np.testing.assert_array_equal(GainModel.gains[-1][0].numpy(), [1, 1, 0, 0, 1, 1])
    assert dec.chunks.pending == {} and dec.flush() == []


def test_lost_frames_stop_being_waited_for_once_the_stream_is_well_past_them():
    dec = JsccDecoder(FakeModel(), reorder_window=64)
    assert dec.decode([event(10, 7, [1, 2], 0, 3)]) == []
    assert dec.decode([event(12 + 64, 8, [0] * 6)])[0].first.header.item_id == 8  # not yet
    out = dec.decode([event(12 + 65, 9, [0] * 6)])
    assert sorted(d.first.header.item_id for d in out) == [7, 9]
    assert next(d for d in out if d.first.header.item_id == 7).lost_chunks == 2


def test_a_duplicate_frame_of_a_finished_image_is_dropped():
    dec = JsccDecoder(FakeModel())
    frames = [event(10, 7, [1, 2], 0, 3), event(11, 7, [3, 4], 1, 3), event(12, 7, [5, 6], 2, 3)]
    assert len(dec.decode(frames)) == 1
    assert dec.decode([frames[1]]) == [] and dec.chunks.pending == {}
    assert dec.flush() == []


def test_a_photograph_of_any_size_comes_back_at_its_size(tiny_cfg):
    """Real model: a 30x42 image (not a multiple of 4) encoded padded, cut into frames, decoded
    and cut back; the same with one frame lost is concealed and keeps the size."""
    from hil.jscc.images import pad
    from hil.jscc.model import JsccModel

    torch.manual_seed(0)
    model = JsccModel(tiny_cfg.model).eval()
    x = torch.rand(3, 30, 42)
    with torch.inference_mode():
        s = model.encoder(pad(x)[None])[0].numpy()
    assert len(s) == model.cfg.n_symbols((3, 32, 44))
    chunks = [s[i : i + 100] for i in range(0, len(s), 100)]

    def frames(skip=None):
        out = []
        for i, c in enumerate(chunks):
            if i == skip:
                continue
            e = event(i, 0, c, i, len(chunks))
            out.append(
                FrameEvent(
                    "ok", 0, 0.0, 0.0, 1.0, 1.0,
                    header=Header(
                        seq=i, item_id=0, fingerprint=b"\0" * 8, payload_len=len(c),
                        shape=(3, 30, 42), chunk_index=i, chunk_count=len(chunks),
                    ),
                    symbols=e.symbols, symbol_gain=e.symbol_gain, snr_db=20.0,
                )
            )  # fmt: skip
        return out

    (whole,) = JsccDecoder(model).decode(frames())
    assert tuple(whole.image.shape) == (3, 30, 42) and whole.lost_chunks == 0
    dec = JsccDecoder(model)
    assert dec.decode(frames(skip=1)) == []
    (lossy,) = dec.flush()
    assert tuple(lossy.image.shape) == (3, 30, 42) and lossy.lost_chunks == 1
    assert not torch.equal(lossy.image, whole.image)  # (an untrained model: only "differs")


def test_a_frame_whose_length_disagrees_with_its_shape_gives_no_image():
    assert JsccDecoder(FakeModel()).decode([event(1, 1, [1, 2, 3])]) == []


def test_decoders_route_by_scheme_and_refuse_unknown_ones():
    decs = Decoders(FakeModel())
    out = decs.decode([event(1, 1, [1, 0, 0, 0, 0, 0])])
    assert len(out) == 1 and out[0].intact
    unknown = next(s for s in range(1, 256) if scheme_name(s) is None)
    with pytest.raises(ValueError, match="no decoder"):
        decs.decode([event(2, 2, [1] * 6, scheme=unknown)])


def test_the_jscc_decoder_needs_a_model():
    with pytest.raises(ValueError, match="needs a model"):
        JsccDecoder(None)


@pytest.mark.parametrize("rotate", [True, False])
def test_a_tiled_photograph_is_put_back_together_tile_by_tile(tiny_cfg, rotate):
    """Scheme 254 (and 255, the order before the rotation): 50x70 as 2x3 tiles of 32x32, each
    encoded alone, symbols interleaved; decoded per tile, the image is the tiles in place,
    cut to 50x70."""
    from hil.jscc.images import from_tiles, interleave, to_tiles
    from hil.jscc.model import JsccModel
    from hil.phy.header import SCHEME_JSCC_TILED, SCHEME_JSCC_TILED_V1

    torch.manual_seed(0)
    model = JsccModel(tiny_cfg.model).eval()
    x = torch.rand(3, 50, 70)
    with torch.inference_mode():
        s = model.encoder(to_tiles(x))  # [6, k]
        want = from_tiles(
            model.decoder(s, torch.full((6,), 10.0), (3, 32, 32), torch.ones(s.shape)).clamp(0, 1),
            (50, 70),
        )
    flat = interleave(s.numpy(), rotate)
    # position j of tile t at j * 6 + (t + j) mod 6 (255: j * 6 + t); within a tile,
    # symbols 0, 37, 74, ... go out first
    a = s.numpy()
    if rotate:
        assert flat[1] == a[1, 0] and flat[6] == a[5, 37] and flat[13] == a[5, 74]
    else:
        assert flat[1] == a[1, 0] and flat[6] == a[0, 37] and flat[13] == a[1, 74]
    scheme = SCHEME_JSCC_TILED if rotate else SCHEME_JSCC_TILED_V1
    chunks = [flat[i : i + 700] for i in range(0, len(flat), 700)]
    frames = [
        FrameEvent(
            "ok", 0, 0.0, 0.0, 1.0, 1.0,
            header=Header(
                seq=i, item_id=0, fingerprint=b"\0" * 8, payload_len=len(c), shape=(3, 50, 70),
                chunk_index=i, chunk_count=len(chunks), scheme=scheme,
            ),
            symbols=c, symbol_gain=np.ones(len(c), np.float32), snr_db=10.0,
        )
        for i, c in enumerate(chunks)
    ]  # fmt: skip
    (d,) = Decoders(model).decode(frames[::-1])
    assert tuple(d.image.shape) == (3, 50, 70)
    torch.testing.assert_close(d.image, want)


def test_an_image_with_only_its_short_last_frame_left_is_still_decoded():
    class Seven(FakeModel):
        class cfg:
            @staticmethod
            def n_symbols(shape):
                return 7

        @staticmethod
        def decoder(sym, snr, shape, gain):
            v = torch.stack([torch.arange(7.0) @ s.real / 100 for s in sym])
            return v[:, None, None, None].expand(len(sym), *shape).clone()

    dec = JsccDecoder(Seven())
    assert dec.decode([event(12, 7, [5], 2, 3)]) == []  # chunks of 3, 3, 1: only the last came
    (d,) = dec.flush()
    assert d.lost_chunks == 2 and float(d.image[0, 0, 0]) == pytest.approx(0.30)  # 6 * 5 / 100


def test_a_frame_that_disagrees_with_its_images_other_frames_is_dropped_and_counted():
    """Same item and first seq, another chunk count (a corrupt or hostile header): before,
    the assembler took it and then asked for chunks no frame had (KeyError, the receiver
    down)."""
    decs = Decoders(FakeModel())
    assert decs.decode([event(10, 1, [1, 2, 3], 0, 2)]) == []
    assert decs.decode([event(13, 1, [1, 2, 3], 3, 4)]) == []  # key (1, 10), but 4 chunks
    assert decs.get("jscc").chunks.inconsistent == 1
    assert decs.dropped() == {"shape": 0, "inconsistent": 1}  # what hil rx's summary shows
    (d,) = decs.decode([event(11, 1, [4, 5, 6], 1, 2)])
    assert [e.header.seq for e in d.events] == [10, 11] and d.lost_chunks == 0


def test_a_last_chunk_longer_than_the_image_is_not_placed():
    dec = JsccDecoder(FakeModel())  # 6 symbols an image; chunk 1 of 2 alone, with 9
    assert dec.decode([event(21, 2, list(range(9)), 1, 2)]) == []
    assert dec.flush() == []  # nothing decodable: not a crash


def test_random_frames_never_bring_the_decoder_down(tiny_cfg):
    """Headers that passed their CRC but make no sense together: random schemes (whole,
    tiled, segmented), shapes, chunk indices and counts, payload lengths and seqs, some
    colliding on (item, first seq). Every image that comes out has its header's shape."""
    from hil.jscc.model import JsccModel
    from hil.phy.header import SCHEME_JSCC_SEGMENTED, SCHEME_JSCC_TILED

    model = JsccModel(tiny_cfg.model).eval()
    rng = np.random.default_rng(5)
    decs = Decoders(model)
    out = []
    for _ in range(1500):
        out += decs.decode([random_frame(rng, [0, SCHEME_JSCC_TILED, SCHEME_JSCC_SEGMENTED], 5)])
    out += decs.flush()
    assert len(out) > 50  # some made whole images, or were given up on and concealed
    for d in out:
        assert tuple(d.image.shape) == tuple(d.first.header.shape)
        assert torch.isfinite(d.image).all()


def test_a_header_naming_a_giant_or_non_rgb_picture_is_not_decoded():
    """One frame saying 65535 x 65535 (its chunk count consistent with it) would have the
    segmented decoder make 4 million tiles at the end of the stream, and the digital one a
    51 GB grey picture: dropped, counted, logged."""
    from hil.jscc.images import MAX_PIXELS, Segments
    from hil.phy import MAX_PAYLOAD
    from hil.phy.header import SCHEME_JSCC_SEGMENTED

    decs = Decoders(FakeModel())
    lay = Segments.of(2048 * 2048, 6, MAX_PAYLOAD)
    big = Header(1, 0, b"\0" * 8, 4800, (3, 65535, 65535), 0, lay.chunk_count % 65536,
                 SCHEME_JSCC_SEGMENTED)  # fmt: skip
    grey = Header(2, 1, b"\0" * 8, 6, (1, 2, 2))
    evs = [received(big, np.ones(4800)), received(grey, np.ones(6))]
    assert decs.decode(evs) == [] and decs.flush() == []
    assert decs.refused_shape == 2 and decs.dropped() == {"shape": 2, "inconsistent": 0}
    assert 65535 * 65535 > MAX_PIXELS
