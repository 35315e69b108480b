"""Image decoders for received frames, keyed by the header's scheme byte.

The receiver does not know how any scheme turns symbols into pixels. Each codec
registers a decoder for the scheme bytes it owns: this module registers the
JSCC (scheme 0, with chunk reassembly for images larger than one frame); the
separation baseline registers its JPEG/WebP/AVIF/HEIF + LDPC schemes when
``hil.baseline.receive`` is imported (the baseline depends on ``jscc``, never the
reverse; the receiver process imports it).

``Decoders`` routes a batch of frames to the decoder of each frame's scheme,
building each decoder on first use, and gives back finished images::

    decs = Decoders(model)                # the checkpoint's JSCC model
    for d in decs.decode(events):         # FrameEvents with status "ok"
        d.first.header.seq, d.image       # image: float32 [3, H, W] in [0, 1]
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from ..convert import to_torch
from ..phy import MAX_PAYLOAD, FrameEvent
from ..phy.header import (
    SCHEME_JSCC,
    SCHEME_JSCC_SEGMENTED,
    SCHEME_JSCC_TILED,
    SCHEME_JSCC_TILED_V1,
)
from .images import (
    MAX_PIXELS,
    TILE,
    Segments,
    deinterleave,
    from_tiles,
    padded_shape,
    tile_grid,
)

_log = logging.getLogger(__name__)


@dataclass
class Decoded:
    """One finished image: its first frame, every frame it came in (chunks, in order),
    the image and whether the payload arrived intact (a digital frame whose CRC failed shows
    mid-grey and is not intact).

    Attributes:
        first: the image's first frame.
        events: every frame it came in, chunks in order.
        image: [3, H, W] float32 in [0, 1], on the CPU.
        intact: False where the payload did not arrive whole (shown mid-grey).
        lost_chunks: frames of the image that never arrived, or (scheme 253) whose payload
            did not fit their place (concealed, JSCC).
    """

    first: FrameEvent
    events: list[FrameEvent]
    image: torch.Tensor
    intact: bool = True
    lost_chunks: int = 0


class SchemeDecoder(Protocol):
    def decode(self, events: list[FrameEvent]) -> list[Decoded]:
        """Frames of this decoder's schemes (status "ok", header read) -> the images they complete."""
        ...

    def flush(self) -> list[Decoded]:
        """The end of the stream: what is still incomplete, as well as it can be decoded."""
        ...


@dataclass(frozen=True)
class _Entry:
    name: str
    accepts: Callable[[int], bool]
    factory: Callable[..., SchemeDecoder]


_REGISTRY: list[_Entry] = []


def register(name: str, accepts: Callable[[int], bool], factory: Callable[..., SchemeDecoder]):
    """Register a decoder for the scheme bytes ``accepts`` says yes to. ``factory(model)``
    builds it (``model`` is the receiver's JSCC model, or None without a decoder)."""
    if any(e.name == name for e in _REGISTRY):
        raise ValueError(f"a decoder named {name!r} is already registered")
    _REGISTRY.append(_Entry(name, accepts, factory))


def scheme_name(scheme: int) -> str | None:
    """The registered decoder that owns a scheme byte, or None: a frame nobody can decode."""
    if not 0 <= scheme <= 255:
        raise ValueError(f"a scheme is one byte, got {scheme}")
    for e in _REGISTRY:
        if e.accepts(scheme):
            return e.name
    return None


