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
from .common import StopFlag, add_curve_args, curve_client, items, resolve_checkpoint, setup_logging


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hil rx", description=__doc__)
    p.add_argument(
        "--checkpoint", default=None, help="checkpoint stem (default: the shipped k/n=1/6 model)"
    )
    p.add_argument(
        "--radio", default=None, help="the radio process's RX endpoint (PULL connects here)"
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
        "--save-images-max",
        type=int,
        default=64,
        help="save at most this many images (PNG is slow)",
    )
    p.add_argument(
        "--keep-frames",
        type=int,
        default=2000,
        help="per-frame records and statuses kept for the summary (all records go to --metrics); "
        "bounds memory on long runs",
    )
    p.add_argument(
        "--idle-timeout", type=float, default=30.0, help="give up after this long without samples"
    )
    p.add_argument(
        "--ready-file",
        help="touch this file once samples flow through the receiver (hil link starts tx then)",
    )
    p.add_argument(
        "--truth", help="endpoint to bind for the sim radio's per-burst ground truth (PULL)"
    )
    p.add_argument("--record", help="also write the received stream as a SigMF recording <stem>")
    p.add_argument(
        "--recording", help="decode a SigMF recording instead of a live stream (offline)"
    )
    p.add_argument(
        "--chunk",
        type=int,
        default=None,
        help="--recording: samples per step (default: as recorded)",
    )
    p.add_argument(
        "--no-decode",
        action="store_true",
        help="detect and account only (no images, no model weights)",
    )
    p.add_argument(
        "--max-seconds", type=float, default=None, help="stop after this much stream time"
    )
    p.add_argument(
        "--max-frames", type=int, default=None, help="stop after this many detected frames"
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (1: leaves cores to the radio, and results do not depend on the machine)",
    )
    p.add_argument(
        "--telemetry",
        help="endpoint to bind a PUB socket on for the live view (hil dashboard); never blocks",
    )
    p.add_argument(
        "--dashboard",
        action="store_true",
        help="also serve the live view (hil dashboard) of this receiver, on loopback",
    )
    p.add_argument("--dashboard-port", type=int, default=8750)
    p.add_argument(
        "--radio-telemetry", help="with --dashboard: the radio process's telemetry endpoint too"
    )
    p.add_argument("-v", "--verbose", action="store_true")
    add_curve_args(p)
    return p


