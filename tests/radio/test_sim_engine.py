"""The simulated Pluto's device model, piece by piece: the DAC and ADC converters, the burst
timeline (latency, backlog, ENSM, cyclic buffers, tones), the RX front end's levels (thermal
noise, gain, AGC, DC), drops and stale buffers, and the backend around the engine."""

import math

import numpy as np
import pytest

from hil.radio import RadioConfig, RadioError, SimConfig
from hil.radio.base import BlockFlag
from hil.radio.sim import ADC_FS, LATENCY, REF_GAIN_DB, SimEngine, SimRadio, _bursts

QUIET = dict(noise_dbfs=-200.0, stale_buffers=0)


def _eng(radio=None, **sim):
    return SimEngine(RadioConfig(backend="sim", **(radio or {}), sim=SimConfig(**sim)))


def _rms_dbfs(x):
    return 10 * math.log10(float(np.mean(np.abs(x) ** 2)))


def test_bursts_split_at_gaps_of_min_gap_zeros():
    x = np.zeros(2000, np.complex64)
    x[10:20] = 1
    x[20 + 255 : 300] = 1  # 255 zeros between: one burst
    x[300 + 256 : 600] = 1j  # 256 zeros: a new burst
    x[1999] = -1
    assert _bursts(x) == [(10, 300), (556, 600), (1999, 2000)]
    assert _bursts(x, min_gap=255) == [(10, 20), (275, 300), (556, 600), (1999, 2000)]
    assert _bursts(np.zeros(10)) == []
    assert _bursts(np.ones(3)) == [(0, 3)]
    assert all(isinstance(v, int) for b in _bursts(x) for v in b)


def test_dac_keeps_the_top_12_bits_of_the_int16_at_2_14_drive():
    e = _eng(**QUIET)
    lsb = 16 / 2**14  # one 12-bit step at the DAC's input scale
    x = np.array([0.5, 17 / 2**14, -17 / 2**14, 15.4 / 2**14, 15.6 / 2**14, 3.0, -3.0])
    got = e.dac(x + 1j * x[::-1])
    want = np.array([0.5, lsb, -2 * lsb, 0.0, lsb, 32752 / 2**14, -2.0])
    np.testing.assert_array_equal(got.real, want)
    np.testing.assert_array_equal(got.imag, want[::-1])
    assert got.dtype == np.complex128


def test_adc_rounds_saturates_and_scales_to_full_scale():
    v = np.array([0.4 + 0.6j, -0.6 - 0.4j, 2047.4 + 5000j, -2048.6 - 9999j, 100.5 + 101.5j])
    out = SimEngine._adc(v)
    assert out.dtype == np.complex64
    codes = out * 2048
    np.testing.assert_array_equal(codes.real, [0, -1, 2047, -2048, 100])
    np.testing.assert_array_equal(codes.imag, [1, 0, 2047, -2048, 102])  # half to even


def test_tx_lands_after_the_latency_in_device_time_and_queues_behind_the_last_burst():
    r = SimRadio(RadioConfig(backend="sim", rx_buffer_size=4096, sim=SimConfig(**QUIET)))
    e = r.engine
    assert e.rx_count == 4 * 4096  # the backend flushed the kernel buffers
    burst = np.full(1000, 0.5, np.complex64)
    r.tx(burst)
    t0 = e.rx_count + LATENCY
    assert r.last_truth["rx_offset"] == t0 and r.last_truth["frame_offset"] == t0
    assert e.tx_time == t0 + 1000 and r.tx_backlog == LATENCY + 1000 and r.tx_active
    r.tx(burst)  # queued behind the first
    assert r.last_truth["rx_offset"] == t0 + 1000 and r.tx_backlog == LATENCY + 2000
    x = np.concatenate([r.rx().samples for _ in range(2)])
    on = np.flatnonzero(np.abs(x) > 0.1)
    assert on[0] == LATENCY and on[-1] == LATENCY + 1999 and len(on) == 2000
    assert r.tx_backlog == 0 and not r.tx_active
    e.tx_dac(np.ones(10), now=e.rx_count + 500)  # the wall clock ahead of the RX count
    assert e.last_truth["rx_offset"] == e.rx_count + 500 + LATENCY
    assert r.wait_tx() is True
    r.close()
    assert not r.tx_active and e.tx_backlog == 0
    with pytest.raises(RadioError, match="closed"):
        r.tx(burst)
    with pytest.raises(RadioError, match="closed"):
        e.rx(10)
    with pytest.raises(RadioError, match="wait_tx on a closed radio"):
        r.wait_tx()


