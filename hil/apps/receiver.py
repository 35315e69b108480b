"""The receive loop of ``hil rx``: samples in, frames found, images decoded and scored, every
frame accounted for.

``Receiver`` owns one ``FrameReceiver`` over the sample stream and what becomes of each
frame it finds. ``feed`` takes a chunk of samples (with its device offset and flags) and
handles sample gaps: frames in flight when samples are lost are counted as cut, never as
silently gone, and detection starts afresh after the gap. ``message`` takes the
transmitter's manifest and the sim radio's ground truth. ``summary`` settles the
accounting at the end.

Decoding is the registered decoders' (``hil.jscc.decoders``), accounting is
``hil.apps.accounting``'s; the process around this (sockets, arguments, live view) is
``hil.apps.rx``.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path

import numpy as np
import torch

from ..baseline import receive as _digital_decoders  # noqa: F401 (registers the digital schemes)
from ..jscc.decoders import Decoded, Decoders, scheme_name
from ..jscc.metrics import psnr, ssim
from ..phy import FrameEvent, FrameReceiver, OfdmConfig
from ..radio.ad9363 import same_rate
from ..transport import DROP, OVERFLOW
from .accounting import Accounting, Records
from .sources import Chunk


class RateMismatch(ValueError):
    """Samples at another rate than the PHY config's: the one source of the sample rate."""


def check_rate(stated_hz: float, phy_hz: float, what: str) -> None:
    """``stated_hz`` (0: not stated) must be the PHY's rate, to the hertz."""
    if stated_hz and not same_rate(stated_hz, phy_hz):
        raise RateMismatch(
            f"{what} runs at {stated_hz / 1e6:g} MSps but the checkpoint's PHY at "
            f"{phy_hz / 1e6:g} MSps; set the radio profile's sample_rate_hz to the PHY's rate"
        )


def _image_entry(m: dict) -> dict | None:
    """A manifest "image" message, checked: item id, 64-hex content id, name, size."""
    cid, name, size = m.get("content_id"), m.get("name"), m.get("size")
    if not (isinstance(m.get("item_id"), int) and isinstance(cid, str) and len(cid) == 64):
        return None
    if not all(c in "0123456789abcdef" for c in cid) or not isinstance(name, str):
        return None
    if not (isinstance(size, list) and len(size) == 2 and all(isinstance(v, int) for v in size)):
        return None
    return {"content_id": cid, "name": name[:200], "size": size}


def _safe_stem(name: str) -> str:
    """A file name from the manifest, safe to write under the image folder."""
    stem = Path(name).stem
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)[:80] or "image"