@dataclass
class Accounting:
    """Every sent seq -> decoded | refused | header_failed | cut (by a sample drop) | missed.

    Header failures carry no seq; they are attributed per interval between two
    frames whose seq is known (by stream position): when an interval holds as
    many failures as it has unaccounted seqs, those seqs failed their headers;
    otherwise they stay "missed" and the failures are counted as unattributed.

    Memory stays constant on long runs: intervals older than the newest
    ``window`` known frames are settled into running counts as the run goes
    (frames arrive in seq order, so nothing later can change them), and a
    per-seq status is kept for at most ``keep`` frames (non-decoded ones first).
    """

    keep: int = 2000
    window: int = 256
    sent: dict = field(default_factory=dict)  # seq -> item_id (not yet settled)
    done: bool = False
    decoded: set = field(default_factory=set)
    refused: set = field(default_factory=set)
    cut: dict = field(default_factory=dict)  # seq -> device offset: payload cut by a sample drop
    header_failed_at: list = field(default_factory=list)  # stream positions (not yet settled)
    positions: dict = field(default_factory=dict)  # seq -> stream position (not yet settled)
    unexpected: int = 0  # decoded frames whose seq the transmitter did not report
    duplicates: int = 0
    cut_unknown: int = 0  # frames cut by a drop before their header was decoded
    on_missed: object = None  # called with each seq settled as missed (the live view)
    floor: tuple = (-1, -1)  # (stream position, seq): everything up to it is settled
    totals: dict = field(default_factory=dict)
    status_kept: dict = field(default_factory=dict)
    status_not_kept: int = 0
    failures_seen: int = 0
    attributed: int = 0
    recent: dict = field(default_factory=dict)  # recently settled seqs, to spot duplicates

    NAMES = ("decoded", "refused", "header_failed", "cut", "missed")

    def header_failed(self, pos: int) -> None:
        self.failures_seen += 1
        self.header_failed_at.append(pos)

    def seen(self, seq: int) -> bool:
        return seq in self.decoded or seq in self.refused or seq in self.recent

    def count(self, name: str) -> int:
        """Running count (settled + pending) of one outcome, for progress lines."""
        pending = {"decoded": self.decoded, "refused": self.refused, "cut": self.cut}
        return self.totals.get(name, 0) + len(pending.get(name, ()))

    def _resolve(self, bounds: list) -> dict:
        status = {}
        for s in self.sent:
            if s in self.decoded:
                status[s] = "decoded"
            elif s in self.refused:
                status[s] = "refused"
            elif s in self.cut:
                status[s] = "cut"
        for (p0, s0), (p1, s1) in itertools.pairwise(bounds):
            fails = sum(1 for h in self.header_failed_at if p0 < h < p1)
            open_seqs = [s for s in self.sent if s0 < s < s1 and s not in status]
            if fails and fails == len(open_seqs):
                for s in open_seqs:
                    status[s] = "header_failed"
                self.attributed += fails
        return status

    def live(self) -> dict:
        """Counts so far: the settled ones plus what is known of the frames not yet settled
        (``pending``: sent, with no outcome yet); sent = the five outcomes + pending."""
        c = {k: self.totals.get(k, 0) for k in self.NAMES}
        c["decoded"] += len(self.decoded & self.sent.keys())
        c["refused"] += len(self.refused & self.sent.keys())
        c["cut"] += len(self.cut.keys() & self.sent.keys() - self.decoded)
        c["sent"] = self.totals.get("sent", 0) + len(self.sent)
        c["pending"] = c["sent"] - sum(c[k] for k in self.NAMES)
        c["header_failures_seen"] = self.failures_seen
        return c

    def _record(self, status: dict) -> None:
        for s in sorted(status):
            v = status[s]
            if v == "missed" and self.on_missed is not None:
                self.on_missed(s)
            self.totals[v] = self.totals.get(v, 0) + 1
            self.totals["sent"] = self.totals.get("sent", 0) + 1
            if v != "decoded" and len(self.status_kept) < 2 * self.keep:
                self.status_kept[s] = v
            elif len(self.status_kept) < self.keep:
                self.status_kept[s] = v
            else:
                self.status_not_kept += 1

    def compact(self) -> None:
        """Settle everything up to the ``window``-th newest known frame."""
        if len(self.positions) <= 2 * self.window:
            return
        known = sorted((p, s) for s, p in self.positions.items())
        end = known[-self.window]
        older = [k for k in known if k < end]
        status = self._resolve([self.floor, *older, end])
        status = {s: v for s, v in status.items() if s <= end[1]}
        for s in self.sent:
            if s <= end[1]:
                status.setdefault(s, "missed")
        self._record(status)
        for s in status:
            del self.sent[s]
            self.recent[s] = None
        gone = [s for s in self.positions if s <= end[1]]
        for s in gone:
            del self.positions[s]
            self.recent[s] = None
        self.decoded = {s for s in self.decoded if s > end[1]}
        self.refused = {s for s in self.refused if s > end[1]}
        self.cut = {s: v for s, v in self.cut.items() if s > end[1]}
        self.header_failed_at = [h for h in self.header_failed_at if h > end[0]]
        while len(self.recent) > 8 * self.window:
            del self.recent[next(iter(self.recent))]
        self.floor = end

    def settle(self) -> dict:
        known = sorted((p, s) for s, p in self.positions.items())
        last = (float("inf"), max(self.sent, default=self.floor[1]) + 1)
        status = self._resolve([self.floor, *known, last])
        for s in self.sent:
            status.setdefault(s, "missed")
        self._record(status)
        self.sent.clear()
        counts = {k: self.totals.get(k, 0) for k in self.NAMES}
        counts["sent"] = self.totals.get("sent", 0)
        counts["header_failures_seen"] = self.failures_seen
        counts["header_failures_unattributed"] = self.failures_seen - self.attributed
        counts["unexpected"] = self.unexpected
        counts["duplicates"] = self.duplicates
        counts["cut_before_header"] = self.cut_unknown
        counts["balanced"] = sum(counts[k] for k in self.NAMES) == counts["sent"]
        return {
            "counts": counts,
            "status": {str(k): v for k, v in sorted(self.status_kept.items())},
            "status_not_kept": self.status_not_kept,
        }


