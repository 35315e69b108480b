"""The twin's attribute model on its own (no server): what a fresh Pluto reads, every
setting's range and parsing, the debug registers, channel masks and the context XML.

The read table is the context a libiio client sees from a twin that nobody has written to:
the values and sysfs file names a Rev C Pluto (firmware v0.3x) prints, the file names as the
kernel builds them (``in_voltage_...`` for attributes shared by type)."""

import errno
import xml.etree.ElementTree as ET

import pytest

from hil.radio.ad9363 import (
    ADC_STATUS_OVF,
    ADC_STATUS_UNF,
    CORE_VERSION,
    PCORE_MAGIC,
    REG_ID,
    REG_RSTN,
    REG_SCRATCH,
    REG_STATUS,
    REG_VERSION,
    SPI_PRODUCT_ID,
)
from hil.twin.model import (
    CONTEXT_ATTRS,
    Channel,
    Device,
    IioError,
    PlutoState,
    build_pluto,
    clamp_gain,
    context_xml,
    mask_channels,
    parse_fir_config,
    reg_read,
    reg_write,
    rssi_db,
)

FRESH = """
    ad9361-phy : calib_mode = auto
    ad9361-phy : calib_mode_available = auto manual manual_tx_quad tx_quad rf_dc_offs rssi_gain_step
    ad9361-phy : ensm_mode = fdd
    ad9361-phy : ensm_mode_available = sleep wait alert fdd pinctrl pinctrl_fdd_indep
    ad9361-phy : filter_fir_config = FIR Rx: 0,0 Tx: 0,0
    ad9361-phy : rx_path_rates = BBPLL:983040000 ADC:245760000 R2:122880000 R1:61440000 RF:30720000 RXSAMP:30720000
    ad9361-phy : tx_path_rates = BBPLL:983040000 DAC:122880000 T2:122880000 T1:61440000 TF:30720000 TXSAMP:30720000
    ad9361-phy : trx_rate_governor = nominal
    ad9361-phy : trx_rate_governor_available = nominal highest_osr
    ad9361-phy : xo_correction = 40000000
    ad9361-phy : xo_correction_available = [39992000 1 40008000]
    ad9361-phy debug : loopback = 0
    ad9361-phy debug : initialize = 0
    ad9361-phy debug : adi,xo-disable-use-ext-refclk-enable = 0
    ad9361-phy debug : direct_reg_access = 0x0
    ad9361-phy out altvoltage0 : out_altvoltage0_RX_LO_frequency = 2400000000
    ad9361-phy out altvoltage0 : out_altvoltage0_RX_LO_frequency_available = [325000000 1 3800000000]
    ad9361-phy out altvoltage0 : out_altvoltage0_RX_LO_external = 0
    ad9361-phy out altvoltage0 : out_altvoltage0_RX_LO_fastlock_load = 0
    ad9361-phy out altvoltage0 : out_altvoltage0_RX_LO_fastlock_recall = 0
    ad9361-phy out altvoltage0 : out_altvoltage0_RX_LO_fastlock_save = 0 0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0
    ad9361-phy out altvoltage0 : out_altvoltage0_RX_LO_fastlock_store = 0
    ad9361-phy out altvoltage0 : out_altvoltage0_RX_LO_powerdown = 0
    ad9361-phy out altvoltage1 : out_altvoltage1_TX_LO_frequency = 2450000000
    ad9361-phy out altvoltage1 : out_altvoltage1_TX_LO_frequency_available = [325000000 1 3800000000]
    ad9361-phy out altvoltage1 : out_altvoltage1_TX_LO_external = 0
    ad9361-phy out altvoltage1 : out_altvoltage1_TX_LO_fastlock_load = 0
    ad9361-phy out altvoltage1 : out_altvoltage1_TX_LO_fastlock_recall = 0
    ad9361-phy out altvoltage1 : out_altvoltage1_TX_LO_fastlock_save = 0 0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0
    ad9361-phy out altvoltage1 : out_altvoltage1_TX_LO_fastlock_store = 0
    ad9361-phy out altvoltage1 : out_altvoltage1_TX_LO_powerdown = 0
    ad9361-phy in voltage0 : in_voltage_sampling_frequency = 30720000
    ad9361-phy in voltage0 : in_voltage_sampling_frequency_available = [2083333 1 61440000]
    ad9361-phy in voltage0 : in_voltage_rf_bandwidth = 18000000
    ad9361-phy in voltage0 : in_voltage_rf_bandwidth_available = [200000 1 56000000]
    ad9361-phy in voltage0 : in_voltage0_hardwaregain = 71.000000 dB
    ad9361-phy in voltage0 : in_voltage0_hardwaregain_available = [-3 1 71]
    ad9361-phy in voltage0 : in_voltage0_gain_control_mode = slow_attack
    ad9361-phy in voltage0 : in_voltage_gain_control_mode_available = manual fast_attack slow_attack hybrid
    ad9361-phy in voltage0 : in_voltage0_rf_port_select = A_BALANCED
    ad9361-phy in voltage0 : in_voltage_rf_port_select_available = A_BALANCED B_BALANCED C_BALANCED A_N A_P B_N B_P C_N C_P TX_MONITOR1 TX_MONITOR2 TX_MONITOR1_2
    ad9361-phy in voltage0 : in_voltage0_rssi = 100.00 dB
    ad9361-phy in voltage0 : in_voltage_filter_fir_en = 0
    ad9361-phy in voltage0 : in_voltage_bb_dc_offset_tracking_en = 1
    ad9361-phy in voltage0 : in_voltage_rf_dc_offset_tracking_en = 1
    ad9361-phy in voltage0 : in_voltage_quadrature_tracking_en = 1
    ad9361-phy out voltage0 : out_voltage0_hardwaregain = -10.000000 dB
    ad9361-phy out voltage0 : out_voltage0_hardwaregain_available = [-89.750000 0.250000 0.000000]
    ad9361-phy out voltage0 : out_voltage_rf_bandwidth = 18000000
    ad9361-phy out voltage0 : out_voltage_rf_bandwidth_available = [200000 1 40000000]
    ad9361-phy out voltage0 : out_voltage_sampling_frequency = 30720000
    ad9361-phy out voltage0 : out_voltage_sampling_frequency_available = [2083333 1 61440000]
    ad9361-phy out voltage0 : out_voltage0_rf_port_select = A
    ad9361-phy out voltage0 : out_voltage_rf_port_select_available = A B
    ad9361-phy out voltage0 : out_voltage0_rssi = 0.00 dB
    ad9361-phy out voltage0 : out_voltage_filter_fir_en = 0
    ad9361-phy in voltage2 : in_voltage_sampling_frequency = 30720000
    ad9361-phy in voltage2 : in_voltage_sampling_frequency_available = [2083333 1 61440000]
    ad9361-phy in voltage2 : in_voltage_rf_bandwidth = 18000000
    ad9361-phy in voltage2 : in_voltage_rf_bandwidth_available = [200000 1 56000000]
    ad9361-phy in voltage2 : in_voltage_gain_control_mode_available = manual fast_attack slow_attack hybrid
    ad9361-phy in voltage2 : in_voltage_rf_port_select_available = A_BALANCED B_BALANCED C_BALANCED A_N A_P B_N B_P C_N C_P TX_MONITOR1 TX_MONITOR2 TX_MONITOR1_2
    ad9361-phy in voltage2 : in_voltage_filter_fir_en = 0
    ad9361-phy in voltage2 : in_voltage_bb_dc_offset_tracking_en = 1
    ad9361-phy in voltage2 : in_voltage_rf_dc_offset_tracking_en = 1
    ad9361-phy in voltage2 : in_voltage_quadrature_tracking_en = 1
    ad9361-phy in voltage2 : in_voltage2_offset = 57
    ad9361-phy in voltage2 : in_voltage2_raw = 846
    ad9361-phy in voltage2 : in_voltage2_scale = 0.305250
    ad9361-phy out voltage2 : out_voltage_rf_bandwidth = 18000000
    ad9361-phy out voltage2 : out_voltage_rf_bandwidth_available = [200000 1 40000000]
    ad9361-phy out voltage2 : out_voltage_sampling_frequency = 30720000
    ad9361-phy out voltage2 : out_voltage_sampling_frequency_available = [2083333 1 61440000]
    ad9361-phy out voltage2 : out_voltage_rf_port_select_available = A B
    ad9361-phy out voltage2 : out_voltage_filter_fir_en = 0
    ad9361-phy out voltage2 : out_voltage2_raw = 306
    ad9361-phy out voltage2 : out_voltage2_scale = 1.000000
    ad9361-phy out voltage3 : out_voltage_rf_bandwidth = 18000000
    ad9361-phy out voltage3 : out_voltage_rf_bandwidth_available = [200000 1 40000000]
    ad9361-phy out voltage3 : out_voltage_sampling_frequency = 30720000
    ad9361-phy out voltage3 : out_voltage_sampling_frequency_available = [2083333 1 61440000]
    ad9361-phy out voltage3 : out_voltage_rf_port_select_available = A B
    ad9361-phy out voltage3 : out_voltage_filter_fir_en = 0
    ad9361-phy out voltage3 : out_voltage3_raw = 306
    ad9361-phy out voltage3 : out_voltage3_scale = 1.000000
    ad9361-phy in temp0 : in_temp0_input = 39474
    ad9361-phy in out : in_out_voltage_filter_fir_en = 0
    xadc : sampling_frequency = 961538
    xadc in temp0 : in_temp0_raw = 2520
    xadc in temp0 : in_temp0_offset = -2219
    xadc in temp0 : in_temp0_scale = 123.040771484
    xadc in voltage0 : in_voltage0_vccint_raw = 1379
    xadc in voltage0 : in_voltage0_vccint_scale = 0.732421875
    xadc in voltage1 : in_voltage1_vccaux_raw = 2453
    xadc in voltage1 : in_voltage1_vccaux_scale = 0.732421875
    xadc in voltage2 : in_voltage2_vccbram_raw = 1381
    xadc in voltage2 : in_voltage2_vccbram_scale = 0.732421875
    xadc in voltage3 : in_voltage3_vccpint_raw = 1368
    xadc in voltage3 : in_voltage3_vccpint_scale = 0.732421875
    xadc in voltage4 : in_voltage4_vccpaux_raw = 2451
    xadc in voltage4 : in_voltage4_vccpaux_scale = 0.732421875
    xadc in voltage5 : in_voltage5_vccoddr_raw = 1840
    xadc in voltage5 : in_voltage5_vccoddr_scale = 0.732421875
    xadc in voltage6 : in_voltage6_vrefp_raw = 1703
    xadc in voltage6 : in_voltage6_vrefp_scale = 0.732421875
    xadc in voltage7 : in_voltage7_vrefn_raw = -2
    xadc in voltage7 : in_voltage7_vrefn_scale = 0.732421875
    cf-ad9361-dds-core-lpc debug : direct_reg_access = 0x0
    cf-ad9361-dds-core-lpc buffer : data_available = 0
    cf-ad9361-dds-core-lpc buffer : length_align_bytes = 8
    cf-ad9361-dds-core-lpc buffer : watermark = 2048
    cf-ad9361-dds-core-lpc out voltage0 : out_voltage0_calibphase = 0.000000
    cf-ad9361-dds-core-lpc out voltage0 : out_voltage0_calibscale = 1.000000
    cf-ad9361-dds-core-lpc out voltage0 : out_voltage_sampling_frequency = 30720000
    cf-ad9361-dds-core-lpc out voltage0 : out_voltage_sampling_frequency_available = 30720000 3840000
    cf-ad9361-dds-core-lpc out voltage1 : out_voltage1_calibphase = 0.000000
    cf-ad9361-dds-core-lpc out voltage1 : out_voltage1_calibscale = 1.000000
    cf-ad9361-dds-core-lpc out voltage1 : out_voltage_sampling_frequency = 30720000
    cf-ad9361-dds-core-lpc out voltage1 : out_voltage_sampling_frequency_available = 30720000 3840000
    cf-ad9361-dds-core-lpc out altvoltage0 : out_altvoltage0_TX1_I_F1_frequency = 9279985
    cf-ad9361-dds-core-lpc out altvoltage0 : out_altvoltage0_TX1_I_F1_phase = 90000
    cf-ad9361-dds-core-lpc out altvoltage0 : out_altvoltage0_TX1_I_F1_raw = 0
    cf-ad9361-dds-core-lpc out altvoltage0 : out_altvoltage0_TX1_I_F1_scale = 0.000000
    cf-ad9361-dds-core-lpc out altvoltage0 : out_altvoltage_sampling_frequency = 30720000
    cf-ad9361-dds-core-lpc out altvoltage1 : out_altvoltage1_TX1_I_F2_frequency = 9279985
    cf-ad9361-dds-core-lpc out altvoltage1 : out_altvoltage1_TX1_I_F2_phase = 90000
    cf-ad9361-dds-core-lpc out altvoltage1 : out_altvoltage1_TX1_I_F2_raw = 0
    cf-ad9361-dds-core-lpc out altvoltage1 : out_altvoltage1_TX1_I_F2_scale = 0.000000
    cf-ad9361-dds-core-lpc out altvoltage1 : out_altvoltage_sampling_frequency = 30720000
    cf-ad9361-dds-core-lpc out altvoltage2 : out_altvoltage2_TX1_Q_F1_frequency = 9279985
    cf-ad9361-dds-core-lpc out altvoltage2 : out_altvoltage2_TX1_Q_F1_phase = 0
    cf-ad9361-dds-core-lpc out altvoltage2 : out_altvoltage2_TX1_Q_F1_raw = 0
    cf-ad9361-dds-core-lpc out altvoltage2 : out_altvoltage2_TX1_Q_F1_scale = 0.000000
    cf-ad9361-dds-core-lpc out altvoltage2 : out_altvoltage_sampling_frequency = 30720000
    cf-ad9361-dds-core-lpc out altvoltage3 : out_altvoltage3_TX1_Q_F2_frequency = 9279985
    cf-ad9361-dds-core-lpc out altvoltage3 : out_altvoltage3_TX1_Q_F2_phase = 0
    cf-ad9361-dds-core-lpc out altvoltage3 : out_altvoltage3_TX1_Q_F2_raw = 0
    cf-ad9361-dds-core-lpc out altvoltage3 : out_altvoltage3_TX1_Q_F2_scale = 0.000000
    cf-ad9361-dds-core-lpc out altvoltage3 : out_altvoltage_sampling_frequency = 30720000
    cf-ad9361-lpc debug : direct_reg_access = 0x0
    cf-ad9361-lpc buffer : data_available = 0
    cf-ad9361-lpc buffer : length_align_bytes = 8
    cf-ad9361-lpc buffer : watermark = 2048
    cf-ad9361-lpc in voltage0 : in_voltage0_calibbias = 0
    cf-ad9361-lpc in voltage0 : in_voltage0_calibphase = 0.000000
    cf-ad9361-lpc in voltage0 : in_voltage0_calibscale = 1.000000
    cf-ad9361-lpc in voltage0 : in_voltage_sampling_frequency = 30720000
    cf-ad9361-lpc in voltage0 : in_voltage_sampling_frequency_available = 30720000 3840000
    cf-ad9361-lpc in voltage1 : in_voltage1_calibbias = 0
    cf-ad9361-lpc in voltage1 : in_voltage1_calibphase = 0.000000
    cf-ad9361-lpc in voltage1 : in_voltage1_calibscale = 1.000000
    cf-ad9361-lpc in voltage1 : in_voltage_sampling_frequency = 30720000
    cf-ad9361-lpc in voltage1 : in_voltage_sampling_frequency_available = 30720000 3840000
"""

