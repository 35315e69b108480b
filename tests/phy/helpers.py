"""Stream construction helpers for PHY tests."""

import numpy as np
import torch

from hil.channel import ChannelChain
from hil.phy import FrameBuilder, Header

FP = b"\x01\x02\x03\x04\x05\x06\x07\x08"


def make_frames(fb: FrameBuilder, rng: np.random.Generator, n: int, k: int = 200):
    frames, headers, payloads = [], [], []
    for i in range(n):
        s = ((rng.normal(size=k) + 1j * rng.normal(size=k)) / np.sqrt(2)).astype(np.complex64)
        h = Header(seq=i, item_id=1000 + i, fingerprint=FP, payload_len=k, shape=(3, 8, 8))
        frames.append(fb.build_numpy(s, h))
        headers.append(h)
        payloads.append(s)
    return frames, headers, payloads


def make_stream(frames, rng, gap=(200, 3000), lead=None):
    """Frames separated by silent gaps; returns (stream, start indices)."""
    parts, starts = [], []
    pos = int(rng.integers(*gap)) if lead is None else lead
    parts.append(np.zeros(pos, np.complex64))
    for f in frames:
        starts.append(pos)
        g = int(rng.integers(*gap))
        parts += [f, np.zeros(g, np.complex64)]
        pos += len(f) + g
    return np.concatenate(parts), starts


def impair(x, *, snr_db, cfo_hz=0.0, delay=0.0, taps=None, delays=None, seed=0, fs=4e6):
    """Apply channel stages to a 1-D stream (noise everywhere, including the gaps)."""
    tables = []
    values = {}
    if taps is not None:
        tables.append(
            {
                "kind": "multipath",
                "profile": "listed",
                "delays_samples": list(delays),
                "powers_db": [0.0] * len(delays),
            }
        )
        values["multipath"] = {
            "taps": torch.as_tensor(np.asarray(taps)[None], dtype=torch.complex64)
        }
    if delay:
        tables.append({"kind": "timing"})
        values["timing"] = {"delay": delay}
    tables.append({"kind": "cfo", "sample_rate_hz": fs})
    values["cfo"] = {"cfo_hz": cfo_hz}
    tables.append({"kind": "awgn", "snr_db": snr_db})
    chain = ChannelChain.from_tables(tables)
    y = chain(
        torch.from_numpy(x)[None], generator=torch.Generator().manual_seed(seed), values=values
    ).y
    return y[0].numpy()


def run_receiver(rx, y, chunk):
    events = []
    for i in range(0, len(y), chunk):
        events += rx.push(y[i : i + chunk])
    return events
