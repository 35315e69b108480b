"""Issue 19's delivery goals, measured on seeded streams with the receiver as hil rx runs it
(one receiver for the stream, expecting the model fingerprint): frames delivered (detected
and header read, right) >= 99 % at 0 dB AWGN, >= 50 % at -3 dB AWGN, >= 95 % on the
two-Pluto profile at 0 dB of the frame's own SNR. scripts/bench_phy.py measures the same on
more frames (100 / 63.95 / 98.4 %); the tolerance stated per test covers the smaller
samples here."""

import math

import numpy as np
import torch

from hil.channel import ChannelChain, profile
from hil.phy import MAX_PAYLOAD, FrameBuilder, FrameReceiver, OfdmConfig

from .helpers import FP, impair, make_frames, make_stream, run_receiver

CFG = OfdmConfig()


def _delivered(y, headers, starts, near=2):
    fr = FrameReceiver(CFG, fingerprint=FP)
    truth = dict(zip(starts, headers, strict=True))
    ok = 0
    for e in run_receiver(fr, y, 1 << 14):
        hit = [s for s in truth if 0 <= e.frame_start - s <= near]
        if e.status == "ok":
            assert hit and e.header == truth[hit[0]], "a header read wrong"
            ok += 1
    return ok


def _awgn(snr_db, n, seed):
    rng = np.random.default_rng(seed)
    frames, headers, _ = make_frames(FrameBuilder(CFG), rng, n, k=96)
    x, starts = make_stream(frames, rng, gap=(300, 900))
    y = impair(x, snr_db=snr_db, cfo_hz=float(rng.uniform(-20e3, 20e3)), seed=seed)
    return _delivered(y, headers, starts)


def test_awgn_0_db_delivers_99_percent():
    """200 frames at 0 dB (all 200 read when written): the bench read 100 % of 2000; at most
    2 of 200 may fail."""
    assert _awgn(0.0, 200, 31) >= 198


def test_awgn_minus_3_db_delivers_half():
    """200 frames at -3 dB (128 read when written): the bench read 63.95 % of 2000 (binomial
    SE of 200 frames: 3.4 points, so 50 % is 4 SE below)."""
    assert _awgn(-3.0, 200, 32) >= 100


def _two_pluto_at_own_snr(snr_db, draws, per_draw, seed):
    """``draws`` channel draws of the two-Pluto profile, each scaled to unit energy (so every
    frame's own SNR is ``snr_db``) and carrying ``per_draw`` frames, one after another in
    one stream."""
    rng = np.random.default_rng(seed)
    fb = FrameBuilder(CFG)
    stages = [{"kind": "timing", "half_width": 8}, *profile("two_pluto", CFG.sample_rate_hz)]
    d = np.arange(8)
    p = np.exp(-d / 2.0) / np.exp(-d / 2.0).sum()  # the profile's exponential taps
    parts, headers, starts, pos = [], [], [], 0
    for k in range(draws):
        frames, hs, _ = make_frames(fb, rng, per_draw, k=96)
        x, st = make_stream(frames, rng, gap=(300, 900))
        taps = np.sqrt(p / 2) * (rng.normal(size=8) + 1j * rng.normal(size=8))
        taps /= np.sqrt(np.sum(np.abs(taps) ** 2))
        chain = ChannelChain.from_tables(stages)
        y = chain(
            torch.from_numpy(x)[None],
            snr_db=snr_db,
            generator=torch.Generator().manual_seed(seed * 1000 + k),
            values={
                "timing": {"delay": float(rng.uniform(0, 1))},
                "multipath": {"taps": torch.as_tensor(taps[None], dtype=torch.complex64)},
            },
        )
        got = y.record["multipath"]["taps"]
        assert math.isclose(float((got.abs() ** 2).sum()), 1.0, rel_tol=1e-5)
        parts.append(y.y[0].numpy())
        headers += hs
        starts += [pos + s for s in st]
        pos += len(x)
    return np.concatenate(parts), headers, starts


def test_two_pluto_0_db_own_snr_delivers_95_percent():
    """300 frames, a new channel every 2, every frame at 0 dB of its own: the bench read
    98.4 % (95 % interval 97.5-99.2 %) of the 872 frames whose draw lies within 0.5 dB of
    0 dB; the goal, 95 %, is about 3 standard errors of 300 clustered frames below that.
    A frame counts found within 12 samples after its start (the receiver's start follows
    the multipath's strong taps). When written: 292 of 300 read; the same frames at -1 dB:
    276, below the bound, so a 1 dB loss fails this test."""
    y, headers, starts = _two_pluto_at_own_snr(0.0, 150, 2, 33)
    assert _delivered(y, headers, starts, near=12) >= 285


def test_long_frames_round_trip_through_the_two_pluto_impairments():
    """Whole-image frames (MAX_PAYLOAD symbols, 60 OFDM symbols after the header) back to
    back through the two-Pluto profile at 15 dB: every frame decoded, and the pilots hold
    the CFO, phase noise and clock over the whole frame, so the last tenth of each payload is
    equalised as well as the first (measured: 13.8-14.6 dB, first and last tenth within 0.6
    dB of each other)."""
    rng = np.random.default_rng(34)
    fb = FrameBuilder(CFG)
    frames, headers, payloads = make_frames(fb, rng, 4, k=MAX_PAYLOAD)
    x, starts = make_stream(frames, rng, gap=(120, 121))
    stages = [{"kind": "timing", "half_width": 8}, *profile("two_pluto", CFG.sample_rate_hz)]
    y = ChannelChain.from_tables(stages)(
        torch.from_numpy(x)[None],
        snr_db=15.0,
        generator=torch.Generator().manual_seed(34),
        values={"timing": {"delay": 0.4}},
    )
    events = run_receiver(FrameReceiver(CFG, fingerprint=FP), y.y[0].numpy(), 1 << 14)
    ok = [e for e in events if e.status == "ok"]
    assert [e.header for e in ok] == headers
    assert all(0 <= e.frame_start - s <= 12 for e, s in zip(ok, starts, strict=True))
    tenth = MAX_PAYLOAD // 10
    for e, s in zip(ok, payloads, strict=True):
        err = np.abs(e.symbols - s) ** 2
        first = -10 * np.log10(err[:tenth].mean())
        last = -10 * np.log10(err[-tenth:].mean())
        assert first > 10 and last > 10 and abs(first - last) < 1.5, (first, last)
