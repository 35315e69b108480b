"""Frames back to back with no gap: an echo detected late in a payload must not hide the
frame right behind it (found while writing docs/frame-format.md)."""

import numpy as np
import pytest

from hil.phy import FrameBuilder, FrameReceiver, Header, OfdmConfig


@pytest.mark.parametrize("gap", [0, 1, 37])
@pytest.mark.parametrize("payload", ["pulses", "random"])
def test_frames_back_to_back_all_decode(gap, payload):
    cfg = OfdmConfig()
    fb = FrameBuilder(cfg)
    k = 480
    if payload == "pulses":  # exp(j 2 pi i / 7): every OFDM symbol a sharp pulse (PAPR 15 dB)
        s = np.exp(2j * np.pi * np.arange(k) / 7).astype(np.complex64)
    else:
        rng = np.random.default_rng(5)
        s = ((rng.normal(size=k) + 1j * rng.normal(size=k)) / np.sqrt(2)).astype(np.complex64)
    parts = [np.zeros(500, np.complex64)]
    for seq in range(4):
        h = Header(seq, seq, bytes(range(1, 9)), k, (3, 32, 32))
        parts += [fb.build_numpy(s, h), np.zeros(gap, np.complex64)]
    x = np.concatenate([*parts, np.zeros(2000, np.complex64)])
    fr = FrameReceiver(cfg)
    events = []
    for a in range(0, len(x), 4096):
        events += fr.push(x[a : a + 4096])
    assert [(e.status, e.header.seq) for e in events] == [("ok", i) for i in range(4)]
    for e in events:
        assert np.mean(np.abs(e.symbols - s) ** 2) < 1e-3
