"""What became of every frame the transmitter sent, and the per-frame records of a run.

``Accounting`` gives each sent sequence number exactly one outcome: decoded,
refused (encoded by another model, or a scheme nobody decodes), header_failed,
cut (by a sample drop) or missed (never detected). Header failures carry no
sequence number; one that sits between two decoded frames with exactly one
sequence number missing between them is attributed to it. ``Records`` keeps the
per-frame records and their running means.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field

import numpy as np


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
    # no manifest (a raw stream from GNU Radio, a recording without one): what was sent is
    # inferred from the headers read, every seq from the lowest to the highest seen
    inferred: bool = False
    highest: int | None = None
    jumps: int = 0  # headers whose seq jumped further than max_jump ahead (not filled in)
    max_jump: int = 65536

    NAMES = ("decoded", "refused", "header_failed", "cut", "missed")

    def observed(self, seq: int) -> None:
        """A header was read (inferred mode): the seqs up to it count as sent."""
        if not self.inferred:
            return
        if self.highest is None or seq <= self.highest:
            if self.highest is None:
                self.highest = seq
            if seq > self.floor[1]:
                self.sent.setdefault(seq, None)
            return
        if seq - self.highest > self.max_jump:
            self.jumps += 1
            self.sent.setdefault(seq, None)
        else:
            for s in range(self.highest + 1, seq + 1):
                self.sent.setdefault(s, None)
        self.highest = seq

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
        counts["sent_inferred"] = self.inferred  # sent = lowest..highest seq seen (no manifest)
        counts["seq_jumps"] = self.jumps
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
        self.latencies: deque[float] = deque(maxlen=keep)  # the newest images' (s)

    def add(self, rec: dict) -> None:
        if self.on_add is not None:
            self.on_add(rec)
        if rec.get("status") == "decoded":
            self.n["decoded"] += 1
            self.sums["snr_db"] += rec["snr_db"]
            self.sums["cfo_hz"] += rec["cfo_hz"]
            if "latency_s" in rec:
                self.latencies.append(rec["latency_s"])
            if "psnr_db" in rec:
                self.n["scored"] += 1
                self.sums["psnr_db"] += rec["psnr_db"]
                self.sums["ssim"] += rec["ssim"]
        if len(self.items) < self.keep:
            self.items.append(rec)
        else:
            self.not_kept += 1

    def latency(self) -> dict | None:
        """End to end, the transmitter starting on an image to its decode here (s), over the
        newest ``keep`` images: {"n", "median", "max"}; None without any."""
        if not self.latencies:
            return None
        v = sorted(self.latencies)
        return {"n": len(v), "median": float(np.median(v)), "max": v[-1]}

    def mean(self, key: str) -> float | None:
        n = self.n["scored"] if key in ("psnr_db", "ssim") else self.n["decoded"]
        return self.sums[key] / n if n else None
