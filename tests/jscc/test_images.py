"""Whole photographs: identified by content, padded by their edge, gathered without repeats,
refused with a reason when unreadable."""

import numpy as np
import pytest
import torch
from PIL import Image

from hil.jscc.images import (
    content_id,
    deinterleave,
    from_tiles,
    gather_images,
    interleave,
    pad,
    padded_shape,
    read_image,
    to_tiles,
)


def _png(path, h, w, seed=0):
    a = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    Image.fromarray(a).save(path)
    return a


def test_content_id_follows_the_pixels_not_the_file(tmp_path):
    a = _png(tmp_path / "a.png", 30, 41)
    Image.fromarray(a).save(tmp_path / "copy.bmp")  # another name and format, same pixels
    ia, ib = read_image(tmp_path / "a.png"), read_image(tmp_path / "copy.bmp")
    assert ia.content_id == ib.content_id and len(ia.content_id) == 64
    assert ia.size == (30, 41) and ia.name == "a.png"
    b = a.copy()
    b[0, 0, 0] ^= 1  # one bit of one pixel
    Image.fromarray(b).save(tmp_path / "b.png")
    assert read_image(tmp_path / "b.png").content_id != ia.content_id
    # the shape is part of it: the same bytes as 41x30 are another picture
    t = torch.from_numpy(a).permute(2, 0, 1).contiguous()
    assert content_id(t.reshape(3, 41, 30)) != content_id(t)
    with pytest.raises(ValueError, match="uint8"):
        content_id(t.float())


def test_padding_repeats_the_edge_up_to_a_multiple_of_four():
    assert padded_shape((3, 30, 41)) == (3, 32, 44)
    assert padded_shape((3, 32, 44)) == (3, 32, 44)
    x = torch.rand(3, 30, 41)
    y = pad(x)
    assert y.shape == (3, 32, 44)
    assert torch.equal(y[:, :30, :41], x)
    assert torch.equal(y[:, 31, :41], x[:, 29]) and torch.equal(y[:, :30, 43], x[:, :, 40])
    assert pad(torch.rand(2, 3, 8, 8)).shape == (2, 3, 8, 8)


def test_gather_keeps_the_given_order_then_folders_sorted_and_drops_repeats(tmp_path):
    d = tmp_path / "dir"
    (d / "sub").mkdir(parents=True)
    _png(tmp_path / "first.png", 12, 16, seed=1)
    _png(d / "b.png", 8, 8, seed=2)
    _png(d / "sub" / "a.png", 8, 12, seed=3)
    _png(d / "dup.png", 12, 16, seed=1)  # the same picture as first.png
    (d / "notes.txt").write_text("not an image")
    got = gather_images([str(tmp_path / "first.png")], [str(d)])
    assert [g.name for g in got] == ["first.png", "b.png", "a.png"]


@pytest.mark.parametrize(
    "make, why",
    [
        (lambda p: None, "does not exist"),
        (lambda p: p.write_bytes(b"\x89PNG but not really"), "cannot read"),
        (lambda p: _png(p, 3, 100), "at least 4x4"),
    ],
)
def test_unreadable_or_unsendable_images_are_refused_with_the_reason(tmp_path, make, why):
    p = tmp_path / "x.png"
    make(p)
    with pytest.raises(ValueError, match=why):
        read_image(p)


def test_folders_must_exist_and_hold_images(tmp_path):
    with pytest.raises(ValueError, match="not a folder"):
        gather_images(dirs=[str(tmp_path / "nope")])
    with pytest.raises(ValueError, match="no images"):
        gather_images(dirs=[str(tmp_path)])


def test_tiles_and_the_interleaver_are_exact_inverses():
    x = torch.rand(3, 50, 70)
    t = to_tiles(x)
    assert t.shape == (6, 3, 32, 32) and torch.equal(from_tiles(t, (50, 70)), x)
    assert torch.equal(t[1], x[:, :32, 32:64])  # row by row
    s = np.random.default_rng(0).standard_normal((6, 512)).astype(np.float32)
    for rotate in (True, False):
        air = interleave(s, rotate)
        np.testing.assert_array_equal(deinterleave(air, 6, rotate), s)
        # a frame's worth of consecutive air symbols touches every tile and all 8 channels
        lost = np.isin(np.arange(512 * 6), np.arange(300, 600)).astype(np.float32)
        seen = deinterleave(lost, 6, rotate)
        assert (seen.sum(1) == 50).all()  # 300 air symbols: 50 from each tile
        channels = np.nonzero(seen[0])[0] // 64
        assert set(channels) == set(range(8))
    assert not np.array_equal(interleave(s), interleave(s, rotate=False))
    with pytest.raises(ValueError, match="whole number"):
        deinterleave(air[:-1], 6)
    with pytest.raises(ValueError, match="expected 6"):
        from_tiles(t[:5], (50, 70))


def test_each_tiles_symbols_visit_every_subcarrier():
    """A 512x768 photograph is 384 tiles, a multiple of the 48 data subcarriers: without the
    rotation every symbol of a tile sits on one subcarrier (air position mod 48), so a faded
    subcarrier takes whole tiles; with it, each tile's 512 symbols cover all 48."""
    tiles, k = 384, 512
    where = np.arange(tiles * k) % 48  # the data subcarrier of each air position
    for rotate, want in ((True, 48), (False, 1)):
        sub = deinterleave(where, tiles, rotate)  # [tiles, k]: each tile's subcarriers
        assert {len(set(row)) for row in sub.tolist()} == {want}
    # and evenly: each subcarrier carries 512 / 48 = 10 or 11 of a tile's symbols
    counts = np.stack([np.bincount(r, minlength=48) for r in deinterleave(where, tiles)])
    assert counts.min() >= 10 and counts.max() <= 11
