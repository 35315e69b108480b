"""The sample wire format, without sockets.

A sample message is two ZeroMQ frames: a fixed 48-byte little-endian header
and a raw payload of interleaved I/Q float32 (numpy complex64, little-endian).

    offset size field
    0      4    magic b"HILS"
    4      1    version (1)
    5      1    flags (OVERFLOW, UNDERFLOW, SOB, EOB, EOS, DROP, CYCLIC)
    6      2    stream id
    8      8    sequence number (per stream, +1 per message)
    16     8    sample offset (index of the first sample in the stream)
    24     8    sample rate, Hz (float64)
    32     8    centre frequency, Hz (float64)
    40     4    number of samples n (payload is 8 n bytes)
    44     4    reserved (0)

Raw mode (GNU Radio's ZMQ source/sink blocks with no tags): one frame of
complex64 items, no header. No pickle, ever.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

MAGIC = b"HILS"
VERSION = 1
_HDR = struct.Struct("<4sBBHQQddII")
HEADER_SIZE = _HDR.size  # 48
MAX_SAMPLES = 1 << 24  # 128 MiB of payload: anything larger is refused as absurd

OVERFLOW = 0x01  # receiver lost samples before this message (device overrun)
UNDERFLOW = 0x02  # transmitter ran dry before this message
SOB = 0x04  # start of burst
EOB = 0x08  # end of burst
EOS = 0x10  # end of stream: no more messages follow on this stream
DROP = 0x20  # samples were dropped between the previous message and this one
CYCLIC = 0x40  # TX: repeat this burst until the next one (the Pluto's cyclic buffer)
KNOWN_FLAGS = OVERFLOW | UNDERFLOW | SOB | EOB | EOS | DROP | CYCLIC
FLAG_NAMES = {
    CYCLIC: "cyclic",
    OVERFLOW: "overflow",
    UNDERFLOW: "underflow",
    SOB: "sob",
    EOB: "eob",
    EOS: "eos",
    DROP: "drop",
}


class WireError(ValueError):
    """A malformed message, with the reason."""


@dataclass(frozen=True)
class SampleHeader:
    stream_id: int = 0
    seq: int = 0
    sample_offset: int = 0
    sample_rate_hz: float = 0.0
    center_freq_hz: float = 0.0
    flags: int = 0
    n_samples: int = 0
    version: int = VERSION

    def pack(self) -> bytes:
        return _HDR.pack(
            MAGIC, self.version, self.flags, self.stream_id, self.seq, self.sample_offset,
            self.sample_rate_hz, self.center_freq_hz, self.n_samples, 0,
        )  # fmt: skip

    def flag_names(self) -> list[str]:
        return [n for f, n in FLAG_NAMES.items() if self.flags & f]


@dataclass(frozen=True)
class SampleMessage:
    header: SampleHeader
    samples: np.ndarray  # [n] complex64 (a read-only view of the received buffer)


def encode(header: SampleHeader, samples: np.ndarray) -> list:
    """-> [header bytes, payload] ready for ``send_multipart(..., copy=False)``.

    samples: [n] complex64 (anything else raises WireError). The payload is the array's own
    buffer (zero-copy) when it is C-contiguous.
    """
    samples = np.asarray(samples)
    if samples.dtype != np.complex64 or samples.ndim != 1:
        raise WireError(f"samples must be 1-D complex64, got {samples.dtype} {samples.shape}")
    if not samples.flags.c_contiguous:
        samples = np.ascontiguousarray(samples)
    if len(samples) > MAX_SAMPLES:
        raise WireError(f"{len(samples)} samples exceed the {MAX_SAMPLES} per message limit")
    if header.flags & ~KNOWN_FLAGS:
        raise WireError(f"unknown flag bits 0x{header.flags & ~KNOWN_FLAGS:02x}")
    h = SampleHeader(**{**header.__dict__, "n_samples": len(samples)})
    return [h.pack(), memoryview(samples).cast("B")]


def all_finite(samples: np.ndarray) -> bool:
    """True when no I or Q value is NaN or inf.

    A float32 dot product is finite only if every term is (one fast pass); when
    it is not, an exact element check decides (finite values so large that
    their squares overflow are still accepted).

    samples: [n] complex64, C-contiguous (viewed as [2 n] float32: no other dtype is valid).
    """
    if samples.dtype != np.complex64:
        raise TypeError(f"all_finite checks complex64 samples, got {samples.dtype}")
    v = samples.view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(np.dot(v, v)):
            return True
    return bool(np.isfinite(v).all())


def decode(frames: list, *, check_finite: bool = True) -> SampleMessage:
    """[header, payload] frames -> SampleMessage, or WireError saying what is wrong."""
    if len(frames) != 2:
        raise WireError(f"expected 2 frames (header, payload), got {len(frames)}")
    head, body = (memoryview(f.buffer if hasattr(f, "buffer") else f) for f in frames)
    if head.nbytes != HEADER_SIZE:
        raise WireError(f"header is {head.nbytes} bytes, expected {HEADER_SIZE}")
    magic, ver, flags, sid, seq, off, rate, fc, n, _ = _HDR.unpack(head)
    if magic != MAGIC:
        raise WireError(f"bad magic {bytes(magic)!r}")
    if ver != VERSION:
        raise WireError(f"wire version {ver}, this end speaks {VERSION}")
    if flags & ~KNOWN_FLAGS:
        raise WireError(f"unknown flag bits 0x{flags & ~KNOWN_FLAGS:02x}")
    if n > MAX_SAMPLES:
        raise WireError(f"absurd sample count {n} (limit {MAX_SAMPLES})")
    if body.nbytes != 8 * n:
        raise WireError(f"payload is {body.nbytes} bytes, header says {n} samples ({8 * n} bytes)")
    if not (np.isfinite(rate) and rate >= 0 and np.isfinite(fc)):
        raise WireError(f"bad sample rate {rate} or centre frequency {fc}")
    samples = np.frombuffer(body, dtype="<c8")
    if check_finite and n and not all_finite(samples):
        raise WireError("non-finite (NaN/inf) samples")
    return SampleMessage(SampleHeader(sid, seq, off, rate, fc, flags, n, ver), samples)


def decode_raw(frame, *, check_finite: bool = True) -> np.ndarray:
    """Raw mode: one frame of complex64 items (GNU Radio ZMQ blocks) -> [n] complex64."""
    body = memoryview(frame.buffer if hasattr(frame, "buffer") else frame)
    if body.nbytes % 8:
        raise WireError(
            f"raw frame of {body.nbytes} bytes is not a whole number of complex64 items"
        )
    if body.nbytes > 8 * MAX_SAMPLES:
        raise WireError(f"absurd raw frame size {body.nbytes}")
    s = np.frombuffer(body, dtype="<c8")
    if check_finite and len(s) and not all_finite(s):
        raise WireError("non-finite (NaN/inf) samples")
    return s