class Receiver:
    """State of one receive run. ``decoders`` None: detect and account only (--no-decode).

    Frames are decoded as they complete, unless the caller says more samples are already
    waiting (``feed(..., more=True)``: the receiver is behind the stream): then they wait
    and go to the decoder together, up to ``DECODE_BATCH`` frames or ``DECODE_WAIT_S``
    seconds, whichever comes first (``decode_waiting`` decodes them now). The JSCC decoder
    costs 0.4-0.5 ms a 32x32 tile in batches of 16 or more against 1.75 ms one at a time
    (one core, bfloat16): a receiver that falls behind catches up instead of staying behind.
    A photograph's frames (more than one chunk) never wait: its decoder holds them until a
    segment or the whole image is in and decodes that as one batch.
    """

    DECODE_BATCH = 64
    DECODE_WAIT_S = 0.25
    MAX_STARTED = 8192  # transmissions whose start times are kept for the latency

    def __init__(
        self,
        phy: OfdmConfig,
        fingerprint: bytes,
        decoders: Decoders | None,
        refs: list[torch.Tensor],
        log: logging.Logger,
        *,
        manifest: bool = True,
        keep_frames: int = 2000,
        writer=None,
        tap=None,
        metrics=None,
        img_dir: Path | None = None,
        save_images_max: int = 64,
        whole_refs: dict[str, torch.Tensor] | None = None,
    ):
        self.phy = phy
        self.fingerprint = fingerprint
        self.decoders = decoders
        self.refs = refs  # item id -> reference image [3, H, W]
        self.whole_refs = whole_refs or {}  # content id -> a whole photograph [3, H, W]
        self.item_images: dict[int, dict] = {}  # item id -> the manifest's image entry
        # photographs put together before the manifest named them (its control socket can
        # connect after the first frames arrive): scored when their entry comes, or at the end
        self.unnamed: list[Decoded] = []
        self.log = log
        self.fr = FrameReceiver(phy, fingerprint=fingerprint)
        self.fr_base: int | None = None  # device sample index of the FrameReceiver's sample 0
        self.pos_base = 0  # stream samples before the FrameReceiver's sample 0 (never goes back)
        self.acc = Accounting(keep=keep_frames, inferred=not manifest)
        self.records = Records(keep_frames)
        self.writer = writer  # SigMF writer (--record), or None
        self.tap = tap  # live view, or None
        self.metrics = metrics  # open file for one JSON line per decoded frame, or None
        self.img_dir = img_dir
        self.save_images_max = save_images_max
        self.saved = 0
        self.constellation: list[np.ndarray] = []
        self.detections: list[dict] = []  # kept only to annotate a recording
        self.n_detections = 0
        self.manifest: dict[int, dict] = {}  # msg_seq -> the transmitter's manifest entry
        self.truths: dict[int, dict] = {}  # msg_seq -> the sim radio's ground truth
        self.radio_info: dict = {}  # the radio process's profile and settings
        self.resyncs = 0
        self.lost_samples = 0
        self.next_offset: int | None = None
        self.stream_samples = 0
        self._waiting: list[FrameEvent] = []  # admitted frames not yet decoded
        self._waiting_seqs: set[int] = set()  # their seqs
        # (item id, seq of its first frame) -> when the transmitter started on it (its clock,
        # time.time(): an end-to-end latency where both run on one host or synchronised ones)
        self.started: dict[tuple, float] = {}
        self._waiting_since = 0.0
        if tap is not None:
            self.records.on_add = tap.frame
            self.acc.on_missed = lambda seq: tap.frame({"status": "missed", "seq": seq})

    # -- what the transmitter and the sim radio say ------------------------------------------

    def message(self, m: dict) -> None:
        """One control-channel message (manifest "sent"/"done", sim "truth", "radio_config")."""
        kind = m.get("type")
        if kind == "sent" and isinstance(m.get("seq"), int):
            self.acc.sent[m["seq"]] = m.get("item_id")
            t, chunk = m.get("t_start"), m.get("chunk", 0)
            if isinstance(t, (int, float)) and math.isfinite(t) and isinstance(chunk, int):
                self.started[(m.get("item_id"), m["seq"] - chunk)] = float(t)
                while len(self.started) > self.MAX_STARTED:
                    self.started.pop(next(iter(self.started)))
            if self.writer is not None and isinstance(m.get("msg_seq"), int):
                self.manifest[m["msg_seq"]] = m
        elif kind == "image":
            entry = _image_entry(m)
            if entry is None:
                self.log.warning("malformed image entry in the manifest: %r", m)
            else:
                self.item_images[m["item_id"]] = entry
                named = [d for d in self.unnamed if d.first.header.item_id == m["item_id"]]
                for d in named:
                    self.unnamed.remove(d)
                    self._emit(d)
        elif kind == "done":
            self.acc.done = True
        elif kind == "truth" and self.writer is not None and isinstance(m.get("msg_seq"), int):
            self.truths[m["msg_seq"]] = m
        elif kind == "radio_config" and isinstance(m.get("config"), dict):
            self.radio_info.update(m)

    # -- samples -----------------------------------------------------------------------------

    def feed(self, c: Chunk, more: bool = False) -> None:
        """One chunk of the stream: gaps handled, recorded, searched for frames. A stream at
        another sample rate than the PHY's is an error (``RateMismatch``), not a slow decode of
        nothing. more: further chunks are already waiting (the frames found may wait for a
        bigger batch of the decoder's)."""
        check_rate(c.sample_rate_hz, self.phy.sample_rate_hz, "the RX stream")
        offset = c.offset
        if offset is None:  # raw mode: no offsets, assume contiguous
            offset = 0 if self.next_offset is None else self.next_offset
        gap = 0 if self.next_offset is None else offset - self.next_offset
        if gap < 0:
            self.log.warning(
                "sample offset went back by %d (radio restarted): resynchronising", -gap
            )
        if self.next_offset is not None and (gap != 0 or c.flags & (DROP | OVERFLOW)):
            self._lost(max(gap, 0), offset)
        if self.fr_base is None:
            self.fr_base = offset
        self.next_offset = offset + len(c.samples)
        if self.writer is not None and len(c.samples):
            note = "overflow" if c.flags & (DROP | OVERFLOW) else None
            self.writer.write(c.samples, offset, note)
        self.stream_samples += len(c.samples)
        if len(c.samples):
            self.handle(self.fr.push(c.samples), more)
            self.acc.compact()
        elif not more:
            self.decode_waiting()

    def _lost(self, n: int, offset: int) -> None:
        """Samples were lost before ``offset``: frames in flight are cut, detection restarts."""
        self.lost_samples += n
        self.resyncs += 1
        self.log.warning(
            "%d samples lost before offset %d: frames in flight are dropped", n, offset
        )
        for det, hdr in self.fr.incomplete():  # frames the gap cut: failed, not silently gone
            if hdr is not None and hdr.seq not in self.acc.decoded:
                self.acc.cut[hdr.seq] = self.fr_base + det.frame_start
                self.records.add(
                    {
                        "status": "cut",
                        "seq": hdr.seq,
                        "item_id": hdr.item_id,
                        "frame_start": self.fr_base + det.frame_start,
                    }
                )
            elif hdr is None:
                self.acc.cut_unknown += 1
        self.fr = self.fr.after_gap()
        self.fr_base = None
        self.pos_base = self.stream_samples

    # -- frames ------------------------------------------------------------------------------

    def _detection(self, e: FrameEvent, dev: int) -> dict:
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
        return det

    def _admit(self, e: FrameEvent, dev: int, spos: int) -> bool:
        """Account for one detected frame; True when it goes on to a decoder."""
        acc, records = self.acc, self.records
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
            return False
        h = e.header
        if acc.seen(h.seq) or h.seq in self._waiting_seqs:  # decoded, or waiting to be
            acc.duplicates += 1
            return False
        acc.observed(h.seq)
        if acc.sent and h.seq not in acc.sent and acc.done:
            acc.unexpected += 1
        acc.positions[h.seq] = spos
        if scheme_name(h.scheme) is None:
            acc.refused.add(h.seq)
            records.add({"status": "refused", "seq": h.seq, "scheme": h.scheme, "frame_start": dev})
            self.log.warning("refused frame %d: unknown scheme %d", h.seq, h.scheme)
            return False
        if h.fingerprint != self.fingerprint:
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
            self.log.warning(
                "refused frame %d: encoded by model %s, this decoder is %s",
                h.seq,
                h.fingerprint.hex(),
                self.fingerprint.hex(),
            )
            return False
        if self.decoders is None:
            acc.decoded.add(h.seq)
            records.add(
                {"status": "detected", "seq": h.seq, "item_id": h.item_id, "frame_start": dev}
            )
            return False
        return True

    def handle(self, events: list[FrameEvent], more: bool = False) -> None:
        """Frames the FrameReceiver finished: accounted, decoded, scored, kept (decoded later,
        with the next ones, where ``more`` samples wait and the batch is still small)."""
        ok = []
        for e in events:
            dev = self.fr_base + e.frame_start
            det = self._detection(e, dev)
            self.n_detections += 1
            if self.writer is not None:
                self.detections.append(det)
            if self._admit(e, dev, self.pos_base + e.frame_start):
                ok.append(e)
                self._waiting_seqs.add(e.header.seq)
        if self.decoders is None:
            return
        if ok and not self._waiting:
            self._waiting_since = time.monotonic()
        self._waiting += ok
        if (
            not more
            # a photograph's frames go on at once: its decoder holds them until a segment or
            # the image is complete, and decodes that in one batch anyway
            or any(e.header.chunk_count > 1 for e in ok)
            or len(self._waiting) >= self.DECODE_BATCH
            or (self._waiting and time.monotonic() - self._waiting_since >= self.DECODE_WAIT_S)
        ):
            self.decode_waiting()

    def decode_waiting(self) -> None:
        """Decode the frames that wait (``feed(..., more=True)``), now."""
        if self.decoders is None or not self._waiting:
            return
        ok, self._waiting = self._waiting, []
        self._waiting_seqs.clear()
        for d in self.decoders.decode(ok):
            self._decoded(d)

    def reference(self, item_id: int, shape: tuple) -> torch.Tensor | None:
        """The reference image of an item, when there is one of the received image's shape: a
        whole photograph the manifest names by content id (found among ``whole_refs``), else
        the built-in item list's."""
        entry = self.item_images.get(item_id)
        if entry is not None:
            ref = self.whole_refs.get(entry["content_id"])
            return ref if ref is not None and tuple(ref.shape) == tuple(shape) else None
        if item_id < len(self.refs) and tuple(self.refs[item_id].shape) == tuple(shape):
            return self.refs[item_id]
        return None

    def finish(self) -> None:
        """The end of the stream: images still waiting for frames are decoded, concealed; the
        ones no manifest entry named are reported without a reference."""
        self.decode_waiting()
        if self.decoders is not None:
            for d in self.decoders.flush():
                self._decoded(d)
        for d in self.unnamed:
            self._emit(d)
        self.unnamed = []

    # at most this many photographs wait for their manifest entry (a transmitter that sends
    # none, e.g. a GNU Radio flowgraph, must not hold every picture back to the end)
    MAX_UNNAMED = 8

    def _decoded(self, d: Decoded) -> None:
        """A finished image: reported now, or held until the manifest names it, when the
        receiver has photographs to score against and nothing else gives its reference."""
        h = d.first.header
        if (
            self.whole_refs
            and h.item_id not in self.item_images
            and self.reference(h.item_id, d.image.shape) is None
        ):
            self.unnamed.append(d)
            while len(self.unnamed) > self.MAX_UNNAMED:
                self._emit(self.unnamed.pop(0))
            return
        self._emit(d)

    def _emit(self, d: Decoded) -> None:
        """Account, score (where the reference is known), record and show one image."""
        first, img = d.first, d.image
        h = first.header
        now = time.time()
        rec = {
            "status": "decoded",
            "time": round(now, 3),
            "seq": h.seq,
            "scheme": h.scheme,
            "item_id": h.item_id,
            "chunks": h.chunk_count,
            "frame_start": self.fr_base + first.frame_start,
            "snr_db": round(first.snr_db, 3),
            "cfo_hz": round(first.cfo_hz, 1),
            "evm_pilots": round(first.evm_pilots, 4),
            "sc_metric": round(first.sc_metric, 3),
        }
        rec["intact"] = d.intact  # False: a digital bitstream that did not arrive whole
        started = self.started.get((h.item_id, h.seq - h.chunk_index))
        if started is not None:  # the transmitter started on it -> decoded here
            rec["latency_s"] = round(now - started, 4)
        if h.chunk_count > 1:
            rec["lost_chunks"] = d.lost_chunks
        entry = self.item_images.get(h.item_id)
        if entry is not None:
            rec["image"] = entry["name"]
            rec["content_id"] = entry["content_id"]
        ref = self.reference(h.item_id, img.shape)
        if ref is not None:
            rec["psnr_db"] = round(float(psnr(img[None], ref[None])), 3)
            rec["ssim"] = round(float(ssim(img[None], ref[None])), 4)
        for e in d.events:
            self.acc.decoded.add(e.header.seq)
        self.records.add(rec)
        if self.tap is not None:
            self.tap.decoded(first, img, ref)
        if self.metrics is not None:
            self.metrics.write(json.dumps(rec) + "\n")
        if self.img_dir is not None and self.saved < self.save_images_max:
            self.saved += 1
            from PIL import Image

            arr = (img.permute(1, 2, 0).numpy() * 255 + 0.5).astype(np.uint8)
            name = f"seq{h.seq:06d}_item{h.item_id:04d}"
            if entry is not None:
                name += "_" + _safe_stem(entry["name"])
            # zlib level 1: a 512x768 photograph in 38 ms against 102 ms at the default 6,
            # for 8 % more bytes (the receiver writes it while frames keep arriving)
            Image.fromarray(arr).save(self.img_dir / f"{name}.png", compress_level=1)
        if len(self.constellation) < 8:
            self.constellation.append(first.symbols)

    # -- reports -----------------------------------------------------------------------------

    def stats(self) -> dict:
        return {
            # frames whose headers the decoders would not build a picture from
            "decoder_dropped": self.decoders.dropped() if self.decoders is not None else None,
            "detections": self.n_detections,
            "rejected": self.fr.stats.rejected,
            "nonfinite": self.fr.stats.nonfinite,
            "resyncs": self.resyncs,
            "lost_samples": self.lost_samples,
        }

    def progress(self) -> None:
        pm = self.records.mean("psnr_db")
        self.log.info(
            "frames: %d decoded, %d header-failed, %d refused; mean PSNR %.2f dB",
            self.acc.count("decoded"),
            self.acc.failures_seen,
            self.acc.count("refused"),
            pm if pm is not None else float("nan"),
        )

    def summary(self) -> dict:
        """Settle the accounting (call once, at the end) and summarise the run."""
        settled = self.acc.settle()
        items = self.records.items
        return {
            "counts": settled["counts"],
            "frame_status": settled["status"],
            "frame_status_not_kept": settled["status_not_kept"],
            "psnr_db_mean": self.records.mean("psnr_db"),
            "ssim_mean": self.records.mean("ssim"),
            "snr_est_db_mean": self.records.mean("snr_db"),
            "latency_s": self.records.latency(),
            "cfo_hz_mean": self.records.mean("cfo_hz"),
            "per_frame": [r for r in items if r.get("status") != "header_failed"]
            + [r for r in items if r.get("status") == "header_failed"],
            "per_frame_not_kept": self.records.not_kept,
            "receiver": self.stats(),
            "fingerprint": self.fingerprint.hex(),
            "transmitter_done": self.acc.done,
            "stream_samples": self.stream_samples,
            "sample_rate_hz": self.phy.sample_rate_hz,
        }