FTR = "RX 3 GAIN -6 DEC 4\nTX 3 GAIN 0 INT 4\n" + "".join(f"{i},{-i}\n" for i in range(128))


def _table(devs: list[Device]) -> dict[str, str]:
    out = {}
    for d in devs:
        for kind, attrs in (("", d.attrs), (" debug", d.debug), (" buffer", d.buffer)):
            for k, a in attrs.items():
                out[f"{d.name}{kind} : {k}"] = a.read()
        for c in d.channels:
            for a in c.attrs.values():
                out[f"{d.name} {'out' if c.output else 'in'} {c.id} : {a.file(c)}"] = a.read()
    return out


class Twin:
    """A fresh state and its devices, with the on_change calls recorded."""

    def __init__(self, **state):
        self.changes: list[str] = []
        self.s = PlutoState(on_change=self.changes.append, **state)
        self.devs = {d.name: d for d in build_pluto(self.s)}

    def attr(self, dev: str, name: str, ch: str | None = None, output: bool = False):
        d = self.devs[dev]
        if ch is None:
            return d.attrs[name]
        return d.channel(ch, output).attrs[name]

    def write(self, dev, name, text, ch=None, output=False):
        self.attr(dev, name, ch, output).write(text)

    def read(self, dev, name, ch=None, output=False):
        return self.attr(dev, name, ch, output).read()

    def refused(self, dev, name, text, ch=None, output=False):
        before = _table(list(self.devs.values()))
        n = len(self.changes)
        with pytest.raises(IioError) as exc:
            self.write(dev, name, text, ch, output)
        assert exc.value.code == errno.EINVAL
        assert _table(list(self.devs.values())) == before and len(self.changes) == n
        return str(exc.value)


