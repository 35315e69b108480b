"""Whole photographs of any size for the link: found, identified by content, padded for the codec.

The JSCC codec is fully convolutional but needs H and W divisible by 4 (two stride-2 stages).
A photograph of any size is sent at its full resolution: padded on the bottom and right by
repeating its edge (``pad``), encoded whole, and cut back to its own size by the receiver
(the frame header carries the image's real size; ``padded_shape`` is the codec's).

An image is named by its content (``content_id``: SHA-256 of its size and pixels), not by a
position in a list: the transmitter's manifest says which content each item is, and a
receiver holding the same files (``hil rx --image``/``--images``) finds its reference by that
id, whatever the files are called or in which order they were given.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from .data import IMAGE_EXT, load_image

MULTIPLE = 4  # the codec's downsampling: H and W must be multiples of it
MAX_SIDE = 65535  # the frame header's 16-bit height and width
MAX_PIXELS = 40_000_000  # a guard against a decompression bomb, not a codec limit


@dataclass(frozen=True)
class WholeImage:
    """One photograph to send.

    Attributes:
        name: the file's name (for the user's eyes; never used to pair images).
        content_id: SHA-256 (hex) of the size and the RGB pixels.
        pixels: [3, H, W] uint8, on the CPU.
    """

    name: str
    content_id: str
    pixels: torch.Tensor

    @property
    def size(self) -> tuple[int, int]:
        return int(self.pixels.shape[1]), int(self.pixels.shape[2])

    def as_float(self) -> torch.Tensor:
        """[3, H, W] float32 in [0, 1]."""
        return self.pixels.float() / 255.0


def content_id(pixels: torch.Tensor) -> str:
    """pixels [3, H, W] uint8 -> SHA-256 (hex) over the image's shape and its RGB pixels: the
    same picture read from a PNG or a lossless copy gets the same id; a one-pixel change gets
    another."""
    if pixels.dtype != torch.uint8 or pixels.ndim != 3 or pixels.shape[0] != 3:
        raise ValueError(
            f"expected [3, H, W] uint8 pixels, got {pixels.dtype} {tuple(pixels.shape)}"
        )
    h = hashlib.sha256()
    h.update(f"{pixels.shape[1]}x{pixels.shape[2]}:".encode())
    h.update(pixels.contiguous().numpy().tobytes())
    return h.hexdigest()


def read_image(path: str | os.PathLike) -> WholeImage:
    """One image file as a WholeImage; ValueError with the reason for anything unreadable or
    too large for a frame header."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"image {p} does not exist")
    px = load_image(p)
    h, w = px.shape[1:]
    if h < MULTIPLE or w < MULTIPLE:
        raise ValueError(f"image {p} is {w}x{h}: at least {MULTIPLE}x{MULTIPLE} pixels")
    if max(h, w) > MAX_SIDE or h * w > MAX_PIXELS:
        raise ValueError(
            f"image {p} is {w}x{h}: at most {MAX_SIDE} pixels a side and {MAX_PIXELS} in all"
        )
    return WholeImage(p.name, content_id(px), px)


def gather_images(
    files: list[str] | None = None, dirs: list[str] | None = None
) -> list[WholeImage]:
    """``--image FILE`` (in the order given) then the images under each ``--images DIR`` (sorted
    by path); a picture given twice (same content) is sent once."""
    paths = [Path(f) for f in files or []]
    for d in dirs or []:
        dp = Path(d)
        if not dp.is_dir():
            raise ValueError(f"--images {dp}: not a folder")
        found = sorted(f for f in dp.rglob("*") if f.is_file() and f.suffix.lower() in IMAGE_EXT)
        if not found:
            raise ValueError(f"--images {dp}: no images ({', '.join(IMAGE_EXT)}) in it")
        paths.extend(found)
    out, seen = [], set()
    for p in paths:
        im = read_image(p)
        if im.content_id not in seen:
            seen.add(im.content_id)
            out.append(im)
    return out


