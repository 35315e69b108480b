"""The Pluto twin's IIO context: devices, channels and attributes with the driver's semantics.

The model is the twin's description of an ADALM-PLUTO (Rev C, AD9363A) as the
libiio clients see it: four devices, their channels (scan elements with their
sample formats first, in index order) and attributes. Every attribute is a
pair of functions over ``PlutoState``: ``read`` returns the value as the
driver prints it (``71.000000 dB``, ``[2083333 1 61440000]``), ``write``
parses the text the client sends, enforces the driver's ranges and raises
``IioError(-EINVAL)`` otherwise. The server serialises the tree as the
context XML and routes READ/WRITE to it; the state's ``on_change`` hook
carries the settings that matter into the simulated radio engine.
"""

from __future__ import annotations

import errno
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from xml.sax.saxutils import quoteattr

from ..radio.ad9363 import (
    ADC_CORE_DEVICE,
    CORE_REGS_BYTES,
    CORE_RSTN,
    CORE_VERSION,
    DAC_CORE_DEVICE,
    GAIN_MODES,
    LO_MAX_HZ,
    LO_MIN_HZ,
    PCORE_MAGIC,
    RATE_MAX_HZ,
    RATE_NATIVE_MIN_HZ,
    REG_ID,
    REG_RSTN,
    REG_SCRATCH,
    REG_STATUS,
    REG_VERSION,
    RX_BW_HZ,
    RX_GAIN_DB,
    SPI_PRODUCT_ID,
    SPI_PRODUCT_ID_VALUE,
    SPI_REG_MAX,
    TX_BW_HZ,
    TX_GAIN_DB,
    TX_GAIN_STEP_DB,
)

ENSM_MODES = ("sleep", "wait", "alert", "fdd", "pinctrl", "pinctrl_fdd_indep")
CALIB_MODES = ("auto", "manual", "manual_tx_quad", "tx_quad", "rf_dc_offs", "rssi_gain_step")
RX_PORTS = (
    "A_BALANCED", "B_BALANCED", "C_BALANCED", "A_N", "A_P", "B_N", "B_P", "C_N", "C_P",
    "TX_MONITOR1", "TX_MONITOR2", "TX_MONITOR1_2",
)  # fmt: skip
TX_PORTS = ("A", "B")
RATE_GOVERNORS = ("nominal", "highest_osr")
XO_NOMINAL = 40_000_000


class IioError(Exception):
    """A failed request, answered with ``-errno`` like the kernel driver / iiod would."""

    def __init__(self, code: int, why: str = ""):
        super().__init__(why or errno.errorcode.get(code, str(code)))
        self.code = code


def _int(text: str, lo: int, hi: int) -> int:
    """Integer the way the kernel's kstrto* parse it: decimal digits only, in range."""
    if not re.fullmatch(r"[+-]?\d+", text):
        raise IioError(errno.EINVAL, f"not an integer: {text!r}")
    v = int(text)
    if not lo <= v <= hi:
        raise IioError(errno.EINVAL, f"{v} outside [{lo}, {hi}]")
    return v


def _fixpoint(text: str, lo: float, hi: float) -> float:
    """Decimal fixed point (iio_str_to_fixpoint): '40', '40.0', '-10.25'; an optional ' dB'."""
    t = text.removesuffix("dB").strip()
    if not re.fullmatch(r"[+-]?(\d+(\.\d*)?|\.\d+)", t):
        raise IioError(errno.EINVAL, f"not a number: {text!r}")
    v = float(t)
    if not lo <= v <= hi:
        raise IioError(errno.EINVAL, f"{v} outside [{lo}, {hi}]")
    return v


def _choice(text: str, options: tuple[str, ...]) -> str:
    if text not in options:
        raise IioError(errno.EINVAL, f"{text!r} not one of {' '.join(options)}")
    return text


@dataclass
class Attr:
    """One attribute. ``shared``: the driver registers it shared by type (IIO_SHARED_BY_TYPE), so
    its sysfs file, which the context XML names, is ``in_voltage_<name>`` and not
    ``in_voltage0_<name>``; ``filename`` overrides both."""

    name: str
    read: Callable[[], str]
    write: Callable[[str], None] | None = None
    shared: bool = False
    filename: str | None = None

    def file(self, ch: Channel) -> str:
        """The attribute's sysfs file name, as the context XML carries it (libiio's
        iio_device_identify_filename, which GNU Radio's gr-iio uses, looks attributes up by it)."""
        if self.filename:
            return self.filename
        prefix = "out" if ch.output else "in"
        if self.shared:
            return f"{prefix}_{re.sub(r'[0-9]+$', '', ch.id)}_{self.name}"
        return f"{prefix}_{ch.id}{'_' + ch.name if ch.name else ''}_{self.name}"


