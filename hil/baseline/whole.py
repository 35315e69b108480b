"""The separation baseline for whole photographs: one bitstream per image, LDPC codewords across
frames, each codeword standing alone.

A photograph of ``n_symbols`` payload symbols (the JSCC's for the same image, so both spend
the same airtime) goes out in ``frame_sizes(n_symbols)`` frames of at most ``MAX_PAYLOAD``
symbols, sized evenly so that no frame is a stub too short to code. Each frame is one
``DigitalCodec`` over its symbols: 5G NR LDPC codewords as long as the frame allows (up to
8448 information bits) and, in block framing, every codeword carrying

    total bitstream length u32 | byte offset of this block u32 | bytes | (zero pad) | CRC-32

so a codeword decodes on its own, whichever frames were lost, reordered or duplicated. The
receiver (``assemble``) puts the bitstream together from the codewords whose CRC holds. With
every byte there it is decoded as usual; with some missing, the codec gets the bytes before
the first gap (a truncated bitstream, as a real receiver without retransmission would hand
it on): JPEG decodes what it has and greys the rest, the other codecs usually give nothing,
and the image shows mid-grey. That is how each codec fails, not a model of it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from ..phy import MAX_PAYLOAD
from .digital import MCS_TABLE, DigitalCodec, Mcs
from .source import decode, decode_truncated

BLOCK_HEADER = 8  # bytes: total length u32, offset u32
MAX_CODECS = 16  # frame sizes whose codecs a WholeCodec keeps (a photograph needs two)
GREY = 0.5


def frame_sizes(n_symbols: int, frame: int = MAX_PAYLOAD) -> list[int]:
    """The symbols of each frame: as few frames of at most ``frame`` symbols as hold
    ``n_symbols``, their sizes as even as can be (the first ones one symbol longer)."""
    if n_symbols < 1:
        raise ValueError(f"an image needs at least one symbol, got {n_symbols}")
    count = -(-n_symbols // frame)
    q, r = divmod(n_symbols, count)
    return [q + (i < r) for i in range(count)]


class WholeCodec:
    """One MCS: bitstreams of whole photographs <-> frames of symbols (block framing)."""

    def __init__(self, mcs: Mcs | int, num_iter: int = 20):
        self.mcs = MCS_TABLE[mcs] if isinstance(mcs, int) else mcs
        self.num_iter = num_iter
        self._codecs: dict[int, DigitalCodec] = {}

    def codec(self, n: int) -> DigitalCodec:
        """The ``DigitalCodec`` of a frame of ``n`` symbols (built once per size)."""
        if n not in self._codecs:
            if len(self._codecs) >= MAX_CODECS:  # frame sizes a stream names: bounded
                self._codecs.pop(next(iter(self._codecs)))
            self._codecs[n] = DigitalCodec(self.mcs, n, self.num_iter)
        return self._codecs[n]

    def _data_capacity(self, n: int) -> list[int]:
        return [max(0, c - BLOCK_HEADER) for c in self.codec(n).block_capacity]

    def capacity(self, n_symbols: int) -> int:
        """Bytes of bitstream a photograph of ``n_symbols`` symbols can carry."""
        return sum(sum(self._data_capacity(n)) for n in frame_sizes(n_symbols))

    def encode(self, bitstream: bytes, n_symbols: int) -> list[np.ndarray]:
        """A bitstream (at most ``capacity(n_symbols)`` bytes) -> the frames' symbols, each
        [frame size] complex64 (unit average energy)."""
        cap = self.capacity(n_symbols)
        if len(bitstream) > cap:
            raise ValueError(
                f"a {len(bitstream)}-byte bitstream exceeds the {cap} bytes {self.mcs.name} "
                f"carries in {n_symbols} symbols"
            )
        frames, at = [], 0
        for n in frame_sizes(n_symbols):
            blocks = []
            for c in self._data_capacity(n):
                part = bitstream[at : at + c]
                blocks.append(struct.pack(">II", len(bitstream), at) + part if c else b"")
                at += c
            frames.append(self.codec(n).encode_blocks(blocks).numpy().astype(np.complex64))
        return frames

    def decode_frames(
        self, frames: list[tuple[np.ndarray, np.ndarray]]
    ) -> list[list[tuple[int, int, bytes]]]:
        """Received frames, each (equalised symbols [n] complex, their post-equalisation SNR
        ``symbol_gain`` [n] real), frames of one size decoded in one batch -> per frame the
        codewords that decoded, (total length, offset, bytes)."""
        import torch

        out: list[list[tuple[int, int, bytes]]] = [[] for _ in frames]
        for n in sorted({len(s) for s, _ in frames}):
            idx = [i for i, (s, _) in enumerate(frames) if len(s) == n]
            y = torch.from_numpy(np.stack([np.asarray(frames[i][0], np.complex64) for i in idx]))
            g = np.stack([np.asarray(frames[i][1], np.float32) for i in idx])
            no = torch.from_numpy(1.0 / np.maximum(g, 1e-6))
            for i, blocks in zip(idx, self.codec(n).decode_blocks(y, no), strict=True):
                for b in blocks:
                    if b is not None and len(b) >= BLOCK_HEADER:
                        total, offset = struct.unpack(">II", b[:BLOCK_HEADER])
                        out[i].append((total, offset, b[BLOCK_HEADER:]))
        return out


@dataclass
class Assembled:
    """A whole photograph's bitstream as far as its codewords arrived.

    Attributes:
        data: the bitstream, or the bytes before the first gap when some are missing
            (empty when nothing arrived).
        complete: every byte arrived.
        length: the bitstream's length as the codewords state it (0: none arrived).
        missing: bytes missing.
    """

    data: bytes
    complete: bool
    length: int
    missing: int


def assemble(blocks: list[tuple[int, int, bytes]]) -> Assembled:
    """Codewords (total length, offset, bytes) in any order, duplicates allowed -> the
    bitstream. Codewords that disagree on the length (a CRC that passed by chance) are
    outvoted by the length most of them state."""
    if not blocks:
        return Assembled(b"", False, 0, 0)
    lengths = [t for t, _, _ in blocks]
    total = max(set(lengths), key=lengths.count)
    buf = bytearray(total)
    have = np.zeros(total, bool)
    for t, off, b in blocks:
        if t != total or off >= total:
            continue
        b = b[: total - off]
        buf[off : off + len(b)] = b
        have[off : off + len(b)] = True
    missing = int((~have).sum())
    if missing == 0:
        return Assembled(bytes(buf), True, total, 0)
    first_gap = int(np.argmin(have))
    return Assembled(bytes(buf[:first_gap]), False, total, missing)


def decode_image(a: Assembled, shape: tuple[int, int, int]) -> tuple[np.ndarray, bool]:
    """The assembled bitstream -> ([3, H, W] float32 in [0, 1], intact): the codec's picture
    when it decodes (from a truncated bitstream where bytes are missing), else mid-grey."""
    img = None
    if a.complete:
        img = decode(a.data, shape)
    elif a.data:
        img = decode_truncated(a.data, shape)
    if img is None:
        return np.full(shape, GREY, np.float32), False
    return img, a.complete
