"""One model of the world: the simulated radio's impairments are the training chain's stages.

For each impairment the sim shares with hil.channel (the XO's CFO ramp, oscillator phase
noise, the RX mixer's IQ imbalance, the DC offset), the sim's sample-level output equals the
training chain's stage on the same input with the same realisation (the phase-noise steps and
the thermal noise are drawn from a copy of the sim's own generator)."""

import copy
import math

import numpy as np
import pytest
import torch

from hil.channel import ChannelChain
from hil.radio.config import RadioConfig, SimConfig
from hil.radio.sim import ADC_FS, REF_GAIN_DB, SimEngine


def stage(table):
    """The training chain's module for one stage table (as hil train builds it)."""
    (module,) = ChannelChain.from_tables([table]).stages.values()
    return module


def engine(**sim):
    base = dict(channel="awgn", ppm=0.0, dc_offset_dbfs=None, iq_gain_db=0.0, iq_phase_deg=0.0)
    base["phase_noise_hz"] = 0.0
    base.update(sim)
    return SimEngine(RadioConfig(sim=SimConfig(**base)))


def signal(n=8192, seed=0):
    rng = np.random.default_rng(seed)
    return ((rng.normal(size=n) + 1j * rng.normal(size=n)) * 0.05).astype(np.complex64)


def expected(e, sig, stages, phase0=0.0):
    """The training chain's stages on sig, with the realisation the sim draws next."""
    rng = copy.deepcopy(e.rng)
    n, s = len(sig), e.cfg.sim
    x = torch.from_numpy(sig.astype(np.complex64))[None]
    kinds = [t["kind"] for t in stages]
    if "phase_noise" in kinds:
        inc = rng.standard_normal(n, dtype=np.float32)
        inc *= np.float32(math.sqrt(2 * math.pi * s.phase_noise_hz / e.cfg.sample_rate_hz))
        pn = stage(next(t for t in stages if t["kind"] == "phase_noise"))
        x = pn(x, phase0=phase0, increments=torch.from_numpy(inc)[None]).y
    noise = rng.standard_normal(2 * n, dtype=np.float32).view(np.complex64)
    noise *= np.float32(10 ** (s.noise_dbfs / 20) / math.sqrt(2))
    g = 10 ** ((e.gain_db - REF_GAIN_DB) / 20)
    x = (x + torch.from_numpy(noise)[None]) * np.float32(g * ADC_FS)
    for t in stages:
        if t["kind"] == "iq_imbalance":
            x = stage(t)(x).y
        if t["kind"] == "dc_offset":
            x = stage(t)(x, offset=complex(e.dc)).y
    return x[0].numpy()


def test_iq_imbalance_is_the_training_stage():
    e = engine(iq_gain_db=1.2, iq_phase_deg=5.0)
    sig = signal()
    want = expected(e, sig, [{"kind": "iq_imbalance", "gain_db": 1.2, "phase_deg": 5.0}])
    np.testing.assert_allclose(e.impair(sig), want, rtol=0, atol=1e-3)
    # and it is an IQ imbalance: an image at -f
    tone = np.exp(2j * np.pi * 0.1 * np.arange(4096)).astype(np.complex64) * 0.1
    spec = np.abs(
        np.fft.fft(engine(iq_gain_db=1.2, iq_phase_deg=5.0, noise_dbfs=-120.0).impair(tone))
    )
    assert spec[4096 - 410] > 1e-3 * spec[410]


def test_dc_offset_is_the_training_stage():
    e = engine(dc_offset_dbfs=-30.0)
    sig = signal(seed=1)
    want = expected(e, sig, [{"kind": "dc_offset"}])
    np.testing.assert_allclose(e.impair(sig), want, rtol=0, atol=1e-3)
    assert abs(abs(e.dc) / ADC_FS - 10 ** (-30 / 20)) < 1e-9


@pytest.mark.parametrize("fs", [4e6, 2.5e6])
def test_phase_noise_is_the_training_stage_and_continuous_across_blocks(fs):
    base = dict(channel="awgn", ppm=0.0, dc_offset_dbfs=None, iq_gain_db=0.0, iq_phase_deg=0.0)
    e = SimEngine(RadioConfig(sample_rate_hz=fs, sim=SimConfig(phase_noise_hz=500.0, **base)))
    table = {"kind": "phase_noise", "linewidth_hz": 500.0, "sample_rate_hz": fs}
    sig = signal(seed=2)
    # where the training stage's walk ends after block 1, from the same increments
    inc = copy.deepcopy(e.rng).standard_normal(len(sig), dtype=np.float32)
    inc *= np.float32(math.sqrt(2 * math.pi * 500.0 / fs))
    x = torch.from_numpy(sig)[None]
    end = float(
        stage(table)(x, phase0=0.0, increments=torch.from_numpy(inc)[None]).record["phase"][0, -1]
    )
    want = expected(e, sig, [table], phase0=0.0)
    np.testing.assert_allclose(e.impair(sig), want, rtol=0, atol=1e-3)
    want2 = expected(e, sig, [table], phase0=end)  # block 2 starts where block 1 ended
    np.testing.assert_allclose(e.impair(sig), want2, rtol=0, atol=1e-3)
    assert 0 <= e._pn_phase < 2 * math.pi


@pytest.mark.parametrize("start", [0, 123_456_789])
def test_the_xo_cfo_ramp_is_the_training_stage(start):
    e = engine(ppm=10.0)
    cfo = 10.0e-6 * e.cfg.lo_hz
    x = signal(seed=3).astype(np.complex128)
    got = e._through_channel(x, start)  # TX side: DAC, gain, (no channel), the XO's CFO
    base = e.dac(x) * 10 ** ((e.cfg.tx_gain_db + e.cfg.sim.path_gain_db) / 20)
    from hil.channel import TimingOffset

    t = torch.from_numpy(np.concatenate([base, np.zeros(32)]))[None]
    t = TimingOffset(sfo_ppm=10.0)(t, delay=0.0).y
    cfo_stage = stage({"kind": "cfo", "sample_rate_hz": 4e6, "random_phase": False})
    want = cfo_stage(t, cfo_hz=cfo, phase0=0.0, start=start).y[0].numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
    assert cfo == pytest.approx(24_000.0)  # 10 ppm at 2.4 GHz
