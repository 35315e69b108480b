"""The frame format against the committed vectors (docs/frame-format.md, tests/phy/vectors/).

Three kinds of check:

1. the implementation (hil.phy) reproduces every committed vector: bit-exact for
   bytes and bits, IQ within 1e-6;
2. an independent transmitter written from docs/frame-format.md alone (numpy,
   zlib and the tables below; nothing from hil.phy) reproduces them too, so the
   document says enough to build a compatible frame;
3. the receiver (hil.phy.FrameReceiver) decodes the vector frame back to the
   example header and payload.

A failure of 1 after a PHY change means the change altered the over-the-air
format: regenerate with ``python scripts/frame_vectors.py``, bump
``hil.phy.header.FORMAT_VERSION`` and update docs/frame-format.md.
"""

from __future__ import annotations

import importlib.util
import json
import re
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from hil.phy import FrameBuilder, FrameReceiver, Header, OfdmConfig, to_full_scale
from hil.phy.coding import conv_encode, interleaver
from hil.phy.header import decode_header_llr, encode_header_bits, header_symbols
from hil.phy.sequences import (
    header_scrambler,
    lts_freq,
    lts_time,
    payload_phases,
    pilot_values,
    sts_freq,
    sts_time,
)

ROOT = Path(__file__).resolve().parents[2]
VEC = Path(__file__).resolve().parent / "vectors"
ATOL = 1e-6


@pytest.fixture(scope="module")
def meta() -> dict:
    return json.loads((VEC / "frame.json").read_text())


def c64(name: str) -> np.ndarray:
    return np.fromfile(VEC / f"{name}.c64", "<c8")


def bits_of(s: str) -> np.ndarray:
    return np.array([int(c) for c in s], np.uint8)


def example_header(meta: dict) -> Header:
    h = Header.from_dict(meta["header"])
    assert h.to_dict() == meta["header"]  # the vector names every field, nothing else
    return h


def example_payload() -> np.ndarray:
    return np.exp(2j * np.pi * np.arange(480) / 7).astype(np.complex64)


# --------------------------------------------------------------- 1. implementation
def test_files_small_and_complete(meta):
    total = sum(p.stat().st_size for p in VEC.iterdir())
    assert total < 200_000
    for name, info in meta["files"].items():
        assert (VEC / name).stat().st_size == 8 * info["samples"]


def test_numerology_is_the_default(meta):
    cfg = OfdmConfig()
    assert meta["numerology"] == cfg.to_dict()
    assert (cfg.fft_size, cfg.cp_len, cfg.n_data, len(cfg.pilots)) == (64, 16, 48, 4)
    assert cfg.sample_rate_hz == 4e6
    assert meta["data_carriers"] == cfg.data_carriers.tolist()
    assert meta["pilot_carriers"] == cfg.pilot_carriers.tolist()
    lay = meta["layout"]
    assert lay["frame_len"] == cfg.frame_len(480) == len(c64("frame")) == 2080
    assert (lay["lts_start"], lay["header_start"], lay["payload_start"]) == (160, 320, 1280)


def test_header_bytes_crc_and_bits(meta):
    cfg = OfdmConfig()
    h = example_header(meta)
    raw = h.pack()
    assert raw.hex() == meta["header_hex"]
    assert raw[:31].hex() == meta["body_hex"]
    assert int.from_bytes(raw[31:], "big") == meta["crc32"] == zlib.crc32(raw[:31])
    assert Header.unpack(bytes.fromhex(meta["header_hex"])) == h
    bits = np.unpackbits(np.frombuffer(raw, np.uint8))
    assert np.array_equal(bits, bits_of(meta["header_bits"]))
    assert np.array_equal(conv_encode(bits), bits_of(meta["coded_bits"]))
    inter, air = bits_of(meta["interleaved_bits"]), bits_of(meta["scrambled_bits"])
    assert np.array_equal(encode_header_bits(h, cfg), air)
    assert np.array_equal(inter ^ header_scrambler(len(inter)), air)
    q = np.rint(np.angle(payload_phases(len(meta["payload_q"]))) / (np.pi / 2)).astype(int) % 4
    assert q.tolist() == meta["payload_q"]
    assert np.array_equal(header_symbols(h, cfg), np.array(meta["header_bpsk"], float))