class Records:
    """Per-frame records with running aggregates; keeps at most ``keep`` records in memory
    (the metrics JSON lines hold them all), so a long run's memory does not grow with it."""

    def __init__(self, keep: int = 2000):
        self.keep = keep
        self.items: list[dict] = []
        self.not_kept = 0
        self.n = {"decoded": 0, "scored": 0}
        self.sums = {"psnr_db": 0.0, "ssim": 0.0, "snr_db": 0.0, "cfo_hz": 0.0}
        self.on_add = None  # called with each record (the live view)

    def add(self, rec: dict) -> None:
        if self.on_add is not None:
            self.on_add(rec)
        if rec.get("status") == "decoded":
            self.n["decoded"] += 1
            self.sums["snr_db"] += rec["snr_db"]
            self.sums["cfo_hz"] += rec["cfo_hz"]
            if "psnr_db" in rec:
                self.n["scored"] += 1
                self.sums["psnr_db"] += rec["psnr_db"]
                self.sums["ssim"] += rec["ssim"]
        if len(self.items) < self.keep:
            self.items.append(rec)
        else:
            self.not_kept += 1

    def mean(self, key: str) -> float | None:
        n = self.n["scored"] if key in ("psnr_db", "ssim") else self.n["decoded"]
        return self.sums[key] / n if n else None


class Decoder:
    """Decoder side: the checkpoint's model, the references, and chunk reassembly."""

    def __init__(self, ckpt, dataset: str, crop: int, count: int):
        self.model, self.phy, doc, _ = load_checkpoint(ckpt)
        self.fingerprint = bytes.fromhex(doc["fingerprint"])
        self.refs, self.ref_ids = items(dataset, crop, count)
        self.chunks: dict[tuple[int, int], dict] = {}
        self.codecs: dict[tuple[int, int], object] = {}  # (MCS index, symbols) -> DigitalCodec

    def warm_up(self, shape: tuple[int, int, int]) -> None:
        """One decode and one score of a dummy image: the first call of each costs far more
        than the rest (allocations, kernel choice), which a live stream must not wait for."""
        k = self.model.cfg.n_symbols(shape)
        with torch.inference_mode():
            img = self.model.decoder(
                torch.zeros(1, k, dtype=torch.complex64),
                torch.tensor([10.0]),
                shape,
                torch.ones(1, k),
            ).clamp(0, 1)
            psnr(img, img.flip(-1))
            ssim(img, img.flip(-1))

    def decode_digital(self, e: FrameEvent) -> tuple[torch.Tensor, bool]:
        """A separation-baseline frame -> (image, payload intact). A CRC failure or an
        undecodable bitstream shows mid-grey, as the fast path scores it."""
        from ..baseline import MCS_TABLE, DigitalCodec, parse_scheme
        from ..baseline.source import decode as decode_image

        h = e.header
        mi, _codec = parse_scheme(h.scheme)
        key = (mi, len(e.symbols))
        if key not in self.codecs:
            self.codecs[key] = DigitalCodec(MCS_TABLE[mi], len(e.symbols))
        no = 1.0 / np.maximum(e.symbol_gain, 1e-6)
        data = self.codecs[key].decode(to_torch(e.symbols[None]), torch.from_numpy(no[None]))[0]
        img = decode_image(data, h.shape) if data is not None else None
        if img is None:
            return torch.full(tuple(h.shape), 0.5), False
        return torch.from_numpy(img), True

    def decode(
        self, events: list[FrameEvent]
    ) -> list[tuple[FrameEvent, list[FrameEvent], torch.Tensor]]:
        """Complete images from ok events: [(first event, all chunk events, image [3, H, W])]."""
        ready, out = [], []
        for e in events:
            h = e.header
            if h.scheme != 0:  # separation baseline: one image per frame
                img, _intact = self.decode_digital(e)
                out.append((e, [e], img))
                continue
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


