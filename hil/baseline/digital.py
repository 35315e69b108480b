"""The digital half of the separation baseline: bytes -> 5G NR LDPC -> bit-interleaved QAM and back.

An ``Mcs`` (modulation, code rate) over ``n_symbols`` payload symbols, the
same symbols a JSCC frame would carry, gives ``n_symbols * bits_per_symbol``
coded bits. Sionna's 5G NR LDPC (``LDPC5GEncoder`` with rate matching and
the 5G bit interleaver for the modulation order) protects the information
bits; Sionna's Gray-mapped QAM (unit average energy, as the JSCC payload)
carries them; the receiver demaps with exact APP LLRs using its own
per-symbol noise estimate (the inverse of the equaliser's post-equalisation
SNR) and decodes with 20 belief-propagation iterations.

The information bits of each frame are: payload length (u16), the source
bitstream, CRC-32, zero padding, all scrambled with a fixed pseudo-random
sequence (so padding does not become a constant, high-PAPR symbol run). A
frame whose CRC fails is an erasure: the receiver shows a mid-grey image.
Long budgets are split into several codewords (5G's limit is 8448 bits).

Whole photographs (``hil.baseline.whole``) use block framing instead: each
codeword carries its own bytes and its own CRC-32 (``encode_blocks`` /
``decode_blocks``), so a codeword that fails costs only its bytes.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch

from .source import CODECS

MAX_K = 8448  # 5G NR base graph 1: information bits per codeword
FRAMING = 6  # bytes: length u16 + CRC-32


@dataclass(frozen=True)
class Mcs:
    modulation: str
    bits: int
    rate: Fraction

    @property
    def name(self) -> str:
        return f"{self.modulation} {self.rate.numerator}/{self.rate.denominator}"

    @property
    def key(self) -> str:
        return f"{self.modulation}-{self.rate.numerator}/{self.rate.denominator}"


MCS_TABLE = (
    Mcs("BPSK", 1, Fraction(1, 3)),
    Mcs("QPSK", 2, Fraction(1, 3)),
    Mcs("QPSK", 2, Fraction(1, 2)),
    Mcs("QPSK", 2, Fraction(3, 4)),
    Mcs("16QAM", 4, Fraction(1, 2)),
    Mcs("16QAM", 4, Fraction(3, 4)),
    Mcs("64QAM", 6, Fraction(2, 3)),
    Mcs("64QAM", 6, Fraction(8, 9)),
)


def mcs_by_key(key: str) -> int:
    keys = [m.key for m in MCS_TABLE]
    norm = key.strip().upper().replace(" ", "-")
    for i, k in enumerate(keys):
        if k.upper() == norm:
            return i
    raise ValueError(f"unknown MCS {key!r}; one of {', '.join(keys)}")


N_SCHEMES = len(CODECS) * len(MCS_TABLE)  # digital scheme bytes of one framing


def scheme_id(mcs_index: int, codec: int, whole: bool = False) -> int:
    """The header's scheme byte: 0 is JSCC; 1 + len(CODECS) * MCS index + codec for the digital
    schemes (codec: index into ``source.CODECS``: 0 JPEG, 1 WebP, 2 AVIF, 3 HEIF), one image
    per frame; ``whole``: the same plus ``N_SCHEMES`` (33..64), a whole photograph in block
    framing across frames (``hil.baseline.whole``)."""
    if not (0 <= mcs_index < len(MCS_TABLE) and 0 <= codec < len(CODECS)):
        raise ValueError(f"no scheme for MCS index {mcs_index}, codec index {codec}")
    return 1 + len(CODECS) * mcs_index + codec + (N_SCHEMES if whole else 0)


def is_digital_scheme(scheme: int) -> bool:
    """Any digital scheme byte, one frame per image or whole (1..64)."""
    return 1 <= scheme <= 2 * N_SCHEMES


def is_whole_scheme(scheme: int) -> bool:
    """A digital whole photograph in block framing (33..64)."""
    return N_SCHEMES < scheme <= 2 * N_SCHEMES


def parse_scheme(scheme: int) -> tuple[int, int]:
    """Scheme byte -> (MCS index, codec index), either framing; ValueError for JSCC (0) or an
    unknown byte."""
    if not is_digital_scheme(scheme):
        raise ValueError(f"scheme {scheme} is not a digital scheme")
    return divmod((scheme - 1) % N_SCHEMES, len(CODECS))


def _sionna():
    try:
        from sionna.phy.fec.ldpc import LDPC5GDecoder, LDPC5GEncoder
        from sionna.phy.mapping import Demapper, Mapper
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "the separation baseline needs Sionna's 5G LDPC: pip install -e '.[baseline]' "
            "(sionna-no-rt, PyTorch-based)"
        ) from exc
    return LDPC5GEncoder, LDPC5GDecoder, Mapper, Demapper


class DigitalCodec:
    """One MCS over ``n_symbols`` payload symbols: byte payloads <-> complex symbols."""

    def __init__(self, mcs: Mcs, n_symbols: int, num_iter: int = 20):
        LDPC5GEncoder, LDPC5GDecoder, Mapper, Demapper = _sionna()
        self.mcs, self.n_symbols = mcs, n_symbols
        n_bits = n_symbols * mcs.bits
        k_total = int(n_bits * mcs.rate)
        segs = max(1, -(-k_total // MAX_K))
        sym = [n_symbols // segs + (i < n_symbols % segs) for i in range(segs)]
        self.segments = []  # (k, n) per codeword
        for s in sym:
            n = s * mcs.bits
            self.segments.append((int(n * mcs.rate), n))
        self.k = sum(k for k, _ in self.segments)
        self.capacity = self.k // 8 - FRAMING  # bytes of source bitstream per frame
        m = mcs.bits if mcs.bits > 1 else None
        self._codes = {}
        for k, n in set(self.segments):
            enc = LDPC5GEncoder(k, n, num_bits_per_symbol=m)
            self._codes[(k, n)] = (enc, LDPC5GDecoder(enc, num_iter=num_iter, hard_out=True))
        ctype = "pam" if mcs.bits == 1 else "qam"
        self.mapper = Mapper(ctype, mcs.bits)
        self.demapper = Demapper("app", ctype, mcs.bits)
        self.scramble = np.random.default_rng(0x5C3A).integers(0, 2, self.k).astype(np.float32)

    def framed_bits(self, payload: bytes) -> np.ndarray:
        """Payload -> the frame's information bits [k] float32 0/1: length (u16), payload,
        CRC-32, zero padding, scrambled."""
        if len(payload) > self.capacity:
            raise ValueError(
                f"{len(payload)} bytes exceed the {self.capacity}-byte budget of {self.mcs.name}"
            )
        framed = struct.pack(">H", len(payload)) + payload + struct.pack(">I", zlib.crc32(payload))
        bits = np.unpackbits(np.frombuffer(framed, np.uint8)).astype(np.float32)
        out = np.zeros(self.k, np.float32)
        out[: len(bits)] = bits
        return np.abs(out - self.scramble)  # XOR

    def encode(self, payloads: list[bytes]) -> torch.Tensor:
        """[B] byte strings -> [B, n_symbols] complex64 symbols (unit average energy)."""
        return self._modulate(np.stack([self.framed_bits(p) for p in payloads]))

    @property
    def block_capacity(self) -> list[int]:
        """Block framing: the bytes each codeword carries (its information bits less a CRC-32;
        0 for a codeword too short to hold one)."""
        return [max(0, k // 8 - 4) for k, _ in self.segments]

    def encode_blocks(self, blocks: list[bytes]) -> torch.Tensor:
        """Block framing: one byte string per codeword (at most ``block_capacity`` bytes; a
        shorter one is zero-padded to it), each followed by its CRC-32 and scrambled ->
        [n_symbols] complex64 (unit average energy)."""
        if len(blocks) != len(self.segments):
            raise ValueError(f"{len(blocks)} blocks for {len(self.segments)} codewords")
        u, a = np.zeros(self.k, np.float32), 0
        for b, cap, (k, _) in zip(blocks, self.block_capacity, self.segments, strict=True):
            if len(b) > cap:
                raise ValueError(f"a {len(b)}-byte block exceeds its codeword's {cap} bytes")
            if cap:
                b = b + bytes(cap - len(b))
                framed = b + struct.pack(">I", zlib.crc32(b))
                u[a : a + 8 * len(framed)] = np.unpackbits(np.frombuffer(framed, np.uint8))
            a += k
        return self._modulate(np.abs(u - self.scramble)[None])[0]

    def decode_blocks(self, y: torch.Tensor, no: torch.Tensor) -> list[list[bytes | None]]:
        """Block framing: y [B, n_symbols] complex and no [B, n_symbols] real (as ``decode``)
        -> per frame, per codeword its ``block_capacity`` bytes, or None where its CRC fails
        (or it holds none)."""
        u = np.abs(self._demodulate(y, no) - self.scramble).round().astype(np.uint8)
        out = []
        for row in u:
            blocks, a = [], 0
            for cap, (k, _) in zip(self.block_capacity, self.segments, strict=True):
                raw = np.packbits(row[a : a + 8 * (cap + 4)]).tobytes()
                a += k
                ok = cap and zlib.crc32(raw[:cap]) == struct.unpack(">I", raw[cap:])[0]
                blocks.append(raw[:cap] if ok else None)
            out.append(blocks)
        return out

    def _modulate(self, bits: np.ndarray) -> torch.Tensor:
        """Information bits [B, k] float32 0/1 -> [B, n_symbols] complex64 symbols."""
        u = torch.from_numpy(bits)
        out, a = [], 0
        for k, n in self.segments:
            enc, _ = self._codes[(k, n)]
            out.append(self.mapper(enc(u[:, a : a + k])))
            a += k
        x = torch.cat(out, dim=1)
        if self.mcs.bits == 1:
            x = x.to(torch.complex64)
        return x

    def decode(self, y: torch.Tensor, no: torch.Tensor) -> list[bytes | None]:
        """Equalised symbols y [B, n_symbols] complex (any precision; demapped in complex64) and
        their noise variances no [B, n_symbols] real (any precision; used as float32, floored
        at 1e-6) -> [B] payloads (None where the CRC fails or the framing is impossible)."""
        return [self.unframe(row) for row in self._demodulate(y, no)]

    def _demodulate(self, y: torch.Tensor, no: torch.Tensor) -> np.ndarray:
        """y [B, n_symbols] complex, no [B, n_symbols] real -> decoded (still scrambled)
        information bits [B, k] float32."""
        y = y.to(torch.complex64)
        no = no.to(torch.float32).clamp_min(1e-6)
        llr = self.demapper(y, no)
        bits, a = [], 0
        for k, n in self.segments:
            _, dec = self._codes[(k, n)]
            bits.append(dec(llr[:, a : a + n].clamp(-50, 50)))
            a += n
        return torch.cat(bits, dim=1).numpy().astype(np.float32)

    def unframe(self, bits: np.ndarray) -> bytes | None:
        """The decoded information bits of one frame, [k] 0/1 (still scrambled; real or integer,
        any dtype, read as float32), -> the payload, or None where the length is impossible or
        the CRC-32 does not match."""
        row = np.abs(np.asarray(bits, np.float32) - self.scramble).round().astype(np.uint8)
        raw = np.packbits(row).tobytes()
        (length,) = struct.unpack(">H", raw[:2])
        if length > self.capacity:
            return None
        data = raw[2 : 2 + length]
        (crc,) = struct.unpack(">I", raw[2 + length : 6 + length])
        return data if zlib.crc32(data) == crc else None


def codec_name(codec: int) -> str:
    return CODECS[codec]
