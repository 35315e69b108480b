"""One set of Pluto facts: the config checks, the twin's attributes and the converters agree with
hil.radio.ad9363, and ad9363 agrees with what a stock Pluto reports (PLUTO_TWIN_PROTOCOL)."""

import numpy as np
import pytest

from hil.radio import ad9363 as F
from hil.radio.config import ConfigError, RadioConfig
from hil.twin.model import PlutoState, build_pluto


def attr(devices, dev, cid, output, name):
    d = next(x for x in devices if x.name == dev)
    return d.channel(cid, output).attrs[name].read()


def test_the_twin_reports_the_facts_as_a_stock_pluto_does():
    devs = build_pluto(PlutoState())
    phy = "ad9361-phy"
    assert (
        attr(devs, phy, "voltage0", False, "sampling_frequency_available") == "[2083333 1 61440000]"
    )
    assert attr(devs, phy, "voltage0", False, "hardwaregain_available") == "[-3 1 71]"
    assert attr(devs, phy, "voltage0", True, "hardwaregain_available") == (
        "[-89.750000 0.250000 0.000000]"
    )
    assert attr(devs, phy, "voltage0", False, "rf_bandwidth_available") == "[200000 1 56000000]"
    assert attr(devs, phy, "voltage0", True, "rf_bandwidth_available") == "[200000 1 40000000]"
    modes = attr(devs, phy, "voltage0", False, "gain_control_mode_available")
    assert modes == "manual fast_attack slow_attack hybrid" == " ".join(F.GAIN_MODES)


def test_the_config_accepts_exactly_the_device_ranges():
    RadioConfig(sample_rate_hz=F.RATE_NATIVE_MIN_HZ)
    with pytest.raises(ConfigError, match="sample_rate_hz"):
        RadioConfig(sample_rate_hz=F.RATE_NATIVE_MIN_HZ - 1)
    RadioConfig(sample_rate_hz=F.RATE_FIR_MIN_HZ, fir_enable=True)
    with pytest.raises(ConfigError, match="sample_rate_hz"):
        RadioConfig(sample_rate_hz=F.RATE_FIR_MIN_HZ - 1, fir_enable=True)
    RadioConfig(lo_hz=F.LO_MIN_HZ)
    RadioConfig(lo_hz=F.LO_MAX_HZ)
    with pytest.raises(ConfigError, match="lo_hz"):
        RadioConfig(lo_hz=F.LO_MAX_HZ + 1)
    RadioConfig(tx_gain_db=F.TX_GAIN_DB[0])
    with pytest.raises(ConfigError, match=r"multiple of 0\.25"):
        RadioConfig(tx_gain_db=-10.1)
    with pytest.raises(ConfigError, match="rx_gain_db"):
        RadioConfig(rx_gain_db=F.RX_GAIN_DB[1] + 1)
    assert F.RATE_FIR_MIN_HZ == 520_833 and F.RATE_NATIVE_MIN_HZ * 12 // 1000 == 24_999


def test_the_sim_converters_use_the_device_scales():
    from hil.radio.sim import SimEngine

    x = np.array([1.0, -1.0, 0.5 + 0.25j, 2.0], np.complex128)
    out = SimEngine.dac(None, x)  # full scale 1.0 -> int16 at DAC_DRIVE, low 4 bits dropped
    codes = out * F.DAC_DRIVE
    assert np.all(codes.real % 2**F.DAC_DISCARDED_BITS == 0)
    assert out[0] == 1.0 and out[1] == -1.0 and out[3].real == 32752 / F.DAC_DRIVE  # clipped
    adc = SimEngine._adc(np.array([3000, -3000, 1024 + 512j], np.complex64))
    assert adc[0] == (F.ADC_FULL_SCALE - 1) / F.ADC_FULL_SCALE and adc[1] == -1.0
    assert adc[2] == 0.5 + 0.25j