PHY, DDS, ADC = "ad9361-phy", "cf-ad9361-dds-core-lpc", "cf-ad9361-lpc"


def test_a_fresh_twin_reads_as_a_pluto_prints_it():
    expect = {}
    for line in FRESH.strip().splitlines():
        key, value = line.strip().split(" = ", 1)
        expect[key] = value
    assert _table(build_pluto(PlutoState())) == expect


def test_the_context_xml_lists_every_device_channel_and_attribute():
    devs = build_pluto(PlutoState())
    text = context_xml(devs)
    assert text.startswith('<?xml version="1.0" encoding="utf-8"?><!DOCTYPE context [')
    root = ET.fromstring(text)
    assert root.tag == "context" and root.get("name") == "network"
    assert (root.get("version-major"), root.get("version-minor"), root.get("version-git")) == (
        "0",
        "24",
        "v0.24",
    )
    assert root.get("description") == CONTEXT_ATTRS["description"]
    ctx = {e.get("name"): e.get("value") for e in root.findall("context-attribute")}
    assert ctx == CONTEXT_ATTRS
    xdevs = root.findall("device")
    assert [(e.get("id"), e.get("name")) for e in xdevs] == [(d.id, d.name) for d in devs]
    for d, e in zip(devs, xdevs, strict=True):
        chans = e.findall("channel")
        # scan elements first, in index order; then the rest in the device's order
        order = [*d.scan_channels, *(c for c in d.channels if not c.scan)]
        assert [(c.get("id"), c.get("type"), c.get("name")) for c in chans] == [
            (c.id, "output" if c.output else "input", c.name) for c in order
        ]
        for c, x in zip(order, chans, strict=True):
            scan = x.findall("scan-element")
            if c.scan:
                assert [(s.get("index"), s.get("format"), s.get("scale")) for s in scan] == [
                    (str(c.scan[0]), c.scan[1], "1.000000")
                ]
            else:
                assert scan == []
            names = [(a.get("name"), a.get("filename")) for a in x.findall("attribute")]
            assert names == sorted((a.name, a.file(c)) for a in c.attrs.values())
        assert [a.get("name") for a in e.findall("attribute")] == sorted(d.attrs)
        assert [a.get("name") for a in e.findall("debug-attribute")] == list(d.debug)
        assert [a.get("name") for a in e.findall("buffer-attribute")] == list(d.buffer)
    # the sample formats a client unpacks with: 12-bit ADC codes, 16-bit DAC words
    adc = root.find("device[@name='cf-ad9361-lpc']/channel[@id='voltage0']/scan-element")
    dac = root.find("device[@name='cf-ad9361-dds-core-lpc']/channel[@id='voltage1']/scan-element")
    assert adc.get("format") == "le:S12/16>>0" and dac.get("format") == "le:S16/16>>0"