def shared(a: Attr) -> Attr:
    """The same attribute, marked shared by type (a copy: the read/write functions are one)."""
    return replace(a, shared=True)


@dataclass
class Channel:
    id: str
    output: bool
    name: str | None = None
    scan: tuple[int, str] | None = None  # (index, format)
    attrs: dict[str, Attr] = field(default_factory=dict)


@dataclass
class Device:
    id: str
    name: str
    channels: list[Channel] = field(default_factory=list)
    attrs: dict[str, Attr] = field(default_factory=dict)
    debug: dict[str, Attr] = field(default_factory=dict)
    buffer: dict[str, Attr] = field(default_factory=dict)

    @property
    def scan_channels(self) -> list[Channel]:
        return sorted((c for c in self.channels if c.scan), key=lambda c: c.scan[0])

    @property
    def words(self) -> int:
        """32-bit words in this device's channel mask."""
        return max(1, (len(self.channels) + 31) // 32)

    def channel(self, cid: str, output: bool) -> Channel:
        for c in self.channels:
            if c.output == output and (c.id == cid or c.name == cid):
                return c
        raise IioError(errno.ENXIO, f"{self.id} has no {'output' if output else 'input'} {cid}")


@dataclass
class PlutoState:
    """Everything the twin's driver remembers. Units: Hz, samples/s, dB."""

    rx_lo: int = 2_400_000_000
    tx_lo: int = 2_450_000_000
    sample_rate: int = 30_720_000
    rx_bw: int = 18_000_000
    tx_bw: int = 18_000_000
    gain_mode: str = "slow_attack"
    rx_gain: float = 71.0  # manual gain; the AGC's current value comes from the engine
    tx_gain: float = -10.0
    fir_en: bool = False
    fir_dec: int = 1
    fir_text: str = ""
    fir_taps: int = 0
    loopback: int = 0
    ensm_mode: str = "fdd"
    calib_mode: str = "auto"
    rx_port: str = "A_BALANCED"
    tx_port: str = "A"
    xo_correction: int = XO_NOMINAL
    rx_dec8: bool = False  # the FPGA's decimate-by-8 filter (cf-ad9361-lpc sampling_frequency)
    tx_int8: bool = False
    rx_lo_powerdown: int = 0
    tx_lo_powerdown: int = 0
    tracking: dict = field(default_factory=lambda: {"bb_dc": 1, "rf_dc": 1, "quad": 1})
    rate_governor: str = "nominal"
    aux_dac: dict = field(default_factory=dict)
    dds: dict = field(
        default_factory=lambda: {
            i: {"frequency": 9_279_985, "phase": 90_000 if i < 2 else 0, "raw": 0, "scale": 0.0}
            for i in range(4)
        }
    )
    calib: dict = field(default_factory=dict)  # (device, channel) -> calibscale/phase/bias values
    # debug registers: the DMA cores' status bits (the server sets overflow/underflow), their
    # scratch registers, the AD9363 SPI registers written, each device's selected address
    core_status: dict = field(default_factory=lambda: {"adc": 0, "dac": 0})
    core_scratch: dict = field(default_factory=lambda: {"adc": 0, "dac": 0})
    spi: dict = field(default_factory=lambda: {SPI_PRODUCT_ID: SPI_PRODUCT_ID_VALUE})
    reg_addr: dict = field(default_factory=dict)
    poll_status: Callable[[], None] | None = None  # the server refreshes the status bits
    current_gain: Callable[[], float] | None = None  # the engine's gain (AGC) when attached
    current_rssi: Callable[[], float] | None = None
    on_change: Callable[[str], None] | None = None

    def changed(self, what: str) -> None:
        if self.on_change is not None:
            self.on_change(what)

    @property
    def stream_rate(self) -> float:
        """Samples per second in the RX DMA stream (after the FPGA decimator)."""
        return self.sample_rate / 8 if self.rx_dec8 else float(self.sample_rate)

    @property
    def rate_min(self) -> int:
        return RATE_NATIVE_MIN_HZ // self.fir_dec if self.fir_en else RATE_NATIVE_MIN_HZ


def _rates(s: PlutoState, kind: str) -> str:
    """tx_path_rates / rx_path_rates in the driver's format, derived from the sample rate."""
    samp = s.sample_rate
    f = samp * (s.fir_dec if s.fir_en else 1)
    h1 = f * 2
    h2 = h1 * 2
    conv = h2 if kind == "TX" else h2 * 2  # the ADC runs at twice the DAC's clock
    pll = h2 * 8  # one BBPLL for both paths (983.04 MHz at 30.72 MSps, as a Pluto prints)
    if kind == "TX":
        return f"BBPLL:{pll} DAC:{conv} T2:{h2} T1:{h1} TF:{f} TXSAMP:{samp}"
    return f"BBPLL:{pll} ADC:{conv} R2:{h2} R1:{h1} RF:{f} RXSAMP:{samp}"


def parse_fir_config(text: str) -> tuple[int, int]:
    """The .ftr text pyadi-iio and IIO Oscilloscope write -> (taps, decimation); -EINVAL if invalid."""
    dec, taps = 1, 0
    for line in text.replace("\r", "").split("\n"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if parts[0] in ("RX", "TX"):
            kw = {parts[i]: parts[i + 1] for i in range(2, len(parts) - 1, 2)}
            d = kw.get("DEC") or kw.get("INT") or "1"
            if not d.isdigit() or int(d) not in (1, 2, 4):
                raise IioError(errno.EINVAL, f"FIR decimation {d} not 1, 2 or 4")
            dec = max(dec, int(d))
            continue
        if parts[0] in ("BWRX", "BWTX", "RXPFIR", "TXPFIR"):
            continue
        vals = [v for v in re.split(r"[,\s]+", line) if v]
        if not all(re.fullmatch(r"[+-]?\d+", v) for v in vals):
            raise IioError(errno.EINVAL, f"bad FIR line {line!r}")
        if any(not -32768 <= int(v) <= 32767 for v in vals):
            raise IioError(errno.EINVAL, "FIR coefficient outside int16")
        taps += 1
    if taps == 0 or taps > 128 or taps % 16:
        raise IioError(errno.EINVAL, f"{taps} FIR taps (16..128, a multiple of 16)")
    return taps, dec


def _c_int(text: str) -> int:
    """One number as the kernel's sscanf("%i") reads it: decimal, 0x hex or 0 octal, optional
    sign; kept to 32 bits as the driver's unsigned int keeps it."""
    m = re.fullmatch(r"([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", text)
    if m is None:
        raise IioError(errno.EINVAL, f"not a register number: {text!r}")
    digits = m.group(2)
    if digits[:2].lower() == "0x":
        v = int(digits, 16)
    elif digits.startswith("0"):
        v = int(digits, 8)
    else:
        v = int(digits)
    return (-v if m.group(1) == "-" else v) & 0xFFFF_FFFF


def reg_read(s: PlutoState, core: str | None, addr: int) -> int:
    """A register read through direct_reg_access: core "adc", "dac" or None (ad9361-phy: SPI only)."""
    if addr & PCORE_MAGIC and core is not None:
        off = addr & 0xFFFF
        if off >= CORE_REGS_BYTES[core] or off & 3:
            raise IioError(errno.EINVAL, f"register 0x{addr:X} outside the core or unaligned")
        if off == REG_STATUS and s.poll_status is not None:
            s.poll_status()
        return {
            REG_VERSION: CORE_VERSION[core],
            REG_ID: 0,
            REG_SCRATCH: s.core_scratch[core],
            REG_RSTN: CORE_RSTN,
            REG_STATUS: s.core_status[core],
        }.get(off, 0)
    if addr > SPI_REG_MAX:
        raise IioError(errno.EINVAL, f"AD9363 register 0x{addr:X} past 0x{SPI_REG_MAX:X}")
    return s.spi.get(addr, 0)


def reg_write(s: PlutoState, core: str | None, addr: int, value: int) -> None:
    """A register write: the status register clears the bits written as 1 (the HDL's
    ``status <= status & ~wdata``); the scratch register holds a value; other core registers
    ignore the write (the twin models none of them); SPI registers keep 8 bits."""
    if addr & PCORE_MAGIC and core is not None:
        off = addr & 0xFFFF
        if off >= CORE_REGS_BYTES[core] or off & 3:
            raise IioError(errno.EINVAL, f"register 0x{addr:X} outside the core or unaligned")
        if off == REG_STATUS:
            if s.poll_status is not None:
                s.poll_status()
            s.core_status[core] &= ~value
        elif off == REG_SCRATCH:
            s.core_scratch[core] = value
        return
    if addr > SPI_REG_MAX:
        raise IioError(errno.EINVAL, f"AD9363 register 0x{addr:X} past 0x{SPI_REG_MAX:X}")
    if addr != SPI_PRODUCT_ID:  # read-only
        s.spi[addr] = value & 0xFF


def reg_access_attr(s: PlutoState, dev_id: str, core: str | None) -> Attr:
    """The debugfs ``direct_reg_access`` file: writing "ADDR" selects a register, "ADDR VALUE"
    writes it (and selects it); reading gives the selected register as "0x%X". libiio's
    iio_device_reg_read writes the address (decimal) then reads; iio_device_reg_write writes
    "0x<addr> 0x<value>"."""

    def read() -> str:
        return f"0x{reg_read(s, core, s.reg_addr.get(dev_id, 0)):X}"

    def write(text: str) -> None:
        parts = text.split()
        if len(parts) not in (1, 2):
            raise IioError(errno.EINVAL, f"direct_reg_access: {text!r}")
        addr = _c_int(parts[0])
        if len(parts) == 2:
            reg_write(s, core, addr, _c_int(parts[1]))
        s.reg_addr[dev_id] = addr

    return Attr("direct_reg_access", read, write)


def _ro(v: Callable[[], object]) -> Callable[[], str]:
    return lambda: str(v())


def _setter(s: PlutoState, key: str, parse: Callable[[str], object], what: str | None = None):
    """A writer that parses the text into state attribute ``key`` and reports the change."""

    def w(text: str) -> None:
        setattr(s, key, parse(text))
        s.changed(what or key)

    return w


def _choice_attrs(s: PlutoState, name: str, key: str, options: tuple[str, ...]) -> dict[str, Attr]:
    """A setting with a fixed list of values (state attribute ``key``), and the
    ``<name>_available`` list a Pluto shows beside it."""
    return {
        name: Attr(name, lambda: getattr(s, key), _setter(s, key, lambda t: _choice(t, options))),
        f"{name}_available": Attr(f"{name}_available", lambda: " ".join(options)),
    }


def build_pluto(s: PlutoState) -> list[Device]:
    """The Pluto's IIO devices as the twin presents them: the transceiver (ad9361-phy), the
    Zynq's monitor ADC (xadc) and the two DMA cores (the DAC's: TX and the DDS; the ADC's: RX),
    every attribute reading and writing ``s``."""
    return [_phy(s), _xadc(), _dac_core(s), _adc_core(s)]


# ------------------------------------------------------------ ad9361-phy
def _lo_channel(s: PlutoState, cid: str, name: str, key: str, pd_key: str) -> Channel:
    """An LO (RX_LO or TX_LO): frequency in Hz, power-down, the fastlock profile stubs."""
    c = Channel(cid, True, name)
    c.attrs = {
        "frequency": Attr(
            "frequency",
            _ro(lambda: getattr(s, key)),
            _setter(s, key, lambda t: _int(t, LO_MIN_HZ, LO_MAX_HZ)),
        ),
        "frequency_available": Attr(
            "frequency_available", lambda: f"[{int(LO_MIN_HZ)} 1 {int(LO_MAX_HZ)}]"
        ),
        "external": Attr("external", lambda: "0", lambda t: None),
        "fastlock_load": Attr("fastlock_load", lambda: "0", lambda t: None),
        "fastlock_recall": Attr("fastlock_recall", lambda: "0", lambda t: None),
        "fastlock_save": Attr("fastlock_save", lambda: "0 " + ",".join(["0"] * 16)),
        "fastlock_store": Attr("fastlock_store", lambda: "0", lambda t: None),
        "powerdown": Attr(
            "powerdown",
            _ro(lambda: getattr(s, pd_key)),
            _setter(s, pd_key, lambda t: _int(t, 0, 1)),
        ),
    }
    return c


def _phy(s: PlutoState) -> Device:
    """ad9361-phy: the transceiver's settings (LOs, rate, bandwidths, gains, ports, FIR,
    tracking, calibration, ENSM) and its SPI registers."""
    phy = Device("iio:device0", "ad9361-phy")

    def rate_write(text: str) -> None:
        v = _int(text, 0, 2**32 - 1)
        if not s.rate_min <= v <= int(RATE_MAX_HZ):
            raise IioError(
                errno.EINVAL, f"sampling_frequency {v} outside [{s.rate_min}, {int(RATE_MAX_HZ)}]"
            )
        s.sample_rate = v
        s.changed("sample_rate")

    def fir_en_write(text: str) -> None:
        v = _int(text, 0, 1)
        if v and not s.fir_text:
            raise IioError(errno.EINVAL, "no FIR loaded (write filter_fir_config first)")
        if not v and s.sample_rate < RATE_NATIVE_MIN_HZ:
            raise IioError(errno.EINVAL, "the sample rate needs the FIR: raise it before disabling")
        s.fir_en = bool(v)
        s.changed("fir")

    fir_en = Attr("filter_fir_en", lambda: str(int(s.fir_en)), fir_en_write)
    rx0, tx0 = _phy_rx(s, rate_write, fir_en), _phy_tx(s, rate_write, fir_en)
    rx_shared = {k: a for k, a in rx0.attrs.items() if a.shared}
    tx_shared = {k: a for k, a in tx0.attrs.items() if a.shared}
    phy.channels = [
        _lo_channel(s, "altvoltage0", "RX_LO", "rx_lo", "rx_lo_powerdown"),
        _lo_channel(s, "altvoltage1", "TX_LO", "tx_lo", "tx_lo_powerdown"),
        rx0,
        tx0,
        *_phy_monitors(s, rx_shared, tx_shared, fir_en),
    ]

    def fir_config_write(text: str) -> None:
        taps, dec = parse_fir_config(text)
        s.fir_text, s.fir_dec = text, dec
        s.fir_taps = taps
        s.changed("fir")

    def fir_config_read() -> str:
        if not s.fir_text:
            return "FIR Rx: 0,0 Tx: 0,0"
        return f"FIR Rx: {s.fir_taps},{s.fir_dec} Tx: {s.fir_taps},{s.fir_dec}"

    phy.attrs = {
        **_choice_attrs(s, "calib_mode", "calib_mode", CALIB_MODES),
        **_choice_attrs(s, "ensm_mode", "ensm_mode", ENSM_MODES),
        "filter_fir_config": Attr("filter_fir_config", fir_config_read, fir_config_write),
        "rx_path_rates": Attr("rx_path_rates", lambda: _rates(s, "RX")),
        "tx_path_rates": Attr("tx_path_rates", lambda: _rates(s, "TX")),
        **_choice_attrs(s, "trx_rate_governor", "rate_governor", RATE_GOVERNORS),
        "xo_correction": Attr(
            "xo_correction",
            _ro(lambda: s.xo_correction),
            _setter(s, "xo_correction", lambda t: _int(t, XO_NOMINAL - 8000, XO_NOMINAL + 8000)),
        ),
        "xo_correction_available": Attr(
            "xo_correction_available", lambda: f"[{XO_NOMINAL - 8000} 1 {XO_NOMINAL + 8000}]"
        ),
    }
    phy.debug = {
        "loopback": Attr(
            "loopback", _ro(lambda: s.loopback), _setter(s, "loopback", lambda t: _int(t, 0, 2))
        ),
        "initialize": Attr("initialize", lambda: "0", lambda t: None),
        "adi,xo-disable-use-ext-refclk-enable": Attr(
            "adi,xo-disable-use-ext-refclk-enable", lambda: "0"
        ),
        "direct_reg_access": reg_access_attr(s, phy.id, None),
    }

    return phy


def _phy_rx(s: PlutoState, rate_write: Callable[[str], None], fir_en: Attr) -> Channel:
    """The receive channel (in_voltage0): rate, bandwidth, gain and its mode, port, RSSI, FIR
    enable, the tracking loops."""

    def rx_gain_read() -> str:
        g = s.current_gain() if s.current_gain is not None else s.rx_gain
        return f"{round(g):d}.000000 dB"

    def rx_gain_write(text: str) -> None:
        v = _fixpoint(text, *RX_GAIN_DB)
        if s.gain_mode != "manual":
            return  # the driver keeps the AGC's gain
        s.rx_gain = float(round(v))
        s.changed("rx_gain")

    def rssi() -> str:
        return f"{s.current_rssi() if s.current_rssi is not None else 100.0:.2f} dB"

    rx0 = Channel("voltage0", False)
    rx0.attrs = {
        "sampling_frequency": Attr("sampling_frequency", _ro(lambda: s.sample_rate), rate_write),
        "sampling_frequency_available": Attr(
            "sampling_frequency_available", lambda: f"[{s.rate_min} 1 {int(RATE_MAX_HZ)}]"
        ),
        "rf_bandwidth": Attr(
            "rf_bandwidth", _ro(lambda: s.rx_bw), _setter(s, "rx_bw", lambda t: _int(t, *RX_BW_HZ))
        ),
        "rf_bandwidth_available": Attr(
            "rf_bandwidth_available", lambda: f"[{RX_BW_HZ[0]} 1 {RX_BW_HZ[1]}]"
        ),
        "hardwaregain": Attr("hardwaregain", rx_gain_read, rx_gain_write),
        "hardwaregain_available": Attr(
            "hardwaregain_available", lambda: f"[{RX_GAIN_DB[0]:g} 1 {RX_GAIN_DB[1]:g}]"
        ),
        **_choice_attrs(s, "gain_control_mode", "gain_mode", GAIN_MODES),
        **_choice_attrs(s, "rf_port_select", "rx_port", RX_PORTS),
        "rssi": Attr("rssi", rssi),
        "filter_fir_en": fir_en,
    }
    for key, attr in (
        ("bb_dc", "bb_dc_offset_tracking_en"),
        ("rf_dc", "rf_dc_offset_tracking_en"),
        ("quad", "quadrature_tracking_en"),
    ):

        def tw(text: str, key=key) -> None:
            s.tracking[key] = _int(text, 0, 1)

        rx0.attrs[attr] = Attr(attr, lambda key=key: str(s.tracking[key]), tw)
    # the driver's shared-by-type attributes: one sysfs file (in_voltage_sampling_frequency) that
    # every channel of the type and direction lists, as gr-iio's set_params addresses them
    for n in (
        "sampling_frequency",
        "sampling_frequency_available",
        "rf_bandwidth",
        "rf_bandwidth_available",
        "gain_control_mode_available",
        "rf_port_select_available",
        "filter_fir_en",
        "bb_dc_offset_tracking_en",
        "rf_dc_offset_tracking_en",
        "quadrature_tracking_en",
    ):
        rx0.attrs[n] = shared(rx0.attrs[n])
    return rx0


def _phy_tx(s: PlutoState, rate_write: Callable[[str], None], fir_en: Attr) -> Channel:
    """The transmit channel (out_voltage0): gain in 0.25 dB steps, bandwidth, rate, port."""

    def tx_gain_write(text: str) -> None:
        v = _fixpoint(text, *TX_GAIN_DB)
        s.tx_gain = round(v / TX_GAIN_STEP_DB) * TX_GAIN_STEP_DB
        s.changed("tx_gain")

    tx0 = Channel("voltage0", True)
    tx0.attrs = {
        "hardwaregain": Attr("hardwaregain", lambda: f"{s.tx_gain:.6f} dB", tx_gain_write),
        "hardwaregain_available": Attr(
            "hardwaregain_available",
            lambda: f"[{TX_GAIN_DB[0]:.6f} {TX_GAIN_STEP_DB:.6f} {TX_GAIN_DB[1]:.6f}]",
        ),
        "rf_bandwidth": Attr(
            "rf_bandwidth", _ro(lambda: s.tx_bw), _setter(s, "tx_bw", lambda t: _int(t, *TX_BW_HZ))
        ),
        "rf_bandwidth_available": Attr(
            "rf_bandwidth_available", lambda: f"[{TX_BW_HZ[0]} 1 {TX_BW_HZ[1]}]"
        ),
        "sampling_frequency": Attr("sampling_frequency", _ro(lambda: s.sample_rate), rate_write),
        "sampling_frequency_available": Attr(
            "sampling_frequency_available", lambda: f"[{s.rate_min} 1 {int(RATE_MAX_HZ)}]"
        ),
        **_choice_attrs(s, "rf_port_select", "tx_port", TX_PORTS),
        "rssi": Attr("rssi", lambda: "0.00 dB"),
        "filter_fir_en": fir_en,
    }
    for n in (  # shared by type, as on the RX side
        "sampling_frequency",
        "sampling_frequency_available",
        "rf_bandwidth",
        "rf_bandwidth_available",
        "rf_port_select_available",
        "filter_fir_en",
    ):
        tx0.attrs[n] = shared(tx0.attrs[n])
    return tx0


def _phy_monitors(s: PlutoState, rx_shared: dict, tx_shared: dict, fir_en: Attr) -> list[Channel]:
    """The AD9363's auxiliary ADC and DACs, its temperature sensor (monitor values, as a
    Pluto reads them) and the FIR enable's ``out`` channel."""

    def aux_dac(cid: str) -> Channel:
        c = Channel(cid, True)
        c.attrs = {
            **tx_shared,
            "raw": Attr(
                "raw",
                lambda: str(s.aux_dac.get(cid, 306)),
                lambda t: s.aux_dac.__setitem__(cid, _int(t, 0, 3300)),
            ),
            "scale": Attr("scale", lambda: "1.000000"),
        }
        return c

    aux_adc = Channel("voltage2", False)
    aux_adc.attrs = {
        **rx_shared,
        "offset": Attr("offset", lambda: "57"),
        "raw": Attr("raw", lambda: "846"),
        "scale": Attr("scale", lambda: "0.305250"),
    }
    phy_temp = Channel("temp0", False)
    phy_temp.attrs = {"input": Attr("input", lambda: "39474")}
    fir_out = Channel("out", False)
    fir_out.attrs = {
        "voltage_filter_fir_en": Attr(
            "voltage_filter_fir_en",
            fir_en.read,
            fir_en.write,
            filename="in_out_voltage_filter_fir_en",
        )
    }
    return [aux_adc, aux_dac("voltage2"), aux_dac("voltage3"), phy_temp, fir_out]


# ------------------------------------------------------------ xadc (monitor only)
def _xadc() -> Device:
    """xadc: the Zynq's monitor ADC (temperature and supply voltages, fixed values)."""
    xadc = Device("iio:device1", "xadc")
    temp = Channel("temp0", False)
    temp.attrs = {
        "raw": Attr("raw", lambda: "2520"),
        "offset": Attr("offset", lambda: "-2219"),
        "scale": Attr("scale", lambda: "123.040771484"),
    }
    xadc.channels = [temp]
    for i, (label, raw) in enumerate(
        (
            ("vccint", 1379),
            ("vccaux", 2453),
            ("vccbram", 1381),
            ("vccpint", 1368),
            ("vccpaux", 2451),
            ("vccoddr", 1840),
            ("vrefp", 1703),
            ("vrefn", -2),
        )
    ):
        c = Channel(f"voltage{i}", False, label)
        c.attrs = {
            "raw": Attr("raw", lambda raw=raw: str(raw)),
            "scale": Attr("scale", lambda: "0.732421875"),
        }
        xadc.channels.append(c)
    xadc.attrs = {"sampling_frequency": Attr("sampling_frequency", lambda: "961538")}

    return xadc


# ------------------------------------------------------------ DMA devices
def _calib(s: PlutoState, dev: str, cid: str, key: str, default: str) -> Attr:
    """A DMA channel's calibration cell (checked as fixed point, kept as written)."""

    def w(text: str) -> None:
        _fixpoint(text, -1e6, 1e6)
        s.calib[(dev, cid, key)] = text

    return Attr(key, lambda: s.calib.get((dev, cid, key), default), w)


def _dma_rate(s: PlutoState, key: str) -> Attr:
    """The DMA core's rate: the AD9363's, or an eighth with the FPGA's x8 filter."""

    def w(text: str) -> None:
        v = _int(text, 0, 2**32 - 1)
        if v not in (s.sample_rate, s.sample_rate // 8):
            raise IioError(errno.EINVAL, f"{v} not in {s.sample_rate} {s.sample_rate // 8}")
        setattr(s, key, v != s.sample_rate)
        s.changed(key)

    return Attr(
        "sampling_frequency",
        lambda: str(s.sample_rate // 8 if getattr(s, key) else s.sample_rate),
        w,
    )


def _dma_rates(s: PlutoState) -> Attr:
    return Attr("sampling_frequency_available", lambda: f"{s.sample_rate} {s.sample_rate // 8}")


def _buffer_attrs() -> dict[str, Attr]:
    return {
        "data_available": Attr("data_available", lambda: "0"),
        "length_align_bytes": Attr("length_align_bytes", lambda: "8"),
        "watermark": Attr("watermark", lambda: "2048", lambda t: None),
    }


def _dac_core(s: PlutoState) -> Device:
    """The DAC's DMA core: the TX buffer's two scan channels (I, Q) and the DDS's four tones."""
    dds = Device("iio:device2", DAC_CORE_DEVICE)
    for i in range(2):
        c = Channel(f"voltage{i}", True, scan=(i, "le:S16/16>>0"))
        c.attrs = {
            "calibphase": _calib(s, "dds", c.id, "calibphase", "0.000000"),
            "calibscale": _calib(s, "dds", c.id, "calibscale", "1.000000"),
            "sampling_frequency": shared(_dma_rate(s, "tx_int8")),
            "sampling_frequency_available": shared(_dma_rates(s)),
        }
        dds.channels.append(c)
    for i, name in enumerate(("TX1_I_F1", "TX1_I_F2", "TX1_Q_F1", "TX1_Q_F2")):

        def dds_attr(key: str, parse: Callable[[str], object], fmt: Callable[[object], str], i=i):
            def w(text: str) -> None:
                s.dds[i][key] = parse(text)
                s.changed("dds")

            return Attr(key, lambda: fmt(s.dds[i][key]), w)

        c = Channel(f"altvoltage{i}", True, name)
        c.attrs = {
            "frequency": dds_attr("frequency", lambda t: _int(t, 0, 30_720_000), str),
            "phase": dds_attr("phase", lambda t: _int(t, 0, 360_000), str),
            "raw": dds_attr("raw", lambda t: _int(t, 0, 1), str),
            "scale": dds_attr("scale", lambda t: _fixpoint(t, 0.0, 1.0), lambda v: f"{v:.6f}"),
            "sampling_frequency": shared(Attr("sampling_frequency", lambda: str(s.sample_rate))),
        }
        dds.channels.append(c)
    dds.buffer = _buffer_attrs()
    dds.debug = {"direct_reg_access": reg_access_attr(s, dds.id, "dac")}
    return dds


def _adc_core(s: PlutoState) -> Device:
    """The ADC's DMA core: the RX buffer's two scan channels (I, Q)."""
    adc = Device("iio:device3", ADC_CORE_DEVICE)
    for i in range(2):
        c = Channel(f"voltage{i}", False, scan=(i, "le:S12/16>>0"))
        c.attrs = {
            "calibbias": _calib(s, "adc", c.id, "calibbias", "0"),
            "calibphase": _calib(s, "adc", c.id, "calibphase", "0.000000"),
            "calibscale": _calib(s, "adc", c.id, "calibscale", "1.000000"),
            "sampling_frequency": shared(_dma_rate(s, "rx_dec8")),
            "sampling_frequency_available": shared(_dma_rates(s)),
        }
        adc.channels.append(c)
    adc.buffer = _buffer_attrs()
    adc.debug = {"direct_reg_access": reg_access_attr(s, adc.id, "adc")}
    return adc


# -------------------------------------------------------------------------- XML

# The document type of a libiio context, as the clients validate it.
DTD = (
    "<!DOCTYPE context ["
    "<!ELEMENT context (device | context-attribute)*>"
    "<!ELEMENT context-attribute EMPTY>"
    "<!ELEMENT device (channel | attribute | debug-attribute | buffer-attribute)*>"
    "<!ELEMENT channel (scan-element?, attribute*)>"
    "<!ELEMENT attribute EMPTY>"
    "<!ELEMENT scan-element EMPTY>"
    "<!ELEMENT debug-attribute EMPTY>"
    "<!ELEMENT buffer-attribute EMPTY>"
    "<!ATTLIST context name CDATA #REQUIRED version-major CDATA #REQUIRED "
    "version-minor CDATA #REQUIRED version-git CDATA #REQUIRED description CDATA #IMPLIED>"
    "<!ATTLIST context-attribute name CDATA #REQUIRED value CDATA #REQUIRED>"
    "<!ATTLIST device id CDATA #REQUIRED name CDATA #IMPLIED label CDATA #IMPLIED>"
    "<!ATTLIST channel id CDATA #REQUIRED type (input|output) #REQUIRED name CDATA #IMPLIED>"
    "<!ATTLIST scan-element index CDATA #REQUIRED format CDATA #REQUIRED scale CDATA #IMPLIED>"
    "<!ATTLIST attribute name CDATA #REQUIRED filename CDATA #IMPLIED value CDATA #IMPLIED>"
    "<!ATTLIST debug-attribute name CDATA #REQUIRED value CDATA #IMPLIED>"
    "<!ATTLIST buffer-attribute name CDATA #REQUIRED value CDATA #IMPLIED>"
    "]>"
)

CONTEXT_ATTRS = {
    "hw_model": "Analog Devices PlutoSDR Rev.C (Z7010-AD9363A)",
    "hw_model_variant": "0",
    "hw_serial": "hil-twin-0001",
    "fw_version": "v0.32",
    "ad9361-phy,xo_correction": str(XO_NOMINAL),
    "ad9361-phy,model": "ad9363a",
    "local,kernel": "hil-twin",
    "description": "hil Pluto twin: a simulated ADALM-PLUTO behind the libiio network protocol",
}
VERSION = (0, 24, "v0.24")


def context_xml(devices: list[Device]) -> str:
    q = quoteattr
    out = [
        '<?xml version="1.0" encoding="utf-8"?>',
        DTD,
        f'<context name="network" version-major="{VERSION[0]}" version-minor="{VERSION[1]}" '
        f"version-git={q(VERSION[2])} description={q(CONTEXT_ATTRS['description'])} >",
    ]
    for k, v in CONTEXT_ATTRS.items():
        out.append(f"<context-attribute name={q(k)} value={q(v)} />")
    for d in devices:
        out.append(f"<device id={q(d.id)} name={q(d.name)} >")
        for c in [*d.scan_channels, *(c for c in d.channels if not c.scan)]:
            name = f" name={q(c.name)}" if c.name else ""
            kind = "output" if c.output else "input"
            out.append(f'<channel id={q(c.id)}{name} type="{kind}" >')
            if c.scan:
                out.append(
                    f'<scan-element index="{c.scan[0]}" format={q(c.scan[1])} scale="1.000000" />'
                )
            for a in sorted(c.attrs.values(), key=lambda a: a.name):  # sysfs order, as iiod
                out.append(f"<attribute name={q(a.name)} filename={q(a.file(c))} />")
            out.append("</channel>")
        for a in sorted(d.attrs):
            out.append(f"<attribute name={q(a)} />")
        for a in d.debug:
            out.append(f"<debug-attribute name={q(a)} />")
        for a in d.buffer:
            out.append(f"<buffer-attribute name={q(a)} />")
        out.append("</device>")
    out.append("</context>")
    return "".join(out)


def mask_channels(dev: Device, mask_hex: str) -> list[Channel]:
    """Parse a channel mask (8 hex digits per 32-bit word, most significant word first) -> the
    enabled scan channels in mask-bit order; -EINVAL for a wrong length, bad digits, no channel,
    or a bit past the scan channels."""
    if len(mask_hex) != 8 * dev.words or not re.fullmatch(r"[0-9a-fA-F]+", mask_hex):
        raise IioError(errno.EINVAL, f"mask {mask_hex!r}: need {8 * dev.words} hex digits")
    bits = int(mask_hex, 16)
    scan = dev.scan_channels
    if bits == 0 or bits >> len(scan):
        raise IioError(
            errno.EINVAL, f"mask {mask_hex} enables no channel or one that is not a scan element"
        )
    return [c for i, c in enumerate(scan) if bits >> i & 1]


def clamp_gain(g: float) -> float:
    return float(min(max(g, RX_GAIN_DB[0]), RX_GAIN_DB[1]))


def rssi_db(power_dbfs: float) -> float:
    """A Pluto-like RSSI reading (dB below a reference) from the received power."""
    return round(max(0.0, -power_dbfs) * 4) / 4 if math.isfinite(power_dbfs) else 127.75
