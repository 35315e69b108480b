"""Simulated Pluto behaviour beyond the contract."""

import itertools

import numpy as np
import pytest

from hil.radio import RadioConfig, SimConfig
from hil.radio.sim import SimEngine, SimRadio


def _cfg(**sim):
    return RadioConfig(backend="sim", rx_buffer_size=4096, sim=SimConfig(**sim))


def test_stale_buffers_at_start_then_flushed():
    eng = SimEngine(_cfg(noise_dbfs=-60.0, stale_buffers=4))
    stale = [eng.rx(4096) for _ in range(4)]
    assert all(b.counter == -1 for b in stale)
    assert np.mean(np.abs(stale[0].samples)) > 0.1  # garbage at a very different level
    fresh = eng.rx(4096)
    assert fresh.counter == 0 and np.sqrt(np.mean(np.abs(fresh.samples) ** 2)) < 0.01
    r = SimRadio(_cfg(noise_dbfs=-60.0))
    assert r.rx().counter == 0  # the backend flushed them


def test_adc_is_12_bit_and_saturates():
    r = SimRadio(_cfg(noise_dbfs=-60.0))
    r.tx(np.full(20_000, 0.7 + 0.7j, np.complex64))
    r.set_rx_gain(71.0)  # +31 dB over the reference: hard saturation
    x = np.concatenate([r.rx().samples for _ in range(6)])
    codes = x * 2048
    np.testing.assert_array_equal(codes.real, np.round(codes.real))
    assert codes.real.max() == 2047 and codes.real.min() >= -2048


def test_injected_drops_are_flagged_and_counted():
    r = SimRadio(_cfg(drop_every=3, drop_samples=1000))
    blocks = [r.rx() for _ in range(9)]
    lost = [b.lost for b in blocks]
    assert lost == [0, 0, 1000, 0, 0, 1000, 0, 0, 1000]
    for a, b in itertools.pairwise(blocks):
        assert b.counter == a.counter + len(a.samples) + b.lost
    assert all(b.flags & 0x21 for b in blocks if b.lost)


def test_xo_offset_gives_cfo():
    from hil.phy import FrameBuilder, FrameReceiver, Header, to_full_scale

    r = SimRadio(
        RadioConfig(
            backend="sim",
            lo_hz=2.4e9,
            rx_buffer_size=8192,
            sim=SimConfig(ppm=20.0, noise_dbfs=-50.0),
        )
    )
    fb = FrameBuilder()
    x, _ = to_full_scale(
        fb.build_numpy(
            np.ones(48, np.complex64),
            Header(seq=0, item_id=0, fingerprint=b"12345678", payload_len=48, shape=(3, 8, 8)),
        )
    )
    r.tx(x)
    fr = FrameReceiver()
    ev = [e for _ in range(3) for e in fr.push(r.rx().samples)]
    assert len(ev) == 1 and abs(ev[0].cfo_hz - 48e3) < 500  # 20 ppm of 2.4 GHz


@pytest.mark.parametrize("mode", ["slow_attack", "fast_attack"])
def test_agc_settles_near_minus_12_dbfs(mode):
    r = SimRadio(
        RadioConfig(
            backend="sim", rx_gain_mode=mode, rx_buffer_size=4096, sim=SimConfig(noise_dbfs=-40.0)
        )
    )
    r.tx(np.full(4096 * 200, 0.25 + 0j, np.complex64), cyclic=False)
    for _ in range(150):
        b = r.rx()
    rms = np.sqrt(np.mean(np.abs(b.samples) ** 2))
    assert abs(20 * np.log10(rms) + 12) < 2.0
