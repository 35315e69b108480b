"""Facts of the ADALM-PLUTO and its AD9363 transceiver, in one place.

The Pluto backend, the simulated radio, the libiio twin and SigMF I/O all read
these; nothing else writes a device number down. Values as the stock Pluto
firmware (v0.38) reports them through libiio (``sampling_frequency_available``,
``hardwaregain_available``, ...) and as the AD9361 driver and the ADI HDL
handle samples.

Rates are integers in Hz, as the driver takes them: without the FIR filter the
AD9363 runs down to 25 MHz / 12 = 2 083 333 Hz; its FIR decimating by 4 brings
that to 520 833 Hz, and the FPGA's decimation by 8 after it (``hil`` uses it for
the slowest rates) to 65 105 Hz.
"""

from __future__ import annotations

# -- tuning ------------------------------------------------------------------------------
LO_MIN_HZ, LO_MAX_HZ = 325_000_000, 3_800_000_000  # AD9363 as the Pluto ships
LO_MIN_AD9364_HZ, LO_MAX_AD9364_HZ = 70_000_000, 6_000_000_000  # with the AD9364 firmware option

# -- rates and bandwidths (Hz) ------------------------------------------------------------
RATE_MAX_HZ = 61_440_000
RATE_NATIVE_MIN_HZ = 2_083_333  # 25 MHz / 12: the lowest rate without the FIR decimating
FIR_DECIMATION = 4
RATE_FIR_MIN_HZ = RATE_NATIVE_MIN_HZ // FIR_DECIMATION  # 520 833
RATE_FPGA_DEC_MIN_HZ = 65_105  # with the FPGA's decimation by 8 after the FIR
RX_BW_HZ = (200_000, 56_000_000)
TX_BW_HZ = (200_000, 40_000_000)

# -- gains (dB) ---------------------------------------------------------------------------
RX_GAIN_DB = (-3.0, 71.0)  # hardwaregain_available [-3 1 71]
RX_GAIN_STEP_DB = 1.0
TX_GAIN_DB = (-89.75, 0.0)  # TX attenuation: hardwaregain_available [-89.75 0.25 0]
TX_GAIN_STEP_DB = 0.25
GAIN_MODES = ("manual", "fast_attack", "slow_attack", "hybrid")  # gain_control_mode_available

# -- converters ---------------------------------------------------------------------------
ADC_BITS = 12
ADC_FULL_SCALE = 2048  # RX samples are 12-bit codes -2048..2047 in int16 (sign-extended)
DAC_BITS = 12
DAC_DRIVE = 2**14  # the int16 code that drives the DAC to full scale 1.0 (top 12 bits are kept)
DAC_DISCARDED_BITS = 16 - DAC_BITS  # the low bits of each int16 the DAC ignores

# -- debug registers (direct_reg_access; ADI HDL axi_ad9361: library common/up_adc_common.v and
# up_dac_common.v; Linux cf_axi_adc / cf_axi_dds / ad9361 drivers). gr-iio polls REG_STATUS of
# both DMA cores (0x80000088) for overflow and underflow.
# An address with bit 31 set (the drivers' DEBUGFS_DRA_PCORE_REG_MAGIC) is a byte offset into the
# DMA core's registers; one without it goes to the AD9363 over SPI (10-bit address, 8-bit value).
ADC_CORE_DEVICE = "cf-ad9361-lpc"  # the IIO devices of the HDL cores (RX and TX DMA)
DAC_CORE_DEVICE = "cf-ad9361-dds-core-lpc"
PCORE_MAGIC = 0x8000_0000
REG_VERSION, REG_ID, REG_SCRATCH, REG_RSTN, REG_STATUS = 0x00, 0x04, 0x08, 0x40, 0x88
ADC_STATUS_OVF = 1 << 2  # up_adc_common 0x22 (byte 0x88): {ovf, unf, 0}, write-1-to-clear
ADC_STATUS_UNF = 1 << 1
DAC_STATUS_UNF = 1 << 0  # up_dac_common 0x22: {unf}, write-1-to-clear
CORE_VERSION = {"adc": 0x000A_0062, "dac": 0x0009_0162}
CORE_REGS_BYTES = {"adc": 0x6000, "dac": 0x1000}  # the cores' register windows (device tree)
CORE_RSTN = 0x3  # mmcm_resetn | resetn: the core running
SPI_REG_MAX = 0x3FF
SPI_PRODUCT_ID = 0x037  # REG_PRODUCT_ID: 0x08 (AD9361 family) | revision 2
SPI_PRODUCT_ID_VALUE = 0x0A


def same_rate(a_hz: float, b_hz: float) -> bool:
    """Two sample rates are the same to the hertz (the driver takes integer rates): the check
    wherever a rate meets the PHY config's, the one source of the sample rate."""
    return abs(float(a_hz) - float(b_hz)) <= 0.5
