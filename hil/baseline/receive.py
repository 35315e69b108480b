"""The separation baseline's decoder for the receiver: LDPC + QAM back to bytes, bytes back to
an image. Registers itself with ``hil.jscc.decoders`` for every digital scheme byte."""

from __future__ import annotations

import logging

import numpy as np
import torch

from ..convert import to_torch
from ..jscc.decoders import ChunkAssembler, Decoded, register
from ..phy import FrameEvent
from .digital import MCS_TABLE, DigitalCodec, is_digital_scheme, is_whole_scheme, parse_scheme
from .source import decode as decode_image
from .whole import GREY, WholeCodec, assemble
from .whole import decode_image as decode_whole

log = logging.getLogger("hil.baseline")


MAX_CODECS = 16  # (MCS, payload size) codecs kept: a stream names the sizes


class DigitalDecoder:
    """Schemes 1..32: one image per frame; a CRC failure or an undecodable bitstream shows
    mid-grey (``intact`` False), as the baseline's fast evaluation path scores it.

    Schemes 33..64: a whole photograph across frames in block framing
    (``hil.baseline.whole``), reassembled by a ``ChunkAssembler`` (any order, duplicates
    dropped, given up on when the frames stop coming). Its codewords that decode are put
    together; a photograph missing bytes gets the codec's picture from the bytes before the
    first gap (JPEG's grey-filled rest) or mid-grey, and is not ``intact``."""

    def __init__(self, model=None, max_pending: int = 64, reorder_window: int = 64):
        self.codecs: dict[tuple[int, int], DigitalCodec] = {}  # (MCS index, symbols) -> codec
        self.whole: dict[int, WholeCodec] = {}  # MCS index -> codec
        self.chunks = ChunkAssembler(max_pending, reorder_window)

    def _codec(self, mi: int, n: int, seq: int) -> DigitalCodec | None:
        """The codec of MCS ``mi`` for payloads of ``n`` symbols (kept, at most
        ``MAX_CODECS``); None where no 5G LDPC code of the MCS fits ``n`` (logged)."""
        key = (mi, n)
        if key not in self.codecs:
            try:
                codec = DigitalCodec(MCS_TABLE[mi], n)
            except ValueError as err:
                log.warning("frame %d: %d symbols in %s: %s", seq, n, MCS_TABLE[mi].name, err)
                return None
            if len(self.codecs) >= MAX_CODECS:  # payload sizes a stream names: bounded
                self.codecs.pop(next(iter(self.codecs)))
            self.codecs[key] = codec
        return self.codecs[key]

    def decode_one(self, e: FrameEvent) -> Decoded:
        h = e.header
        mi, _codec = parse_scheme(h.scheme)
        codec = self._codec(mi, len(e.symbols), h.seq)
        data = None
        if codec is not None:
            no = 1.0 / np.maximum(e.symbol_gain, 1e-6)
            data = codec.decode(to_torch(e.symbols[None]), torch.from_numpy(no[None]))[0]
        img = decode_image(data, h.shape) if data is not None else None
        if img is None:
            return Decoded(e, [e], torch.full(tuple(h.shape), 0.5), intact=False)
        return Decoded(e, [e], torch.from_numpy(img))

    def decode_whole(self, evs: list[FrameEvent | None]) -> Decoded:
        """One photograph's frames in chunk order (None: never arrived)."""
        got = [e for e in evs if e is not None]
        mi, _codec = parse_scheme(got[0].header.scheme)
        if mi not in self.whole:
            self.whole[mi] = WholeCodec(mi)
        wc = self.whole[mi]
        try:
            blocks = wc.decode_frames([(e.symbols, e.symbol_gain) for e in got])
        except ValueError as err:  # frame sizes no 5G LDPC code of this MCS fits
            log.warning("item %d: frames not decodable as %s: %s", got[0].header.item_id,
                        MCS_TABLE[mi].name, err)  # fmt: skip
            grey = torch.full(tuple(got[0].header.shape), GREY)
            return Decoded(got[0], got, grey, False, len(evs) - len(got))
        a = assemble([b for bs in blocks for b in bs])
        img, intact = decode_whole(a, got[0].header.shape)
        words = sum(len(wc.codec(len(e.symbols)).segments) for e in got)
        log.info(
            "item %d: %d of %d frames, %d of %d codewords decoded, %d of %d bytes missing%s",
            got[0].header.item_id,
            len(got),
            len(evs),
            sum(len(bs) for bs in blocks),
            words,
            a.missing,
            a.length,
            "" if intact else ": not intact",
        )
        return Decoded(got[0], got, torch.from_numpy(img), intact, len(evs) - len(got))

    def decode(self, events: list[FrameEvent]) -> list[Decoded]:
        out = [self.decode_one(e) for e in events if not is_whole_scheme(e.header.scheme)]
        whole = [e for e in events if is_whole_scheme(e.header.scheme)]
        return out + [self.decode_whole(evs) for evs in self.chunks.add(whole)]

    def flush(self) -> list[Decoded]:
        """The end of the stream: whole photographs still missing frames, as far as they go."""
        return [self.decode_whole(evs) for evs in self.chunks.flush()]


register("digital", is_digital_scheme, DigitalDecoder)