class Decoders:
    """Routes frames to their scheme's decoder; each decoder is built on first use."""

    def __init__(self, model):
        self.model = model
        self._built: dict[str, SchemeDecoder] = {}
        self.refused_shape = 0  # frames of images no decoder makes (not RGB, too large)

    def get(self, name: str) -> SchemeDecoder:
        if name not in self._built:
            entry = next(e for e in _REGISTRY if e.name == name)
            self._built[name] = entry.factory(self.model)
        return self._built[name]

    def decode(self, events: list[FrameEvent]) -> list[Decoded]:
        """Frames (status "ok") -> finished images, in the order each decoder returns them.
        A frame of a scheme nobody registered raises ValueError: callers refuse those first
        (``scheme_name`` is None). A frame of an image that is not RGB or has more than
        ``MAX_PIXELS`` pixels (what ``hil tx`` reads at most) is dropped, counted in
        ``refused_shape`` and logged: its header alone would have the decoder make a picture
        of up to 65535 x 65535."""
        groups: dict[str, list[FrameEvent]] = {}
        for e in events:
            c, h, w = e.header.shape
            if c != 3 or h * w > MAX_PIXELS:  # no decoder makes that picture: a bomb, not a photo
                self.refused_shape += 1
                _log.warning("frame %d dropped: an image of shape %s is not decoded (RGB, at "
                             "most %d pixels)", e.header.seq, e.header.shape, MAX_PIXELS)  # fmt: skip
                continue
            name = scheme_name(e.header.scheme)
            if name is None:
                raise ValueError(f"no decoder for scheme {e.header.scheme}")
            groups.setdefault(name, []).append(e)
        out: list[Decoded] = []
        for name, evs in groups.items():
            out.extend(self.get(name).decode(evs))
        return out

    def flush(self) -> list[Decoded]:
        """The end of the stream: each decoder's incomplete images."""
        return [d for dec in self._built.values() for d in dec.flush()]

    def dropped(self) -> dict[str, int]:
        """Frames dropped before any picture: ``shape`` (not RGB, or too large) and
        ``inconsistent`` (disagreeing with their image's other frames)."""
        held = [getattr(d, "chunks", None) for d in self._built.values()]
        return {
            "shape": self.refused_shape,
            "inconsistent": sum(c.inconsistent for c in held if c is not None),
        }


class ChunkAssembler:
    """Frames of images larger than one frame, held until the image is complete.

    An image comes as ``chunk_count`` frames with consecutive sequence numbers. They are held
    until all have arrived, in any order (a duplicate is dropped); an image whose frames did
    not all arrive is given up on, its missing chunks as None, once a frame
    ``reorder_window`` sequence numbers past its last one arrives, or at ``flush`` (the end of
    the stream). Beyond ``max_pending`` incomplete images the oldest is given up on early, so
    memory stays bounded on a lossy link. A single-frame image is ready at once. A frame
    whose chunk count, shape or scheme disagrees with the frames already held for its image
    (a corrupt or hostile header) is dropped, counted in ``inconsistent`` and logged.
    """

    def __init__(self, max_pending: int = 256, reorder_window: int = 64):
        self.max_pending = max_pending
        self.reorder_window = reorder_window
        self.pending: dict[tuple[int, int], dict[int, FrameEvent]] = {}
        self.finished: dict[tuple[int, int], None] = {}  # recently completed, for duplicates
        self.newest_seq = -1
        self.inconsistent = 0  # frames that disagreed with the rest of their image: dropped

    def add(self, events: list[FrameEvent]) -> list[list[FrameEvent | None]]:
        """Frames -> the images they complete (or give up on): each its chunks in order,
        None where one never arrived."""
        ready: list[list[FrameEvent | None]] = []
        for e in events:
            h = e.header
            self.newest_seq = max(self.newest_seq, h.seq)
            if h.chunk_count == 1:
                ready.append([e])
                continue
            key = (h.item_id, h.seq - h.chunk_index)  # (item, seq of its first chunk)
            if key in self.finished:
                continue  # a duplicate of a frame of an image already decoded
            part = self.pending.setdefault(key, {})
            if part:  # an image's frames agree on its chunk count, shape and scheme
                ref = next(iter(part.values())).header
                if (h.chunk_count, h.shape, h.scheme) != (ref.chunk_count, ref.shape, ref.scheme):
                    self.inconsistent += 1
                    _log.warning(
                        "frame %d dropped: chunk %d of %d, shape %s, scheme %d, but the frames "
                        "held for its image say %d chunks, shape %s, scheme %d",
                        h.seq, h.chunk_index, h.chunk_count, h.shape, h.scheme,
                        ref.chunk_count, ref.shape, ref.scheme,
                    )  # fmt: skip
                    continue
            part[h.chunk_index] = e
            if len(part) == h.chunk_count:
                ready.append([part[i] for i in range(h.chunk_count)])
                self._finish(key)
        for key in list(self.pending):  # images whose missing frames are not coming
            part = self.pending[key]
            count = next(iter(part.values())).header.chunk_count
            if self.newest_seq > key[1] + count - 1 + self.reorder_window:
                ready.append(self._give_up(key))
        while len(self.pending) > self.max_pending:
            ready.append(self._give_up(next(iter(self.pending))))
        return ready

    def flush(self) -> list[list[FrameEvent | None]]:
        """The end of the stream: every incomplete image, None where a chunk is missing."""
        return [self._give_up(k) for k in list(self.pending)]

    def _finish(self, key) -> None:
        self.pending.pop(key, None)
        self.finished[key] = None
        while len(self.finished) > 4 * self.max_pending:
            self.finished.pop(next(iter(self.finished)))

    def _give_up(self, key) -> list[FrameEvent | None]:
        part = self.pending[key]
        count = next(iter(part.values())).header.chunk_count
        self._finish(key)
        return [part.get(i) for i in range(count)]


