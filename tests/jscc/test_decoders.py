"""Decoders by scheme byte: the registry, routing, and the JSCC's chunk reassembly."""

import numpy as np
import pytest
import torch

import hil.baseline.receive  # noqa: F401 (registers the digital schemes, as the receiver does)
from hil.baseline.digital import is_digital_scheme, scheme_id
from hil.jscc.decoders import Decoders, JsccDecoder, register, scheme_name
from hil.phy import FrameEvent
from hil.phy.header import Header


def test_every_scheme_byte_has_one_owner_or_none():
    assert scheme_name(0) == "jscc"
    for s in range(1, 256):
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
    sym = np.asarray(symbols, np.complex64)
    return FrameEvent(
        "ok",
        0,
        0.0,
        0.0,
        1.0,
        1.0,
        header=h,
        symbols=sym,
        symbol_gain=np.ones(len(sym), np.float32),
        snr_db=10.0,
    )


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
    assert dec.pending == {}


def test_pending_images_are_bounded():
    dec = JsccDecoder(FakeModel(), max_pending=4)
    for i in range(10):
        dec.decode([event(100 * i, i, [1, 2], 0, 3)])
    assert len(dec.pending) == 4 and min(k[0] for k in dec.pending) == 6  # oldest dropped


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