def test_a_device_buffer_is_split_into_bursts_and_silence():
    e = _eng(**QUIET)
    buf = np.zeros(5000, np.complex128)
    buf[100:200] = 0.5
    buf[3000:3100] = 0.5j
    e.tx_dac(buf)
    # each burst with room for the channel's tail (multipath, resampling)
    assert [(s, len(b)) for s, b in e.bursts] == [(LATENCY + 100, 132), (LATENCY + 3000, 132)]
    assert e.tx_time == LATENCY + 5000
    e.advance(LATENCY + 231)  # the first burst's last sample (its tail included) not yet read
    assert len(e.bursts) == 2 and e.rx_count == LATENCY + 231
    e.advance(1)
    assert len(e.bursts) == 1
    e.advance(3000)
    assert len(e.bursts) == 0
    e.tx_dac(np.zeros(0))
    assert e.tx_time == LATENCY + 5000  # nothing queued
    with pytest.raises(ValueError, match="n >= 1"):
        e.rx(0)


def test_ensm_off_radiates_and_receives_nothing():
    e = _eng(noise_dbfs=-40.0, stale_buffers=0)
    e.enabled = False
    e.tx_dac(np.ones(1000))
    assert not e.bursts and e.tx_time == LATENCY + 1000
    b = e.rx(4096)
    assert not np.any(b.samples) and b.counter == 0 and e.rx_count == 4096


def test_cyclic_buffer_repeats_from_its_start():
    e = _eng(**QUIET)
    wave = np.array([0.25, 0.5, -0.25, -0.5] * 25, np.complex128)  # 100 samples
    e.tx_dac(wave, cyclic=True)
    assert e.tx_active and e.cyclic[0] == LATENCY
    x = e.rx(LATENCY + 1000).samples
    assert not np.any(x[:LATENCY])
    got = x[LATENCY:].real * ADC_FS
    ref = np.tile(wave.real, 10) * ADC_FS
    assert np.corrcoef(got, ref)[0, 1] > 0.999
    e.stop_cyclic()
    assert not e.tx_active and not np.any(e.rx(500).samples)
    e.tx_dac(np.zeros(0), cyclic=True)  # an empty cyclic buffer sends nothing
    assert not np.any(e.rx(500).samples)


def test_digital_loopback_returns_the_dac_codes():
    e = _eng(radio={"loopback": 1}, noise_dbfs=-20.0, stale_buffers=0, ppm=10.0)
    x = np.array([0.5, -0.25j, 1.5, 17 / 2**14, 2.5], np.complex128)
    e.tx_dac(x)
    assert e.last_truth == {"rx_offset": LATENCY, "n": 5, "loopback": 1}
    got = e.rx(LATENCY + 5).samples[LATENCY:]
    # the DAC's 12-bit codes (int16 >> 4) straight into the RX path, no noise: full scale 1.0
    # is 1024 codes, the DAC clips at 2.0 (32767 >> 4 = 2047)
    np.testing.assert_array_equal(got * ADC_FS, [512, -256j, 1536, 1, 2047])


def test_a_tx_lo_outside_the_rx_band_is_not_received():
    e = _eng(**QUIET)
    e.lo_offset_hz = e.cfg.sample_rate_hz / 2
    e.tx_dac(np.ones(100))
    assert e.last_truth["out_of_band"] is True
    assert not np.any(e.rx(LATENCY + 100).samples)
    e.lo_offset_hz = e.cfg.sample_rate_hz / 2 - 1
    e.tx_dac(np.full(100, 0.5))
    assert "out_of_band" not in e.last_truth and np.any(e.rx(LATENCY + 100).samples)


