"""The separation baseline's decoder for the receiver: LDPC + QAM back to bytes, bytes back to
an image. Registers itself with ``hil.jscc.decoders`` for every digital scheme byte."""

from __future__ import annotations

import numpy as np
import torch

from ..convert import to_torch
from ..jscc.decoders import Decoded, register
from ..phy import FrameEvent
from .digital import MCS_TABLE, DigitalCodec, is_digital_scheme, parse_scheme
from .source import decode as decode_image


class DigitalDecoder:
    """One image per frame. A CRC failure or an undecodable bitstream shows mid-grey
    (``intact`` False), as the baseline's fast evaluation path scores it."""

    def __init__(self, model=None):
        self.codecs: dict[tuple[int, int], DigitalCodec] = {}  # (MCS index, symbols) -> codec

    def decode_one(self, e: FrameEvent) -> Decoded:
        h = e.header
        mi, _codec = parse_scheme(h.scheme)
        key = (mi, len(e.symbols))
        if key not in self.codecs:
            self.codecs[key] = DigitalCodec(MCS_TABLE[mi], len(e.symbols))
        no = 1.0 / np.maximum(e.symbol_gain, 1e-6)
        data = self.codecs[key].decode(to_torch(e.symbols[None]), torch.from_numpy(no[None]))[0]
        img = decode_image(data, h.shape) if data is not None else None
        if img is None:
            return Decoded(e, [e], torch.full(tuple(h.shape), 0.5), intact=False)
        return Decoded(e, [e], torch.from_numpy(img))

    def decode(self, events: list[FrameEvent]) -> list[Decoded]:
        return [self.decode_one(e) for e in events]

    def flush(self) -> list[Decoded]:
        return []  # one frame per image: nothing is ever held


register("digital", is_digital_scheme, DigitalDecoder)