def test_sequences(meta):
    cfg = OfdmConfig()
    np.testing.assert_allclose(sts_time(cfg), c64("sts"), rtol=0, atol=ATOL)
    np.testing.assert_allclose(lts_time(cfg), c64("lts"), rtol=0, atol=ATOL)
    sf = sts_freq(cfg)
    for k, q in zip(meta["sts_carriers"], meta["sts_q"], strict=True):
        want = np.sqrt(64 / 12) * np.exp(1j * (np.pi / 4 + q * np.pi / 2))
        assert abs(sf[k % 64] - want) < 1e-12
    assert np.count_nonzero(sf) == 12
    lf = lts_freq(cfg)
    assert {str(k): int(lf[k % 64].real) for k in cfg.used} == meta["lts_values"]
    pv = pilot_values(cfg, len(meta["pilot_polarity"]))
    assert np.array_equal(pv[:, 0], meta["pilot_polarity"])
    assert np.array_equal(pv[0], meta["pilot_base"])


def test_frame_iq(meta):
    cfg = OfdmConfig()
    h = example_header(meta)
    s = example_payload()
    np.testing.assert_allclose(s, c64("payload"), rtol=0, atol=ATOL)
    frame = FrameBuilder(cfg).build_numpy(s, h)
    np.testing.assert_allclose(frame, c64("frame"), rtol=0, atol=ATOL)
    full, stats = to_full_scale(frame, meta["full_scale"]["rms_dbfs"])
    np.testing.assert_allclose(full, c64("frame_full_scale"), rtol=0, atol=ATOL)
    assert np.abs(c64("frame_full_scale")).max() <= 1 + 1e-6
    assert stats["clipped_fraction"] == pytest.approx(meta["full_scale"]["clipped_fraction"])


