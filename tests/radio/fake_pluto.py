"""A stand-in for ``adi.Pluto`` that reproduces pyadi-iio 0.0.21's documented behaviour.

- ``rx()`` returns complex128 at raw ADC scale (+-2048), ``rx_buffer_size`` samples;
  the first ``kernel_buffers`` reads after the buffer is created hold stale samples;
- ``tx()`` takes int16-scaled complex (2**14 ~ full scale); the first call fixes
  the buffer length, a different length raises; with ``tx_cyclic_buffer`` set, a
  second ``tx()`` raises until ``tx_destroy_buffer()``; setting
  ``tx_cyclic_buffer`` while a buffer exists raises;
- ``rx_hardwaregain_chan0`` writes are ignored unless the gain mode is manual;
- ``sample_rate`` below 521 kSps raises ValueError.
Behind it runs the simulated Pluto engine, so TX comes back as RX.
"""

import threading

import numpy as np

from hil.radio.config import RadioConfig, SimConfig
from hil.radio.sim import SimEngine


class _RxAdc:
    def __init__(self, owner):
        self.owner = owner

    def set_kernel_buffers_count(self, n):
        if self.owner._rx_created:
            raise Exception("kernel buffer count must be set before the buffer is created")
        self.owner.kernel_buffers = n


class FakePluto:
    def __init__(self, sim: SimConfig | None = None, fail_rx_after: int | None = None):
        self._sim = sim or SimConfig()
        self._rxadc = _RxAdc(self)
        self.kernel_buffers = 4
        self._sample_rate = 30_720_000
        self.rx_lo = 2_400_000_000
        self.tx_lo = 2_450_000_000
        self.rx_rf_bandwidth = 18_000_000
        self.tx_rf_bandwidth = 18_000_000
        self.gain_control_mode_chan0 = "slow_attack"
        self._rx_gain = 71.0
        self.tx_hardwaregain_chan0 = -10.0
        self.rx_buffer_size = 1024
        self.loopback = 0
        self._tx_cyclic_buffer = False
        self._txbuf = None
        self._rx_created = False
        self._engine = None
        # the radio's TX and RX threads call tx() and rx() at once, as on hardware, whose
        # buffers are independent; the sim engine behind them is one object: one at a time
        self._lock = threading.Lock()
        self.fail_rx_after = fail_rx_after
        self.rx_calls = 0
        self.destroyed_tx = 0
        self.tx_lengths = []
        self.fail_tx = False

    # properties with driver semantics
    @property
    def sample_rate(self):
        return self._sample_rate

    @sample_rate.setter
    def sample_rate(self, rate):
        if rate < 521e3:
            raise ValueError("Error: Does not currently support sample rates below 521e3")
        self._sample_rate = int(rate)

    @property
    def rx_hardwaregain_chan0(self):
        return self._engine.gain_db if self._engine else self._rx_gain

    @rx_hardwaregain_chan0.setter
    def rx_hardwaregain_chan0(self, value):
        if self.gain_control_mode_chan0 != "manual":
            return  # the driver ignores it
        self._rx_gain = float(value)
        if self._engine:
            self._engine.set_gain(value)

    @property
    def tx_cyclic_buffer(self):
        return self._tx_cyclic_buffer

    @tx_cyclic_buffer.setter
    def tx_cyclic_buffer(self, value):
        if self._txbuf:
            raise Exception(
                "TX buffer has been created, it must be destroyed then recreated to modify tx_cyclic_buffer"
            )
        self._tx_cyclic_buffer = value

    def _eng(self):
        if self._engine is None:
            cfg = RadioConfig(
                backend="sim",
                lo_hz=float(self.rx_lo),
                sample_rate_hz=float(self._sample_rate),
                rx_gain_mode=self.gain_control_mode_chan0,
                rx_gain_db=self._rx_gain,
                tx_gain_db=float(self.tx_hardwaregain_chan0),
                sim=self._sim,
            )
            self._engine = SimEngine(cfg)
            self._engine.stale_left = self.kernel_buffers
        return self._engine

    def rx(self):
        self.rx_calls += 1
        if self.fail_rx_after is not None and self.rx_calls > self.fail_rx_after:
            raise OSError(19, "No such device")
        self._rx_created = True
        with self._lock:
            raw, _ = self._eng().raw_rx(self.rx_buffer_size)
        return raw

    def tx(self, data):
        data = np.asarray(data)
        if self.fail_tx:
            raise OSError(110, "Connection timed out")
        self.tx_lengths.append(len(data))
        if self._txbuf and self._tx_cyclic_buffer:
            raise Exception(
                "TX buffer has been submitted in cyclic mode. To push more data the tx buffer must be destroyed first."
            )
        if not self._txbuf:
            self._txbuf = len(data)
        elif self._txbuf != len(data):
            raise Exception(
                "Buffer length different than data length. Cannot change buffer length on the fly"
            )
        with self._lock:
            self._eng().tx(
                np.clip(data.real, -(2**15), 2**15 - 1) / 2**14
                + 1j * np.clip(data.imag, -(2**15), 2**15 - 1) / 2**14,
                cyclic=self._tx_cyclic_buffer,
            )

    def tx_destroy_buffer(self):
        self._txbuf = None
        self.destroyed_tx += 1
        if self._engine:
            with self._lock:
                self._engine.stop_cyclic()

    def rx_destroy_buffer(self):
        self._rx_created = False

    @property
    def transmitting(self):
        return self._engine is not None and self._engine.cyclic is not None
