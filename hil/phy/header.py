"""The digital frame header: fields, CRC-32, coding and parsing.

Layout (big-endian, 35 bytes): version u8, scheme u8, seq u32, item_id u32,
fingerprint 8 bytes, payload_len u32 (complex symbols in this frame),
channels u8, height u16, width u16, chunk_index u16, chunk_count u16,
CRC-32 (zlib) over everything before it.

Coded with the K=7 rate-1/2 convolutional code, interleaved across subcarriers
(``coding.interleaver``), scrambled (XOR with ``sequences.header_scrambler``),
BPSK on the data subcarriers of ``OfdmConfig.header_symbols`` OFDM symbols.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import asdict, dataclass

import numpy as np

from .coding import (
    conv_encode,
    interleaver,
    invert_hard_batch,
    list_viterbi_decode,
    viterbi_decode,
)
from .numerology import OfdmConfig
from .sequences import header_scrambler

# 3: the coded header bits and the payload symbols scrambled (sequences.header_scrambler,
# payload_phases); 2: the subcarrier interleaver; 1: a 16-column block interleaver
FORMAT_VERSION = 3
_FMT = ">BBII8sIBHHHH"
BODY_LEN = struct.calcsize(_FMT)
HEADER_LEN = BODY_LEN + 4
HEADER_BITS = 8 * HEADER_LEN
# Paths the list Viterbi decoder tries against the CRC when the best one fails it: about
# 1 dB at 50 % header success (scripts/bench_phy.py --only header), ~3.4 ms per list run
# (linear in the paths), and a false-accept probability of at most HEADER_LIST / 2^32 per
# failed header. 64 rather than 16: on the two-Pluto profile, frames at 0 dB of their own
# read 97.0 % of their headers instead of 94.0 % (scripts/bench_phy.py --only detection)
HEADER_LIST = 64

SCHEME_JSCC = 0
# JSCC, the image sent as 32x32 tiles encoded one by one (hil.jscc.images.to_tiles, row by
# row), their symbols interleaved with a rotation (symbol j of tile t at j * tiles + (t + j)
# mod tiles: hil.jscc.images.interleave), so each tile's symbols visit every subcarrier;
# the header's shape is the image's own
SCHEME_JSCC_TILED = 254
# the same without the rotation (symbol j of tile t at j * tiles + t): what transmitters
# sent before scheme 254; still decoded. Where the tile count is a multiple of the 48 data
# subcarriers (384 tiles for 512x768) it puts every symbol of a tile on one subcarrier, and
# a faded subcarrier takes whole tiles
SCHEME_JSCC_TILED_V1 = 255
# JSCC tiles as 254, interleaved within segments of consecutive tiles (each at most 8
# frames' worth of symbols) instead of across the whole image, the segments one after
# another (hil.jscc.images.Segments): the transmitter streams a segment while it encodes
# the next and the receiver decodes each segment as its frames arrive
SCHEME_JSCC_SEGMENTED = 253


class HeaderError(ValueError):
    """A header that cannot be trusted: bad CRC, bad version, bad field values."""


@dataclass(frozen=True)
class Header:
    seq: int
    item_id: int
    fingerprint: bytes
    payload_len: int
    shape: tuple[int, int, int]  # C, H, W
    chunk_index: int = 0
    chunk_count: int = 1
    scheme: int = SCHEME_JSCC
    version: int = FORMAT_VERSION

    def __post_init__(self):
        def rng(name, v, hi):
            if not isinstance(v, int) or not 0 <= v <= hi:
                raise HeaderError(f"{name}={v!r} outside 0..{hi}")

        rng("version", self.version, 255)
        rng("scheme", self.scheme, 255)
        rng("seq", self.seq, 2**32 - 1)
        rng("item_id", self.item_id, 2**32 - 1)
        rng("payload_len", self.payload_len, 2**32 - 1)
        if not isinstance(self.fingerprint, bytes) or len(self.fingerprint) != 8:
            raise HeaderError(f"fingerprint must be 8 bytes, got {self.fingerprint!r}")
        if len(self.shape) != 3:
            raise HeaderError(f"shape must be (C, H, W), got {self.shape!r}")
        rng("channels", self.shape[0], 255)
        rng("height", self.shape[1], 65535)
        rng("width", self.shape[2], 65535)
        rng("chunk_count", self.chunk_count, 65535)
        rng("chunk_index", self.chunk_index, 65535)
        if self.chunk_count < 1 or self.chunk_index >= self.chunk_count:
            raise HeaderError(
                f"chunk_index={self.chunk_index} must be < chunk_count={self.chunk_count}"
            )

    def pack(self) -> bytes:
        body = struct.pack(
            _FMT,
            self.version,
            self.scheme,
            self.seq,
            self.item_id,
            self.fingerprint,
            self.payload_len,
            *self.shape,
            self.chunk_index,
            self.chunk_count,
        )
        return body + struct.pack(">I", zlib.crc32(body))

    @classmethod
    def unpack(cls, data: bytes) -> Header:
        """Parse and verify; raises HeaderError with the reason on anything wrong."""
        if not isinstance(data, (bytes, bytearray)):
            raise HeaderError(f"header must be bytes, got {type(data).__name__}")
        if len(data) != HEADER_LEN:
            raise HeaderError(f"header must be {HEADER_LEN} bytes, got {len(data)}")
        body, (crc,) = data[:BODY_LEN], struct.unpack(">I", data[BODY_LEN:])
        if zlib.crc32(body) != crc:
            raise HeaderError("header CRC mismatch")
        v, sch, seq, item, fp, plen, c, h, w, ci, cc = struct.unpack(_FMT, body)
        if v != FORMAT_VERSION:
            raise HeaderError(f"header format version {v}, this receiver speaks {FORMAT_VERSION}")
        return cls(seq, item, bytes(fp), plen, (c, h, w), ci, cc, sch, v)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["fingerprint"] = self.fingerprint.hex()
        d["shape"] = list(self.shape)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Header:
        """The inverse of ``to_dict`` (fingerprint as hex, shape as a list); the fields are
        checked as for any header."""
        return cls(
            **{**d, "fingerprint": bytes.fromhex(d["fingerprint"]), "shape": tuple(d["shape"])}
        )


_FIELDS = ("B", "B", "I", "I", "8s", "I", "B", "H", "H", "H", "H")  # _FMT, field by field
if ">" + "".join(_FIELDS) != _FMT:
    raise RuntimeError("_FIELDS must list _FMT's fields")


def _field_bits(index: int) -> tuple[int, int]:
    """(first bit, bit count) of the body field at ``index`` of ``_FMT`` (0: version, 2: seq,
    3: item_id, 4: fingerprint, 5: payload_len, ...)."""
    at = struct.calcsize(">" + "".join(_FIELDS[:index]))
    return 8 * at, 8 * struct.calcsize(">" + _FIELDS[index])


# The plausible tier of HeaderPrior: body field index -> its high bits assumed zero. hil tx
# counts seq up from --first-seq (0) and item ids from 0, so both stay under 2^24 (8 of 32
# bits zero: 16.7 million frames); real images have at most 3 channels (6 of channels' 8
# bits), sides under 8192 pixels (3 of 16) and fewer than 4096 chunks (4 of 16, index and
# count): 36 more known bits for a receiver with no last header (a cold start, another
# transmitter). On the two-Pluto profile, a fresh receiver per channel draw reads 97.1 % of
# the headers at 0 dB of the frame's own SNR instead of 94.5 % without the tier
# (scripts/bench_phy.py --only two_pluto). A header outside these bounds fails this tier's
# CRC and is read by the next.
PLAUSIBLE = {2: 8, 3: 8, 6: 6, 7: 3, 8: 3, 9: 4, 10: 4}


@dataclass(frozen=True)
class HeaderPrior:
    """What a receiver knows of a header before decoding it: the decoder then follows only
    trellis paths that carry those bits (``coding.viterbi_decode(known=...)``), so fewer bits
    are unknown and the code is stronger where the plain decoder fails.

    Three tiers (``known_bits``), most known bits first: what the last header read predicts
    of the next one from the same transmitter (the same scheme, payload length, image shape
    and chunk count, and the high halves of seq and item id, which count up); what hil tx and
    real images make likely of any header (``PLAUSIBLE``: seq and item id under 2^24, at most
    3 channels, sides under 8192 pixels, fewer than 4096 chunks); and what is known of every
    header it accepts (the version, the high zero bits of a payload length <= max_payload,
    the expected model fingerprint), which the other two include. A header that does not
    match a tier fails its CRC under it and is decoded again with less: the prior never
    loses a frame the plain decoder reads.

    Attributes:
        fingerprint: the model fingerprint the receiver expects (its decoder's), or None.
        max_payload: the largest payload_len accepted.
        last: the last header read, or None.
    """

    fingerprint: bytes | None = None
    max_payload: int = 2**32 - 1
    last: Header | None = None

    def __post_init__(self):
        if self.fingerprint is not None and (
            not isinstance(self.fingerprint, bytes) or len(self.fingerprint) != 8
        ):
            raise ValueError(f"fingerprint must be 8 bytes or None, got {self.fingerprint!r}")
        if not 0 <= self.max_payload < 2**32:
            raise ValueError(f"max_payload must be in 0..2^32 - 1, got {self.max_payload}")
        if self.last is not None and not isinstance(self.last, Header):
            raise ValueError(f"last must be a Header or None, got {type(self.last).__name__}")

    def after(self, header: Header) -> HeaderPrior:
        """The prior for the next frame, once ``header`` was read."""
        return HeaderPrior(self.fingerprint, self.max_payload, header)

    def known_bits(self, history: bool = True, plausible: bool = False) -> np.ndarray:
        """[HEADER_BITS] int64: each header bit's known value (0/1), -1 where unknown: what is
        known of every header; with ``history`` (and a last header) what the last one predicts
        too; with ``plausible``, the high zero bits of ``PLAUSIBLE`` too. The CRC and the low
        halves of seq and item id are never known, the chunk index only its high zeros."""
        kn = np.full(HEADER_BITS, -1, np.int64)

        def put(index: int, value: int, bits: int | None = None) -> None:
            """The top ``bits`` bits (all by default) of field ``index`` hold those of value."""
            at, n = _field_bits(index)
            bits = n if bits is None else bits
            v = value >> (n - bits)
            kn[at : at + bits] = [(v >> (bits - 1 - i)) & 1 for i in range(bits)]

        put(0, FORMAT_VERSION)
        zeros = 32 - self.max_payload.bit_length()
        if zeros:
            put(5, 0, zeros)
        if self.fingerprint is not None:
            at, n = _field_bits(4)
            kn[at : at + n] = np.unpackbits(np.frombuffer(self.fingerprint, np.uint8))
        if plausible:
            for index, bits in PLAUSIBLE.items():
                put(index, 0, bits)
        h = self.last
        if history and h is not None:
            put(1, h.scheme)
            put(2, h.seq, 16)
            put(3, h.item_id, 16)
            put(5, h.payload_len)
            for i, v in zip((6, 7, 8), h.shape, strict=True):
                put(i, v)
            put(10, h.chunk_count)
        return kn


def coded_bits_capacity(cfg: OfdmConfig) -> int:
    return cfg.header_symbols * cfg.n_data


def _check_fits(cfg: OfdmConfig) -> int:
    n = 2 * (HEADER_BITS + 6)
    cap = coded_bits_capacity(cfg)
    if n > cap:
        raise ValueError(
            f"header needs {n} coded bits but {cfg.header_symbols} symbols carry {cap}; "
            f"raise header_symbols to {-(-n // cfg.n_data)}"
        )
    return n


def encode_header_bits(header: Header, cfg: OfdmConfig) -> np.ndarray:
    """Header -> [header_symbols * n_data] uint8 coded, interleaved, scrambled bits (the
    padding, zeros before scrambling, scrambled too): the bits on the air."""
    return code_header_bits(np.unpackbits(np.frombuffer(header.pack(), np.uint8)), cfg)


def code_header_bits(bits: np.ndarray, cfg: OfdmConfig) -> np.ndarray:
    """Raw header bits [HEADER_BITS] or [B, HEADER_BITS] {0,1} (any integer dtype; a CRC that
    fails is coded as it is) -> [(B,) header_symbols * n_data] uint8 coded, interleaved,
    scrambled bits: what the transmitter would have sent for them."""
    n = _check_fits(cfg)
    bits = np.asarray(bits)
    if bits.shape[-1:] != (HEADER_BITS,) or bits.ndim > 2:
        raise ValueError(f"bits must be [{HEADER_BITS}] or [B, {HEADER_BITS}], got {bits.shape}")
    rows = bits.reshape(-1, HEADER_BITS)
    out = np.zeros((len(rows), coded_bits_capacity(cfg)), np.uint8)
    out[:, interleaver(n, cfg.n_data)] = conv_encode(rows)
    out ^= header_scrambler(out.shape[1])
    return out.reshape(*bits.shape[:-1], -1)


def header_symbols(header: Header, cfg: OfdmConfig) -> np.ndarray:
    """BPSK symbols [header_symbols, n_data] float64 (real +-1)."""
    return (1.0 - 2.0 * encode_header_bits(header, cfg)).reshape(cfg.header_symbols, cfg.n_data)


def decode_header_bits(
    llr: np.ndarray,
    cfg: OfdmConfig,
    n_list: int = HEADER_LIST,
    prior: HeaderPrior | None = None,
) -> np.ndarray:
    """Soft bits [B, header_symbols * n_data] real (any precision; LLR, positive for bit 0) ->
    hard header bits [B, HEADER_BITS] uint8 (batched Viterbi).

    A row whose Viterbi path fails the CRC is decoded again: with a ``prior``, by the Viterbi
    decoder held to each of its tiers (most known bits first), then by the list Viterbi
    decoder held to each; then by the list Viterbi decoder without a prior
    (``n_list`` paths, best first; 1 turns list decoding off). The first path that passes the
    CRC is taken; where none does, the Viterbi path is returned and the CRC rejects it.
    Non-finite LLRs are zeroed (erasures); the CRC then decides.
    """
    n = _check_fits(cfg)
    llr = np.asarray(llr, np.float64)
    if llr.ndim != 2 or llr.shape[1] != coded_bits_capacity(cfg):
        raise ValueError(f"expected [B, {coded_bits_capacity(cfg)}] header LLRs, got {llr.shape}")
    # erasures for non-finite values; beyond +-1e6 an LLR carries no more information,
    # and clipping keeps the path metrics finite
    llr = np.clip(np.where(np.isfinite(llr), llr, 0.0), -1e6, 1e6)
    llr = (llr * (1.0 - 2.0 * header_scrambler(llr.shape[1])))[:, interleaver(n, cfg.n_data)]
    out, ok = invert_hard_batch(llr < 0)
    passed = crc_ok_batch(out)
    slow = [i for i in range(len(out)) if not (ok[i] and passed[i])]
    if slow:
        out[slow] = viterbi_decode(llr[slow])
    failed = [i for i in slow if not crc_ok(out[i])]
    # known bits, most first; built only when a header needs them (most batches do not)
    tiers = _tiers(prior) if prior is not None and failed else []
    for known in tiers:  # the Viterbi path held to each tier: cheap
        if not failed:
            break
        held = viterbi_decode(llr[failed], known)
        for j, i in enumerate(failed):
            if crc_ok(held[j]):
                out[i] = held[j]
        failed = [i for i in failed if not crc_ok(out[i])]
    # the list decoder (~3.4 ms a header at 64 paths) held to each tier, then without a
    # prior: a last header from another image makes the first tier wrong, and the others serve
    for known in (*tiers, None):
        failed = _list_decode(llr, out, failed, n_list, known)
    return out


def _tiers(prior: HeaderPrior) -> list[np.ndarray]:
    """The prior's known bits [HEADER_BITS], most first: with the last header's (when there
    is one), with what is plausible of any header, then what is known of every header."""
    tiers = [
        prior.known_bits(history=True, plausible=False),
        prior.known_bits(history=False, plausible=True),
        prior.known_bits(history=False, plausible=False),
    ]
    return tiers if prior.last is not None else tiers[1:]


def _list_decode(llr, out, failed: list[int], n_list: int, known) -> list[int]:
    """List-Viterbi the rows ``failed`` of llr (held to ``known`` bits, or not), writing into
    ``out`` the first path of each that passes the CRC; returns the rows still failing."""
    # 32 headers at a time: the list decoder's traceback table is ~0.6 MB per header
    for at in range(0, len(failed) if n_list > 1 else 0, 32):
        rows = failed[at : at + 32]
        paths, metric = list_viterbi_decode(llr[rows], n_list, known)
        for j, i in enumerate(rows):
            for r in range(n_list):  # path 0 is the Viterbi path (up to ties)
                if np.isfinite(metric[j, r]) and crc_ok(paths[j, r]):
                    out[i] = paths[j, r]
                    break
    return [i for i in failed if not crc_ok(out[i])]


def crc_ok(bits: np.ndarray) -> bool:
    """Whether raw header bits [HEADER_BITS] {0,1} (uint8) pass the header's CRC-32."""
    raw = np.packbits(bits).tobytes()
    return zlib.crc32(raw[:BODY_LEN]) == struct.unpack(">I", raw[BODY_LEN:])[0]


def crc_ok_batch(bits: np.ndarray) -> list[bool]:
    """``crc_ok`` of each row of raw header bits [B, HEADER_BITS] {0,1} (uint8), packed at
    once."""
    raw = np.packbits(bits, axis=1)
    if raw.ndim != 2 or raw.shape[1] != HEADER_LEN:
        raise ValueError(f"bits must be [B, {HEADER_BITS}], got {np.shape(bits)}")
    b = raw.tobytes()  # bytes slices: cheaper than numpy rows
    return [
        zlib.crc32(b[o : o + BODY_LEN]) == int.from_bytes(b[o + BODY_LEN : o + HEADER_LEN], "big")
        for o in range(0, len(b), HEADER_LEN)
    ]


def parse_header_bits(bits: np.ndarray) -> Header:
    """[HEADER_BITS] hard bits {0,1} (any integer or bool dtype; read as uint8) -> Header, or
    HeaderError."""
    return Header.unpack(np.packbits(np.asarray(bits, np.uint8)).tobytes())


def decode_header_llr(llr: np.ndarray, cfg: OfdmConfig) -> Header:
    """Soft bits [header_symbols * n_data] of one frame, real (any precision; any shape with
    that many elements is flattened) -> Header, or HeaderError."""
    llr = np.asarray(llr, np.float64).ravel()
    if llr.size != coded_bits_capacity(cfg):
        raise HeaderError(f"expected {coded_bits_capacity(cfg)} header LLRs, got {llr.size}")
    if not np.all(np.isfinite(llr)):
        raise HeaderError("non-finite header LLRs")
    return parse_header_bits(decode_header_bits(llr[None], cfg)[0])
