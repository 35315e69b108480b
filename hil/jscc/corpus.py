"""The photograph corpus: real photographs from packages the set-up installs, split by image
and by source, scaled for training and cached.

``hil/assets/corpus/manifest.json`` lists every photograph: its source (a
Debian desktop-background package or scikit-image's bundled samples), file,
licence, size, SHA-256 and split:

- ``train``: cropped for training, at several scales;
- ``test``: held out, cut into fixed tiles for evaluation;
- ``whole``: held out, kept whole for whole-image transfers.

Large photographs (wallpapers are 1920x1080 to 5K) are downscaled before
cropping so that a 32x32 crop holds structure rather than a flat patch: each
training photograph is stored at short sides ``TRAIN_SHORT_SIDES`` (never
upscaled), each test photograph at ``TEST_SHORT_SIDES``. Resampling is
Lanczos on the 8-bit sRGB values, channel by channel, so colour is kept (no
jitter, no colour-space change); flips happen at crop time.

``build(...)`` verifies each file's SHA-256, scales it and caches the result
as ``.npy`` arrays (uint8, [3, H, W]) under ``cache_dir()`` keyed by the
manifest's hash; ``hil corpus`` runs it with a progress bar. Data set specs
(``hil.jscc.data.open_dataset``): ``corpus`` (everything) and
``corpus-ci`` (the scikit-image photographs only: no Debian package needed).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

MANIFEST = Path(__file__).resolve().parents[1] / "assets" / "corpus" / "manifest.json"
FORMAT = "hil-corpus-manifest/1"
SPLITS = ("train", "test", "whole")
TRAIN_SHORT_SIDES = (160, 256, 384, 576)
TEST_SHORT_SIDES = (256, 512)
WHOLE_LONG_SIDE = 768
CI_SOURCES = ("scikit-image",)


class CorpusError(ValueError):
    """The manifest or a photograph it names is missing, altered or inconsistent."""


@dataclass(frozen=True)
class Photo:
    """One manifest entry."""

    id: str
    source: str
    path: str
    licence: str
    width: int
    height: int
    grey: bool
    sha256: str
    split: str
    note: str = ""

    def file(self) -> Path:
        """Where the photograph is on this machine (``skimage:<name>`` -> scikit-image's data)."""
        if self.path.startswith("skimage:"):
            from .data import skimage_data_dir

            return skimage_data_dir() / self.path.removeprefix("skimage:")
        return Path(self.path)


@dataclass(frozen=True)
class Manifest:
    photos: tuple[Photo, ...]
    sources: dict
    apt_packages: tuple[str, ...]
    digest: str  # SHA-256 of the manifest file: the cache key

    def select(self, split: str, sources: tuple[str, ...] | None = None) -> list[Photo]:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        return [
            p for p in self.photos if p.split == split and (sources is None or p.source in sources)
        ]


def load_manifest(path: str | os.PathLike = MANIFEST) -> Manifest:
    """Read and check the manifest: known format, unique ids and hashes, known splits and sources."""
    p = Path(path)
    try:
        raw = p.read_bytes()
        doc = json.loads(raw)
    except (OSError, json.JSONDecodeError) as exc:
        raise CorpusError(f"cannot read corpus manifest {p}: {exc}") from exc
    if doc.get("format") != FORMAT:
        raise CorpusError(f"{p}: format {doc.get('format')!r}, expected {FORMAT!r}")
    fields = set(Photo.__dataclass_fields__)
    photos = []
    for i, e in enumerate(doc.get("images", [])):
        missing = {f for f in fields if f != "note"} - set(e)
        if missing:
            raise CorpusError(f"{p}: image #{i} lacks {sorted(missing)}")
        photos.append(Photo(**{k: e[k] for k in fields if k in e}))
    sources = dict(doc.get("sources", {}))
    for ph in photos:
        if ph.split not in SPLITS:
            raise CorpusError(f"{p}: {ph.id} has split {ph.split!r}; allowed: {SPLITS}")
        if ph.source not in sources:
            raise CorpusError(f"{p}: {ph.id} names source {ph.source!r}, not in 'sources'")
    for key in ("id", "sha256"):
        vals = [getattr(ph, key) for ph in photos]
        dup = {v for v in vals if vals.count(v) > 1}
        if dup:
            raise CorpusError(f"{p}: duplicate {key}(s) {sorted(dup)[:5]}")
    return Manifest(
        tuple(photos),
        sources,
        tuple(doc.get("apt_packages", [])),
        hashlib.sha256(raw).hexdigest(),
    )


def cache_dir() -> Path:
    """``$HIL_CACHE`` or ``~/.cache/hil``, then ``corpus/``."""
    base = Path(os.environ.get("HIL_CACHE") or Path.home() / ".cache" / "hil")
    return base / "corpus"


def read_photo(ph: Photo) -> np.ndarray:
    """The photograph as [H, W, 3] uint8 after checking its SHA-256 against the manifest."""
    f = ph.file()
    try:
        data = f.read_bytes()
    except OSError as exc:
        hint = (
            "it ships with scikit-image"
            if ph.path.startswith("skimage:")
            else "install the Debian packages the manifest lists (make corpus-deps, as root)"
        )
        raise CorpusError(f"photograph {ph.id} ({f}) is missing: {exc}; {hint}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != ph.sha256:
        raise CorpusError(
            f"photograph {ph.id} ({f}) has SHA-256 {digest[:16]}..., the manifest says "
            f"{ph.sha256[:16]}...: the package version differs or the file was altered"
        )
    from io import BytesIO

    with Image.open(BytesIO(data)) as im:
        return np.asarray(im.convert("RGB")).copy()


def scaled(
    a: np.ndarray, short_side: int | None = None, long_side: int | None = None
) -> np.ndarray:
    """[H, W, 3] uint8 -> the same downscaled (Lanczos) to the given short or long side.

    Never upscales: an image already at or below the size comes back as it is."""
    h, w = a.shape[:2]
    s = short_side / min(h, w) if short_side else long_side / max(h, w)
    if s >= 1:
        return a
    size = (max(1, round(w * s)), max(1, round(h * s)))
    return np.asarray(Image.fromarray(a).resize(size, Image.Resampling.LANCZOS))


def _variants(ph: Photo, a: np.ndarray) -> list[tuple[str, np.ndarray]]:
    if ph.split == "train":
        sides = sorted({min(s, min(a.shape[:2])) for s in TRAIN_SHORT_SIDES})
        return [(f"s{s}", scaled(a, short_side=s)) for s in sides]
    if ph.split == "test":
        sides = sorted({min(s, min(a.shape[:2])) for s in TEST_SHORT_SIDES})
        return [(f"s{s}", scaled(a, short_side=s)) for s in sides]
    return [("whole", scaled(a, long_side=WHOLE_LONG_SIDE))]


def build(
    manifest: Manifest | None = None,
    sources: tuple[str, ...] | None = None,
    splits: tuple[str, ...] = SPLITS,
    progress: bool = True,
) -> Path:
    """Verify, scale and cache the photographs of ``splits`` (and ``sources``); returns the cache
    folder. Photographs already cached are not read again."""
    m = manifest or load_manifest()
    out = cache_dir() / m.digest[:16]
    out.mkdir(parents=True, exist_ok=True)
    todo = [p for s in splits for p in m.select(s, sources)]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), unit="photo", desc="corpus", file=sys.stderr, leave=False)
    for ph in todo:
        done = out / f"{ph.id}.done"
        if not done.exists():
            a = read_photo(ph)
            names = []
            for tag, v in _variants(ph, a):
                np.save(out / f"{ph.id}.{tag}.npy", np.ascontiguousarray(v.transpose(2, 0, 1)))
                names.append(tag)
            done.write_text(json.dumps(names))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return out