def test_received_level_follows_tx_gain_path_gain_and_rx_gain():
    def level(tx_gain, path, rx_gain):
        e = _eng(
            radio={"tx_gain_db": tx_gain, "rx_gain_db": rx_gain},
            path_gain_db=path,
            **QUIET,
        )
        e.tx_dac(np.full(4000, 0.1, np.complex128))
        return _rms_dbfs(e.rx(LATENCY + 4000).samples[LATENCY + 100 : LATENCY + 3900])

    # the RX gain makes up the losses, so the ADC's rounding stays small (about 200 codes)
    ref = level(0.0, 0.0, REF_GAIN_DB)
    assert abs(ref - 20 * math.log10(0.1)) < 0.05  # full scale in, full scale out at 40 dB
    assert abs(level(-10.0, 0.0, REF_GAIN_DB + 10) - ref) < 0.05
    assert abs(level(0.0, -20.0, REF_GAIN_DB + 20) - ref) < 0.05
    assert abs(level(-10.0, -20.0, REF_GAIN_DB + 24) - (ref - 6)) < 0.05
    e = _eng(radio={"tx_gain_db": -10.0}, path_gain_db=-20.0, **QUIET)
    e.tx_dac(np.full(4000, 0.1, np.complex128))
    # against the noise floor; the DAC takes 0.1 to 1632 / 2**14 (-0.034 dB)
    assert abs(e.last_truth["snr_db"] - (-20 - 30 + 200)) < 0.05
    assert e.last_truth["cfo_hz"] == 0.0 and e.last_truth["delays"] == [0]


@pytest.mark.parametrize("gain", [REF_GAIN_DB, REF_GAIN_DB + 6])
def test_thermal_noise_is_noise_dbfs_at_the_reference_gain(gain):
    e = _eng(radio={"rx_gain_db": gain}, noise_dbfs=-40.0, stale_buffers=0)
    x = e.rx(200_000).samples
    assert abs(_rms_dbfs(x) - (-40.0 + gain - REF_GAIN_DB)) < 0.1
    assert abs(np.mean(x)) < 1e-3  # no DC unless asked for
    assert abs(np.var(x.real) - np.var(x.imag)) / np.var(x) < 0.03  # circular


def test_dc_offset_level_and_a_blocks_mean():
    e = _eng(noise_dbfs=-60.0, dc_offset_dbfs=-30.0, stale_buffers=0)
    assert abs(abs(e.dc) - 10 ** (-30 / 20) * ADC_FS) < 1e-9
    x = e.rx(100_000).samples
    assert abs(20 * math.log10(abs(np.mean(x))) - (-30.0)) < 0.1
    assert abs(np.mean(x) * ADC_FS - e.dc) < 0.5


def test_manual_gain_is_clipped_and_agc_steps():
    e = _eng(radio={"rx_gain_db": 30.0}, **QUIET)
    e.set_gain(100)
    assert e.gain_db == 71.0
    e.set_gain(-10)
    assert e.gain_db == -3.0
    a = _eng(radio={"rx_gain_mode": "slow_attack"}, **QUIET)
    assert a.gain_db == 71.0  # the AGC starts high
    a.set_gain(10)  # the driver ignores it outside manual mode
    assert a.gain_db == 71.0
    loud = np.full(1000, 0.5 * ADC_FS)  # -6 dBFS: 6 dB too loud
    a._agc(loud)
    assert a.gain_db == 68.0  # the slow AGC steps down at most 3 dB a block
    quiet = np.full(1000, 10 ** (-22 / 20) * ADC_FS)  # 10 dB too quiet
    a._agc(quiet)
    assert a.gain_db == 69.0  # and up at most 1 dB
    a.gain_db = 70.5
    a._agc(quiet)
    assert a.gain_db == 71.0  # never past the range
    f = _eng(radio={"rx_gain_mode": "fast_attack"}, **QUIET)
    f._agc(loud)
    assert f.gain_db == pytest.approx(71.0 - 12.0 - 20 * math.log10(0.5))  # all at once
    f._agc(np.zeros(1000))
    assert f.gain_db == 71.0
    m = _eng(radio={"rx_gain_db": 20.0}, **QUIET)
    m._agc(loud)
    assert m.gain_db == 20.0