def test_channels_are_found_by_id_or_name_and_direction():
    t = Twin()
    phy = t.devs[PHY]
    assert phy.channel("altvoltage0", True) is phy.channel("RX_LO", True)
    assert phy.channel("voltage0", False) is not phy.channel("voltage0", True)
    with pytest.raises(IioError) as exc:
        phy.channel("altvoltage0", False)
    assert (
        exc.value.code == errno.ENXIO and str(exc.value) == "iio:device0 has no input altvoltage0"
    )
    with pytest.raises(IioError, match="has no output nope"):
        phy.channel("nope", True)
    assert [d.words for d in t.devs.values()] == [1, 1, 1, 1]
    assert Device("x", "y", channels=[Channel(f"c{i}", False) for i in range(33)]).words == 2
    assert str(IioError(errno.EINVAL)) == "EINVAL" and str(IioError(-7, "why")) == "why"


@pytest.mark.parametrize(
    "ch, key, lo, hi",
    [
        ("RX_LO", "rx_lo", 325_000_000, 3_800_000_000),
        ("TX_LO", "tx_lo", 325_000_000, 3_800_000_000),
    ],
)
def test_lo_frequency_range(ch, key, lo, hi):
    t = Twin()
    for v in (lo, hi, 915_000_000):
        t.write(PHY, "frequency", str(v), ch, True)
        assert t.read(PHY, "frequency", ch, True) == str(v) and getattr(t.s, key) == v
        assert t.changes[-1] == key
    for bad in (str(lo - 1), str(hi + 1), "2.4e9", "0x10000000", "", "915 000 000", "+"):
        t.refused(PHY, "frequency", bad, ch, True)
    assert "outside [325000000, 3800000000]" in t.refused(PHY, "frequency", "1", ch, True)
    assert "not an integer: 'abc'" in t.refused(PHY, "frequency", "abc", ch, True)
    t.write(PHY, "frequency", "+915000000", ch, True)  # kstrtoull takes a sign
    assert getattr(t.s, key) == 915_000_000
    # the LO synthesiser's power-down bit
    t.write(PHY, "powerdown", "1", ch, True)
    assert t.read(PHY, "powerdown", ch, True) == "1" and t.changes[-1] == f"{key}_powerdown"
    t.refused(PHY, "powerdown", "2", ch, True)
    t.refused(PHY, "powerdown", "-1", ch, True)
    for ignored in ("external", "fastlock_load", "fastlock_recall", "fastlock_store"):
        n = len(t.changes)
        t.write(PHY, ignored, "1", ch, True)
        assert t.read(PHY, ignored, ch, True) == "0" and len(t.changes) == n


def test_sample_rate_range_follows_the_fir():
    t = Twin()
    for ch, out in (("voltage0", False), ("voltage0", True)):
        for v in (2_083_333, 61_440_000, 4_000_000):
            t.write(PHY, "sampling_frequency", str(v), ch, out)
            assert t.s.sample_rate == v and t.changes[-1] == "sample_rate"
            assert t.read(PHY, "sampling_frequency", "voltage0", not out) == str(v)
        msg = t.refused(PHY, "sampling_frequency", "2083332", ch, out)
        assert msg == "sampling_frequency 2083332 outside [2083333, 61440000]"
        t.refused(PHY, "sampling_frequency", "61440001", ch, out)
        t.refused(PHY, "sampling_frequency", "4000000.5", ch, out)
        t.refused(PHY, "sampling_frequency", "4294967296", ch, out)
    # enabling the FIR needs one loaded, and then the rate may go down to a quarter
    assert "no FIR loaded" in t.refused(PHY, "filter_fir_en", "1", "voltage0")
    t.write(PHY, "filter_fir_config", FTR)
    assert t.changes[-1] == "fir" and (t.s.fir_taps, t.s.fir_dec) == (128, 4)
    assert t.read(PHY, "filter_fir_config") == "FIR Rx: 128,4 Tx: 128,4"
    t.write(PHY, "filter_fir_en", "1", "voltage0", True)
    assert t.s.fir_en and t.changes[-1] == "fir"
    assert t.read(PHY, "filter_fir_en", "voltage0") == "1"
    assert t.read(PHY, "voltage_filter_fir_en", "out") == "1"
    assert t.read(PHY, "sampling_frequency_available", "voltage0") == "[520833 1 61440000]"
    t.write(PHY, "sampling_frequency", "520833", "voltage0")
    t.refused(PHY, "sampling_frequency", "520832", "voltage0")
    assert t.s.rate_min == 520_833
    # the path rates run at the FIR's decimation above the sample rate; one BBPLL for both
    assert t.read(PHY, "rx_path_rates") == (
        "BBPLL:66666624 ADC:16666656 R2:8333328 R1:4166664 RF:2083332 RXSAMP:520833"
    )
    assert t.read(PHY, "tx_path_rates") == (
        "BBPLL:66666624 DAC:8333328 T2:8333328 T1:4166664 TF:2083332 TXSAMP:520833"
    )
    # a rate that needs the FIR keeps it on
    assert t.refused(PHY, "voltage_filter_fir_en", "0", "out") == (
        "the sample rate needs the FIR: raise it before disabling"
    )
    t.write(PHY, "sampling_frequency", "2083333", "voltage0")
    t.write(PHY, "voltage_filter_fir_en", "0", "out")
    assert not t.s.fir_en and t.s.rate_min == 2_083_333
    t.refused(PHY, "filter_fir_en", "2", "voltage0")


