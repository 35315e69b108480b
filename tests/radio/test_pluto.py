"""Pluto backend specifics, against the fake pyadi device and the real libiio."""

import builtins

import numpy as np
import pytest

from hil.radio import RadioConfig, RadioError, SimConfig
from hil.radio.pluto import PlutoRadio, open_pluto
from tests import needs

from .fake_pluto import FakePluto


def _cfg(**kw):
    d = dict(
        backend="pluto",
        uri="ip:fake",
        rx_buffer_size=4096,
        tx_buffer_size=4096,
        rx_gain_mode="manual",
        rx_gain_db=30.0,
    )
    d.update(kw)
    return RadioConfig(**d)


def test_config_mapped_to_driver_attributes():
    fake = FakePluto()
    PlutoRadio(
        _cfg(
            lo_hz=915e6, ad9364_mode=True, sample_rate_hz=3e6, tx_gain_db=-20.25, kernel_buffers=8
        ),
        device=fake,
    )
    assert (fake.rx_lo, fake.tx_lo, fake.sample_rate) == (915_000_000, 915_000_000, 3_000_000)
    assert fake.gain_control_mode_chan0 == "manual" and fake.rx_hardwaregain_chan0 == 30.0
    assert (
        fake.tx_hardwaregain_chan0 == -20.25
        and fake.rx_buffer_size == 4096
        and fake.kernel_buffers == 8
    )
    assert fake.rx_rf_bandwidth == 3_000_000


def test_stale_buffers_flushed_and_scaling():
    fake = FakePluto(SimConfig(noise_dbfs=-40.0, seed=1))
    r = PlutoRadio(_cfg(rx_gain_db=40.0), device=fake)
    assert fake.rx_calls == 4  # the four stale kernel buffers were read and dropped
    b = r.rx()
    # noise at -40 dBFS at the reference gain: RMS 0.01 of full scale
    rms = float(np.sqrt(np.mean(np.abs(b.samples) ** 2)))
    assert 0.008 < rms < 0.012
    assert b.samples.dtype == np.complex64 and b.counter == 0


def test_non_cyclic_tx_uses_fixed_buffers():
    fake = FakePluto()
    r = PlutoRadio(_cfg(), device=fake)
    r.tx(np.full(10_000, 0.1 + 0j, np.complex64))
    r.tx(np.full(100, 0.1 + 0j, np.complex64))
    assert r.wait_tx()
    # packed back to back: 10 100 samples in 3 buffers of 4096, the last zero-padded when idle
    assert fake._txbuf == 4096 and fake.tx_lengths == [4096] * 3


def test_tx_thread_error_surfaces_and_silences():
    fake = FakePluto()
    r = PlutoRadio(_cfg(), device=fake)
    fake.fail_tx = True
    r.tx(np.full(100, 0.1 + 0j, np.complex64))
    with pytest.raises(RadioError, match="TX failed"):
        for _ in range(100):
            r.wait_tx(0.05)
            r.rx()
    assert not r.tx_active


def test_device_gone_mid_stream_raises_and_silences():
    fake = FakePluto(fail_rx_after=6)
    r = PlutoRadio(_cfg(), device=fake)
    r.tx(np.full(5000, 0.1 + 0j, np.complex64), cyclic=True)
    r.rx()
    r.rx()
    with pytest.raises(RadioError, match="device may be gone"):
        r.rx()
    assert not fake.transmitting


def test_overflow_heuristic(monkeypatch):
    fake = FakePluto()
    r = PlutoRadio(_cfg(sample_rate_hz=4e6), device=fake)
    t = [100.0]
    monkeypatch.setattr("hil.radio.pluto.time.monotonic", lambda: t[0])
    r._rx_captured = 100.0
    t[0] += 4096 / 4e6  # on time
    assert r.rx().flags == 0
    t[0] += 0.1  # 100 ms late: far more than 4 kernel buffers of 1 ms
    b = r.rx()
    assert b.flags & 0x01 and b.lost > 300_000
    assert b.counter == 4096 + b.lost


def test_overflow_from_a_reader_a_little_slow_on_every_read(monkeypatch):
    """No single read is late by the kernel buffers, but a reader that takes 1.25 buffers' time
    per buffer falls behind by a quarter buffer each read: after the 4 kernel buffers' worth
    (16 reads), the DMA has nowhere to write. A reader at real time (reads that wait for the
    data) never overflows."""
    fake = FakePluto()
    r = PlutoRadio(_cfg(sample_rate_hz=4e6), device=fake)
    dur = 4096 / 4e6
    t = [100.0]
    monkeypatch.setattr("hil.radio.pluto.time.monotonic", lambda: t[0])
    r._rx_captured = 100.0
    for _ in range(200):
        t[0] += dur
        assert r.rx().flags == 0
    late = []
    for i in range(40):
        t[0] += 1.25 * dur
        b = r.rx()
        if b.flags & 0x01:
            late.append((i, b.lost))
    assert late and 15 <= late[0][0] <= 20, late
    # each overflow loses what the reader fell behind beyond the kernel buffers, not the backlog
    assert all(lost < 2 * 4096 for _, lost in late)
    # and once the reader is on time again, the buffers drain and nothing more is lost
    for _ in range(8):
        t[0] += 0.5 * dur  # reads return at once while old buffers are queued
        assert r.rx().flags == 0
    for _ in range(50):
        t[0] += dur
        assert r.rx().flags == 0


def test_missing_pyadi_is_explained(monkeypatch):
    real_import = builtins.__import__

    def no_adi(name, *a, **k):
        if name == "adi":
            raise ImportError("No module named 'adi'")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_adi)
    with pytest.raises(RadioError, match="pip install"):
        open_pluto("ip:127.0.0.1")


def test_wrong_uri_through_real_libiio():
    needs.module("adi", "pip install -e '.[pluto]'")
    with pytest.raises(RadioError, match="no Pluto at"):
        open_pluto("ip:127.0.0.1:9")  # nothing listens on the discard port


def test_dropped_burst_leaves_no_samples_behind():
    """A burst cut short by a cyclic switch does not resurface in a later padded buffer."""
    fake = FakePluto()
    r = PlutoRadio(_cfg(), device=fake)
    r._start_tx_thread()
    with r._pack_lock:  # a burst half packed when the transmitter is stopped
        r._pack[:1000] = 999.0
        r._fill = 1000
    r._stop_tx_thread()
    assert r._fill == 0 and not np.any(r._pack)
