"""``hil finetune``: fine-tune the decoder on recordings of the air, the encoder as deployed.

    hil finetune --recording runs/bench/rec1 [--recording ...] --checkpoint C --out STEM

Each recording (``hil record`` or ``hil link --record``) is run through the receiver as
``hil rx --recording`` would; every JSCC frame whose header is read is paired with the image
it carried (the item id in its header, the references named in the recording's metadata:
``hil:dataset``, ``hil:crop``, ``hil:count``) and, where the recording holds the
transmitter's manifest, the pairing is checked against it (a frame whose header and manifest
disagree is left out and counted). Frames are split by item into training and validation
(validation images are never trained on); the decoder is fine-tuned, keeping the weights
that score best on validation.

Refused: a recording made with another model (``hil:fingerprint``) or another PHY
(``hil:phy``). The checkpoint written records the recordings' SHA-512 (data and metadata),
the base checkpoint, the frames used and the validation PSNR before and after; its
``transmitter_fingerprint`` is the base's, so ``hil rx`` with it accepts the deployed
transmitter's frames.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import sys
from pathlib import Path

import numpy as np
import torch

from .common import items, resolve_checkpoint, setup_logging


class RecordingRefused(ValueError):
    """A recording that does not belong to this checkpoint (model or PHY)."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hil finetune", description=__doc__)
    p.add_argument("--recording", action="append", required=True, help="SigMF stem (repeatable)")
    p.add_argument(
        "--checkpoint", default=None, help="base checkpoint (default: the shipped k/n=1/6)"
    )
    p.add_argument("--out", required=True, help="checkpoint stem to write")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument(
        "--val-every",
        type=int,
        default=5,
        help="the frames of every N-th item (image) validate; those images are never trained on",
    )
    p.add_argument("--max-frames", type=int, default=None, help="use at most N frames (the first)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def sha512(path: Path) -> str:
    h = hashlib.sha512()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def received_frames(stem: str | Path, doc: dict, log: logging.Logger) -> tuple[list[dict], dict]:
    """Run the receiver over a recording: (one dict per JSCC frame read, with its seq, item id,
    symbols [k] complex64, gain [k] float32 and SNR estimate; the recording's provenance and
    counts). Raises RecordingRefused for another model's or PHY's recording."""
    from ..jscc.finetune import transmitter_fingerprint
    from ..phy import FrameReceiver, OfdmConfig
    from ..radio.ad9363 import same_rate
    from ..record import SigMFReader

    rec = SigMFReader(stem)
    fp = transmitter_fingerprint(doc).hex()
    rec_fp = rec.global_field("hil:fingerprint")
    if rec_fp != fp:
        raise RecordingRefused(
            f"{stem}: recorded with model {rec_fp}, this checkpoint's transmitter is {fp}"
        )
    phy = OfdmConfig.from_dict(doc["phy"])
    rec_phy = rec.global_field("hil:phy")
    if rec_phy is None or OfdmConfig.from_dict(rec_phy) != phy:
        raise RecordingRefused(
            f"{stem}: recorded with another PHY ({rec_phy}), not {phy.to_dict()}"
        )
    if not same_rate(rec.sample_rate_hz, phy.sample_rate_hz):
        raise RecordingRefused(
            f"{stem}: {rec.sample_rate_hz:g} Sps, the PHY runs at {phy.sample_rate_hz:g}"
        )
    manifest = {
        int(a["hil:seq"]): int(a["hil:item_id"])
        for a in rec.annotations()
        if a.get("core:label") == "frame sent" and a.get("hil:seq") is not None
    }
    sent = rec.global_field("hil:sent")  # the transmitter's manifest, when rx had one
    if isinstance(sent, dict) and len(sent.get("seq", [])) == len(sent.get("item_id", [])):
        for s, i in zip(sent["seq"], sent["item_id"], strict=True):
            if i is not None:
                manifest.setdefault(int(s), int(i))
    fr = FrameReceiver(phy)
    frames, counts = [], {"headers": 0, "header_failed": 0, "other_scheme": 0, "disagree": 0}
    counts["dropped_by_gaps"] = 0
    seen: set[int] = set()
    first = True
    for c in rec.chunks(int(rec.global_field("hil:chunk", 65536))):
        if c.new_capture and not first:  # samples lost between captures: restart detection
            counts["dropped_by_gaps"] += len(fr.incomplete())
            fr = fr.after_gap()
        first = False
        for e in fr.push(c.samples):
            if e.status != "ok":
                counts["header_failed"] += 1
                continue
            h = e.header
            counts["headers"] += 1
            if h.scheme != 0 or h.chunk_count != 1 or h.fingerprint.hex() != fp:
                counts["other_scheme"] += 1
                continue
            if h.seq in seen:
                continue
            if manifest and manifest.get(h.seq) != h.item_id:
                counts["disagree"] += 1
                continue
            seen.add(h.seq)
            frames.append(
                {
                    "seq": h.seq,
                    "item_id": h.item_id,
                    "shape": tuple(h.shape),
                    "symbols": e.symbols.astype(np.complex64),
                    "gain": e.symbol_gain.astype(np.float32),
                    "snr_db": float(e.snr_db),
                }
            )
    rec.close()
    prov = {
        "path": str(stem),
        "sha512_data": sha512(rec.data_path),
        "sha512_meta": sha512(rec.data_path.with_name(rec.stem.name + ".sigmf-meta")),
        "samples": rec.n,
        "manifest_frames": len(manifest),
        "references": {k: rec.global_field(f"hil:{k}") for k in ("dataset", "crop", "count")},
        **counts,
        "frames": len(frames),
    }
    log.info(
        "%s: %d frames paired (%d headers read, %d header failures, %d disagree with the manifest)",
        stem,
        len(frames),
        counts["headers"],
        counts["header_failed"],
        counts["disagree"],
    )
    return frames, prov


def frame_set(frames: list[dict], refs: torch.Tensor):
    """Paired frames -> a FrameSet; frames whose item has no reference of their shape are left out."""
    from ..jscc.finetune import FrameSet

    keep = [
        f
        for f in frames
        if f["item_id"] < len(refs) and tuple(refs[f["item_id"]].shape) == f["shape"]
    ]
    if not keep:
        raise ValueError("no frame pairs with a reference image (wrong --dataset/--crop/--count?)")
    return FrameSet(
        symbols=torch.from_numpy(np.stack([f["symbols"] for f in keep])),
        gain=torch.from_numpy(np.stack([f["gain"] for f in keep])),
        snr_db=torch.tensor([f["snr_db"] for f in keep], dtype=torch.float32),
        target=torch.stack([refs[f["item_id"]] for f in keep]).float(),
        seq=torch.tensor([f["seq"] for f in keep], dtype=torch.int64),
        item=torch.tensor([f["item_id"] for f in keep], dtype=torch.int64),
    )


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    log = setup_logging("finetune", a.verbose)
    if a.threads:
        torch.set_num_threads(a.threads)
    from ..jscc.checkpoint import load_checkpoint, save_checkpoint
    from ..jscc.finetune import finetune_decoder, transmitter_fingerprint

    base = resolve_checkpoint(a.checkpoint)
    model, phy, doc, _ = load_checkpoint(base)
    frames, provenance, refs_spec = [], [], None
    for stem in a.recording:
        got, prov = received_frames(stem, doc, log)
        spec = prov["references"]
        if refs_spec is not None and spec != refs_spec:
            raise RecordingRefused(f"{stem}: references {spec}, the first recording's {refs_spec}")
        refs_spec = spec
        # seqs of different recordings may repeat: they stay apart by recording
        off = len(provenance) << 32
        frames += [{**f, "seq": f["seq"] + off} for f in got]
        provenance.append(prov)
    if a.max_frames is not None:
        frames = frames[: a.max_frames]
    if refs_spec is None or refs_spec.get("dataset") is None:
        raise ValueError(
            "the recordings do not name their references (hil:dataset); record with hil rx --record"
        )
    refs, _ = items(refs_spec["dataset"], int(refs_spec["crop"]), int(refs_spec["count"]))
    fs = frame_set(frames, refs)
    train, val = fs.split(a.val_every)
    log.info("%d frames: %d to train on, %d to validate", len(fs), len(train), len(val))
    say = None if a.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    hist = finetune_decoder(
        model, train, val, epochs=a.epochs, batch=a.batch, lr=a.lr, seed=a.seed, progress=say
    )
    meta = {k: v for k, v in doc.items() if k not in ("format", "fingerprint", "model", "phy")}
    meta["transmitter_fingerprint"] = transmitter_fingerprint(doc).hex()
    meta["finetune"] = {
        "base_checkpoint": str(base),
        "base_fingerprint": doc["fingerprint"],
        "recordings": provenance,
        "epochs": a.epochs,
        "lr": a.lr,
        "batch": a.batch,
        "val_every": a.val_every,
        "seed": a.seed,
        **hist,
    }
    path = save_checkpoint(a.out, model, phy, meta)
    v = hist["val_psnr_db"]
    print(
        f"validation PSNR {v[0]:.2f} -> {max(v):.2f} dB on {len(val)} frames "
        f"({len(train)} trained on, best epoch {hist['best_epoch']}); written {path}"
    )
    return 0
