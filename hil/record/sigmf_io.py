"""Streaming SigMF writer and reader.

Writer: samples go to ``<stem>.sigmf-data`` (``cf32_le``) in chunks as they
arrive, never held in memory; ``close()`` writes ``<stem>.sigmf-meta`` through
the ``sigmf`` library, which validates it. A gap in the device's sample
counter (overflow, dropped samples) starts a new capture segment whose
``core:global_index`` is the device sample index, plus an annotation saying
how many samples were lost; so the timeline survives the recording.

Reader: any valid single-channel ``cf32_le`` or ``ci16_le`` recording. ``ci16``
is scaled to full scale 1.0 by ``hil:full_scale`` when present, else by 2048
when ``core:hw`` names a Pluto (its 12-bit samples sit in int16 at +-2048),
else by 32768. Other data types are refused with a clear error.

Our extension fields use the ``hil:`` namespace (declared in
``core:extensions``).
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sigmf
from sigmf import SigMFFile, sigmffile

from .. import __version__
from ..radio.ad9363 import ADC_FULL_SCALE

EXTENSION = {"name": "hil", "version": "1.0.0", "optional": True}
SUPPORTED = ("cf32_le", "ci16_le")


class UnsupportedRecording(ValueError):
    """A recording this reader cannot play, with the reason."""


def stem_of(path: str | os.PathLike) -> Path:
    p = Path(path)
    for suf in (".sigmf-meta", ".sigmf-data", ".sigmf"):
        if p.name.endswith(suf):
            return p.with_name(p.name[: -len(suf)])
    return p


def _now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class SigMFWriter:
    """Write a cf32_le recording in chunks.

    Args:
        path: stem (``.sigmf-data``/``.sigmf-meta`` are appended).
        sample_rate_hz, center_freq_hz: of the stream.
        hw: hardware description (``core:hw``), e.g. "ADALM-PLUTO (sim backend)".
        extra_global: more global fields (``hil:radio_profile``, gains, ...).
        checksum: store ``core:sha512`` (reads the data file once more at close).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        sample_rate_hz: float,
        center_freq_hz: float = 0.0,
        hw: str = "unknown",
        extra_global: dict | None = None,
        checksum: bool = True,
    ):
        if sample_rate_hz <= 0:
            raise ValueError(f"sample_rate_hz must be positive, got {sample_rate_hz}")
        self.stem = stem_of(path)
        self.stem.parent.mkdir(parents=True, exist_ok=True)
        self.data_path = self.stem.with_name(self.stem.name + ".sigmf-data")
        self.meta_path = self.stem.with_name(self.stem.name + ".sigmf-meta")
        self._fh = open(self.data_path, "wb")
        self.rate = float(sample_rate_hz)
        self.fc = float(center_freq_hz)
        self.hw = hw
        self.extra = dict(extra_global or {})
        self.checksum = checksum
        self.n = 0  # samples written (file index of the next sample)
        self._next_global: int | None = None
        self.captures: list[tuple[int, int, str]] = []  # (file start, global index, datetime)
        self.annotations: list[tuple[int, int, dict]] = []
        self.lost = 0
        self.closed = False

    def write(
        self, samples: np.ndarray, global_index: int | None = None, flags_note: str | None = None
    ) -> int:
        """Append samples ([n] complex64; other dtypes are cast to it); ``global_index`` = device
        sample index of samples[0].

        Returns the file index of samples[0]. A jump in the global index starts a new capture
        and annotates the samples lost.
        """
        x = np.ascontiguousarray(samples, dtype="<c8")
        if x.ndim != 1:
            raise ValueError("samples must be 1-D")
        g = (
            self.n
            if global_index is None and self._next_global is None
            else (global_index if global_index is not None else self._next_global)
        )
        if not self.captures or g != self._next_global:
            if self.captures and g > self._next_global:
                lost = g - self._next_global
                self.lost += lost
                self.annotations.append(
                    (
                        self.n,
                        0,
                        {
                            sigmf.LABEL_KEY: "samples lost",
                            "hil:lost_samples": int(lost),
                            "hil:reason": flags_note or "gap in the device sample counter",
                        },
                    )
                )
            self.captures.append((self.n, int(g), _now_iso()))
        elif flags_note:
            self.annotations.append((self.n, 0, {sigmf.LABEL_KEY: flags_note}))
        start = self.n
        self._fh.write(memoryview(x).cast("B"))
        self.n += len(x)
        self._next_global = int(g) + len(x)
        return start

    def file_index(self, global_index: int) -> int | None:
        """File index of a device sample index, or None if it was not recorded."""
        for fs, gi, _ in reversed(self.captures):
            if global_index >= gi:
                off = fs + (global_index - gi)
                return off if off < self.n else None
        return None

    def annotate(self, start: int, length: int, label: str, **fields) -> None:
        md = {sigmf.LABEL_KEY: label}
        md.update({k if ":" in k else f"hil:{k}": v for k, v in fields.items()})
        self.annotations.append((int(start), int(length), md))

    def close(self) -> Path:
        if self.closed:
            return self.meta_path
        self.closed = True
        self._fh.close()
        g = {
            sigmf.DATATYPE_KEY: "cf32_le",
            sigmf.SAMPLE_RATE_KEY: self.rate,
            sigmf.HW_KEY: self.hw,
            sigmf.RECORDER_KEY: f"hil {__version__}",
            sigmf.VERSION_KEY: sigmf.__specification__,
            sigmf.EXTENSIONS_KEY: [EXTENSION],
            sigmf.NUM_CHANNELS_KEY: 1,
            "hil:software_version": __version__,
            "hil:samples_lost": int(self.lost),
            **self.extra,
        }
        meta = SigMFFile(
            data_file=str(self.data_path), global_info=g, skip_checksum=not self.checksum
        )
        if not self.captures:
            self.captures.append((0, 0, _now_iso()))
        for fs, gi, dt in self.captures:
            meta.add_capture(
                fs,
                metadata={
                    sigmf.FREQUENCY_KEY: self.fc,
                    sigmf.DATETIME_KEY: dt,
                    sigmf.GLOBAL_INDEX_KEY: gi,
                },
            )
        for start, length, md in sorted(self.annotations, key=lambda a: a[0]):
            meta.add_annotation(start, length if length > 0 else None, metadata=md)
        meta.validate()
        meta.tofile(str(self.stem), skip_validate=False, overwrite=True)
        return self.meta_path

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