def test_fir_config_parsing_and_its_errors():
    assert parse_fir_config(FTR) == (128, 4)
    assert parse_fir_config("RX 3 GAIN -6 DEC 2\n" + "1 2\n" * 16) == (16, 2)
    assert parse_fir_config("TX 3 GAIN 0 INT 2\r\n" + "1,2\r\n" * 64) == (64, 2)
    assert parse_fir_config("# a comment\nBWRX 1000\nBWTX 1000\n" + "1,2\n" * 32) == (32, 1)
    assert parse_fir_config("RXPFIR\n\n  \n" + "-32768,32767\n" * 48) == (48, 1)
    cases = {
        "": "0 FIR taps (16..128, a multiple of 16)",
        "1,1\n" * 130: "130 FIR taps",
        "1,1\n" * 17: "17 FIR taps",
        "1,1\n" * 144: "144 FIR taps",
        "RX 3 GAIN -6 DEC 3\n" + "1,1\n" * 16: "FIR decimation 3 not 1, 2 or 4",
        "RX 3 GAIN -6 DEC x\n" + "1,1\n" * 16: "FIR decimation x",
        "RX 3 GAIN -6 DEC 8\n" + "1,1\n" * 16: "FIR decimation 8",
        "1,x\n" * 16: "bad FIR line '1,x'",
        "1,32768\n" * 16: "FIR coefficient outside int16",
        "-32769,1\n" * 16: "FIR coefficient outside int16",
    }
    for text, msg in cases.items():
        with pytest.raises(IioError) as exc:
            parse_fir_config(text)
        assert exc.value.code == errno.EINVAL and msg in str(exc.value), text[:30]


def test_bandwidths_gains_and_choices():
    t = Twin()
    for ch, out, hi in (("voltage0", False, 56_000_000), ("voltage0", True, 40_000_000)):
        t.write(PHY, "rf_bandwidth", str(hi), ch, out)
        t.write(PHY, "rf_bandwidth", "200000", ch, out)
        assert t.read(PHY, "rf_bandwidth", ch, out) == "200000"
        assert t.changes[-1] == ("tx_bw" if out else "rx_bw")
        t.refused(PHY, "rf_bandwidth", str(hi + 1), ch, out)
        t.refused(PHY, "rf_bandwidth", "199999", ch, out)
    # RX gain: whole dB, written only in manual mode (the AGC keeps its own)
    n = len(t.changes)
    t.write(PHY, "hardwaregain", "20", "voltage0")
    assert t.s.rx_gain == 71.0 and len(t.changes) == n
    t.refused(PHY, "hardwaregain", "72", "voltage0")  # the range is checked in every mode
    t.write(PHY, "gain_control_mode", "manual", "voltage0")
    assert t.changes[-1] == "gain_mode"
    for text, v in (("20.4", 20.0), ("20.6", 21.0), ("-3", -3.0), ("71 dB", 71.0), (".5", 0.0)):
        t.write(PHY, "hardwaregain", text, "voltage0")
        assert t.s.rx_gain == v and t.changes[-1] == "rx_gain"
    assert t.read(PHY, "hardwaregain", "voltage0") == "0.000000 dB"
    for bad in ("-3.5", "71.5", "x", "1e1", "--1", ""):
        t.refused(PHY, "hardwaregain", bad, "voltage0")
    assert "-3.5 outside [-3.0, 71.0]" in t.refused(PHY, "hardwaregain", "-3.5", "voltage0")
    t.s.current_gain = lambda: 42.6  # an engine attached: its AGC's gain is what reads
    assert t.read(PHY, "hardwaregain", "voltage0") == "43.000000 dB"
    # TX attenuation in 0.25 dB steps
    for text, v in (("-10.1", -10.0), ("-10.2", -10.25), ("0", 0.0), ("-89.75", -89.75)):
        t.write(PHY, "hardwaregain", text, "voltage0", True)
        assert t.s.tx_gain == v and t.changes[-1] == "tx_gain"
    assert t.read(PHY, "hardwaregain", "voltage0", True) == "-89.750000 dB"
    t.refused(PHY, "hardwaregain", "0.1", "voltage0", True)
    t.refused(PHY, "hardwaregain", "-89.8", "voltage0", True)
    # settings with a list of values
    for dev, name, ch, out, key, good, bad in (
        (PHY, "gain_control_mode", "voltage0", False, "gain_mode", "hybrid", "auto"),
        (PHY, "rf_port_select", "voltage0", False, "rx_port", "TX_MONITOR1_2", "A"),
        (PHY, "rf_port_select", "voltage0", True, "tx_port", "B", "A_BALANCED"),
        (PHY, "calib_mode", None, False, "calib_mode", "rssi_gain_step", "AUTO"),
        (PHY, "ensm_mode", None, False, "ensm_mode", "sleep", "tdd"),
        (PHY, "trx_rate_governor", None, False, "rate_governor", "highest_osr", "high"),
    ):
        t.write(dev, name, good, ch, out)
        assert t.read(dev, name, ch, out) == good == getattr(t.s, key) and t.changes[-1] == key
        msg = t.refused(dev, name, bad, ch, out)
        assert msg.startswith(f"{bad!r} not one of ")
    assert t.read(PHY, "gain_control_mode", "voltage0") == "hybrid"


