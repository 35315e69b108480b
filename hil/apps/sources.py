"""Where the receiver's samples come from: the radio process's socket (framed messages, or raw
complex64 frames as GNU Radio's ZMQ sink sends them) or a SigMF recording (offline).

Every source gives ``Chunk``s: samples (complex64), the device sample offset of the first
one (None in raw mode: no header, so contiguity is assumed), the wire flags and whether the
stream has ended.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zmq

from ..transport import DROP, EOS, SampleReceiver, make_socket


@dataclass
class Chunk:
    samples: np.ndarray  # complex64 [n]
    offset: int | None  # device sample index of samples[0]; None: raw stream, assume contiguous
    flags: int  # wire flags (DROP, OVERFLOW, EOS, ...)
    eos: bool
    sample_rate_hz: float = 0.0  # as the sender or the recording states it; 0: not stated (raw)


class RecordingSource:
    """A SigMF recording, read in the steps it was captured in (``hil:chunk``) unless
    ``chunk`` says otherwise. A new capture segment is flagged as a drop."""

    def __init__(self, stem: str | Path, chunk: int | None, log: logging.Logger):
        from ..record import SigMFReader

        self.recording = SigMFReader(stem)
        size = chunk or int(self.recording.global_field("hil:chunk", 16384))
        self._it = self.recording.chunks(size)
        self.stats = {"messages": 0, "samples": 0, "recording": str(stem)}
        self.center_freq_hz = 0.0
        self.first_chunk = size
        log.info(
            "decoding recording %s: %d samples at %.3f MSps",
            stem,
            self.recording.n,
            self.recording.sample_rate_hz / 1e6,
        )

    @property
    def sample_rate(self) -> float:
        return self.recording.sample_rate_hz

    def next(self) -> Chunk:
        c = next(self._it, None)
        if c is None:
            return Chunk(np.zeros(0, np.complex64), None, EOS, True, self.sample_rate)
        self.stats["messages"] += 1
        self.stats["samples"] += len(c.samples)
        flags = DROP if c.new_capture else 0
        return Chunk(c.samples, c.global_index, flags, False, self.sample_rate)

    def waiting(self) -> bool:
        """Whether more samples are at hand (a recording: until its end)."""
        return True

    def stats_dict(self) -> dict:
        return dict(self.stats)

    def close(self) -> None:
        pass


class SocketSource:
    """The radio process's PUSH socket (connected, not bound). ``raw``: GNU Radio style
    frames of bare complex64, no header."""

    def __init__(self, endpoint: str, raw: bool, curve=None):
        self.ctx = zmq.Context()
        self.sock = make_socket(self.ctx, zmq.PULL, endpoint, bind=False, curve=curve)
        self.stream = SampleReceiver(self.sock, raw=raw, name="rx<-radio")
        self.center_freq_hz = 0.0
        self.first_chunk: int | None = None

    sample_rate = None  # known from the wire header, message by message

    def next(self, timeout_s: float = 0.2) -> Chunk | None:
        """The next chunk, or None when nothing came within ``timeout_s``."""
        msg = self.stream.recv(timeout_s=timeout_s)
        if msg is None:
            return None
        h = msg.header
        self.center_freq_hz = h.center_freq_hz
        if h.n_samples and self.first_chunk is None:
            self.first_chunk = h.n_samples
        offset = None if self.stream.raw else h.sample_offset
        return Chunk(msg.samples, offset, h.flags, bool(h.flags & EOS), h.sample_rate_hz)

    def waiting(self) -> bool:
        """Whether another message is already queued on the socket (the receiver is behind)."""
        return bool(self.sock.poll(0))

    def stats_dict(self) -> dict:
        return self.stream.stats.to_dict()

    def close(self) -> None:
        self.sock.close(linger=0)
        self.ctx.term()


def open_source(a, log: logging.Logger, curve=None) -> RecordingSource | SocketSource:
    """The source ``hil rx``'s arguments name: ``--recording STEM`` or ``--radio ENDPOINT``."""
    if a.recording:
        return RecordingSource(a.recording, a.chunk, log)
    return SocketSource(a.radio, a.raw, curve)
