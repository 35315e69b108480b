"""The photograph corpus: manifest consistency, splits, integrity, scaling."""

import hashlib
import json

import numpy as np
import pytest
from PIL import Image

from hil.jscc import corpus as C
from hil.jscc.data import open_dataset


@pytest.fixture(scope="module")
def manifest():
    return C.load_manifest()


def test_manifest_is_consistent_and_large_enough(manifest):
    photos = manifest.photos
    assert len(photos) >= 100
    counts = {s: len(manifest.select(s)) for s in C.SPLITS}
    assert counts["train"] >= 50 and counts["test"] >= 12 and counts["whole"] >= 12, counts
    for p in photos:
        assert p.licence and p.source in manifest.sources
        assert len(p.sha256) == 64 and int(p.sha256, 16) >= 0
        assert p.path.startswith("skimage:") or p.path.startswith("/usr/share/")
    apt = set(manifest.apt_packages)
    assert {p.source for p in photos if not p.path.startswith("skimage:")} == apt


def test_split_is_disjoint_by_image_and_by_source(manifest):
    ids = [p.id for p in manifest.photos]
    hashes = [p.sha256 for p in manifest.photos]
    files = [p.path for p in manifest.photos]
    assert len(set(ids)) == len(set(hashes)) == len(set(files)) == len(ids)
    train_sources = {p.source for p in manifest.select("train")}
    held_sources = {p.source for s in ("test", "whole") for p in manifest.select(s)}
    unseen = held_sources - train_sources
    assert unseen, "at least one source must contribute no training photograph"
    assert sum(1 for p in manifest.photos if p.source in unseen) >= 10
    # the stereo pair stays on one side; the built-in test photographs stay held out
    assert {p.id for p in manifest.select("test")} >= {"sk-chelsea", "sk-coffee", "sk-rocket"}


def test_every_photograph_is_present_and_verified(manifest):
    """Reads every file and checks its SHA-256 (the Debian packages in the manifest must be
    installed: .ci/run and `make` install them as root)."""
    for p in manifest.photos:
        a = C.read_photo(p)
        assert a.dtype == np.uint8 and a.shape == (p.height, p.width, 3), p.id


def test_altered_file_and_bad_manifest_are_refused(manifest, tmp_path):
    src = manifest.select("test", C.CI_SOURCES)[0]
    f = tmp_path / "x.png"
    f.write_bytes(src.file().read_bytes() + b"\0")
    doc = json.loads(C.MANIFEST.read_text())
    entry = dict(next(e for e in doc["images"] if e["id"] == src.id), path=str(f))
    doc["images"] = [entry]
    (tmp_path / "m.json").write_text(json.dumps(doc))
    m = C.load_manifest(tmp_path / "m.json")
    with pytest.raises(C.CorpusError, match="SHA-256"):
        C.read_photo(m.photos[0])
    entry["sha256"] = hashlib.sha256(f.read_bytes()).hexdigest()
    (tmp_path / "m.json").write_text(json.dumps(doc))
    assert C.read_photo(C.load_manifest(tmp_path / "m.json").photos[0]).shape[2] == 3
    for change, match in (
        ({"split": "val"}, "split"),
        ({"source": "nowhere"}, "source"),
    ):
        doc["images"] = [dict(entry, **change)]
        (tmp_path / "m.json").write_text(json.dumps(doc))
        with pytest.raises(C.CorpusError, match=match):
            C.load_manifest(tmp_path / "m.json")
    doc["images"] = [entry, dict(entry, sha256="0" * 64)]
    (tmp_path / "m.json").write_text(json.dumps(doc))
    with pytest.raises(C.CorpusError, match="duplicate id"):
        C.load_manifest(tmp_path / "m.json")
    entry.pop("sha256")
    doc["images"] = [entry]
    (tmp_path / "m.json").write_text(json.dumps(doc))
    with pytest.raises(C.CorpusError, match="lacks"):
        C.load_manifest(tmp_path / "m.json")


def test_scaling_never_upscales_and_keeps_colour():
    rng = np.random.default_rng(0)
    a = (rng.random((300, 500, 3)) * np.array([200, 120, 40]) + 10).astype(np.uint8)
    s = C.scaled(a, short_side=150)
    assert s.shape == (150, 250, 3)
    assert np.abs(s.reshape(-1, 3).mean(0) - a.reshape(-1, 3).mean(0)).max() < 1.0
    assert C.scaled(a, short_side=600) is a
    assert C.scaled(a, long_side=250).shape == (150, 250, 3)


def test_data_sets_from_the_corpus(monkeypatch, tmp_path):
    monkeypatch.setenv("HIL_CACHE", str(tmp_path))
    tr = open_dataset("corpus-ci", "train")
    te = open_dataset("corpus-ci", "test")
    names_tr = {i.split("@")[0] for i in tr.ids}
    names_te = {i.split("@")[0] for i in te.ids}
    assert names_tr and names_te and not names_tr & names_te
    m = C.load_manifest()
    for img, i in zip(tr.images, tr.ids, strict=True):
        pid, tag = i.split("@")
        ph = next(p for p in m.photos if p.id == pid)
        side = int(tag.removeprefix("s"))
        assert min(img.shape[1:]) == min(side, ph.height, ph.width)
        assert img.shape[0] == 3 and img.dtype.is_floating_point is False
    assert (tmp_path / "corpus").is_dir()  # cached where HIL_CACHE says


def test_whole_photographs_are_exported_as_png_as_cached(tmp_path):
    """hil corpus --export-whole: the whole split as PNG files, pixel for pixel what the cache
    holds (make demo sends them)."""
    images, ids = C.load_split("whole")
    files = C.export_whole(tmp_path / "photos", count=2)
    assert [f.name for f in files] == [f"{i.split('@')[0]}.png" for i in ids[:2]]
    for f, img in zip(files, images, strict=False):
        back = np.asarray(Image.open(f).convert("RGB")).transpose(2, 0, 1)
        assert back.shape == tuple(img.shape) and np.array_equal(back, img.numpy())
        assert max(back.shape[1:]) == C.WHOLE_LONG_SIDE