def load_split(
    split: str, sources: tuple[str, ...] | None = None, manifest: Manifest | None = None
) -> tuple[list[torch.Tensor], list[str]]:
    """The cached images of one split, building what is missing: ([3, H, W] uint8 tensors, ids
    ``photo-id@variant``), every scale of every photograph."""
    m = manifest or load_manifest()
    photos = m.select(split, sources)
    if not photos:
        raise CorpusError(f"the corpus has no {split!r} photograph from sources {sources}")
    out = build(m, sources, (split,), progress=sys.stderr.isatty())
    images, ids = [], []
    for ph in photos:
        for tag in json.loads((out / f"{ph.id}.done").read_text()):
            a = np.load(out / f"{ph.id}.{tag}.npy", allow_pickle=False)
            if a.dtype != np.uint8 or a.ndim != 3 or a.shape[0] != 3:
                raise CorpusError(f"corrupt cache entry {out / f'{ph.id}.{tag}.npy'}: delete {out}")
            images.append(torch.from_numpy(a))
            ids.append(f"{ph.id}@{tag}")
    return images, ids


def export_whole(
    folder: str | os.PathLike,
    sources: tuple[str, ...] | None = None,
    count: int | None = None,
    manifest: Manifest | None = None,
) -> list[Path]:
    """The ``whole`` split as PNG files ``<photo id>.png`` in ``folder`` (made if needed; files
    of the same name replaced), the first ``count`` only if given: photographs to send whole
    (``hil link --images``). Returns the files written."""
    images, ids = load_split("whole", sources, manifest)
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for img, ident in list(zip(images, ids, strict=True))[:count]:
        f = out / f"{ident.split('@')[0]}.png"
        Image.fromarray(img.permute(1, 2, 0).numpy()).save(f)
        files.append(f)
    return files