@dataclass
class Chunk:
    samples: np.ndarray  # [n] complex64, full scale 1.0
    file_index: int
    global_index: int  # device sample index of samples[0]
    new_capture: (
        bool  # first chunk of a capture segment (a discontinuity before it, except the first)
    )


class SigMFReader:
    """Read a SigMF recording in chunks (flat memory: explicit reads, nothing mapped)."""

    def __init__(self, path: str | os.PathLike, verify_checksum: bool = False):
        self.stem = stem_of(path)
        meta_path = self.stem.with_name(self.stem.name + ".sigmf-meta")
        if not meta_path.is_file():
            raise UnsupportedRecording(f"{meta_path} not found")
        try:
            self.meta = sigmffile.fromfile(str(meta_path), skip_checksum=not verify_checksum)
        except Exception as exc:  # the library raises several types for invalid metadata
            raise UnsupportedRecording(f"{meta_path}: not a valid SigMF recording: {exc}") from exc
        dt = self.meta.get_global_field(sigmf.DATATYPE_KEY)
        if dt not in SUPPORTED:
            raise UnsupportedRecording(
                f"{meta_path}: data type {dt!r} is not supported; use one of {SUPPORTED} "
                "(complex float32 or the Pluto's complex int16)"
            )
        ch = self.meta.get_global_field(sigmf.NUM_CHANNELS_KEY) or 1
        if ch != 1:
            raise UnsupportedRecording(
                f"{meta_path}: {ch} channels; only single-channel recordings are supported"
            )
        self.datatype = dt
        self.sample_rate_hz = float(self.meta.get_global_field(sigmf.SAMPLE_RATE_KEY) or 0.0)
        if self.sample_rate_hz <= 0:
            raise UnsupportedRecording(f"{meta_path}: core:sample_rate missing or not positive")
        caps = self.meta.get_captures()
        self.center_freq_hz = float(caps[0].get(sigmf.FREQUENCY_KEY, 0.0)) if caps else 0.0
        self.data_path = self.stem.with_name(self.stem.name + ".sigmf-data")
        if not self.data_path.is_file():
            raise UnsupportedRecording(f"{self.data_path} not found")
        item = 8 if dt == "cf32_le" else 4
        size = self.data_path.stat().st_size
        if size % item:
            raise UnsupportedRecording(
                f"{self.data_path}: {size} bytes is not a whole number of {dt} samples"
            )
        self.n = size // item
        self._item = item
        self._dtype = np.dtype("<c8") if dt == "cf32_le" else np.dtype("<i2")
        # explicit reads, not a memory map: a mapped file's pages count as resident
        # memory as they are read, and a long replay would look like a leak
        self._fh = open(self.data_path, "rb")
        hw = str(self.meta.get_global_field(sigmf.HW_KEY) or "")
        fs = self.meta.get_global_field("hil:full_scale")
        self.scale = (
            float(fs) if fs else (float(ADC_FULL_SCALE) if "pluto" in hw.lower() else 32768.0)
        )
        self.captures = [
            (
                int(c.get(sigmf.SAMPLE_START_KEY, 0)),
                int(c.get(sigmf.GLOBAL_INDEX_KEY, c.get(sigmf.SAMPLE_START_KEY, 0))),
            )
            for c in caps
        ] or [(0, 0)]

    def annotations(self) -> list[dict]:
        return self.meta.get_annotations()

    def global_field(self, key: str, default=None):
        v = self.meta.get_global_field(key)
        return default if v is None else v

    def read(self, start: int, count: int) -> np.ndarray:
        """Samples [start, start + count) as [m] complex64 at full scale 1.0, m <= count: the
        range is clipped to the recording (m = 0 outside it). ci16 recordings are scaled by
        the full scale in their metadata."""
        start, stop = max(0, start), min(self.n, start + count)
        if stop <= start:
            return np.zeros(0, np.complex64)
        self._fh.seek(start * self._item)
        k = (stop - start) * (1 if self.datatype == "cf32_le" else 2)
        raw = np.fromfile(self._fh, dtype=self._dtype, count=k)
        if self.datatype == "cf32_le":
            return raw.astype(np.complex64, copy=False)
        iq = raw.astype(np.float32).reshape(-1, 2) / self.scale
        return (iq[:, 0] + 1j * iq[:, 1]).astype(np.complex64)

    def close(self) -> None:
        self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def chunks(self, size: int = 65536) -> Iterator[Chunk]:
        """The recording in chunks of at most ``size``, split at capture boundaries."""
        if size < 1:
            raise ValueError("chunk size must be >= 1")
        bounds = [c[0] for c in self.captures] + [self.n]
        for ci, (fs, gi) in enumerate(self.captures):
            end = bounds[ci + 1]
            first = True
            for a in range(fs, end, size):
                b = min(a + size, end)
                yield Chunk(self.read(a, b - a), a, gi + (a - fs), first and ci > 0)
                first = False
