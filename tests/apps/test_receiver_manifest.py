"""A photograph put together before the manifest named it (the transmitter's control socket
can connect after its first frames arrive) is scored once its entry comes, not left
unscored; one no entry ever names is still reported, at the end."""

import logging

import torch

from hil.apps.receiver import Receiver
from hil.jscc.decoders import Decoded
from hil.jscc.images import content_id
from hil.phy import FrameEvent, Header, OfdmConfig

FP = bytes(range(1, 9))


def _photo(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (3, 20, 28), dtype=torch.uint8, generator=g)


def _decoded(item_id, ref, seq):
    h = Header(seq, item_id, FP, 96, (3, 20, 28), 0, 2, 255)
    e = FrameEvent("ok", 1000 * seq, 0.0, 0.0, 0.9, 0.9, header=h, snr_db=10.0, evm_pilots=0.1)
    img = (ref.float() / 255 + 0.02).clamp(0, 1)  # a little off: PSNR about 34 dB
    return Decoded(first=e, events=[e, e], image=img)


def _entry(item_id, pixels, name):
    cid = content_id(pixels)
    return {"type": "image", "item_id": item_id, "content_id": cid, "name": name, "size": [28, 20]}


def test_a_photograph_decoded_before_its_manifest_entry_is_scored_when_it_comes():
    a, b = _photo(1), _photo(2)
    refs = {content_id(p): p.float() / 255 for p in (a, b)}
    rx = Receiver(OfdmConfig(), FP, None, [], logging.getLogger("t"), whole_refs=refs)
    rx.fr_base = 0
    rx._decoded(_decoded(0, a, 1))  # before any manifest entry: held
    assert rx.unnamed and not rx.records.items
    rx.message(_entry(0, a, "a.png"))
    (rec,) = rx.records.items
    assert rec["image"] == "a.png" and 30 < rec["psnr_db"] < 40 and not rx.unnamed
    rx.message(_entry(1, b, "b.png"))  # named first: scored at once
    rx._decoded(_decoded(1, b, 2))
    assert [r["image"] for r in rx.records.items] == ["a.png", "b.png"]
    rx._decoded(_decoded(7, a, 3))  # no entry ever comes: reported at the end, unscored
    assert len(rx.records.items) == 2
    rx.finish()
    last = rx.records.items[-1]
    assert last["item_id"] == 7 and "psnr_db" not in last and not rx.unnamed


def test_without_manifest_entries_at_most_a_few_photographs_wait():
    a = _photo(3)
    rx = Receiver(
        OfdmConfig(), FP, None, [], logging.getLogger("t"), whole_refs={content_id(a): a / 255}
    )
    rx.fr_base = 0
    for i in range(Receiver.MAX_UNNAMED + 3):
        rx._decoded(_decoded(i, a, i + 1))
    assert len(rx.unnamed) == Receiver.MAX_UNNAMED and len(rx.records.items) == 3