def test_monitors_tracking_aux_and_xo():
    t = Twin()
    assert t.read(PHY, "rssi", "voltage0") == "100.00 dB"
    t.s.current_rssi = lambda: 37.125
    assert t.read(PHY, "rssi", "voltage0") == "37.12 dB"
    # the three tracking loops are three settings
    names = ("bb_dc_offset_tracking_en", "rf_dc_offset_tracking_en", "quadrature_tracking_en")
    for i, name in enumerate(names):
        t.write(PHY, name, "0", "voltage0")
        assert [t.read(PHY, n, "voltage0") for n in names] == ["0"] * (i + 1) + ["1"] * (2 - i)
        t.refused(PHY, name, "2", "voltage0")
    assert t.s.tracking == {"bb_dc": 0, "rf_dc": 0, "quad": 0}
    # aux DACs: millivolts 0..3300, one value each
    t.write(PHY, "raw", "3300", "voltage2", True)
    t.write(PHY, "raw", "0", "voltage3", True)
    assert (
        t.read(PHY, "raw", "voltage2", True) == "3300"
        and t.read(PHY, "raw", "voltage3", True) == "0"
    )
    t.refused(PHY, "raw", "3301", "voltage2", True)
    t.refused(PHY, "raw", "-1", "voltage3", True)
    # the crystal's trim: +-8 kHz around 40 MHz
    t.write(PHY, "xo_correction", "40008000")
    assert t.read(PHY, "xo_correction") == "40008000" and t.changes[-1] == "xo_correction"
    t.write(PHY, "xo_correction", "39992000")
    t.refused(PHY, "xo_correction", "40008001")
    t.refused(PHY, "xo_correction", "39991999")
    # the debug loopback: 0 off, 1 digital, 2 RF
    lb = t.devs[PHY].debug["loopback"]
    for v in ("2", "1", "0"):
        lb.write(v)
        assert lb.read() == v and t.s.loopback == int(v) and t.changes[-1] == "loopback"
    for bad in ("3", "-1"):
        with pytest.raises(IioError):
            lb.write(bad)
    t.devs[PHY].debug["initialize"].write("1")
    assert t.devs[PHY].debug["initialize"].read() == "0"
    # read-only attributes have no write
    for dev, name, ch, out in (
        (PHY, "rssi", "voltage0", False),
        (PHY, "frequency_available", "RX_LO", True),
        (PHY, "rx_path_rates", None, False),
        (PHY, "input", "temp0", False),
        (PHY, "scale", "voltage2", True),
    ):
        assert t.attr(dev, name, ch, out).write is None


def test_dma_cores_rates_calibration_and_dds():
    t = Twin()
    # each DMA core runs at the AD9363's rate or an eighth of it (the FPGA's x8 filter)
    for dev, key, out in ((ADC, "rx_dec8", False), (DDS, "tx_int8", True)):
        t.write(dev, "sampling_frequency", "3840000", "voltage1", out)
        assert getattr(t.s, key) and t.changes[-1] == key
        assert t.read(dev, "sampling_frequency", "voltage0", out) == "3840000"
        t.write(dev, "sampling_frequency", "30720000", "voltage0", out)
        assert not getattr(t.s, key)
        msg = t.refused(dev, "sampling_frequency", "7680000", "voltage0", out)
        assert msg == "7680000 not in 30720000 3840000"
        t.refused(dev, "sampling_frequency", "x", "voltage0", out)
    t.write(ADC, "sampling_frequency", "3840000", "voltage0")
    assert t.s.stream_rate == 3_840_000.0
    t.write(ADC, "sampling_frequency", "30720000", "voltage0")
    assert t.s.stream_rate == 30_720_000.0 and isinstance(t.s.stream_rate, float)
    # calibration values: kept as written, per device, channel and name
    t.write(ADC, "calibscale", "0.5", "voltage1")
    t.write(ADC, "calibbias", "-12", "voltage0")
    t.write(DDS, "calibphase", "1000000", "voltage0", True)
    assert t.read(ADC, "calibscale", "voltage1") == "0.5"
    assert t.read(ADC, "calibscale", "voltage0") == "1.000000"
    assert t.read(ADC, "calibbias", "voltage0") == "-12"
    assert t.read(ADC, "calibphase", "voltage0") == "0.000000"
    assert t.read(DDS, "calibphase", "voltage0", True) == "1000000"
    assert t.read(DDS, "calibphase", "voltage1", True) == "0.000000"
    t.refused(ADC, "calibscale", "1000000.5", "voltage0")
    t.refused(DDS, "calibscale", "-1000001", "voltage1", True)
    t.refused(ADC, "calibbias", "one", "voltage1")
    # the DDS tones, four of them, each with its own settings
    for i, name in enumerate(("TX1_I_F1", "TX1_I_F2", "TX1_Q_F1", "TX1_Q_F2")):
        t.write(DDS, "frequency", str(1000 + i), name, True)
        assert t.s.dds[i]["frequency"] == 1000 + i and t.changes[-1] == "dds"
    assert [t.read(DDS, "frequency", f"altvoltage{i}", True) for i in range(4)] == [
        "1000",
        "1001",
        "1002",
        "1003",
    ]
    t.write(DDS, "frequency", "30720000", "TX1_I_F1", True)
    t.refused(DDS, "frequency", "30720001", "TX1_I_F1", True)
    t.refused(DDS, "frequency", "-1", "TX1_I_F1", True)
    t.write(DDS, "phase", "360000", "TX1_Q_F2", True)
    assert t.s.dds[3]["phase"] == 360_000
    t.refused(DDS, "phase", "360001", "TX1_Q_F2", True)
    t.write(DDS, "raw", "1", "TX1_I_F2", True)
    assert t.s.dds[1]["raw"] == 1 and t.read(DDS, "raw", "TX1_I_F2", True) == "1"
    t.refused(DDS, "raw", "2", "TX1_I_F2", True)
    t.write(DDS, "scale", "0.25", "TX1_Q_F1", True)
    assert t.s.dds[2]["scale"] == 0.25 and t.read(DDS, "scale", "TX1_Q_F1", True) == "0.250000"
    t.write(DDS, "scale", "1", "TX1_Q_F1", True)
    t.refused(DDS, "scale", "1.000001", "TX1_Q_F1", True)
    t.refused(DDS, "scale", "-0.1", "TX1_Q_F1", True)
    t.write(PHY, "sampling_frequency", "4000000", "voltage0")
    assert t.read(DDS, "sampling_frequency", "TX1_I_F1", True) == "4000000"
    assert t.read(DDS, "sampling_frequency_available", "voltage0", True) == "4000000 500000"


