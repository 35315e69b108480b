"""Source coding for the separation baseline: JPEG, WebP, AVIF and HEIF fitted to a byte budget.

JPEG, WebP and AVIF (AV1 intra, libavif) come with Pillow; HEIF is HEVC intra
(x265 through libheif, the ``pillow-heif`` package): HEVC intra is what BPG,
the codec the Deep JSCC literature compares against, is built on. AVIF and
HEIF bitstreams are sent in their ISO-BMFF containers as Pillow writes them
(a few hundred bytes of boxes), so at the byte budget of one 32x32 tile they
rarely fit; at whole-image budgets the container is a small share.

The transmitter picks, per image, the highest quality whose bitstream fits
the budget, for each codec, and keeps the codec whose decoded image scores
the higher PSNR (both ends learn the codec from the frame header's scheme
field). An image that does not fit even at the lowest quality is not sent.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageFile

CODECS = ("jpeg", "webp", "avif", "heif")  # the index is part of the header's scheme byte
_PIL = {"jpeg": "JPEG", "webp": "WEBP", "avif": "AVIF", "heif": "HEIF"}
_QUALITY = {"jpeg": (1, 95), "webp": (0, 100), "avif": (0, 100), "heif": (0, 100)}
_OPTS = {
    "jpeg": {"optimize": True},
    "webp": {"method": 6},
    "avif": {"speed": 4, "subsampling": "4:2:0"},
    "heif": {"chroma": 420},
}
_heif_ready = False


def _heif() -> None:
    """Register pillow-heif's HEIF encoder and decoder with Pillow (once)."""
    global _heif_ready
    if _heif_ready:
        return
    try:
        import pillow_heif
    except ImportError as exc:
        raise RuntimeError(
            "the HEIF codec needs pillow-heif: pip install -e '.[baseline]'"
        ) from exc
    pillow_heif.register_heif_opener()
    _heif_ready = True


def to_uint8(img: np.ndarray) -> np.ndarray:
    """[3, H, W] real in [0, 1] (any float dtype; clipped) -> [H, W, 3] uint8."""
    return (np.clip(np.asarray(img, np.float32), 0, 1).transpose(1, 2, 0) * 255 + 0.5).astype(
        np.uint8
    )


def encode(img8: np.ndarray, codec: str, quality: int) -> bytes:
    """[H, W, 3] uint8 -> the codec's bitstream at ``quality`` (higher is better and larger)."""
    if codec not in CODECS:
        raise ValueError(f"unknown codec {codec!r}; one of {CODECS}")
    if codec == "heif":
        _heif()
    buf = io.BytesIO()
    Image.fromarray(img8).save(buf, _PIL[codec], quality=int(quality), **_OPTS[codec])
    return buf.getvalue()


def decode(data: bytes, shape: tuple[int, int, int]) -> np.ndarray | None:
    """Bitstream -> [3, H, W] float32 in [0, 1] (shape = (3, H, W)); None if it does not
    decode to that shape."""
    _heif()
    try:
        with Image.open(io.BytesIO(data)) as im:
            a = np.asarray(im.convert("RGB"), np.float32) / 255.0
    except Exception:  # a corrupted bitstream can raise anything Pillow has
        return None
    if a.shape != (shape[1], shape[2], 3):
        return None
    return a.transpose(2, 0, 1)


def decode_truncated(data: bytes, shape: tuple[int, int, int]) -> np.ndarray | None:
    """The first bytes of a bitstream (the rest lost) -> [3, H, W] float32 in [0, 1] as far as
    the codec decodes a truncated stream (Pillow's ``LOAD_TRUNCATED_IMAGES``: JPEG fills
    what is missing with grey), or None where it gives nothing of that shape."""
    _heif()
    previous = ImageFile.LOAD_TRUNCATED_IMAGES
    ImageFile.LOAD_TRUNCATED_IMAGES = True
    try:
        with Image.open(io.BytesIO(data)) as im:
            a = np.asarray(im.convert("RGB"), np.float32) / 255.0
    except Exception:  # a truncated bitstream can raise anything Pillow has
        return None
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES = previous
    if a.shape != (shape[1], shape[2], 3):
        return None
    return a.transpose(2, 0, 1)


def fit(img8: np.ndarray, codec: str, max_bytes: int) -> bytes | None:
    """The highest-quality bitstream of ``codec`` no longer than ``max_bytes`` (None: none fits).

    img8: [H, W, 3] uint8 (as :func:`to_uint8` makes).
    """
    return fit_many(img8, codec, [max_bytes])[0]


def fit_many(img8: np.ndarray, codec: str, budgets: list[int]) -> list[bytes | None]:
    """``fit`` for several byte budgets at once, each quality encoded at most once (a whole
    photograph's AVIF takes seconds).

    img8: [H, W, 3] uint8; returns one bitstream (or None) per budget, in order.
    """
    memo: dict[int, bytes] = {}

    def at(q: int) -> bytes:
        if q not in memo:
            memo[q] = encode(img8, codec, q)
        return memo[q]

    out = []
    for max_bytes in budgets:
        lo, hi = _QUALITY[codec]
        if len(at(lo)) > max_bytes:  # AVIF/HEIF containers often cannot fit at all
            out.append(None)
            continue
        best = None
        while lo <= hi:  # sizes grow with quality, nearly (the result is checked to fit)
            q = (lo + hi) // 2
            b = at(q)
            if len(b) <= max_bytes:
                best, lo = b, q + 1
            else:
                hi = q - 1
        out.append(best)
    return out


def psnr_np(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR in dB of two images of one shape (e.g. [3, H, W]), real in [0, 1], any dtype
    (computed in float64; MSE floored at 1e-10)."""
    mse = float(np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2))
    return 10 * np.log10(1.0 / max(mse, 1e-10))


def best_fit(img: np.ndarray, max_bytes: int, codecs=CODECS) -> tuple[int, bytes] | None:
    """(codec index, bitstream) of the better-scoring codec within the budget, or None.

    img: [3, H, W] real in [0, 1] (any float dtype); scored by PSNR against its uint8 rounding.
    """
    return best_fits(img, [max_bytes], codecs)[0]


def best_fits(img: np.ndarray, budgets: list[int], codecs=CODECS) -> list[tuple[int, bytes] | None]:
    """``best_fit`` for several byte budgets at once (each codec's qualities encoded once).

    img: [3, H, W] real in [0, 1] (any float dtype); returns one (codec index, bitstream) or
    None per budget, in order.
    """
    img8 = to_uint8(img)
    ref = img8.astype(np.float32).transpose(2, 0, 1) / 255.0
    best: list[tuple[float, int, bytes] | None] = [None] * len(budgets)
    for codec in codecs:
        for i, b in enumerate(fit_many(img8, codec, list(budgets))):
            if b is None:
                continue
            out = decode(b, img.shape)
            score = psnr_np(out, ref) if out is not None else -np.inf
            if best[i] is None or score > best[i][0]:
                best[i] = (score, CODECS.index(codec), b)
    return [None if t is None else (t[1], t[2]) for t in best]
