import numpy as np
import pytest
import torch
from PIL import Image

from hil.jscc import data as D


def test_builtin_split_is_by_image_and_disjoint():
    assert not set(D.BUILTIN_TRAIN) & set(D.BUILTIN_TEST)
    tr, te = D.builtin("train"), D.builtin("test")
    assert tr.ids == list(D.BUILTIN_TRAIN) and te.ids == list(D.BUILTIN_TEST)
    # no test image appears (even as identical pixels) among the training images
    for a in te.images:
        for b in tr.images:
            assert a.shape != b.shape or not torch.equal(a, b)


def test_crops_come_only_from_train_images():
    tr = D.builtin("train")
    s = D.CropSampler(tr, 32, torch.Generator().manual_seed(0))
    assert s.images is not None and len(s.images) == len(tr.images)
    x = s(16)
    assert x.shape == (16, 3, 32, 32) and x.dtype == torch.float32 and 0 <= x.min() and x.max() <= 1


def test_fixed_tiles_deterministic_and_from_test():
    te = D.builtin("test")
    a, ia = D.fixed_tiles(te, 32, 100)
    b, ib = D.fixed_tiles(te, 32, 100)
    assert torch.equal(a, b) and ia == ib
    assert all(i.split("@")[0] in D.BUILTIN_TEST for i in ia)


def test_cifar10_binary_reader(tmp_path):
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        rec = rng.integers(0, 256, (3, D.CIFAR_RECORD), dtype=np.uint8)
        rec.tofile(tmp_path / name)
    te = D.open_dataset(f"cifar10:{tmp_path}", "test")
    assert len(te.images) == 3 and te.images[0].shape == (3, 32, 32)
    raw = np.fromfile(tmp_path / "test_batch.bin", np.uint8).reshape(3, -1)
    np.testing.assert_array_equal(te.images[1].numpy().ravel(), raw[1, 1:])
    assert len(D.open_dataset(f"cifar10:{tmp_path}", "train").images) == 15
    (tmp_path / "test_batch.bin").write_bytes(b"\x00" * 100)
    with pytest.raises(ValueError, match="multiple"):
        D.open_dataset(f"cifar10:{tmp_path}", "test")


def test_cifar10_missing_explains(tmp_path):
    with pytest.raises(ValueError, match="binary version"):
        D.open_dataset(f"cifar10:{tmp_path}", "train")


def test_folder_dataset(tmp_path):
    for sub in ("train", "test"):
        (tmp_path / sub).mkdir()
        for i in range(2):
            Image.fromarray(np.full((40, 50, 3), 10 * i, np.uint8)).save(
                tmp_path / sub / f"{i}.png"
            )
    Image.fromarray(np.zeros((40, 40), np.uint8)).save(tmp_path / "test" / "grey.png")
    te = D.open_dataset(f"folder:{tmp_path}", "test")
    assert len(te.images) == 3 and all(im.shape[0] == 3 for im in te.images)
    with pytest.raises(ValueError, match="no images"):
        (tmp_path / "empty").mkdir()
        D.folder(tmp_path / "empty")


def test_unknown_dataset():
    with pytest.raises(ValueError, match="unknown data set"):
        D.open_dataset("imagenet", "train")
