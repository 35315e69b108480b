"""The twin's device on its own, without the protocol server: buffers, samples, status bits."""

import errno
from dataclasses import replace

import numpy as np
import pytest

from hil.radio import RadioConfig, SimConfig
from hil.radio.ad9363 import ADC_STATUS_OVF, DAC_DRIVE
from hil.twin import IioError, TwinDevice

CLEAN = SimConfig(channel="awgn", noise_dbfs=-60.0, path_gain_db=0.0, seed=1)


@pytest.fixture
def dev():
    d = TwinDevice(RadioConfig(sim=CLEAN))
    yield d
    d.close()


def _open(dev, cid, name, samples, mask="00000003", cyclic=False):
    return dev.open_buffer(cid, dev.device(name), samples, mask, cyclic)


def test_rx_buffer_serves_stale_buffers_then_int16_codes_of_its_channels(dev):
    b = _open(dev, 1, "cf-ad9361-lpc", 1024)
    assert not b.output and b.sample_bytes == 4
    assert dev.engine.stale_left == CLEAN.stale_buffers  # the kernel's stale buffers, first
    assert dev.read_chunk(b) == 1024  # unpaced: a whole request per reply
    iq = dev.rx_samples(b, 1024)
    assert iq.dtype == np.int16 and iq.shape == (1024, 2)
    assert dev.stats["rx_samples"] == 1024
    only_q = _open(dev, 2, "cf-ad9361-dds-core-lpc", 16, mask="00000002")  # TX, Q only
    assert [c.id for c in only_q.channels] == ["voltage1"]


def test_a_device_takes_one_buffer_and_a_connection_releases_its_own(dev):
    _open(dev, 1, "cf-ad9361-lpc", 64)
    with pytest.raises(IioError) as e:
        _open(dev, 2, "iio:device3", 64)  # the same device by id
    assert e.value.code == errno.EBUSY
    _open(dev, 2, "cf-ad9361-dds-core-lpc", 64)
    with pytest.raises(IioError) as e:
        dev.own(2, "cf-ad9361-lpc", output=False)  # another connection's buffer
    assert e.value.code == errno.EBADF
    dev.release(1)
    assert list(dev.buffers) == ["iio:device2"]
    dev.release(2)
    assert dev.buffers == {}


def test_refusals_name_the_reason(dev):
    with pytest.raises(IioError) as e:
        _open(dev, 1, "cf-ad9361-lpc", 64, cyclic=True)
    assert e.value.code == errno.EINVAL and "cannot be cyclic" in str(e.value)
    with pytest.raises(IioError) as e:
        _open(dev, 1, "cf-ad9361-lpc", (1 << 24) + 1)
    assert e.value.code == errno.ENOMEM
    with pytest.raises(IioError) as e:
        dev.device("no-such-device")
    assert e.value.code == errno.ENODEV


def test_cyclic_tx_buffer_drives_the_engine_until_closed(dev):
    b = _open(dev, 1, "cf-ad9361-dds-core-lpc", 256, cyclic=True)
    iq = np.zeros((256, 2), "<i2")
    iq[:, 0] = DAC_DRIVE // 2
    dev.tx_samples(b, iq.tobytes())
    assert dev.engine.cyclic is not None and dev.stats["tx_samples"] == 256
    dev.close_buffer(b)
    assert dev.engine.cyclic is None and dev.buffers == {}


def test_injected_drops_set_the_adc_overflow_bit(dev):
    d = TwinDevice(RadioConfig(sim=replace(CLEAN, drop_every=1, drop_samples=100)))
    try:
        b = _open(d, 1, "cf-ad9361-lpc", 512)
        assert not d.state.core_status["adc"] & ADC_STATUS_OVF
        for _ in range(CLEAN.stale_buffers + 2):
            d.rx_samples(b, 512)
        assert d.state.core_status["adc"] & ADC_STATUS_OVF
        assert d.stats["rx_lost"] > 0 and d.stats["overflows"] >= 1
    finally:
        d.close()


def test_attributes_follow_into_the_engine(dev):
    dev.attr(["ad9361-phy", "OUTPUT", "altvoltage0", "frequency"]).write("915000000")
    assert dev.engine.cfg.lo_hz == 915e6
    assert dev.attr(["ad9361-phy", "INPUT", "voltage0", "rssi"]).read().endswith(" dB")
