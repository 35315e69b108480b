#!/usr/bin/env python3
"""Fuzz the parsers that face the outside: mutated wire messages and frame headers.

    python scripts/fuzz_parsers.py [--n 1000000] [--seed 0]

Each iteration takes a valid message (a sample message, or a header's bytes),
mutates it (bit flips, byte overwrites, truncation, extension, splicing,
wrong frame counts, NaN/inf payloads, random bytes) and parses it. The parser
may accept it or raise its own error (WireError / HeaderError); anything else
escaping is a crash and is printed with its input. Prints the counts.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback

import numpy as np

from hil.phy import Header, HeaderError
from hil.transport import SampleHeader, WireError, decode, decode_raw, encode


def mutate(rng: np.random.Generator, b: bytes) -> bytes:
    a = bytearray(b)
    op = rng.integers(0, 7)
    if op == 0 and a:  # bit flips
        for _ in range(int(rng.integers(1, 8))):
            i = int(rng.integers(0, len(a)))
            a[i] ^= 1 << int(rng.integers(0, 8))
    elif op == 1 and a:  # byte overwrites
        for _ in range(int(rng.integers(1, 8))):
            a[int(rng.integers(0, len(a)))] = int(rng.integers(0, 256))
    elif op == 2:  # truncation
        a = a[: int(rng.integers(0, len(a) + 1))]
    elif op == 3:  # extension
        a += rng.bytes(int(rng.integers(1, 64)))
    elif op == 4 and len(a) > 8:  # splice a copy of a slice elsewhere
        i, j = sorted(rng.integers(0, len(a), 2))
        k = int(rng.integers(0, len(a)))
        a[k:k] = a[i:j]
    elif op == 5:  # random bytes of the same length
        a = bytearray(rng.bytes(len(a)))
    else:  # interesting values at random offsets
        for _ in range(int(rng.integers(1, 4))):
            if len(a) >= 4:
                i = int(rng.integers(0, len(a) - 3))
                a[i : i + 4] = rng.choice(
                    [
                        b"\xff\xff\xff\xff",
                        b"\x00\x00\x00\x00",
                        b"\x00\x00\xc0\x7f",
                        b"\x00\x00\x80\x7f",
                        b"\xff\xff\xff\x7f",
                    ]
                )
    return bytes(a)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    x = (rng.standard_normal(64) + 1j * rng.standard_normal(64)).astype(np.complex64)
    head, body = (bytes(f) for f in encode(SampleHeader(1, 7, 1000, 4e6, 2.4e9, 0x05), x))
    hdr = Header(
        seq=5, item_id=9, fingerprint=b"fuzzfuzz", payload_len=512, shape=(3, 32, 32)
    ).pack()
    counts = {"wire": [0, 0], "raw": [0, 0], "header": [0, 0]}  # [accepted, rejected]
    crashes = 0
    t0 = time.perf_counter()
    for i in range(a.n):
        kind = ("wire", "wire", "raw", "header")[i % 4]
        try:
            if kind == "wire":
                frames = [mutate(rng, head), mutate(rng, body) if rng.random() < 0.5 else body]
                r = rng.random()
                if r < 0.05:
                    frames = frames[:1]
                elif r < 0.1:
                    frames = [*frames, b""]
                decode(frames)
            elif kind == "raw":
                decode_raw(mutate(rng, body))
            else:
                Header.unpack(mutate(rng, hdr))
            counts[kind][0] += 1
        except (WireError, HeaderError):
            counts[kind][1] += 1
        except Exception:
            crashes += 1
            if crashes <= 5:
                print(f"CRASH on iteration {i} ({kind}):", file=sys.stderr)
                traceback.print_exc()
    dt = time.perf_counter() - t0
    print(f"{a.n} fuzzed inputs in {dt:.1f} s ({a.n / dt:.0f}/s), seed {a.seed}: {crashes} crashes")
    print("| parser | accepted | rejected with its own error |")
    print("| --- | --- | --- |")
    for k, (acc, rej) in counts.items():
        print(f"| {k} | {acc} | {rej} |")
    return 1 if crashes else 0


if __name__ == "__main__":
    raise SystemExit(main())