def padded_shape(shape: tuple[int, int, int]) -> tuple[int, int, int]:
    """The codec's shape for an image of ``shape`` (C, H, W): H and W rounded up to MULTIPLE."""
    c, h, w = shape
    return c, -(-h // MULTIPLE) * MULTIPLE, -(-w // MULTIPLE) * MULTIPLE


def pad(x: torch.Tensor) -> torch.Tensor:
    """x [3, H, W] or [B, 3, H, W] float32 -> the same with H, W rounded up (``padded_shape``),
    the last row and column repeated: an edge, not a black border, so the codec spends nothing
    on a step that is not there."""
    h, w = x.shape[-2:]
    _, hp, wp = padded_shape((3, h, w))
    if (hp, wp) == (h, w):
        return x
    y = x if x.ndim == 4 else x[None]
    y = F.pad(y, (0, wp - w, 0, hp - h), mode="replicate")
    return y if x.ndim == 4 else y[0]


TILE = 32  # the tiled mode's tile: the size the shipped models were trained on


def tile_grid(size: tuple[int, int], t: int = TILE) -> tuple[int, int]:
    """Tiles (rows, columns) covering an image of ``size`` (H, W)."""
    return -(-size[0] // t), -(-size[1] // t)


def to_tiles(x: torch.Tensor, t: int = TILE) -> torch.Tensor:
    """x [3, H, W] float32 -> [rows * cols, 3, t, t] float32: the image padded (edge) to whole
    tiles, cut row by row."""
    h, w = x.shape[1:]
    r, c = tile_grid((h, w), t)
    y = F.pad(x[None], (0, c * t - w, 0, r * t - h), mode="replicate")[0]
    return y.reshape(3, r, t, c, t).permute(1, 3, 0, 2, 4).reshape(r * c, 3, t, t)


def from_tiles(tiles: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """tiles [rows * cols, 3, t, t] float32 (``to_tiles``) -> [3, H, W] float32 of ``size``."""
    t = tiles.shape[-1]
    r, c = tile_grid(size, t)
    if tiles.shape[0] != r * c:
        raise ValueError(f"{tiles.shape[0]} tiles for a {size} image: expected {r * c}")
    y = tiles.reshape(r, c, 3, t, t).permute(2, 0, 3, 1, 4).reshape(3, r * t, c * t)
    return y[:, : size[0], : size[1]]


def whole_symbols(cfg, size: tuple[int, int], mode: str = "tiles") -> int:
    """Payload symbols the JSCC of model config ``cfg`` spends on an image of ``size`` (H, W):
    ``tiles`` or ``interleaved`` (32x32 tiles, segmented or not: hil tx's ``--whole-mode``) or
    ``full`` (the padded image at once). The digital baseline gets the same for the same
    photograph."""
    if mode in ("tiles", "interleaved"):
        r, c = tile_grid(size)
        return r * c * cfg.n_symbols((3, TILE, TILE))
    if mode == "full":
        return cfg.n_symbols(padded_shape((3, *size)))
    raise ValueError(f"unknown whole-image mode {mode!r}: tiles, interleaved or full")


def _spread(k: int) -> np.ndarray:
    """Within a tile: the order its k symbols go out in, a stride of 37 (mod k) through them,
    so a run of consecutive positions touches every latent channel and place, not one channel's
    rows. 37 is prime: a permutation for every k it does not divide (k is 32 x channels here)."""
    if k % 37 == 0:
        raise ValueError(f"the tile interleaver needs k not a multiple of 37, got {k}")
    return (np.arange(k) * 37) % k


def _air_positions(tiles: int, k: int, rotate: bool) -> np.ndarray:
    """[tiles, k] int64: where position j of tile t goes in air order: j * tiles + (t + j)
    mod tiles with ``rotate``, else j * tiles + t."""
    j = np.arange(k)[None, :]
    t = np.arange(tiles)[:, None]
    return j * tiles + ((t + j) % tiles if rotate else t)


def interleave(s: np.ndarray, rotate: bool = True) -> np.ndarray:
    """Tiles' symbols [tiles, k] complex64 -> [tiles * k] complex64 in air order: the
    ``_spread`` order within each tile, then position j of every tile before position j + 1
    (position j of tile t at j * tiles + (t + j) mod tiles; without ``rotate``, the order of
    scheme 255, at j * tiles + t).

    Frames carry consecutive runs of that order, so a lost frame takes a few symbols, spread
    over the latent, from every tile (each decodes a little worse) instead of every symbol of a
    few tiles (which decode to nothing) or one latent channel of every tile. The rotation
    moves each tile's symbols across the OFDM symbol's subcarriers: without it, a tile count
    that is a multiple of the 48 data subcarriers puts all of a tile's symbols on one of them,
    and a faded subcarrier takes whole tiles (the held-out whole photographs on a static
    multipath_cfo channel lost 5.6 dB at 0 dB without it: ``scripts/whole_images.py
    --fading per-photo --order 255``)."""
    tiles, k = s.shape
    out = np.empty(tiles * k, s.dtype)
    out[_air_positions(tiles, k, rotate).ravel()] = s[:, _spread(k)].ravel()
    return out


def deinterleave(s: np.ndarray, tiles: int, rotate: bool = True) -> np.ndarray:
    """The inverse of ``interleave``: s [tiles * k] complex64 (or float32 gains) -> [tiles, k]
    of the same dtype."""
    if len(s) % tiles:
        raise ValueError(f"{len(s)} symbols are not a whole number of symbols for {tiles} tiles")
    k = len(s) // tiles
    t = s[_air_positions(tiles, k, rotate)]
    out = np.empty_like(t)
    out[:, _spread(k)] = t
    return out


SEGMENT_FRAMES = 8  # scheme 253: a segment of tiles fills at most this many frames


@dataclass(frozen=True)
class Segments:
    """Scheme 253's layout of an image's tiles on the air: consecutive segments of tiles, each
    interleaved (``interleave``) only within itself, the segments' symbols one after another,
    cut into frames of ``frame_symbols`` (the last shorter). The transmitter sends the frames
    of a segment while it encodes the next, and the receiver decodes a segment as soon as the
    frames that hold it are in (scheme 254 interleaves every tile of the image across every
    frame: nothing can go out before all is encoded, nor be decoded before all arrived).

    The segments are as few as keep each within ``SEGMENT_FRAMES`` frames' worth of symbols,
    their tiles shared out evenly (a 512x768 photograph's 384 tiles of 512 symbols: 6
    segments of 64 tiles, 6.8 frames each, 41 frames in all). A lost frame takes about
    1 / 7 of the symbols of one or two segments' tiles. Everything follows from the tile
    count, the symbols per tile and the frame size, so the header's shape and chunk index
    say which symbols a frame holds.

    Attributes:
        tiles: per segment, the range of tile indices (row by row, ``to_tiles``) it holds.
        k: symbols per tile.
        frame_symbols: a full frame's payload (symbols).
    """

    tiles: tuple[range, ...]
    k: int
    frame_symbols: int

    @classmethod
    def of(cls, n_tiles: int, k: int, frame_symbols: int) -> Segments:
        """The layout of ``n_tiles`` tiles of ``k`` symbols in frames of ``frame_symbols``."""
        if n_tiles < 1 or k < 1 or frame_symbols < 1:
            raise ValueError(
                f"no segments for {n_tiles} tiles of {k} symbols in frames of {frame_symbols}"
            )
        n = max(1, -(-n_tiles * k // (SEGMENT_FRAMES * frame_symbols)))
        n = min(n, n_tiles)
        edges = [i * n_tiles // n for i in range(n + 1)]
        return cls(tuple(range(a, b) for a, b in pairwise(edges)), k, frame_symbols)

    @classmethod
    def for_image(cls, size: tuple[int, int], k: int, frame_symbols: int) -> Segments:
        """The layout of an image of ``size`` (H, W) as 32x32 tiles (``tile_grid``) of ``k``
        symbols: what the transmitter sends and the receiver reads from the header's shape."""
        r, c = tile_grid(size)
        return cls.of(r * c, k, frame_symbols)

    @property
    def symbols(self) -> int:
        """Payload symbols of the whole image."""
        return self.tiles[-1].stop * self.k

    @property
    def chunk_count(self) -> int:
        """Frames of the whole image."""
        return -(-self.symbols // self.frame_symbols)

    def chunk_len(self, chunk: int) -> int:
        """The payload length (symbols) of frame ``chunk``."""
        if not 0 <= chunk < self.chunk_count:
            raise ValueError(f"no chunk {chunk} in {self.chunk_count}")
        return min(self.frame_symbols, self.symbols - chunk * self.frame_symbols)

    def chunks(self, seg: int) -> range:
        """The chunk indices (frames, counted over the image) that hold segment ``seg``."""
        r, fs = self.tiles[seg], self.frame_symbols
        return range(r.start * self.k // fs, -(-r.stop * self.k // fs))

    def air(self, seg: int, s: np.ndarray) -> np.ndarray:
        """Segment ``seg``'s tiles' symbols [tiles, k] complex64 -> [tiles * k] complex64 in air
        order (``interleave``); the segments' air orders one after another, cut into frames of
        ``frame_symbols``, are the image's frames."""
        if s.shape != (len(self.tiles[seg]), self.k):
            raise ValueError(
                f"segment {seg} holds {len(self.tiles[seg])} tiles of {self.k} symbols, "
                f"got {s.shape}"
            )
        return interleave(s)

    def join(self, seg: int, payloads: dict) -> tuple[np.ndarray, np.ndarray]:
        """Segment ``seg`` from the frames received: ``payloads`` maps a chunk index to (its
        symbols [n] complex64, their gains [n] float32), n = ``chunk_len``; a chunk not in it
        was lost -> (symbols [tiles, k] complex64, gains [tiles, k] float32) of the segment, a
        lost frame's symbols zeros with zero gain (the decoder's "nothing received here")."""
        r, fs = self.tiles[seg], self.frame_symbols
        start, stop = r.start * self.k, r.stop * self.k
        sym = np.zeros(stop - start, np.complex64)
        gain = np.zeros(stop - start, np.float32)
        for c in self.chunks(seg):
            if c not in payloads:
                continue
            ys, gs = payloads[c]
            if len(ys) != self.chunk_len(c) or len(gs) != len(ys):
                raise ValueError(f"chunk {c} holds {len(ys)} symbols, not {self.chunk_len(c)}")
            a, b = max(start, c * fs), min(stop, (c + 1) * fs)
            sym[a - start : b - start] = ys[a - c * fs : b - c * fs]
            gain[a - start : b - start] = gs[a - c * fs : b - c * fs]
        return deinterleave(sym, len(r)), deinterleave(gain, len(r))
