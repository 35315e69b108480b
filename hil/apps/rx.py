"""``hil rx``: find frames in the RX stream, decode the images, score them, account for every frame.

For every frame the transmitter reports sending (control channel), the
summary says exactly one of: decoded, header_failed, refused (encoded by
another model: fingerprint mismatch), or missed (never detected). Header
failures carry no sequence number; one that sits between two decoded frames
with exactly one sequence number missing between them is attributed to it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import zmq

from ..convert import to_torch
from ..jscc.checkpoint import load_checkpoint
from ..jscc.metrics import psnr, ssim
from ..phy import FrameEvent, FrameReceiver
from ..transport import DROP, EOS, OVERFLOW, SampleReceiver, make_socket, recv_json
from .common import StopFlag, items, resolve_checkpoint, setup_logging


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hil rx", description=__doc__)
    p.add_argument(
        "--checkpoint", default=None, help="checkpoint stem (default: the shipped k/n=1/6 model)"
    )
    p.add_argument(
        "--radio", required=True, help="the radio process's RX endpoint (PULL connects here)"
    )
    p.add_argument(
        "--raw", action="store_true", help="raw complex64 frames without our header (GNU Radio ZMQ)"
    )
    p.add_argument(
        "--control", default=None, help="endpoint to bind for the transmitter's manifest (PULL)"
    )
    p.add_argument(
        "--dataset", default="builtin", help="where the reference images come from (test split)"
    )
    p.add_argument("--crop", type=int, default=32)
    p.add_argument(
        "--count", type=int, default=32, help="items the transmitter draws from (for references)"
    )
    p.add_argument("--metrics", help="write one JSON line per frame here")
    p.add_argument("--summary", help="write the summary JSON here")
    p.add_argument(
        "--save-images", help="folder for received images (PNG) and constellation samples (.npy)"
    )
    p.add_argument(
        "--idle-timeout", type=float, default=30.0, help="give up after this long without samples"
    )
    p.add_argument("-v", "--verbose", action="store_true")
    return p


@dataclass
class Accounting:
    sent: dict = field(default_factory=dict)  # seq -> item_id
    done: bool = False
    decoded: dict = field(default_factory=dict)  # seq -> record
    refused: dict = field(default_factory=dict)  # seq -> record
    header_failed_at: list = field(default_factory=list)  # stream positions of header failures
    positions: dict = field(default_factory=dict)  # seq -> frame_start of decoded/refused frames
    unexpected: int = 0  # decoded frames whose seq the transmitter did not report
    duplicates: int = 0

    def settle(self) -> dict:
        """Every sent seq -> decoded | refused | header_failed | missed.

        Header failures are attributed per interval between two frames whose
        seq is known (by stream position): when an interval holds as many
        failures as it has unaccounted seqs, those seqs failed their headers;
        otherwise they stay "missed" and the failures are counted as unattributed.
        """
        status = {}
        for s in self.sent:
            if s in self.decoded:
                status[s] = "decoded"
            elif s in self.refused:
                status[s] = "refused"
        known = sorted((pos, s) for s, pos in self.positions.items())
        bounds = [(-1, -1), *known, (float("inf"), max(self.sent, default=-1) + 1)]
        attributed = 0
        for (p0, s0), (p1, s1) in itertools.pairwise(bounds):
            fails = [h for h in self.header_failed_at if p0 < h < p1]
            open_seqs = [s for s in self.sent if s0 < s < s1 and s not in status]
            if fails and len(fails) == len(open_seqs):
                for s in open_seqs:
                    status[s] = "header_failed"
                attributed += len(fails)
        for s in self.sent:
            status.setdefault(s, "missed")
        names = ("decoded", "refused", "header_failed", "missed")
        counts = {k: sum(1 for v in status.values() if v == k) for k in names}
        counts["sent"] = len(self.sent)
        counts["header_failures_seen"] = len(self.header_failed_at)
        counts["header_failures_unattributed"] = len(self.header_failed_at) - attributed
        counts["unexpected"] = self.unexpected
        counts["duplicates"] = self.duplicates
        counts["balanced"] = sum(counts[k] for k in names) == len(self.sent)
        return {"counts": counts, "status": {str(k): v for k, v in sorted(status.items())}}


class Decoder:
    """Decoder side: the checkpoint's model, the references, and chunk reassembly."""

    def __init__(self, ckpt, dataset: str, crop: int, count: int):
        self.model, self.phy, doc, _ = load_checkpoint(ckpt)
        self.fingerprint = bytes.fromhex(doc["fingerprint"])
        self.refs, self.ref_ids = items(dataset, crop, count)
        self.chunks: dict[tuple[int, int], dict] = {}

    def decode(
        self, events: list[FrameEvent]
    ) -> list[tuple[FrameEvent, list[FrameEvent], torch.Tensor]]:
        """Complete images from ok events: [(first event, all chunk events, image [3, H, W])]."""
        ready = []
        for e in events:
            h = e.header
            if h.chunk_count == 1:
                ready.append([e])
                continue
            key = (h.item_id, h.seq - h.chunk_index)
            part = self.chunks.setdefault(key, {})
            part[h.chunk_index] = e
            if len(part) == h.chunk_count:
                ready.append([part[i] for i in range(h.chunk_count)])
                del self.chunks[key]
            if len(self.chunks) > 256:  # incomplete images never complete: bounded memory
                self.chunks.pop(next(iter(self.chunks)))
        by_shape: dict[tuple, list] = {}
        for evs in ready:
            by_shape.setdefault(tuple(evs[0].header.shape), []).append(evs)
        out = []
        with torch.inference_mode():
            for shape, group in by_shape.items():
                k = self.model.cfg.n_symbols(shape)
                sym = np.stack([np.concatenate([e.symbols for e in evs]) for evs in group])
                gain = np.stack([np.concatenate([e.symbol_gain for e in evs]) for evs in group])
                if sym.shape[1] != k:
                    continue
                snr = torch.tensor([float(np.mean([e.snr_db for e in evs])) for evs in group])
                img = self.model.decoder(to_torch(sym), snr, shape, torch.from_numpy(gain)).clamp(
                    0, 1
                )
                out.extend((evs[0], evs, img[i]) for i, evs in enumerate(group))
        return out


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    log = setup_logging("rx", a.verbose)
    stop = StopFlag()
    dec = Decoder(resolve_checkpoint(a.checkpoint), a.dataset, a.crop, a.count)
    fr = FrameReceiver(dec.phy)
    ctx = zmq.Context.instance()
    sock = make_socket(ctx, zmq.PULL, a.radio, bind=False)
    ctrl = make_socket(ctx, zmq.PULL, a.control, bind=True) if a.control else None
    stream = SampleReceiver(sock, raw=a.raw, name="rx<-radio")
    acc = Accounting()
    metrics = open(a.metrics, "w") if a.metrics else None
    img_dir = Path(a.save_images) if a.save_images else None
    if img_dir:
        img_dir.mkdir(parents=True, exist_ok=True)
    constellation: list[np.ndarray] = []
    records: list[dict] = []
    resyncs = 0
    lost_samples = 0
    next_offset = None
    t0 = time.monotonic()
    last_print = t0
    last_data = t0
    eos = False
    first_data = None

    def handle(events: list[FrameEvent]) -> None:
        ok = []
        for e in events:
            if e.status == "header_error":
                acc.header_failed_at.append(e.frame_start)
                rec = {
                    "status": "header_failed",
                    "frame_start": e.frame_start,
                    "error": e.error,
                    "snr_db": e.snr_db,
                    "cfo_hz": e.cfo_hz,
                }
                records.append(rec)
                continue
            h = e.header
            if h.seq in acc.decoded or h.seq in acc.refused:
                acc.duplicates += 1
                continue
            if acc.sent and h.seq not in acc.sent and acc.done:
                acc.unexpected += 1
            acc.positions[h.seq] = e.frame_start
            if h.fingerprint != dec.fingerprint:
                acc.refused[h.seq] = {"fingerprint": h.fingerprint.hex()}
                records.append(
                    {
                        "status": "refused",
                        "seq": h.seq,
                        "item_id": h.item_id,
                        "fingerprint": h.fingerprint.hex(),
                        "frame_start": e.frame_start,
                    }
                )
                log.warning(
                    "refused frame %d: encoded by model %s, this decoder is %s",
                    h.seq,
                    h.fingerprint.hex(),
                    dec.fingerprint.hex(),
                )
                continue
            ok.append(e)
        for first, evs, img in dec.decode(ok):
            h = first.header
            rec = {
                "status": "decoded",
                "seq": h.seq,
                "item_id": h.item_id,
                "chunks": h.chunk_count,
                "frame_start": first.frame_start,
                "snr_db": round(first.snr_db, 3),
                "cfo_hz": round(first.cfo_hz, 1),
                "evm_pilots": round(first.evm_pilots, 4),
                "sc_metric": round(first.sc_metric, 3),
            }
            if h.item_id < len(dec.refs) and tuple(dec.refs[h.item_id].shape) == tuple(img.shape):
                ref = dec.refs[h.item_id][None]
                rec["psnr_db"] = round(float(psnr(img[None], ref)), 3)
                rec["ssim"] = round(float(ssim(img[None], ref)), 4)
            for e in evs:
                acc.decoded[e.header.seq] = rec
            records.append(rec)
            if metrics:
                metrics.write(json.dumps(rec) + "\n")
            if img_dir is not None:
                from PIL import Image

                arr = (img.permute(1, 2, 0).numpy() * 255 + 0.5).astype(np.uint8)
                Image.fromarray(arr).save(img_dir / f"seq{h.seq:06d}_item{h.item_id:04d}.png")
            if len(constellation) < 8:
                constellation.append(first.symbols)

    try:
        while not stop:
            if ctrl is not None:
                while True:
                    m = recv_json(ctrl, timeout_s=0)
                    if m is None:
                        break
                    if m.get("type") == "sent" and isinstance(m.get("seq"), int):
                        acc.sent[m["seq"]] = m.get("item_id")
                    elif m.get("type") == "done":
                        acc.done = True
            if eos:
                break
            msg = stream.recv(timeout_s=0.2)
            now = time.monotonic()
            if msg is None:
                if now - last_data > a.idle_timeout:
                    log.error("no samples for %.0f s; giving up", a.idle_timeout)
                    break
                continue
            last_data = now
            if first_data is None:
                first_data = now
            h = msg.header
            gap = 0 if next_offset is None or a.raw else h.sample_offset - next_offset
            if gap < 0 and next_offset is not None:
                log.warning(
                    "sample offset went back by %d (radio restarted): resynchronising", -gap
                )
                gap = 1
            if gap > 0 or h.flags & (DROP | OVERFLOW):
                lost_samples += max(gap, 0)
                resyncs += 1
                log.warning(
                    "%d samples lost before offset %d: frames in flight are dropped",
                    max(gap, 0),
                    h.sample_offset,
                )
                handle(fr.push(np.zeros(0, np.complex64)))
                fr = FrameReceiver(dec.phy, receiver=fr.rx)
            next_offset = h.sample_offset + h.n_samples
            if h.n_samples:
                handle(fr.push(msg.samples))
            if h.flags & EOS:
                eos = True
            if now - last_print > 2.0:
                last_print = now
                ps = [r["psnr_db"] for r in records if "psnr_db" in r]
                log.info(
                    "frames: %d decoded, %d header-failed, %d refused; mean PSNR %.2f dB",
                    len(acc.decoded),
                    len(acc.header_failed_at),
                    len(acc.refused),
                    float(np.mean(ps)) if ps else float("nan"),
                )
    finally:
        sock.close(linger=0)
        if metrics:
            metrics.close()
    # late manifest messages
    if ctrl is not None:
        while True:
            m = recv_json(ctrl, timeout_s=0.2)
            if m is None:
                break
            if m.get("type") == "sent" and isinstance(m.get("seq"), int):
                acc.sent[m["seq"]] = m.get("item_id")
            elif m.get("type") == "done":
                acc.done = True
        ctrl.close(linger=0)
    settled = acc.settle()
    ps = [r["psnr_db"] for r in records if "psnr_db" in r]
    ss = [r["ssim"] for r in records if "ssim" in r]
    summary = {
        "counts": settled["counts"],
        "frame_status": settled["status"],
        "psnr_db_mean": float(np.mean(ps)) if ps else None,
        "ssim_mean": float(np.mean(ss)) if ss else None,
        "snr_est_db_mean": float(
            np.mean([r["snr_db"] for r in records if r.get("status") == "decoded"])
        )
        if ps
        else None,
        "cfo_hz_mean": float(
            np.mean([r["cfo_hz"] for r in records if r.get("status") == "decoded"])
        )
        if ps
        else None,
        "per_frame": [r for r in records if r.get("status") != "header_failed"]
        + [r for r in records if r.get("status") == "header_failed"],
        "stream": stream.stats.to_dict(),
        "receiver": {
            "detections": fr.stats.detections,
            "rejected": fr.stats.rejected,
            "nonfinite": fr.stats.nonfinite,
            "resyncs": resyncs,
            "lost_samples": lost_samples,
        },
        "fingerprint": dec.fingerprint.hex(),
        "transmitter_done": acc.done,
        "end_of_stream": eos,
        "wall_seconds": time.monotonic() - t0,
        "stream_seconds": (last_data - first_data) if first_data is not None else 0.0,
        "stream_samples": stream.stats.samples,
        "sample_rate_hz": dec.phy.sample_rate_hz,
    }
    if img_dir is not None and constellation:
        np.save(
            img_dir / "constellation.npy",
            np.concatenate(constellation).astype(np.complex64),
            allow_pickle=False,
        )
    if a.summary:
        Path(a.summary).write_text(json.dumps(summary, indent=1))
    c = settled["counts"]
    log.info(
        "sent %d: decoded %d, header-failed %d, refused %d, missed %d; mean PSNR %s dB",
        c["sent"],
        c["decoded"],
        c["header_failed"],
        c["refused"],
        c["missed"],
        f"{summary['psnr_db_mean']:.2f}" if ps else "n/a",
    )
    return 0 if (eos or acc.done) else 1