class JsccDecoder:
    """Schemes 0, 253, 254 and 255: the JSCC model's decoder, with chunk reassembly and loss
    concealment.

    An image larger than one frame is reassembled by a ``ChunkAssembler`` (any order,
    duplicates dropped). An image whose frames did not all arrive is decoded anyway, its
    missing symbols as zeros with zero symbol gain (the decoder's "nothing received here"),
    once the assembler gives up on it: a lost frame costs only its part of the image. Images
    of one shape are decoded in one batch. The header's shape is the image's own; the codec
    decodes at ``padded_shape`` and the image is cut back to its size. Scheme 254
    (``SCHEME_JSCC_TILED``): the symbols are the image's 32x32 tiles interleaved
    (``interleave``, with its rotation across subcarriers), decoded tile by tile and put
    together; scheme 255 (``SCHEME_JSCC_TILED_V1``), what transmitters sent before, the same
    without the rotation. Scheme 253 (``SCHEME_JSCC_SEGMENTED``): the tiles in segments
    (``Segments``), each decoded as soon as the frames that hold it are in, so the image is
    ready a segment's decode after its last frame, not a whole image's.
    """

    def __init__(self, model, max_pending: int = 256, reorder_window: int = 64):
        if model is None:
            raise ValueError("the JSCC decoder needs a model (rx without --no-decode)")
        self.model = model
        self.chunks = ChunkAssembler(max_pending, reorder_window)
        self.k_tile = model.cfg.n_symbols((3, TILE, TILE))
        # scheme 253: (item id, first seq) -> segment -> its decoded tiles [n, 3, 32, 32]
        self.segments_done: dict[tuple[int, int], dict[int, torch.Tensor]] = {}

    def flush(self) -> list[Decoded]:
        """The end of the stream: every incomplete image, concealed."""
        return self._decode(self.chunks.flush())

    def decode(self, events: list[FrameEvent]) -> list[Decoded]:
        return self._decode(self.chunks.add(events))

    def _decode(self, complete: list[list]) -> list[Decoded]:
        seg = [evs for evs in complete if _first(evs).header.scheme == SCHEME_JSCC_SEGMENTED]
        rest = [evs for evs in complete if _first(evs).header.scheme != SCHEME_JSCC_SEGMENTED]
        return self._decode_whole(rest) + self._decode_segments(seg)

    def _layout(self, h) -> Segments | None:
        """Scheme 253's layout for a frame's header; None where the header's chunk count
        disagrees with it (a frame nobody can place)."""
        lay = _segments(tuple(h.shape[1:]), self.k_tile)
        return lay if lay.chunk_count == h.chunk_count else None

    def _decode_segments(self, complete: list[list]) -> list[Decoded]:
        """Scheme 253: every segment whose frames are all in (images still waiting for others
        included), and every segment left of the images ``complete`` finishes (their lost
        frames concealed), in one decoder batch; then the finished images put together."""
        jobs = []  # _job's: (key, layout, segment, symbols, gains, SNR dB)
        for key, part in self.chunks.pending.items():
            h = next(iter(part.values())).header
            lay = self._layout(h) if h.scheme == SCHEME_JSCC_SEGMENTED else None
            if lay is None:
                continue
            done = self.segments_done.get(key, {})
            for s in range(len(lay.tiles)):
                if s not in done and all(c in part for c in lay.chunks(s)):
                    jobs.append(_job(key, lay, s, part))
        finished = []  # (key, layout, events with None where lost)
        for evs in complete:
            first = _first(evs)
            key = (first.header.item_id, first.header.seq - first.header.chunk_index)
            lay = self._layout(first.header)
            if lay is None:  # header and payload disagree: nothing to decode
                self.segments_done.pop(key, None)
                continue
            part = {i: e for i, e in enumerate(evs) if e is not None}
            done = self.segments_done.get(key, {})
            jobs.extend(_job(key, lay, s, part) for s in range(len(lay.tiles)) if s not in done)
            finished.append((key, lay, evs))
        if jobs:
            sym = np.concatenate([j[3] for j in jobs])
            gain = np.concatenate([j[4] for j in jobs])
            snr = torch.cat([torch.full((len(j[3]),), j[5]) for j in jobs])
            with torch.inference_mode():
                img = self.model.decode_received(
                    to_torch(sym), snr, (3, TILE, TILE), torch.from_numpy(gain)
                ).clamp(0, 1)
            at = 0
            for key, _lay, s, y, _g, _snr in jobs:
                self.segments_done.setdefault(key, {})[s] = img[at : at + len(y)]
                at += len(y)
        out = []
        for key, lay, evs in finished:
            done = self.segments_done.pop(key)
            tiles = torch.cat([done[s] for s in range(len(lay.tiles))])
            got = [e for e in evs if e is not None]
            # frames that never came, and those whose payload did not fit their place
            lost = len(evs) - len(got)
            lost += sum(len(e.symbols) != lay.chunk_len(i) for i, e in enumerate(evs) if e)
            shape = tuple(got[0].header.shape)
            out.append(Decoded(got[0], got, from_tiles(tiles, shape[1:]), lost_chunks=lost))
        return out

    def _decode_whole(self, complete: list[list]) -> list[Decoded]:
        by_shape: dict[tuple, list[list]] = {}
        for evs in complete:
            first = next(e for e in evs if e is not None)
            key = (tuple(first.header.shape), first.header.scheme)
            by_shape.setdefault(key, []).append(evs)
        out = []
        with torch.inference_mode():
            for (shape, scheme), group in by_shape.items():
                tiled = scheme in (SCHEME_JSCC_TILED, SCHEME_JSCC_TILED_V1)
                rotate = scheme == SCHEME_JSCC_TILED
                if tiled:
                    n_tiles = int(np.prod(tile_grid(shape[1:])))
                    k = n_tiles * self.model.cfg.n_symbols((3, TILE, TILE))
                else:
                    padded = padded_shape(shape)
                    k = self.model.cfg.n_symbols(padded)
                rows = [_symbols(evs, k) for evs in group]
                keep = [i for i, r in enumerate(rows) if r is not None]
                if not keep:  # header and payload disagree: nothing to decode
                    continue
                sym = np.stack([rows[i][0] for i in keep])
                gain = np.stack([rows[i][1] for i in keep])
                snr = torch.tensor(
                    [float(np.mean([e.snr_db for e in group[i] if e is not None])) for i in keep]
                )
                if tiled:  # every tile of every image in one batch, then each image put together
                    n = len(keep)
                    sym = np.concatenate([deinterleave(r, n_tiles, rotate) for r in sym])
                    gain = np.concatenate([deinterleave(r, n_tiles, rotate) for r in gain])
                    img = self.model.decode_received(
                        to_torch(np.ascontiguousarray(sym)),
                        snr.repeat_interleave(n_tiles),
                        (3, TILE, TILE),
                        torch.from_numpy(np.ascontiguousarray(gain)),
                    ).clamp(0, 1)
                    img = torch.stack(
                        [from_tiles(t, shape[1:]) for t in img.reshape(n, n_tiles, 3, TILE, TILE)]
                    )
                else:
                    img = self.model.decode_received(
                        to_torch(sym), snr, padded, torch.from_numpy(gain)
                    )
                    img = img.clamp(0, 1)[:, :, : shape[1], : shape[2]]
                for j, i in enumerate(keep):
                    evs = group[i]
                    got = [e for e in evs if e is not None]
                    lost = len(evs) - len(got)
                    out.append(Decoded(got[0], got, img[j], lost_chunks=lost))
        return out