def test_drops_and_stale_buffers():
    e = _eng(noise_dbfs=-60.0, stale_buffers=2, drop_every=2, drop_samples=100)
    stale = [e.rx(1000) for _ in range(2)]
    assert [b.counter for b in stale] == [-1, -1] and e.rx_count == 0
    b1, b2, b3 = (e.rx(1000) for _ in range(3))
    assert (b1.counter, b1.lost, b1.flags) == (0, 0, 0)
    assert (b2.counter, b2.lost) == (1100, 100)
    assert b2.flags == BlockFlag.OVERFLOW | BlockFlag.LOST
    assert (b3.counter, b3.lost) == (2100, 0)
    e.inject_drop(7)
    e.inject_drop(3)
    b4 = e.rx(1000)
    assert (b4.counter, b4.lost) == (3100 + 10 + 100, 110)  # both, and the periodic drop


def test_raw_rx_is_complex128_adc_codes():
    e = _eng(noise_dbfs=-20.0, stale_buffers=0)
    raw, blk = e.raw_rx(1000)
    assert raw.dtype == np.complex128 and blk.counter == 0
    np.testing.assert_array_equal(raw, blk.samples.astype(np.complex128) * 2048)
    np.testing.assert_array_equal(raw.real, np.round(raw.real))


def test_xo_offset_in_truth_and_retune():
    r = SimRadio(
        RadioConfig(backend="sim", lo_hz=1e9, rx_buffer_size=1024, sim=SimConfig(ppm=5.0, **QUIET))
    )
    assert r.engine.cfo_hz == pytest.approx(5e3)
    r.engine.lo_offset_hz = 1e3  # the TX LO apart from the RX LO (the twin's two LOs)
    r.tx(np.full(100, 0.5, np.complex64))
    assert r.last_truth["cfo_hz"] == pytest.approx(5e3)  # the XO's part
    x = np.concatenate([r.rx().samples for _ in range(4)])
    on = x[np.abs(x) > 0.1]
    f = np.angle(np.mean(on[1:] * np.conj(on[:-1]))) / (2 * math.pi) * r.cfg.sample_rate_hz
    assert abs(f - 6e3) < 50
    new = RadioConfig(backend="sim", lo_hz=2e9, rx_gain_db=50.0, rx_buffer_size=1024, sim=r.cfg.sim)
    r._retune(new, {"lo_hz", "rx_gain_db"})
    assert r.engine.cfo_hz == pytest.approx(10e3) and r.rx_gain_db == 50.0
    r._retune(RadioConfig(backend="sim", lo_hz=3e9, sim=r.cfg.sim), {"rx_gain_db"})
    assert r.engine.cfo_hz == pytest.approx(10e3)  # the LO did not change


def test_backend_refusals():
    with pytest.raises(RadioError, match="SimRadio needs backend 'sim', got 'pluto'"):
        SimRadio(RadioConfig(backend="pluto", uri="ip:192.168.2.1"))
    r = SimRadio(RadioConfig(backend="sim", rx_gain_mode="fast_attack", sim=SimConfig(**QUIET)))
    with pytest.raises(RadioError, match="set by the AGC in mode 'fast_attack'"):
        r.set_rx_gain(10.0)
    m = SimRadio(RadioConfig(backend="sim", rx_buffer_size=2048, sim=SimConfig(**QUIET)))
    m.set_rx_gain(12.0)
    assert m.rx_gain_db == 12.0
    assert len(m.rx().samples) == 2048 and len(m.rx(100).samples) == 100
    m.inject_drop(5)
    assert m.rx().lost == 5
    m.configure(RadioConfig(backend="sim", rx_buffer_size=1024, sim=SimConfig(**QUIET)))
    assert m.engine.rx_count == 4 * 1024 and m.engine.stale_left == 0