def test_script_check_passes():
    spec = importlib.util.spec_from_file_location(
        "frame_vectors", ROOT / "scripts/frame_vectors.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.check(VEC) == []


# ------------------------------------------- 2. a transmitter from the document alone
# Tables copied from docs/frame-format.md (sections 3 and 4).
STS_Q = {-24: 0, -20: 2, -16: 0, -12: 3, -8: 1, -4: 0, 4: 2, 8: 3, 12: 0, 16: 2, 20: 2, 24: 3}
LTS_NEG = "-++-+++-+---+--+++--+-++--"  # k = -26 .. -1
LTS_POS = "-+++-+----+-++-+--+-+-+-++"  # k = 1 .. 26
N, CP, GUARD = 64, 16, 32
USED = [k for k in range(-26, 27) if k != 0]
PILOTS = [-21, -7, 7, 21]
DATA = [k for k in USED if k not in PILOTS]
A = np.sqrt(64 / 52)


def spec_ifft(grid: dict[int, complex]) -> np.ndarray:
    n = np.arange(N)
    x = np.zeros(N, complex)
    for k, v in grid.items():
        x += v * np.exp(2j * np.pi * k * n / N)
    return x / np.sqrt(N)


def spec_sts() -> np.ndarray:
    grid = {
        k: np.sqrt(64 / 12) * np.exp(1j * (np.pi / 4 + q * np.pi / 2)) for k, q in STS_Q.items()
    }
    return np.tile(spec_ifft(grid)[:16], 10)


def spec_lts() -> np.ndarray:
    signs = [1 if c == "+" else -1 for c in LTS_NEG + LTS_POS]
    sym = A * spec_ifft(dict(zip(USED, signs, strict=True)))
    return np.concatenate([sym[-GUARD:], sym, sym])


def spec_crc32(data: bytes) -> int:
    """CRC-32/ISO-HDLC bit by bit: reflected poly 0xEDB88320, init and xorout 0xFFFFFFFF."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def spec_header_bytes(d: dict) -> bytes:
    body = (
        bytes([d["version"], d["scheme"]])
        + d["seq"].to_bytes(4, "big")
        + d["item_id"].to_bytes(4, "big")
        + bytes.fromhex(d["fingerprint"])
        + d["payload_len"].to_bytes(4, "big")
        + bytes([d["shape"][0]])
        + d["shape"][1].to_bytes(2, "big")
        + d["shape"][2].to_bytes(2, "big")
        + d["chunk_index"].to_bytes(2, "big")
        + d["chunk_count"].to_bytes(2, "big")
    )
    return body + spec_crc32(body).to_bytes(4, "big")


def spec_conv(bits: list[int]) -> list[int]:
    """K = 7, generators 133 and 171 octal (MSB tap = current input), A then B, 6 zero tail bits."""
    reg = [0] * 7  # reg[0] = current input u[n], reg[i] = u[n - i]
    taps = [[(g >> (6 - i)) & 1 for i in range(7)] for g in (0o133, 0o171)]
    out = []
    for b in [*bits, 0, 0, 0, 0, 0, 0]:
        reg = [b, *reg[:6]]
        for t in taps:
            out.append(sum(r & x for r, x in zip(reg, t, strict=True)) & 1)
    return out


def spec_interleave(coded: list[int], capacity: int) -> list[int]:
    """Coded bit i to position 48 (i // 48) + (7 i) mod 48; the positions left are 0."""
    out = [0] * capacity
    for i, bit in enumerate(coded):
        out[48 * (i // 48) + (7 * i) % 48] = bit
    return out


def spec_mseq_bits(count: int) -> list[int]:
    """b_0, b_1, ...: x^7 + x^4 + 1, cells x1..x7 all 1; each step b = x7 xor x4, shift, x1 = b."""
    state = [1] * 7  # x1..x7
    out = []
    for _ in range(count):
        b = state[6] ^ state[3]  # x7 xor x4
        out.append(b)
        state = [b, *state[:6]]
    return out


def spec_pilot_polarity(count: int) -> list[int]:
    return [1 - 2 * b for b in spec_mseq_bits(count)]


def spec_scramble_header(air: list[int]) -> list[int]:
    """Position p of the 576 interleaved bits XOR b_(p mod 127)."""
    m = spec_mseq_bits(127)
    return [bit ^ m[p % 127] for p, bit in enumerate(air)]


def spec_rotate_payload(payload: np.ndarray) -> np.ndarray:
    """Symbol i times j^q_i, q_i = 2 b_(2i mod 127) + b_((2i + 1) mod 127)."""
    m = spec_mseq_bits(127)
    q = [2 * m[(2 * i) % 127] + m[(2 * i + 1) % 127] for i in range(len(payload))]
    return payload * np.array([1j**v for v in q])


def spec_symbol(values: list[complex], index: int, pol: list[int]) -> np.ndarray:
    grid = {k: A * v for k, v in zip(DATA, values, strict=True)}
    for k, base in zip(PILOTS, (1, 1, 1, -1), strict=True):
        grid[k] = A * base * pol[index % 127]
    x = spec_ifft(grid)
    return np.concatenate([x[-CP:], x])


def spec_frame(header: bytes, payload: np.ndarray) -> tuple[np.ndarray, list[int], list[int]]:
    bits = [int(b) for b in np.unpackbits(np.frombuffer(header, np.uint8))]  # MSB first
    coded = spec_conv(bits)
    inter = spec_interleave(coded, 12 * 48)
    air = spec_scramble_header(inter)
    pol = spec_pilot_polarity(127)
    parts = [spec_sts(), spec_lts()]
    for s in range(12):
        parts.append(spec_symbol([1 - 2 * b for b in air[48 * s : 48 * s + 48]], s, pol))
    n_pay = -(-len(payload) // 48)
    rotated = spec_rotate_payload(payload)
    padded = np.concatenate([rotated, np.zeros(48 * n_pay - len(payload))])
    for s in range(n_pay):
        parts.append(spec_symbol(list(padded[48 * s : 48 * s + 48]), 12 + s, pol))
    return np.concatenate(parts), coded, inter, air


def test_document_tables_match_implementation():
    cfg = OfdmConfig()
    sf, lf = sts_freq(cfg), lts_freq(cfg)
    for k, q in STS_Q.items():
        assert abs(sf[k % 64] - np.sqrt(64 / 12) * np.exp(1j * (np.pi / 4 + q * np.pi / 2))) < 1e-12
    signs = [1 if c == "+" else -1 for c in LTS_NEG + LTS_POS]
    assert [int(lf[k % 64].real) for k in USED] == signs


def test_spec_transmitter_matches_vectors(meta):
    assert spec_crc32(b"123456789") == 0xCBF43926
    raw = spec_header_bytes(meta["header"])
    assert raw.hex() == meta["header_hex"]
    frame, coded, inter, air = spec_frame(raw, c64("payload").astype(complex))
    assert "".join(map(str, coded)) == meta["coded_bits"]
    assert "".join(map(str, inter)) == meta["interleaved_bits"]
    assert "".join(map(str, air)) == meta["scrambled_bits"]
    assert spec_pilot_polarity(22) == meta["pilot_polarity"]
    np.testing.assert_allclose(spec_sts(), c64("sts"), rtol=0, atol=ATOL)
    np.testing.assert_allclose(spec_lts(), c64("lts"), rtol=0, atol=ATOL)
    np.testing.assert_allclose(frame, c64("frame"), rtol=0, atol=ATOL)
    # to_full_scale: scale to -12 dBFS RMS by the frame's measured power, clip |y| to 1
    y = frame * (10 ** (-12 / 20) / np.sqrt(np.mean(np.abs(frame) ** 2)))
    mag = np.abs(y)
    y = np.where(mag > 1, y / np.maximum(mag, 1e-30), y)
    np.testing.assert_allclose(y, c64("frame_full_scale"), rtol=0, atol=ATOL)


def test_interleaver_definition():
    """Transmit side: coded bit i goes to position interleaver(n)[i] (a scatter)."""
    perm = interleaver(572)
    coded = list(range(572))
    out = spec_interleave(coded, 576)
    assert [out[p] for p in perm] == coded
    padding = sorted(set(range(576)) - set(perm.tolist()))
    assert padding == [548, 555, 562, 569]  # header symbol 11, data indices 20, 27, 34, 41
    assert all(out[p] == 0 for p in padding)


# --------------------------------------------------------------------- 3. receiver
@pytest.mark.parametrize("lead,trail,chunk", [(0, 0, None), (300, 200, None), (123, 0, 97)])
def test_receiver_decodes_vector_frame(meta, lead, trail, chunk):
    frame = c64("frame")
    x = np.concatenate([np.zeros(lead, np.complex64), frame, np.zeros(trail, np.complex64)])
    rx = FrameReceiver(OfdmConfig())
    if chunk is None:
        events = rx.push(x)
    else:
        events = [e for i in range(0, len(x), chunk) for e in rx.push(x[i : i + chunk])]
    assert [e.status for e in events] == ["ok"]
    ev = events[0]
    assert ev.frame_start == lead
    assert ev.header == example_header(meta)
    assert np.abs(ev.symbols - c64("payload")).max() < 1e-3


def test_receiver_decodes_full_scale_frame_with_noise(meta):
    """The frame as sent (-12 dBFS, 1 % of samples clipped) through AWGN at 30 dB and a CFO."""
    rng = np.random.default_rng(19)
    full = c64("frame_full_scale").astype(complex)
    x = np.concatenate([np.zeros(500), full, np.zeros(500)])
    x = x * np.exp(2j * np.pi * 20e3 / 4e6 * np.arange(len(x)))
    sigma = 10 ** (-12 / 20) * 10 ** (-30 / 20)
    x = x + sigma * (rng.normal(size=len(x)) + 1j * rng.normal(size=len(x))) / np.sqrt(2)
    events = FrameReceiver(OfdmConfig()).push(x.astype(np.complex64))
    assert [e.status for e in events] == ["ok"]
    assert events[0].header == example_header(meta)
    assert events[0].frame_start == 500
    err = events[0].symbols - c64("payload")
    # clipping alone costs 0.218 RMS here: this payload's 2 pi / 7 phase ramp across the data
    # subcarriers puts two 15 dB peaks into every payload symbol, which full scale cuts
    assert np.sqrt(np.mean(np.abs(err) ** 2)) < 0.3


def test_header_decodes_from_vector_bpsk(meta):
    llr = 8.0 * np.array(meta["header_bpsk"], float).ravel()  # llr > 0 <=> bit 0 <=> +1
    assert decode_header_llr(llr, OfdmConfig()) == example_header(meta)


def test_crc_byte_order_matters(meta):
    raw = bytes.fromhex(meta["header_hex"])
    swapped = raw[:31] + struct.pack("<I", struct.unpack(">I", raw[31:])[0])
    with pytest.raises(ValueError, match="CRC"):
        Header.unpack(swapped)


# ------------------------------------------------------ 4. the document's own tables
def test_document_tables_are_current(meta):
    """The tables in docs/frame-format.md (pilot polarity, LTS signs, STS q, example bytes)."""
    doc = (ROOT / "docs" / "frame-format.md").read_text()
    pol = re.search(r"p_0 \.\. p_126 = ([+-]{127})$", doc, re.M).group(1)
    assert [1 if c == "+" else -1 for c in pol] == spec_pilot_polarity(127)
    assert pol[:22] == "".join("+" if p > 0 else "-" for p in meta["pilot_polarity"])
    bits = re.search(r"b_0 \.\. b_126 = ([01]{127})$", doc, re.M).group(1)
    assert [int(c) for c in bits] == spec_mseq_bits(127)
    assert meta["scrambled_bits"][:48] in doc and meta["interleaved_bits"][:48] in doc
    signs = re.findall(r"^\| sign \| `([-+ ]+)` \|$", doc, re.M)
    assert [s.replace(" ", "") for s in signs] == [LTS_NEG, LTS_POS]
    q_row = re.search(r"^\| q_k \|(.*)\|$", doc, re.M).group(1)
    assert [int(v) for v in q_row.split("|")] == meta["sts_q"] == list(STS_Q.values())
    assert meta["header_hex"] in doc.replace(" ", "").replace("\n", "").replace("|", "")
    assert meta["coded_bits"][:64] in doc
    assert meta["interleaved_bits"][:48] in doc