class _Source:
    """Where samples come from: the radio's socket, or a SigMF recording (offline)."""

    def __init__(self, a, log):
        self.recording = None
        self.stream = None
        self.sock = None
        self.center_freq_hz = 0.0
        self.first_chunk: int | None = None
        if a.recording:
            from ..record import SigMFReader

            self.recording = SigMFReader(a.recording)
            size = a.chunk or int(self.recording.global_field("hil:chunk", 16384))
            self._it = self.recording.chunks(size)
            self.stats = {"messages": 0, "samples": 0, "recording": str(a.recording)}
            log.info(
                "decoding recording %s: %d samples at %.3f MSps",
                a.recording,
                self.recording.n,
                self.recording.sample_rate_hz / 1e6,
            )
        else:
            ctx = zmq.Context()
            self.ctx = ctx
            self.sock = make_socket(ctx, zmq.PULL, a.radio, bind=False, curve=curve_client(a))
            self.stream = SampleReceiver(self.sock, raw=a.raw, name="rx<-radio")

    def next(self):
        """(samples, offset, flags, eos) or None on timeout."""
        if self.recording is not None:
            c = next(self._it, None)
            if c is None:
                return np.zeros(0, np.complex64), None, EOS, True
            self.stats["messages"] += 1
            self.stats["samples"] += len(c.samples)
            return c.samples, c.global_index, DROP if c.new_capture else 0, False
        msg = self.stream.recv(timeout_s=0.2)
        if msg is None:
            return None
        h = msg.header
        self.center_freq_hz = h.center_freq_hz
        if h.n_samples and self.first_chunk is None:
            self.first_chunk = h.n_samples
        return (
            msg.samples,
            (None if self.stream.raw else h.sample_offset),
            h.flags,
            bool(h.flags & EOS),
        )

    def stats_dict(self) -> dict:
        return self.stats if self.recording is not None else self.stream.stats.to_dict()

    @property
    def sample_rate(self) -> float | None:
        return self.recording.sample_rate_hz if self.recording is not None else None

    def close(self):
        if self.sock is not None:
            self.sock.close(linger=0)
            self.ctx.term()


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    if not a.recording and not a.radio:
        raise ValueError("give --radio ENDPOINT (live) or --recording STEM (offline)")
    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, a.threads))
    try:
        return _main(a)
    finally:
        torch.set_num_threads(threads)