FS = 2.5e6
CHANNEL = [
    {"kind": "multipath", "profile": "exponential", "n_taps": 4, "decay_samples": 1.5},
    {"kind": "cfo", "max_cfo_hz": 3000.0},
]


def test_a_burst_through_the_channel_and_its_truth():
    """The received burst is the training chain's output on the DAC's samples (the same draw,
    from a copy of the engine's generator), and the truth names what it drew."""
    import torch

    from hil.channel import ChannelChain

    e = _eng(radio={"sample_rate_hz": FS, "tx_gain_db": -6.0}, channel=CHANNEL, **QUIET)
    gen = torch.Generator()
    gen.set_state(e.gen.get_state())
    rng = np.random.default_rng(0)
    x = np.zeros(3000, np.complex128)
    x[200:2200] = (rng.normal(size=2000) + 1j * rng.normal(size=2000)) * 0.1
    e.tx_dac(x)
    truth = e.last_truth
    chain = ChannelChain.from_tables(e.cfg.sim.stages(FS))
    t = torch.from_numpy(np.r_[e.dac(x[200:2200]) * 10 ** (-6 / 20), np.zeros(32)])[None]
    out = chain(t, generator=gen)
    rec = {k: v for r in out.record.values() for k, v in r.items()}
    taps = rec["taps"][0].abs().numpy() ** 2
    assert truth["rx_offset"] == LATENCY + 200 == truth["frame_offset"] and truth["n"] == 2000
    assert truth["cfo_hz"] == pytest.approx(float(rec["cfo_hz"][0]), abs=1e-9)
    assert 0 < abs(truth["cfo_hz"]) <= 3000
    assert truth["delays"] == [0, 1, 2, 3]
    assert truth["tap_power_db"] == [round(10 * math.log10(p), 2) for p in taps]
    y = out.y[0].numpy()
    want_snr = 10 * math.log10(np.mean(np.abs(y[:2000]) ** 2)) + 200
    assert truth["snr_db"] == pytest.approx(want_snr, abs=1e-9)
    got = e.rx(LATENCY + 2400).samples[LATENCY + 200 :]
    np.testing.assert_allclose(got[: len(y)], y, rtol=0, atol=0.75 / 2048)  # the ADC's step
    # the same seed draws the same world
    e2 = _eng(radio={"sample_rate_hz": FS, "tx_gain_db": -6.0}, channel=CHANNEL, **QUIET)
    e2.tx_dac(x)
    assert e2.last_truth == truth


def test_xo_cfo_is_added_to_the_channels_in_truth():
    e = _eng(radio={"lo_hz": 1e9}, channel=[{"kind": "cfo", "max_cfo_hz": 500.0}], ppm=3.0, **QUIET)
    e.tx_dac(np.full(500, 0.2))
    chain_cfo = e.last_truth["cfo_hz"] - 3e3
    assert 0 < abs(chain_cfo) <= 500
    assert e.last_truth["delays"] == [0] and e.last_truth["tap_power_db"] == [0.0]


def test_the_world_is_seeded():
    def run(seed):
        e = _eng(
            channel=CHANNEL, noise_dbfs=-30.0, dc_offset_dbfs=-40.0, seed=seed, stale_buffers=1
        )
        e.tx_dac(np.full(1000, 0.3))
        return np.concatenate([e.rx(2048).samples for _ in range(3)]), e.last_truth

    a, ta = run(5)
    b, tb = run(5)
    c, _ = run(6)
    np.testing.assert_array_equal(a, b)
    assert ta == tb and not np.array_equal(a, c)
    # the DC offset's phase is uniform over seeds
    ph = [_eng(dc_offset_dbfs=-30.0, seed=s).dc for s in range(400)]
    assert abs(np.mean(np.exp(1j * np.angle(ph)))) < 0.1