def _first(evs: list) -> FrameEvent:
    return next(e for e in evs if e is not None)


@functools.lru_cache(maxsize=64)
def _segments(size: tuple[int, int], k: int) -> Segments:
    """``Segments.for_image`` for frames of MAX_PAYLOAD, kept: a photograph's frames all ask
    for the same layout."""
    return Segments.for_image(size, k, MAX_PAYLOAD)


def _job(key, lay: Segments, s: int, part: dict) -> tuple:
    """One segment to decode: (key, layout, segment, symbols [tiles, k] complex64, gains
    [tiles, k] float32, SNR dB: the mean of its frames', or of the image's where all of its
    frames were lost). A frame whose payload is not the layout's length counts as lost."""
    payloads, snrs = {}, []
    for c in lay.chunks(s):
        e = part.get(c)
        if e is not None and len(e.symbols) == lay.chunk_len(c):
            payloads[c] = (e.symbols, e.symbol_gain)
            snrs.append(e.snr_db)
    if not snrs:
        snrs = [e.snr_db for e in part.values()]
    sym, gain = lay.join(s, payloads)
    return key, lay, s, sym, gain, float(np.mean(snrs))


def _symbols(evs: list, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """An image's symbols and per-symbol gains from its chunks in order (None: missing, zeros);
    None when the chunks cannot make k symbols (header and payload disagree)."""
    got = [e for e in evs if e is not None]
    if len(got) == len(evs):
        sym = np.concatenate([e.symbols for e in evs])
        if len(sym) != k:
            return None
        return sym, np.concatenate([e.symbol_gain for e in evs])
    # every chunk but the last is full; the missing ones get zeros, their gain zero
    n = len(evs)
    if evs[-1] is not None and n > 1:  # the full size from what the last leaves of k
        full, rest = divmod(k - len(evs[-1].symbols), n - 1)
        if rest or any(e is not None and len(e.symbols) != full for e in evs[:-1]):
            return None
    else:
        full = max(len(e.symbols) for e in got)
    sizes = [full] * (n - 1) + [k - full * (n - 1)]
    if (
        full <= 0
        or sizes[-1] <= 0
        or any(len(e.symbols) != sizes[i] for i, e in enumerate(evs) if e)
    ):
        return None
    sym = np.zeros(k, np.complex64)
    gain = np.zeros(k, np.float32)
    at = 0
    for e, size in zip(evs, sizes, strict=True):
        if e is not None:
            sym[at : at + size] = e.symbols
            gain[at : at + size] = e.symbol_gain
        at += size
    return sym, gain


register(
    "jscc",
    lambda scheme: (
        scheme in (SCHEME_JSCC, SCHEME_JSCC_TILED, SCHEME_JSCC_TILED_V1, SCHEME_JSCC_SEGMENTED)
    ),
    JsccDecoder,
)