def test_debug_registers():
    s = PlutoState()
    polls = []
    s.poll_status = lambda: polls.append(1)
    for core in ("adc", "dac"):
        base = PCORE_MAGIC
        assert reg_read(s, core, base | REG_VERSION) == CORE_VERSION[core]
        assert reg_read(s, core, base | REG_ID) == 0
        assert reg_read(s, core, base | REG_RSTN) == 0x3
        assert reg_read(s, core, base | 0x44) == 0  # a register the twin does not model
        reg_write(s, core, base | REG_SCRATCH, 0xDEADBEEF)
        assert reg_read(s, core, base | REG_SCRATCH) == 0xDEADBEEF
        reg_write(s, core, base | 0x44, 5)  # ignored
        assert reg_read(s, core, base | 0x44) == 0
        for bad in (base | 0x8A, base | 0x1000 if core == "dac" else base | 0x6000):
            with pytest.raises(IioError) as exc:
                reg_read(s, core, bad)
            assert exc.value.code == errno.EINVAL and "outside the core or unaligned" in str(
                exc.value
            )
            with pytest.raises(IioError):
                reg_write(s, core, bad, 0)
        assert reg_read(s, core, base | (0x1000 - 4)) == 0  # the window's last register
    assert s.core_scratch == {"adc": 0xDEADBEEF, "dac": 0xDEADBEEF}
    # status: the server refreshes it on every access; write 1 to clear
    s.core_status["adc"] = ADC_STATUS_OVF | ADC_STATUS_UNF
    n = len(polls)
    assert reg_read(s, "adc", PCORE_MAGIC | REG_STATUS) == 6 and len(polls) == n + 1
    reg_write(s, "adc", PCORE_MAGIC | REG_STATUS, ADC_STATUS_OVF)
    assert s.core_status["adc"] == ADC_STATUS_UNF and len(polls) == n + 2
    assert reg_read(s, "dac", PCORE_MAGIC | REG_STATUS) == 0
    # SPI: 10-bit addresses, 8-bit values, the product ID read-only
    assert reg_read(s, None, SPI_PRODUCT_ID) == 0x0A
    reg_write(s, None, SPI_PRODUCT_ID, 0x55)
    assert reg_read(s, None, SPI_PRODUCT_ID) == 0x0A
    reg_write(s, None, 0x3FF, 0x1FF)
    assert reg_read(s, None, 0x3FF) == 0xFF and reg_read(s, None, 0x3FE) == 0
    for fn, args in ((reg_read, ()), (reg_write, (1,))):
        with pytest.raises(IioError) as exc:
            fn(s, None, 0x400, *args)
        assert str(exc.value) == "AD9363 register 0x400 past 0x3FF"
        with pytest.raises(IioError, match="past"):  # the core bit means nothing to the SPI
            fn(s, None, PCORE_MAGIC | REG_SCRATCH, *args)


def test_direct_reg_access_as_libiio_writes_it():
    t = Twin()
    adc = t.devs[ADC].debug["direct_reg_access"]
    phy = t.devs[PHY].debug["direct_reg_access"]
    adc.write(f"0x{PCORE_MAGIC | REG_SCRATCH:x} 0x1234")  # iio_device_reg_write
    assert adc.read() == "0x1234"  # the written register stays selected
    adc.write(str(PCORE_MAGIC | REG_VERSION))  # iio_device_reg_read writes the address, decimal
    assert adc.read() == f"0x{CORE_VERSION['adc']:X}"
    assert t.devs[DDS].debug["direct_reg_access"].read() == "0x0"  # each device its own address
    phy.write("066 255")  # octal address, as %i reads it
    assert t.s.spi[0o66] == 255
    phy.write("55")
    assert phy.read() == "0xA"
    phy.write("-1")  # selects; the read then fails
    assert t.s.reg_addr[t.devs[PHY].id] == 0xFFFF_FFFF
    with pytest.raises(IioError, match="past 0x3FF"):
        phy.read()
    phy.write("0X3fe 0x10")
    assert t.s.spi[0x3FE] == 0x10
    for bad in ("", "1 2 3", "08", "0x", "1a", "x1", "1.0", "0x1 g"):
        with pytest.raises(IioError) as exc:
            phy.write(bad)
        assert exc.value.code == errno.EINVAL, bad


def test_channel_masks():
    t = Twin()
    adc = t.devs[ADC]
    i, q = adc.scan_channels
    assert (i.id, q.id) == ("voltage0", "voltage1")
    assert mask_channels(adc, "00000003") == [i, q]
    assert mask_channels(adc, "00000001") == [i]
    assert mask_channels(adc, "00000002") == [q]
    for bad, msg in (
        ("0000000A", "not a scan element"),
        ("0000000a", "not a scan element"),
        ("0000000f", "not a scan element"),
        ("0000003", "need 8 hex digits"),
        ("000000003", "need 8 hex digits"),
        ("0000000g", "need 8 hex digits"),
        ("00000000", "enables no channel"),
        ("00000004", "not a scan element"),
        ("00000007", "not a scan element"),
    ):
        with pytest.raises(IioError) as exc:
            mask_channels(adc, bad)
        assert exc.value.code == errno.EINVAL and msg in str(exc.value), bad
    assert [c.id for c in t.devs[DDS].scan_channels] == ["voltage0", "voltage1"]


def test_gain_clamp_and_rssi():
    assert clamp_gain(100.0) == 71.0 and clamp_gain(-10) == -3.0 and clamp_gain(10.5) == 10.5
    assert isinstance(clamp_gain(5), float)
    assert rssi_db(-10.3) == 10.25 and rssi_db(-10.4) == 10.5 and rssi_db(3.0) == 0.0
    assert rssi_db(float("-inf")) == 127.75 and rssi_db(float("nan")) == 127.75


def _all_attrs(devs):
    for d in devs:
        for group in (d.attrs, d.debug, d.buffer):
            yield from ((d, None, k, a) for k, a in group.items())
        for c in d.channels:
            yield from ((d, c, k, a) for k, a in c.attrs.items())


def test_every_attribute_is_filed_under_its_own_name_and_ids_are_the_plutos():
    devs = build_pluto(PlutoState())
    assert [d.id for d in devs] == [f"iio:device{i}" for i in range(4)]
    for d, c, key, a in _all_attrs(devs):
        assert a.name == key, (d.name, c and c.id, key)
    for d in devs:
        for c in d.channels:
            assert c.output is True or c.output is False, (d.name, c.id)
    # settings a client may write without effect still take the write
    t = Twin()
    for dev in (DDS, ADC):
        t.devs[dev].buffer["watermark"].write("4096")
        assert t.devs[dev].buffer["watermark"].read() == "2048"
    assert t.devs[PHY].debug["initialize"].write is not None


def test_the_xml_has_no_text_outside_its_elements():
    root = ET.fromstring(context_xml(build_pluto(PlutoState())))
    for el in root.iter():
        assert not (el.text or "").strip() and not (el.tail or "").strip(), el.tag