def test_stale_buffers_are_loud_garbage_of_the_block_size():
    e = _eng(noise_dbfs=-60.0, stale_buffers=1)
    b = e.rx(20_000)
    assert len(b.samples) == 20_000 and b.counter == -1 and b.samples.dtype == np.complex64
    comp = np.sqrt(np.mean(b.samples.real**2))  # N(0, 1024^2) codes per component, clipped
    assert 0.45 < comp < 0.52


def test_rx_arguments_and_closed_messages():
    e = _eng(**QUIET)
    assert len(e.rx(1).samples) == 1 and e.rx_count == 1
    with pytest.raises(ValueError) as exc:
        e.rx(0)
    assert str(exc.value) == "rx needs n >= 1"
    r = SimRadio(RadioConfig(backend="sim", sim=SimConfig(**QUIET)))
    assert r.last_truth is None
    r.close()
    for call in (lambda: r.rx(), lambda: r.tx(np.zeros(10, np.complex64))):
        with pytest.raises(RadioError) as exc:
            call()
        assert str(exc.value) == "sim radio is closed"
    with pytest.raises(RadioError) as exc:
        r.wait_tx()
    assert str(exc.value) == "wait_tx on a closed radio: nothing queued will go out"


def test_ensm_off_keeps_device_time_and_silences_a_cyclic_buffer():
    e = _eng(**QUIET)
    e.tx_dac(np.full(100, 0.5), cyclic=True)
    e.enabled = False
    b1, b2 = e.rx(4096), e.rx(4096)
    assert (b1.counter, b2.counter) == (0, 4096) and e.rx_count == 8192
    assert not np.any(b1.samples) and not np.any(b2.samples)
    e.inject_drop(10)
    b3 = e.rx(100)
    assert (b3.counter, b3.lost) == (
        8192 + 10,
        10,
    ) and b3.flags == BlockFlag.OVERFLOW | BlockFlag.LOST


def test_loopback_blocks_carry_drops():
    e = _eng(radio={"loopback": 1}, **QUIET)
    e.inject_drop(5)
    b = e.rx(100)
    assert (b.counter, b.lost, b.flags) == (5, 5, BlockFlag.OVERFLOW | BlockFlag.LOST)
    assert e.rx(100).counter == 105


def test_cyclic_buffer_exactly_and_with_a_burst_on_top():
    r = SimRadio(RadioConfig(backend="sim", tx_gain_db=-6.0, sim=SimConfig(**QUIET)))
    e = r.engine
    t0 = e.rx_count
    rng = np.random.default_rng(1)
    wave = ((rng.normal(size=97) + 1j * rng.normal(size=97)) * 0.1).astype(np.complex64)
    r.tx(wave, cyclic=True)
    assert e.cyclic is not None and e.cyclic[0] == t0 + LATENCY
    first = e.rx(LATENCY + 500).samples  # from t0
    per = e.dac(wave.astype(np.complex128)) * 10 ** (-6 / 20)
    np.testing.assert_allclose(first[LATENCY:], np.tile(per, 6)[:500], atol=0.75 / 2048)
    assert not np.any(first[:LATENCY])
    later = e.rx(1000).samples  # a block starting mid-way through a period
    k = 500 % 97  # the buffer's sample under the block's first
    np.testing.assert_allclose(later, np.roll(np.tile(per, 12), -k)[:1000], atol=0.75 / 2048)
    e.tx_dac(np.full(300, 0.25))  # a burst on top of the cyclic buffer: they add
    start = e.last_truth["rx_offset"]
    e.advance(start - e.rx_count)
    both = e.rx(300).samples
    k = (start - t0 - LATENCY) % 97
    want = np.roll(np.tile(per, 4), -k)[:300] + 0.25 * 10 ** (-6 / 20)
    np.testing.assert_allclose(both, want, atol=1.5 / 2048)