def _main(a) -> int:
    log = setup_logging("rx", a.verbose)
    stop = StopFlag()
    ckpt = resolve_checkpoint(a.checkpoint)
    if a.no_decode:
        from ..jscc.checkpoint import read_meta
        from ..phy import OfdmConfig

        doc = read_meta(ckpt)
        dec = None
        phy = OfdmConfig.from_dict(doc["phy"])
        my_fp = bytes.fromhex(doc["fingerprint"])
    else:
        dec = Decoder(ckpt, a.dataset, a.crop, a.count)
        dec.warm_up((3, a.crop, a.crop))
        phy, my_fp = dec.phy, dec.fingerprint
    fr = FrameReceiver(phy)
    fr_base = None  # device sample index of the FrameReceiver's sample 0
    ctx = zmq.Context()
    src = _Source(a, log)
    ctrl = make_socket(ctx, zmq.PULL, a.control, bind=True) if a.control else None
    truth_sock = make_socket(ctx, zmq.PULL, a.truth, bind=True) if a.truth else None
    acc = Accounting(keep=a.keep_frames)
    tap, dash = _live_view(a, log)
    pos_base = (
        0  # stream samples before the FrameReceiver's sample 0: a position that never goes back
    )
    manifest: dict[int, dict] = {}  # msg_seq -> manifest entry
    truths: dict[int, dict] = {}  # msg_seq -> ground truth
    radio_info: dict = {}  # the radio process's profile and settings (sent on the truth channel)
    detections: list[dict] = []
    n_detections = [0]
    from ..baseline.digital import is_digital_scheme

    writer = None
    if a.record:
        from ..record import SigMFWriter

        writer = SigMFWriter(
            a.record,
            src.sample_rate or phy.sample_rate_hz,
            0.0,
            hw="ADALM-PLUTO via hil radio",
            extra_global={"hil:fingerprint": my_fp.hex(), "hil:phy": phy.to_dict()},
        )
    metrics = open(a.metrics, "w") if a.metrics else None
    img_dir = Path(a.save_images) if a.save_images else None
    saved = [0]
    if img_dir:
        img_dir.mkdir(parents=True, exist_ok=True)
    constellation: list[np.ndarray] = []
    records = Records(a.keep_frames)
    if tap is not None:
        records.on_add = tap.frame
        acc.on_missed = lambda seq: tap.frame({"status": "missed", "seq": seq})

    def receiver_stats() -> dict:
        return {
            "detections": n_detections[0],
            "rejected": fr.stats.rejected,
            "nonfinite": fr.stats.nonfinite,
            "resyncs": resyncs,
            "lost_samples": lost_samples,
        }

    meta = {
        "fingerprint": my_fp.hex(),
        "source": a.recording or a.radio,
        "decoder": dec is not None,
    }
    resyncs = 0
    lost_samples = 0
    next_offset = None
    stream_samples = 0
    t0 = time.monotonic()
    last_print = t0
    last_data = t0
    eos = False
    first_data = None

    def control() -> None:
        for sock in (ctrl, truth_sock):
            if sock is None:
                continue
            while True:
                m = recv_json(sock, timeout_s=0)
                if m is None:
                    break
                if m.get("type") == "sent" and isinstance(m.get("seq"), int):
                    acc.sent[m["seq"]] = m.get("item_id")
                    if writer is not None and isinstance(m.get("msg_seq"), int):
                        manifest[m["msg_seq"]] = m
                elif m.get("type") == "done":
                    acc.done = True
                elif (
                    writer is not None
                    and m.get("type") == "truth"
                    and isinstance(m.get("msg_seq"), int)
                ):
                    truths[m["msg_seq"]] = m
                elif m.get("type") == "radio_config" and isinstance(m.get("config"), dict):
                    radio_info.update(m)

    def handle(events: list[FrameEvent]) -> None:
        ok = []
        for e in events:
            dev = fr_base + e.frame_start
            spos = pos_base + e.frame_start
            det = {
                "device_offset": dev,
                "status": e.status,
                "snr_db": round(e.snr_db, 3),
                "cfo_hz": round(e.cfo_hz, 1),
                "lts_metric": round(e.lts_metric, 3),
            }
            if e.header is not None:
                det.update(
                    {
                        "seq": e.header.seq,
                        "item_id": e.header.item_id,
                        "payload_len": e.header.payload_len,
                        "fingerprint": e.header.fingerprint.hex(),
                        "chunk": e.header.chunk_index,
                    }
                )
            else:
                det["error"] = e.error
            n_detections[0] += 1
            if writer is not None:  # kept only to annotate the recording
                detections.append(det)
            if e.status == "header_error":
                acc.header_failed(spos)
                records.add(
                    {
                        "status": "header_failed",
                        "frame_start": dev,
                        "error": e.error,
                        "snr_db": e.snr_db,
                        "cfo_hz": e.cfo_hz,
                    }
                )
                continue
            h = e.header
            if acc.seen(h.seq):
                acc.duplicates += 1
                continue
            if acc.sent and h.seq not in acc.sent and acc.done:
                acc.unexpected += 1
            acc.positions[h.seq] = spos
            if h.scheme != 0 and not is_digital_scheme(h.scheme):
                acc.refused.add(h.seq)
                records.add(
                    {"status": "refused", "seq": h.seq, "scheme": h.scheme, "frame_start": dev}
                )
                log.warning("refused frame %d: unknown scheme %d", h.seq, h.scheme)
                continue
            if h.fingerprint != my_fp:
                acc.refused.add(h.seq)
                records.add(
                    {
                        "status": "refused",
                        "seq": h.seq,
                        "item_id": h.item_id,
                        "fingerprint": h.fingerprint.hex(),
                        "frame_start": dev,
                    }
                )
                log.warning(
                    "refused frame %d: encoded by model %s, this decoder is %s",
                    h.seq,
                    h.fingerprint.hex(),
                    my_fp.hex(),
                )
                continue
            if dec is None:
                acc.decoded.add(h.seq)
                records.add(
                    {"status": "detected", "seq": h.seq, "item_id": h.item_id, "frame_start": dev}
                )
                continue
            ok.append(e)
        if dec is None:
            return
        for first, evs, img in dec.decode(ok):
            h = first.header
            rec = {
                "status": "decoded",
                "time": round(time.time(), 3),
                "seq": h.seq,
                "scheme": h.scheme,
                "item_id": h.item_id,
                "chunks": h.chunk_count,
                "frame_start": fr_base + first.frame_start,
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
                acc.decoded.add(e.header.seq)
            records.add(rec)
            if tap is not None:
                ok_ref = h.item_id < len(dec.refs) and dec.refs[h.item_id].shape == img.shape
                tap.decoded(first, img, dec.refs[h.item_id] if ok_ref else None)
            if metrics:
                metrics.write(json.dumps(rec) + "\n")
            if img_dir is not None and saved[0] < a.save_images_max:
                saved[0] += 1
                from PIL import Image

                arr = (img.permute(1, 2, 0).numpy() * 255 + 0.5).astype(np.uint8)
                Image.fromarray(arr).save(img_dir / f"seq{h.seq:06d}_item{h.item_id:04d}.png")
            if len(constellation) < 8:
                constellation.append(first.symbols)

    try:
        while not stop and not eos:
            control()
            got = src.next()
            now = time.monotonic()
            if got is None:
                if now - last_data > a.idle_timeout:
                    log.error("no samples for %.0f s; giving up", a.idle_timeout)
                    break
                continue
            samples, offset, flags, is_eos = got
            last_data = now
            if first_data is None:
                first_data = now
            if offset is None:  # raw mode: no offsets, assume contiguous
                offset = 0 if next_offset is None else next_offset
            gap = 0 if next_offset is None else offset - next_offset
            if gap < 0:
                log.warning(
                    "sample offset went back by %d (radio restarted): resynchronising", -gap
                )
            if next_offset is not None and (gap != 0 or flags & (DROP | OVERFLOW)):
                lost_samples += max(gap, 0)
                resyncs += 1
                log.warning(
                    "%d samples lost before offset %d: frames in flight are dropped",
                    max(gap, 0),
                    offset,
                )
                for det, hdr in fr.incomplete():  # frames the gap cut: failed, not silently gone
                    if hdr is not None and hdr.seq not in acc.decoded:
                        acc.cut[hdr.seq] = fr_base + det.frame_start
                        records.add(
                            {
                                "status": "cut",
                                "seq": hdr.seq,
                                "item_id": hdr.item_id,
                                "frame_start": fr_base + det.frame_start,
                            }
                        )
                    elif hdr is None:
                        acc.cut_unknown += 1
                fr = FrameReceiver(phy, receiver=fr.rx)
                fr_base = None
                pos_base = stream_samples
            if fr_base is None:
                fr_base = offset
            next_offset = offset + len(samples)
            if writer is not None and len(samples):
                note = "overflow" if flags & (DROP | OVERFLOW) else None
                writer.write(samples, offset, note)
            stream_samples += len(samples)
            if len(samples):
                handle(fr.push(samples))
                acc.compact()
                if tap is not None:
                    tap.samples(samples)
                    if tap.status_due():
                        tap.status(acc.live(), src.stats_dict(), receiver_stats(), meta)
                if a.ready_file and first_data is not None:
                    Path(a.ready_file).touch()
                    a.ready_file = None
            eos = is_eos
            if a.max_seconds is not None and stream_samples >= a.max_seconds * phy.sample_rate_hz:
                log.info("max-seconds reached")
                break
            if a.max_frames is not None and fr.stats.detections >= a.max_frames:
                log.info("max-frames reached")
                break
            if now - last_print > 2.0:
                last_print = now
                pm = records.mean("psnr_db")
                log.info(
                    "frames: %d decoded, %d header-failed, %d refused; mean PSNR %.2f dB",
                    acc.count("decoded"),
                    acc.failures_seen,
                    acc.count("refused"),
                    pm if pm is not None else float("nan"),
                )
    finally:
        src.close()
        if metrics:
            metrics.close()
    # late manifest and truth messages
    if ctrl is not None or truth_sock is not None:
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            control()
            time.sleep(0.05)
    for s_ in (ctrl, truth_sock):
        if s_ is not None:
            s_.close(linger=0)
    ctx.term()
    if writer is not None:
        _annotate(writer, detections, manifest, truths)
        writer.fc = src.center_freq_hz
        if radio_info:
            rc_ = radio_info["config"]
            writer.hw = f"ADALM-PLUTO ({rc_.get('backend')} backend{', ' + str(rc_.get('uri')) if rc_.get('uri') else ''})"
            writer.extra["hil:radio_profile"] = radio_info.get("profile")
            writer.extra["hil:radio_config"] = rc_
            writer.extra["hil:rx_gain_mode"] = rc_.get("rx_gain_mode")
            writer.extra["hil:rx_gain_db"] = rc_.get("rx_gain_db")
            writer.extra["hil:tx_gain_db"] = rc_.get("tx_gain_db")
        writer.extra["hil:chunk"] = int(src.first_chunk or 16384)  # replay in the same steps
        path = writer.close()
        log.info(
            "recording written: %s (%d samples, %d annotations)",
            path,
            writer.n,
            len(writer.annotations),
        )
    settled = acc.settle()
    ps = records.n["scored"]
    summary = {
        "counts": settled["counts"],
        "frame_status": settled["status"],
        "frame_status_not_kept": settled["status_not_kept"],
        "psnr_db_mean": records.mean("psnr_db"),
        "ssim_mean": records.mean("ssim"),
        "snr_est_db_mean": records.mean("snr_db"),
        "cfo_hz_mean": records.mean("cfo_hz"),
        "per_frame": [r for r in records.items if r.get("status") != "header_failed"]
        + [r for r in records.items if r.get("status") == "header_failed"],
        "per_frame_not_kept": records.not_kept,
        "stream": src.stats_dict(),
        "receiver": receiver_stats(),
        "fingerprint": my_fp.hex(),
        "transmitter_done": acc.done,
        "end_of_stream": eos,
        "wall_seconds": time.monotonic() - t0,
        "stream_seconds": (last_data - first_data) if first_data is not None else 0.0,
        "stream_samples": stream_samples,
        "sample_rate_hz": phy.sample_rate_hz,
        "recording": a.record or a.recording,
    }
    if img_dir is not None and constellation:
        np.save(
            img_dir / "constellation.npy",
            np.concatenate(constellation).astype(np.complex64),
            allow_pickle=False,
        )
    if a.summary:
        Path(a.summary).write_text(json.dumps(summary, indent=1))
    if tap is not None:
        tap.status(summary["counts"], summary["stream"], summary["receiver"], meta)
        tap.summary(summary)
        tap.close()
    if dash is not None:
        time.sleep(1.0)  # the page gets the summary
        dash.terminate()
        dash.wait(10)
    c = settled["counts"]
    log.info(
        "sent %d: decoded %d, header-failed %d, refused %d, cut by drops %d, missed %d; mean PSNR %s dB",
        c["sent"],
        c["decoded"],
        c["header_failed"],
        c["refused"],
        c["cut"],
        c["missed"],
        f"{summary['psnr_db_mean']:.2f}" if ps else "n/a",
    )
    stopped_on_limit = a.max_seconds is not None or a.max_frames is not None
    return 0 if (eos or acc.done or stopped_on_limit) else 1


def _live_view(a, log):
    """The telemetry tap (--telemetry), and with --dashboard a dashboard process reading it."""
    if a.dashboard and not a.telemetry:
        from ..transport.sockets import free_tcp_endpoint

        a.telemetry = free_tcp_endpoint()
    if not a.telemetry:
        return None, None
    from ..dashboard.tap import RxTap

    tap = RxTap(a.telemetry)
    dash = None
    if a.dashboard:
        import subprocess
        import sys

        cmd = [sys.executable, "-m", "hil.cli", "dashboard", "--telemetry", a.telemetry]
        if a.radio_telemetry:
            cmd += ["--telemetry", a.radio_telemetry]
        dash = subprocess.Popen([*cmd, "--port", str(a.dashboard_port)])
        log.info("dashboard at http://127.0.0.1:%d/", a.dashboard_port)
    return tap, dash


def _annotate(writer, detections: list[dict], manifest: dict, truths: dict) -> None:
    """Frames as sent (transmitter manifest + sim ground truth) and as detected, as SigMF annotations."""
    for msg_seq, t in sorted(truths.items()):
        m = manifest.get(msg_seq, {})
        start = writer.file_index(t.get("frame_offset", t["rx_offset"]))
        if start is None:
            continue
        writer.annotate(
            start,
            int(m.get("frame_len", t["n"])),
            "frame sent",
            seq=m.get("seq"),
            item_id=m.get("item_id"),
            device_offset=t.get("frame_offset", t["rx_offset"]),
            true_snr_db=round(t.get("snr_db", 0.0), 3),
            true_cfo_hz=round(t.get("cfo_hz", 0.0), 1),
            delays=t.get("delays"),
            tap_power_db=t.get("tap_power_db"),
        )
    for d in detections:
        start = writer.file_index(d["device_offset"])
        if start is None:
            continue
        fields = {k: v for k, v in d.items() if k != "status"}
        writer.annotate(start, 0, f"frame detected ({d['status']})", **fields)