def test_exact_refusals_of_the_parsers():
    t = Twin()
    assert t.refused(PHY, "hardwaregain", "x", "voltage0") == "not a number: 'x'"
    msg = t.refused(PHY, "gain_control_mode", "auto", "voltage0")
    assert msg == "'auto' not one of manual fast_attack slow_attack hybrid"
    phy = t.devs[PHY].debug["direct_reg_access"]
    for bad, msg in (
        ("08", "not a register number: '08'"),
        ("1 2 3", "direct_reg_access: '1 2 3'"),
    ):
        with pytest.raises(IioError) as exc:
            phy.write(bad)
        assert str(exc.value) == msg and exc.value.code == errno.EINVAL
    assert str(IioError(9999)) == "9999" and IioError(9999).code == 9999
    # the 32-bit range of a rate comes before the device's own
    assert t.refused(PHY, "sampling_frequency", "4294967296", "voltage0") == (
        "4294967296 outside [0, 4294967295]"
    )
    assert t.refused(PHY, "sampling_frequency", "4294967295", "voltage0") == (
        "sampling_frequency 4294967295 outside [2083333, 61440000]"
    )
    assert t.refused(PHY, "sampling_frequency", "0", "voltage0") == (
        "sampling_frequency 0 outside [2083333, 61440000]"
    )
    for dev, out in ((ADC, False), (DDS, True)):
        assert t.refused(dev, "sampling_frequency", "4294967296", "voltage0", out) == (
            "4294967296 outside [0, 4294967295]"
        )
        assert t.refused(dev, "sampling_frequency", "4294967295", "voltage0", out) == (
            "4294967295 not in 30720000 3840000"
        )
        assert t.refused(dev, "sampling_frequency", "0", "voltage0", out) == (
            "0 not in 30720000 3840000"
        )
    assert t.refused(PHY, "filter_fir_en", "1", "voltage0") == (
        "no FIR loaded (write filter_fir_config first)"
    )


def test_zero_is_a_value_of_the_zero_based_settings():
    t = Twin()
    t.write(PHY, "powerdown", "1", "RX_LO", True)
    t.write(PHY, "powerdown", "0", "RX_LO", True)
    assert t.s.rx_lo_powerdown == 0
    for name, key in (("frequency", "frequency"), ("phase", "phase"), ("raw", "raw")):
        t.write(DDS, name, "1", "TX1_I_F1", True)
        t.write(DDS, name, "0", "TX1_I_F1", True)
        assert t.s.dds[0][key] == 0


def test_dma_rate_an_eighth_of_a_rate_not_divisible_by_8():
    t = Twin()
    t.write(PHY, "sampling_frequency", "2083333", "voltage0")
    t.write(ADC, "sampling_frequency", "260416", "voltage0")  # 2083333 // 8
    assert t.s.rx_dec8 and t.read(ADC, "sampling_frequency", "voltage1") == "260416"


def test_calibration_values_are_per_core_and_channel():
    t = Twin()
    cells = [
        (dev, name, ch, out)
        for dev, out, names in (
            (ADC, False, ("calibbias", "calibphase", "calibscale")),
            (DDS, True, ("calibphase", "calibscale")),
        )
        for name in names
        for ch in ("voltage0", "voltage1")
    ]
    for i, (dev, name, ch, out) in enumerate(cells):
        t.write(dev, name, str(i + 1), ch, out)
    assert [t.read(dev, name, ch, out) for dev, name, ch, out in cells] == [
        str(i + 1) for i in range(len(cells))
    ]


def test_fir_files_as_the_tools_write_them():
    assert parse_fir_config("RX 3 GAIN -6\n" + "1,1\n" * 16) == (16, 1)  # no DEC: 1
    assert parse_fir_config("RX 3 GAIN 0 DEC 1\n" + "1,1\n" * 16) == (16, 1)
    assert parse_fir_config("TXPFIR\n" + "1,1\n" * 16) == (16, 1)
    with pytest.raises(IioError) as exc:
        parse_fir_config("1,40000\n" * 16)
    assert str(exc.value) == "FIR coefficient outside int16"
    t = Twin()
    t.write(PHY, "filter_fir_config", FTR)  # loaded but not enabled: the rates ignore it
    assert t.read(PHY, "rx_path_rates") == (
        "BBPLL:983040000 ADC:245760000 R2:122880000 R1:61440000 RF:30720000 RXSAMP:30720000"
    )


def test_register_refusals_and_status_polls():
    s = PlutoState()
    polls = []
    s.poll_status = lambda: polls.append(1)
    for fn, args in ((reg_read, ()), (reg_write, (1,))):
        with pytest.raises(IioError) as exc:
            fn(s, "adc", PCORE_MAGIC | 0x8A, *args)
        assert exc.value.code == errno.EINVAL
        assert str(exc.value) == "register 0x8000008A outside the core or unaligned"
        with pytest.raises(IioError) as exc:
            fn(s, "dac", 0x400, *args)
        assert (
            exc.value.code == errno.EINVAL and str(exc.value) == "AD9363 register 0x400 past 0x3FF"
        )
    reg_read(s, "adc", PCORE_MAGIC | REG_VERSION)
    assert polls == []  # only the status register asks the server for fresh bits
    # a core device without the magic bit reaches the AD9363 over SPI
    reg_write(s, "adc", 0x10, 5)
    assert s.spi[0x10] == 5 and reg_read(s, "dac", 0x10) == 5
    t = Twin()
    t.s.spi[1] = 7
    assert t.devs[DDS].debug["direct_reg_access"].read() == "0x0"  # register 0 until selected
    dds = t.devs[DDS].debug["direct_reg_access"]
    dds.write(str(PCORE_MAGIC | REG_VERSION))
    assert dds.read() == f"0x{CORE_VERSION['dac']:X}"
    t.devs[ADC].debug["direct_reg_access"].write("16")
    t.devs[PHY].debug["direct_reg_access"].write("17")
    assert t.s.reg_addr == {
        "iio:device2": PCORE_MAGIC | REG_VERSION,
        "iio:device3": 16,
        "iio:device0": 17,
    }


def test_masks_of_a_two_word_device():
    dev = Device(
        "iio:device9",
        "big",
        channels=[Channel(f"v{i}", False, scan=(i, "le:S16/16>>0")) for i in range(40)],
    )
    assert dev.words == 2
    assert [c.id for c in mask_channels(dev, "0000000100000001")] == ["v0", "v32"]
    with pytest.raises(IioError, match="need 16 hex digits"):
        mask_channels(dev, "00000001")
