"""Write the frame-format test vectors (docs/frame-format.md) into tests/phy/vectors/.

    python scripts/frame_vectors.py            # (re)write the vectors
    python scripts/frame_vectors.py --check    # compare with the committed ones, write nothing

The vectors come from the current implementation (hil.phy) for one fixed example
header and a deterministic payload. A change to any of them is a format change:
bump ``hil.phy.header.FORMAT_VERSION`` and say so in docs/frame-format.md.

Files (numpy and json only, no pickle):

- ``frame.json``: numerology, header fields, header bytes (hex), CRC-32, the
  header bits before coding, the coded bits before and after interleaving and
  after scrambling, the BPSK header symbols per OFDM symbol, the payload's
  scrambling rotations q_i, the pilot polarities, the training
  sequences' subcarrier values, the frame layout and the list of sample files;
- ``*.c64``: complex64 little-endian samples (interleaved float32 I, Q; what
  GNU Radio's file source reads as gr_complex): ``sts``, ``lts``, ``payload``,
  ``frame`` (unit power, as ``FrameBuilder.build_numpy`` makes it) and
  ``frame_full_scale`` (``to_full_scale`` at -12 dBFS, as ``hil tx`` sends it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hil.phy import FrameBuilder, Header, OfdmConfig, to_full_scale  # noqa: E402
from hil.phy.coding import conv_encode, interleaver  # noqa: E402
from hil.phy.header import (  # noqa: E402
    BODY_LEN,
    FORMAT_VERSION,
    HEADER_BITS,
    encode_header_bits,
    header_symbols,
)
from hil.phy.sequences import (  # noqa: E402
    lts_freq,
    lts_time,
    payload_phases,
    pilot_values,
    sts_freq,
    sts_time,
)

OUT = ROOT / "tests" / "phy" / "vectors"
RMS_DBFS = -12.0
N_PAYLOAD = 480

EXAMPLE_HEADER = {
    "version": FORMAT_VERSION,
    "scheme": 0,
    "seq": 258,
    "item_id": 7,
    "fingerprint": "0102030405060708",
    "payload_len": N_PAYLOAD,
    "shape": [3, 32, 32],
    "chunk_index": 0,
    "chunk_count": 1,
}


def example_header() -> Header:
    return Header.from_dict(EXAMPLE_HEADER)


def example_payload() -> np.ndarray:
    """s[i] = exp(j 2 pi i / 7), i = 0..479, complex64."""
    i = np.arange(N_PAYLOAD)
    return np.exp(2j * np.pi * i / 7).astype(np.complex64)


def _bitstr(bits: np.ndarray) -> str:
    return "".join(str(int(b)) for b in bits)


def build_vectors(cfg: OfdmConfig | None = None) -> tuple[dict, dict[str, np.ndarray]]:
    """(metadata for frame.json, {name: complex64 samples}) from the current implementation."""
    cfg = cfg or OfdmConfig()
    hdr = example_header()
    raw = hdr.pack()
    bits = np.unpackbits(np.frombuffer(raw, np.uint8))
    coded = conv_encode(bits)
    air = encode_header_bits(hdr, cfg)  # interleaved and scrambled
    inter = np.zeros_like(air)
    inter[interleaver(len(coded), cfg.n_data)] = coded
    bpsk = header_symbols(hdr, cfg).astype(int)
    payload = example_payload()
    frame = FrameBuilder(cfg).build_numpy(payload, hdr)
    full, stats = to_full_scale(frame, RMS_DBFS)
    n_sym = cfg.header_symbols + cfg.payload_symbols(N_PAYLOAD)
    sf, lf = sts_freq(cfg), lts_freq(cfg)
    sts_k = [int(k) for k in range(-cfg.fft_size // 2, cfg.fft_size // 2) if abs(sf[k]) > 0]
    sts_q = [
        int(np.rint((np.angle(sf[k]) - np.pi / 4) / (np.pi / 2))) % 4 for k in sts_k
    ]  # value = sqrt(N / 12) exp(j (pi/4 + q pi/2))
    arrays = {
        "sts": sts_time(cfg),
        "lts": lts_time(cfg),
        "payload": payload,
        "frame": frame,
        "frame_full_scale": full,
    }
    meta = {
        "description": "hil PHY frame-format test vectors; see docs/frame-format.md",
        "regenerate": "python scripts/frame_vectors.py",
        "format_version": FORMAT_VERSION,
        "numerology": cfg.to_dict(),
        "header": EXAMPLE_HEADER,
        "header_hex": raw.hex(),
        "body_hex": raw[:BODY_LEN].hex(),
        "crc32": int.from_bytes(raw[BODY_LEN:], "big"),
        "crc32_hex": raw[BODY_LEN:].hex(),
        "header_bits": _bitstr(bits),
        "coded_bits": _bitstr(coded),
        "interleaved_bits": _bitstr(inter),
        "scrambled_bits": _bitstr(air),
        "payload_q": [
            int(np.rint(np.angle(p) / (np.pi / 2))) % 4 for p in payload_phases(N_PAYLOAD)
        ],
        "header_bpsk": [list(map(int, row)) for row in bpsk],
        "pilot_polarity": [int(p) for p in pilot_values(cfg, n_sym)[:, 0]],
        "pilot_carriers": [int(k) for k in cfg.pilot_carriers],
        "pilot_base": [int(v) for v in pilot_values(cfg, 1)[0]],
        "data_carriers": [int(k) for k in cfg.data_carriers],
        "sts_carriers": sts_k,
        "sts_q": sts_q,
        "lts_values": {str(int(k)): int(lf[k].real) for k in cfg.used},
        "payload_definition": "s[i] = exp(j*2*pi*i/7), i = 0..479",
        "layout": {
            "sts_start": 0,
            "lts_start": cfg.sts_len,
            "header_start": cfg.preamble_len,
            "payload_start": cfg.preamble_len + cfg.header_len,
            "frame_len": cfg.frame_len(N_PAYLOAD),
            "header_symbols": cfg.header_symbols,
            "payload_symbols": cfg.payload_symbols(N_PAYLOAD),
        },
        "full_scale": {
            "rms_dbfs": RMS_DBFS,
            "clip_papr_db": None,
            "clipped_fraction": stats["clipped_fraction"],
            "papr_in_db": round(stats["papr_in_db"], 4),
            "rms_dbfs_after_clipping": round(stats["rms_dbfs"], 4),
        },
        "files": {
            f"{name}.c64": {"samples": len(a), "dtype": "complex64 little-endian"}
            for name, a in arrays.items()
        },
    }
    assert len(bits) == HEADER_BITS
    return meta, arrays


def dumps(meta: dict) -> str:
    """JSON with flat number lists on one line (readable, small)."""
    text = json.dumps(meta, indent=2)
    return (
        re.sub(
            r"\[\s*((?:-?[\d.]+,\s*)*-?[\d.]+)\s*\]",
            lambda m: "[" + ", ".join(v.strip() for v in m.group(1).split(",")) + "]",
            text,
        )
        + "\n"
    )


def write(out: Path = OUT) -> dict[str, int]:
    meta, arrays = build_vectors()
    out.mkdir(parents=True, exist_ok=True)
    sizes = {}
    (out / "frame.json").write_text(dumps(meta))
    sizes["frame.json"] = (out / "frame.json").stat().st_size
    for name, a in arrays.items():
        p = out / f"{name}.c64"
        np.asarray(a, "<c8").tofile(p)
        sizes[p.name] = p.stat().st_size
    return sizes


def read_c64(path: Path) -> np.ndarray:
    return np.fromfile(path, "<c8")


def check(out: Path = OUT) -> list[str]:
    """Differences between the implementation and the committed vectors (empty: none)."""
    meta, arrays = build_vectors()
    bad = []
    if json.loads((out / "frame.json").read_text()) != json.loads(dumps(meta)):
        bad.append("frame.json")
    for name, a in arrays.items():
        ref = read_c64(out / f"{name}.c64")
        if ref.shape != a.shape or not np.allclose(ref, a, rtol=0, atol=1e-6):
            bad.append(f"{name}.c64")
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare, write nothing")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    if a.check:
        bad = check(a.out)
        print("vectors match" if not bad else f"vectors differ: {', '.join(bad)}")
        return 1 if bad else 0
    sizes = write(a.out)
    for name, n in sizes.items():
        print(f"{a.out / name}: {n} bytes")
    print(f"total {sum(sizes.values())} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
