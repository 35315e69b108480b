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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from ..convert import to_torch
from ..phy import FrameEvent


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
    """

    first: FrameEvent
    events: list[FrameEvent]
    image: torch.Tensor
    intact: bool = True


class SchemeDecoder(Protocol):
    def decode(self, events: list[FrameEvent]) -> list[Decoded]:
        """Frames of this decoder's schemes (status "ok", header read) -> the images they complete."""
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

    def get(self, name: str) -> SchemeDecoder:
        if name not in self._built:
            entry = next(e for e in _REGISTRY if e.name == name)
            self._built[name] = entry.factory(self.model)
        return self._built[name]

    def decode(self, events: list[FrameEvent]) -> list[Decoded]:
        """Frames (status "ok") -> finished images, in the order each decoder returns them.
        A frame of a scheme nobody registered raises ValueError: callers refuse those first
        (``scheme_name`` is None)."""
        groups: dict[str, list[FrameEvent]] = {}
        for e in events:
            name = scheme_name(e.header.scheme)
            if name is None:
                raise ValueError(f"no decoder for scheme {e.header.scheme}")
            groups.setdefault(name, []).append(e)
        out: list[Decoded] = []
        for name, evs in groups.items():
            out.extend(self.get(name).decode(evs))
        return out


class JsccDecoder:
    """Scheme 0: the JSCC model's decoder, with chunk reassembly.

    An image larger than one frame comes as ``chunk_count`` frames with consecutive
    sequence numbers; they are held until all have arrived, then decoded together
    (their symbols concatenated in chunk order). Incomplete images are dropped
    oldest first beyond ``max_pending``, so memory stays bounded on a lossy link.
    Images of one shape are decoded in one batch.
    """

    def __init__(self, model, max_pending: int = 256):
        if model is None:
            raise ValueError("the JSCC decoder needs a model (rx without --no-decode)")
        self.model = model
        self.max_pending = max_pending
        self.pending: dict[tuple[int, int], dict[int, FrameEvent]] = {}

    def _complete(self, events: list[FrameEvent]) -> list[list[FrameEvent]]:
        ready = []
        for e in events:
            h = e.header
            if h.chunk_count == 1:
                ready.append([e])
                continue
            key = (h.item_id, h.seq - h.chunk_index)  # (item, seq of its first chunk)
            part = self.pending.setdefault(key, {})
            part[h.chunk_index] = e
            if len(part) == h.chunk_count:
                ready.append([part[i] for i in range(h.chunk_count)])
                del self.pending[key]
            if len(self.pending) > self.max_pending:
                self.pending.pop(next(iter(self.pending)))
        return ready

    def decode(self, events: list[FrameEvent]) -> list[Decoded]:
        by_shape: dict[tuple, list[list[FrameEvent]]] = {}
        for evs in self._complete(events):
            by_shape.setdefault(tuple(evs[0].header.shape), []).append(evs)
        out = []
        with torch.inference_mode():
            for shape, group in by_shape.items():
                k = self.model.cfg.n_symbols(shape)
                sym = np.stack([np.concatenate([e.symbols for e in evs]) for evs in group])
                gain = np.stack([np.concatenate([e.symbol_gain for e in evs]) for evs in group])
                if sym.shape[1] != k:  # header and payload disagree: nothing to decode
                    continue
                snr = torch.tensor([float(np.mean([e.snr_db for e in evs])) for evs in group])
                img = self.model.decoder(to_torch(sym), snr, shape, torch.from_numpy(gain))
                img = img.clamp(0, 1)
                out.extend(Decoded(evs[0], evs, img[i]) for i, evs in enumerate(group))
        return out


register("jscc", lambda scheme: scheme == 0, JsccDecoder)
