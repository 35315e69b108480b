"""Image data sets that work offline: built-in photographs, CIFAR-10 binary, any folder.

All return uint8 images as [3, H, W] tensors; ``CropSampler`` draws random
crops for training from a seeded generator, ``fixed_tiles`` cuts a
deterministic test set. Nothing is downloaded; nothing is unpickled (CIFAR-10
is read from its *binary* distribution, not the Python pickle one).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

# The real photographs inside scikit-image's wheel (no fetch needed), split by
# image: a test image is never cropped for training. The stereo pair
# motorcycle_left/right stays on one side of the split.
BUILTIN_TRAIN = (
    "astronaut.png", "hubble_deep_field.jpg", "ihc.png", "motorcycle_left.png",
    "motorcycle_right.png", "retina.jpg", "brick.png", "cell.png", "clock_motion.png",
    "grass.png", "gravel.png", "moon.png",
)  # fmt: skip
BUILTIN_TEST = ("chelsea.png", "coffee.png", "rocket.jpg", "camera.png", "coins.png")
IMAGE_EXT = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".ppm")


def skimage_data_dir() -> Path:
    try:
        import skimage
    except ImportError as exc:  # pragma: no cover - scikit-image is a dependency
        raise RuntimeError(
            "the built-in data set needs scikit-image (pip install scikit-image)"
        ) from exc
    return Path(skimage.__file__).parent / "data"


def load_image(path: str | os.PathLike) -> torch.Tensor:
    """Any image file -> [3, H, W] uint8 (grey replicated, alpha dropped)."""
    try:
        with Image.open(path) as im:
            a = np.asarray(im.convert("RGB"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read image {path}: {exc}") from exc
    return torch.from_numpy(a.copy()).permute(2, 0, 1).contiguous()


@dataclass
class ImageSet:
    """Named images of one split.

    Attributes:
        name: the data set's name (records which corpus manifest, for checkpoints).
        split: "train", "test", "whole" or "all".
        images: one [3, H, W] uint8 tensor per image (H, W vary), on the CPU.
        ids: one name per image, in the same order.
    """

    name: str
    split: str
    images: list[torch.Tensor]
    ids: list[str]

    def describe(self) -> dict:
        return {
            "name": self.name,
            "split": self.split,
            "count": len(self.images),
            "ids": self.ids[:64],
        }


def builtin(split: str) -> ImageSet:
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    d = skimage_data_dir()
    names = BUILTIN_TRAIN if split == "train" else BUILTIN_TEST
    return ImageSet("builtin", split, [load_image(d / n) for n in names], list(names))


def folder(path: str | os.PathLike, split: str = "all") -> ImageSet:
    p = Path(path)
    if not p.is_dir():
        raise ValueError(f"image folder {p} does not exist")
    files = sorted(f for f in p.rglob("*") if f.suffix.lower() in IMAGE_EXT)
    if not files:
        raise ValueError(f"no images ({', '.join(IMAGE_EXT)}) under {p}")
    return ImageSet(
        f"folder:{p}", split, [load_image(f) for f in files], [str(f.relative_to(p)) for f in files]
    )


CIFAR_RECORD = 1 + 3 * 32 * 32


def cifar10(path: str | os.PathLike, split: str) -> ImageSet:
    """CIFAR-10 from the binary distribution (cifar-10-batches-bin): data_batch_1..5.bin, test_batch.bin."""
    p = Path(path)
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    files = (
        [p / f"data_batch_{i}.bin" for i in range(1, 6)]
        if split == "train"
        else [p / "test_batch.bin"]
    )
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise ValueError(
            f"CIFAR-10 binary files {missing} not found in {p}; expected the binary version "
            "(cifar-10-binary.tar.gz, folder cifar-10-batches-bin), not the Python pickle one"
        )
    images, ids = [], []
    for f in files:
        raw = np.fromfile(f, np.uint8)
        if raw.size % CIFAR_RECORD:
            raise ValueError(
                f"{f} has {raw.size} bytes, not a multiple of the {CIFAR_RECORD}-byte record"
            )
        rec = raw.reshape(-1, CIFAR_RECORD)
        imgs = torch.from_numpy(rec[:, 1:].reshape(-1, 3, 32, 32).copy())
        images.extend(imgs)
        ids.extend(f"{f.name}:{i}" for i in range(len(imgs)))
    return ImageSet("cifar10", split, images, ids)


def corpus(split: str, ci: bool = False) -> ImageSet:
    """The photograph corpus (``hil.jscc.corpus``): ``train``, ``test`` or ``whole``;
    ``ci=True``: its scikit-image photographs only (no Debian package needed)."""
    from . import corpus as C

    m = C.load_manifest()
    images, ids = C.load_split(split, C.CI_SOURCES if ci else None, m)
    # the name records which manifest: a checkpoint's JSON says what it was trained on
    return ImageSet(f"{'corpus-ci' if ci else 'corpus'}@{m.digest[:16]}", split, images, ids)


def open_dataset(spec: str, split: str) -> ImageSet:
    """``builtin`` | ``corpus`` | ``corpus-ci`` | ``cifar10:<dir>`` | ``folder:<dir>`` (a
    folder serves both splits unless it has ``train/`` and ``test/`` subfolders)."""
    if spec == "builtin":
        return builtin(split)
    if spec in ("corpus", "corpus-ci"):
        return corpus(split, ci=spec == "corpus-ci")
    kind, _, arg = spec.partition(":")
    if kind == "cifar10" and arg:
        return cifar10(arg, split)
    if kind == "folder" and arg:
        sub = Path(arg) / split
        return folder(sub, split) if sub.is_dir() else folder(arg, split)
    raise ValueError(
        f"unknown data set {spec!r}; use 'builtin', 'corpus', 'corpus-ci', 'cifar10:<dir>' "
        "or 'folder:<dir>'"
    )


class CropSampler:
    """Random crops [B, 3, crop, crop] float32 in [0, 1], with random horizontal flips."""

    def __init__(self, data: ImageSet, crop: int, generator: torch.Generator):
        self.images = [im for im in data.images if im.shape[1] >= crop and im.shape[2] >= crop]
        if not self.images:
            raise ValueError(f"no image in {data.name}/{data.split} is at least {crop}x{crop}")
        self.crop = crop
        self.g = generator
        # every image equally likely, whatever its size (one large image must not dominate)
        self.weights = torch.full((len(self.images),), 1.0 / len(self.images), dtype=torch.float64)

    def __call__(self, batch: int) -> torch.Tensor:
        idx = torch.multinomial(self.weights, batch, replacement=True, generator=self.g)
        out = torch.empty(batch, 3, self.crop, self.crop, dtype=torch.uint8)
        for j, i in enumerate(idx.tolist()):
            im = self.images[i]
            y = int(torch.randint(0, im.shape[1] - self.crop + 1, (1,), generator=self.g))
            x = int(torch.randint(0, im.shape[2] - self.crop + 1, (1,), generator=self.g))
            t = im[:, y : y + self.crop, x : x + self.crop]
            if torch.rand((), generator=self.g) < 0.5:
                t = t.flip(-1)
            out[j] = t
        return out.float() / 255.0


def fixed_tiles(
    data: ImageSet, crop: int, count: int, seed: int = 0
) -> tuple[torch.Tensor, list[str]]:
    """A deterministic test set: ``count`` non-overlapping crop x crop tiles, spread over the images.

    Returns tiles [count, 3, crop, crop] float32 in [0, 1] and their ids ("image@y,x").
    """
    cands = []
    for im, name in zip(data.images, data.ids, strict=True):
        for y in range(0, im.shape[1] - crop + 1, crop):
            for x in range(0, im.shape[2] - crop + 1, crop):
                cands.append((im, name, y, x))
    if not cands:
        raise ValueError(f"no {crop}x{crop} tile fits in {data.name}/{data.split}")
    rng = np.random.default_rng(seed)
    pick = rng.permutation(len(cands))[: min(count, len(cands))]
    pick.sort()
    tiles = torch.stack(
        [
            cands[i][0][:, cands[i][2] : cands[i][2] + crop, cands[i][3] : cands[i][3] + crop]
            for i in pick
        ]
    )
    ids = [f"{cands[i][1]}@{cands[i][2]},{cands[i][3]}" for i in pick]
    return tiles.float() / 255.0, ids