def test_a_burst_inside_a_buffer_lands_at_its_offset():
    e = _eng(radio={"lo_hz": 1e9}, ppm=2.0, **QUIET)
    buf = np.zeros(1000, np.complex128)
    buf[300:600] = 0.5j
    e.tx_dac(buf)
    assert e.last_truth["rx_offset"] == LATENCY + 300 == e.last_truth["frame_offset"]
    y = e.rx(LATENCY + 700).samples[LATENCY + 300 : LATENCY + 600]
    # the XO's CFO ramp runs in device time: its phase at the burst's first sample
    ph = np.angle(y[0] / 0.5j)
    assert abs(ph - (2 * np.pi * 2e3 * (LATENCY + 300) / 4e6 + np.pi) % (2 * np.pi) + np.pi) < 2e-2


def test_the_dds_tone_at_the_antenna():
    f = 50_000.0
    e = _eng(radio={"tx_gain_db": -10.0}, path_gain_db=-3.0, **QUIET)
    e.tone = lambda idx: 0.3 * np.exp(2j * np.pi * f / 4e6 * idx)
    e.lo_offset_hz = 2_000.0
    e.advance(1000)
    y = e.rx(4000).samples.astype(np.complex128)
    idx = np.arange(1000, 5000)
    want = 0.3 * 10 ** (-13 / 20) * np.exp(2j * np.pi * (f + 2e3) / 4e6 * idx)
    np.testing.assert_allclose(y, want, atol=0.75 / 2048)
    e.lo_offset_hz = 2e6  # TX LO outside the RX band
    assert not np.any(e.rx(100).samples)
    lb = _eng(radio={"loopback": 1}, **QUIET)  # digital loopback: the tone's codes, no RF
    lb.tone = lambda idx: np.full(len(idx), 0.5 + 0.25j)
    np.testing.assert_array_equal(lb.rx(10).samples * 2048, np.full(10, 512 + 256j))


def test_paced_rx_runs_at_the_sample_rate():
    import time

    e = _eng(radio={"sample_rate_hz": 2.5e6}, paced=True, **QUIET)
    t = time.monotonic()
    for _ in range(10):
        e.rx(10_000)  # 40 ms of device time in all
    assert time.monotonic() - t >= 0.035


def test_iq_imbalance_of_gain_or_phase_alone():
    tone = np.exp(2j * np.pi * 0.1 * np.arange(4096)).astype(np.complex64) * 0.1
    for iq in ({"iq_gain_db": 1.0}, {"iq_phase_deg": 3.0}):
        spec = np.abs(np.fft.fft(_eng(noise_dbfs=-120.0, **iq).impair(tone)))
        assert spec[4096 - 410] > 1e-2 * spec[410], iq  # an image of 2.6 % (3 deg), 5.7 % (1 dB)
    spec = np.abs(np.fft.fft(_eng(noise_dbfs=-120.0).impair(tone)))
    assert spec[4096 - 410] < 2e-3 * spec[410]  # the ADC's rounding alone


def test_agc_reads_a_quiet_block_at_its_level():
    f = _eng(radio={"rx_gain_mode": "fast_attack"}, **QUIET)
    f.gain_db = 0.0
    f._agc(np.ones(1000))  # one code RMS: -66 dBFS
    assert f.gain_db == pytest.approx(-12.0 + 20 * math.log10(2048))


def test_bursts_overlap_by_the_channels_tail_and_add():
    """Two bursts back to back through multipath: the first one's tail (the channel's delay
    spread) lies under the second's start, and both are received."""
    import torch

    from hil.channel import ChannelChain

    e = _eng(radio={"tx_gain_db": 0.0}, channel=CHANNEL[:1], **QUIET)
    gen = torch.Generator()
    gen.set_state(e.gen.get_state())
    x = np.full(400, 0.2 + 0.1j)
    e.tx_dac(x)
    e.tx_dac(x)
    chain = ChannelChain.from_tables(e.cfg.sim.stages(e.cfg.sample_rate_hz))
    t = torch.from_numpy(np.r_[e.dac(x), np.zeros(32)])[None]
    y1, y2 = chain(t, generator=gen).y[0].numpy(), chain(t, generator=gen).y[0].numpy()
    want = np.zeros(832, complex)
    want[:432] += y1
    want[400:] += y2
    got = e.rx(LATENCY + 832).samples[LATENCY:]
    np.testing.assert_allclose(got, want, atol=0.75 / 2048)


