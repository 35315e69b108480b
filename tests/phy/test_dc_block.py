"""A residual DC offset near the signal's level (a radio's, fixed in ADC codes, at low RX gain)
must not hide frames: the stream receiver removes a slow running mean before detection."""

import numpy as np
import pytest

from hil.phy import FrameBuilder, FrameReceiver, Header, OfdmConfig


def stream(dc: complex, n_frames=8, seed=0):
    cfg = OfdmConfig()
    fb = FrameBuilder(cfg)
    rng = np.random.default_rng(seed)
    k = 480
    sent, parts = [], [np.zeros(200_000, np.complex64)]  # the radio streams before frames come
    for seq in range(n_frames):
        s = ((rng.normal(size=k) + 1j * rng.normal(size=k)) / np.sqrt(2)).astype(np.complex64)
        sent.append(s)
        parts += [
            fb.build_numpy(s, Header(seq, seq, bytes(8), k, (3, 32, 32))),
            np.zeros(3000, np.complex64),
        ]
    x = np.concatenate(parts)
    x = x + (rng.normal(size=(len(x), 2)) @ [1, 1j] * 0.05 / np.sqrt(2)).astype(
        np.complex64
    )  # 26 dB
    return (x + np.complex64(dc)).astype(np.complex64), sent


def receive(x, **kw):
    fr = FrameReceiver(OfdmConfig(), **kw)
    return [e for a in range(0, len(x), 16384) for e in fr.push(x[a : a + 16384])]


@pytest.mark.parametrize("dc", [0.0, 0.7 * np.exp(1j), 2.0 + 1j])
def test_frames_decode_under_a_dc_offset(dc):
    x, sent = stream(dc)
    ev = receive(x)
    assert [(e.status, e.header.seq) for e in ev] == [("ok", i) for i in range(len(sent))]
    for e, s in zip(ev, sent, strict=True):
        assert np.mean(np.abs(e.symbols - s) ** 2) < 0.02  # ~ the 26 dB noise, DC gone
        assert e.snr_db > 20


def test_without_the_dc_block_a_strong_offset_hides_frames():
    """The check above is the block's doing: switched off, the same stream loses frames."""
    x, sent = stream(2.0 + 1j)
    ok = [e for e in receive(x, dc_block=False) if e.status == "ok"]
    assert len(ok) < len(sent)


def test_after_a_gap_the_dc_estimate_and_settings_carry_over():
    x, _ = stream(2.0 + 1j, n_frames=1)
    fr = FrameReceiver(OfdmConfig(), threshold=0.4, dc_block=True)
    fr.push(x[:150_000])
    nxt = fr.after_gap()
    assert nxt._dc == fr._dc and abs(nxt._dc - (2 + 1j)) < 0.2
    assert (nxt.rx, nxt.sync.threshold, nxt.dc_block) == (fr.rx, 0.4, True)
    assert nxt.position == 0 and nxt.stats.samples == 0  # the stream itself starts afresh
