"""Source coding for the separation baseline: JPEG and WebP (Pillow) fitted to a byte budget.

The transmitter picks, per image, the highest quality whose bitstream fits
the budget, for each codec, and keeps the codec whose decoded image scores
the higher PSNR (both ends learn the codec from the frame header's scheme
field). An image that does not fit even at the lowest quality is not sent.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

CODECS = ("jpeg", "webp")
_PIL = {"jpeg": "JPEG", "webp": "WEBP"}
_QUALITY = {"jpeg": (1, 95), "webp": (0, 100)}


def to_uint8(img: np.ndarray) -> np.ndarray:
    """[3, H, W] float in [0, 1] -> [H, W, 3] uint8."""
    return (np.clip(np.asarray(img, np.float32), 0, 1).transpose(1, 2, 0) * 255 + 0.5).astype(
        np.uint8
    )


def encode(img8: np.ndarray, codec: str, quality: int) -> bytes:
    buf = io.BytesIO()
    opts = {"optimize": True} if codec == "jpeg" else {"method": 6}
    Image.fromarray(img8).save(buf, _PIL[codec], quality=int(quality), **opts)
    return buf.getvalue()


def decode(data: bytes, shape: tuple[int, int, int]) -> np.ndarray | None:
    """Bitstream -> [3, H, W] float in [0, 1]; None if it does not decode to that shape."""
    try:
        with Image.open(io.BytesIO(data)) as im:
            a = np.asarray(im.convert("RGB"), np.float32) / 255.0
    except Exception:  # a corrupted bitstream can raise anything Pillow has
        return None
    if a.shape != (shape[1], shape[2], 3):
        return None
    return a.transpose(2, 0, 1)


def fit(img8: np.ndarray, codec: str, max_bytes: int) -> bytes | None:
    """The highest-quality bitstream of ``codec`` no longer than ``max_bytes`` (None: none fits)."""
    lo, hi = _QUALITY[codec]
    best = None
    while lo <= hi:  # sizes grow with quality (checked: the result always fits)
        q = (lo + hi) // 2
        b = encode(img8, codec, q)
        if len(b) <= max_bytes:
            best, lo = b, q + 1
        else:
            hi = q - 1
    return best


def psnr_np(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2))
    return 10 * np.log10(1.0 / max(mse, 1e-10))


def best_fit(img: np.ndarray, max_bytes: int, codecs=CODECS) -> tuple[int, bytes] | None:
    """(codec index, bitstream) of the better-scoring codec within the budget, or None."""
    img8 = to_uint8(img)
    ref = img8.astype(np.float32).transpose(2, 0, 1) / 255.0
    best = None
    for codec in codecs:
        b = fit(img8, codec, max_bytes)
        if b is None:
            continue
        out = decode(b, img.shape)
        score = psnr_np(out, ref) if out is not None else -np.inf
        if best is None or score > best[0]:
            best = (score, CODECS.index(codec), b)
    return None if best is None else (best[1], best[2])