def test_a_burst_read_in_several_blocks():
    e = _eng(radio={"tx_gain_db": 0.0}, **QUIET)
    e.tx_dac(np.full(300, 0.5))
    parts = [e.rx(n).samples for n in (LATENCY + 20, 20, 20, 400)]
    got = np.concatenate(parts)[LATENCY:]
    assert np.all(np.abs(got[:300] - 0.5) < 1e-3) and not np.any(got[300:])


def test_truth_of_cyclic_and_out_of_band_buffers():
    e = _eng(radio={"tx_gain_db": 0.0}, **QUIET)
    x = np.zeros(200, np.complex128)
    x[50:150] = 0.3
    e.tx_dac(x, cyclic=True)
    assert e.last_truth["rx_offset"] == LATENCY and e.last_truth["frame_offset"] == LATENCY + 50
    assert e.last_truth["snr_db"] == pytest.approx(20 * math.log10(abs(e.dac(x)[50])) + 200)
    e.stop_cyclic()
    e.lo_offset_hz = 3e6
    e.tx_dac(np.ones(100))
    assert e.last_truth == {"rx_offset": e.tx_time - 100, "n": 100, "out_of_band": True}
    e.close()
    assert not e.tx_active and e.cyclic is None


def test_the_dds_tone_beside_a_burst_and_near_the_band_edge():
    e = _eng(**QUIET)
    e.tone = lambda idx: np.full(len(idx), 0.1 + 0j)
    e.lo_offset_hz = 4e6 / 2.5  # inside the RX band (below fs / 2)
    e.tx_dac(np.full(100, 0.2))
    y = e.rx(LATENCY + 100).samples[LATENCY:]
    np.testing.assert_allclose(
        np.abs(y), np.abs(0.1 * 10 ** (-10 / 20) + 0.2 * 10 ** (-10 / 20) * np.exp(0j)), atol=0.02
    )


@pytest.mark.parametrize("fs", [4e6, 2.5e6])
def test_xo_cfo_at_the_radios_rate(fs):
    e = _eng(radio={"lo_hz": 1e9, "sample_rate_hz": fs}, ppm=4.0, **QUIET)
    e.tx_dac(np.full(2000, 0.5))
    y = e.rx(LATENCY + 2000).samples[LATENCY : LATENCY + 2000].astype(np.complex128)
    f = np.angle(np.mean(y[1:] * np.conj(y[:-1]))) / (2 * math.pi) * fs
    assert abs(f - 4e3) < 20


def test_tx_sends_a_burst_unless_asked_for_a_cyclic_buffer():
    e = _eng(**QUIET)
    e.tx(np.full(10, 0.5, np.complex64))
    assert e.cyclic is None and len(e.bursts) == 1
    e.tx(np.full(10, 0.5, np.complex64), cyclic=True)
    assert e.cyclic is not None


def test_the_clock_offsets_compiled_resampler_is_ready_before_the_stream_starts():
    """With a crystal offset, the engine loads its compiled resampler when it is built: on the
    first burst numba's cache load held the stream for half a second. A fresh process, so
    nothing else has loaded it before."""
    import subprocess
    import sys

    code = (
        "from hil.radio import RadioConfig, SimConfig\n"
        "from hil.radio.sim import SimEngine\n"
        "from hil.channel.functional import _resample_kernel as k\n"
        "assert not k.signatures\n"
        "SimEngine(RadioConfig(backend='sim', sim=SimConfig(ppm={ppm})))\n"
        "print(len(k.signatures))\n"
    )
    loaded = [
        subprocess.run(
            [sys.executable, "-c", code.format(ppm=ppm)], capture_output=True, text=True, check=True
        ).stdout.strip()
        for ppm in (10.0, 0.0)
    ]
    assert loaded == ["1", "0"]  # no offset: nothing to resample, nothing loaded
