"""The ``pluto`` backend: an ADALM-PLUTO through pyadi-iio.

What it takes care of, because pyadi-iio does not:
- validated configuration mapped to the driver's attributes, in an order the
  driver accepts (gain mode before gain; buffer sizes and kernel buffer count
  before the first buffer exists);
- scaling: ``tx`` takes full scale 1.0 and writes int16 at 2**14 (the DAC
  keeps the top 12 bits); ``rx`` returns complex128 ADC codes (+-2048) from
  pyadi, which become complex64 at full scale 1.0;
- the stale kernel buffers at RX start are read and discarded;
- non-cyclic streaming TX from a thread, in fixed-size buffers (pyadi
  refuses a second buffer of another size), zero-padded when short and
  zero buffers when idle, so RX is never starved by a blocking tx() and the
  DAC never runs dry mid-stream; cyclic TX destroys the previous buffer
  first (pyadi refuses to replace a cyclic buffer);
- an overflow heuristic: pyadi reports no overruns, so a gap between rx()
  returns longer than the kernel buffers can hold marks the block OVERFLOW
  and advances the sample counter by the estimated loss;
- a silent transmitter on close, on error and at interpreter exit
  (``tx_destroy_buffer``; a cyclic carrier otherwise keeps radiating);
- clear errors for a missing libiio, a wrong URI, no device.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
import weakref

import numpy as np

from .ad9363 import (
    ADC_CORE_DEVICE,
    ADC_FULL_SCALE,
    ADC_STATUS_OVF,
    DAC_CORE_DEVICE,
    DAC_DRIVE,
    DAC_STATUS_UNF,
    PCORE_MAGIC,
    REG_STATUS,
)
from .base import BlockFlag, Radio, RadioError, RxBlock, check_tx_samples
from .config import RadioConfig

log = logging.getLogger("hil.radio.pluto")

DRIVE = DAC_DRIVE  # int16 code for full scale 1.0
ADC_FS = float(ADC_FULL_SCALE)

_OPEN: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _silence_all() -> None:  # pragma: no cover - exercised at interpreter exit
    for r in list(_OPEN):
        try:
            r.close()
        except Exception:
            pass


def open_pluto(uri: str):
    """adi.Pluto(uri) with errors that say what to do."""
    try:
        import adi
    except ImportError as exc:
        raise RadioError(
            "pyadi-iio is not installed: pip install -e '.[pluto]' (it needs the libiio C library: "
            "apt-get install libiio0, which pairs with pylibiio==0.25)"
        ) from exc
    except OSError as exc:
        raise RadioError(f"libiio could not be loaded ({exc}); apt-get install libiio0") from exc
    try:
        return adi.Pluto(uri=uri)
    except Exception as exc:  # pyadi raises bare Exception and OSError/ConnectionError variants
        raise RadioError(
            f"no Pluto at {uri!r}: {exc}. Check the cable / IP (ping 192.168.2.1), "
            "`iio_info -s` to list devices, and the URI form ip:HOST or usb:BUS.DEV.N"
        ) from exc


class PlutoRadio(Radio):
    """Drive an ADALM-PLUTO. ``device`` injects a pyadi-like object (tests use a fake)."""

    def __init__(self, cfg: RadioConfig, device=None):
        self.cfg = cfg
        self.sdr = None
        self._device = device
        self._cyclic = False
        self._closed = False
        self._txq: queue.Queue | None = None
        self._tx_thread: threading.Thread | None = None
        self._tx_stop = threading.Event()
        self._tx_error: Exception | None = None
        self._pack_lock = threading.Lock()
        self._pack: np.ndarray | None = None  # the TX buffer being filled; see _new_pack
        self._fill = 0
        self._handing = 0  # samples the TX thread is handing to the driver right now
        # zeros between frames keep the DAC fed; off for injected devices whose tx() does not block
        self.idle_fill = device is None
        self._counter = 0
        self._rx_captured: float | None = None
        self.overflows = 0
        # what the HDL itself saw (the cores' sticky status bits; None where unreadable)
        self.hw_status: dict[str, int] | None = None
        self.configure(cfg)
        _OPEN.add(self)

    def configure(self, cfg: RadioConfig) -> None:
        if cfg.backend != "pluto":
            raise RadioError(f"PlutoRadio needs backend 'pluto', got {cfg.backend!r}")
        if self.sdr is not None:
            self._silence()
        self.cfg = cfg
        with self._pack_lock:
            self._new_pack()
        sdr = self._device if self._device is not None else open_pluto(cfg.uri)
        self.sdr = sdr
        try:
            rxadc = getattr(sdr, "_rxadc", None)
            if rxadc is not None and hasattr(rxadc, "set_kernel_buffers_count"):
                rxadc.set_kernel_buffers_count(cfg.kernel_buffers)
            sdr.sample_rate = int(cfg.sample_rate_hz)
            sdr.rx_lo = int(cfg.lo_hz)
            sdr.tx_lo = int(cfg.lo_hz)
            sdr.rx_rf_bandwidth = int(cfg.rx_bw)
            sdr.tx_rf_bandwidth = int(cfg.tx_bw)
            sdr.gain_control_mode_chan0 = cfg.rx_gain_mode
            if cfg.rx_gain_mode == "manual":
                sdr.rx_hardwaregain_chan0 = float(cfg.rx_gain_db)
            sdr.tx_hardwaregain_chan0 = float(cfg.tx_gain_db)
            sdr.rx_buffer_size = int(cfg.rx_buffer_size)
            if hasattr(type(sdr), "loopback") or hasattr(sdr, "loopback"):
                sdr.loopback = int(cfg.loopback)
            sdr.tx_cyclic_buffer = False
        except RadioError:
            raise
        except Exception as exc:
            raise RadioError(f"configuring the Pluto at {cfg.uri} failed: {exc}") from exc
        self._check_readback()
        self._flush()

    def _check_readback(self) -> None:
        """The driver rounds some values; refuse settings that did not take."""
        sdr, cfg = self.sdr, self.cfg
        got = float(sdr.rx_lo)
        if abs(got - cfg.lo_hz) > 10:
            raise RadioError(f"rx_lo read back as {got:g} Hz, asked {cfg.lo_hz:g}")
        rate = float(sdr.sample_rate)
        if abs(rate - cfg.sample_rate_hz) > 0.01 * cfg.sample_rate_hz:
            raise RadioError(f"sample_rate read back as {rate:g}, asked {cfg.sample_rate_hz:g}")

    def _flush(self) -> None:
        """Read and discard the kernel buffers that hold samples from before the configuration."""
        for _ in range(self.cfg.kernel_buffers):
            self.sdr.rx()
        self._rx_captured = time.monotonic()

    # ---------------------------------------------------------------------- TX
    def tx(self, samples: np.ndarray, cyclic: bool = False) -> None:
        """Cyclic: replace the cyclic buffer now. Non-cyclic: queue fixed-size buffers for the
        TX thread (check ``tx_backlog`` first: the queue blocks when full)."""
        self._raise_tx_error()
        x = check_tx_samples(samples)
        if cyclic:
            self._stop_tx_thread()
            try:
                self._destroy_tx()
                self.sdr.tx_cyclic_buffer = True
                self.sdr.tx((x * DRIVE).astype(np.complex128))
                self._cyclic = True
            except Exception as exc:
                self._silence()
                raise RadioError(f"Pluto cyclic TX failed: {exc}; transmitter silenced") from exc
            return
        if self._cyclic:
            self._destroy_tx()
            self.sdr.tx_cyclic_buffer = False
        self._start_tx_thread()
        # bursts are packed back to back into fixed-size buffers (pyadi refuses a buffer of
        # another length); the TX thread sends a partly filled one, zero-padded, when idle
        # (the lock is held for the whole burst, so an idle flush never splits one; put() only
        # blocks while the queue is full, and then the TX thread takes buffers without the lock)
        n = self.cfg.tx_buffer_size
        a = 0
        with self._pack_lock:
            while a < len(x):
                k = min(n - self._fill, len(x) - a)
                self._pack[self._fill : self._fill + k] = x[a : a + k] * DRIVE
                self._fill += k
                a += k
                if self._fill == n:
                    self._txq.put(self._new_pack())

    def _take_partial(self) -> np.ndarray | bool:
        """The partly filled buffer (zero-padded); False when there is none; True when tx() is
        packing a burst right now (its next buffer is coming: send nothing meanwhile)."""
        if not self._pack_lock.acquire(blocking=False):
            return True
        try:
            if self._fill == 0:
                return False
            self._handing = self._fill  # counted in tx_backlog until the driver has it
            return self._new_pack()
        finally:
            self._pack_lock.release()

    def _new_pack(self) -> np.ndarray:
        """Start a new, silent pack buffer (call with the lock held); returns the old one."""
        old = self._pack
        self._pack, self._fill = np.zeros(self.cfg.tx_buffer_size, np.complex128), 0
        return old

    @property
    def tx_capacity(self) -> int:
        """Samples ``tx`` can queue without blocking."""
        return 4 * self.cfg.kernel_buffers * self.cfg.tx_buffer_size

    @property
    def tx_backlog(self) -> int:
        """Samples queued for the TX thread and not yet handed to the driver (including the buffer
        the thread is handing over right now)."""
        if self._txq is None:
            return 0
        return self._txq.unfinished_tasks * self.cfg.tx_buffer_size + self._fill + self._handing

    def _start_tx_thread(self) -> None:
        if self._tx_thread is not None and self._tx_thread.is_alive():
            return
        self._txq = queue.Queue(maxsize=self.tx_capacity // self.cfg.tx_buffer_size)
        self._tx_stop.clear()
        self._tx_thread = threading.Thread(target=self._tx_worker, name="pluto-tx", daemon=True)
        self._tx_thread.start()

    def _tx_worker(self) -> None:
        """Feed the driver: queued buffers, or zeros when idle so the DAC never runs dry mid-stream.

        pyadi's non-cyclic tx() blocks while the kernel's TX buffers are full,
        which paces this loop at the sample rate.
        """
        zeros = np.zeros(self.cfg.tx_buffer_size, np.complex128)
        while not self._tx_stop.is_set():
            queued = True
            try:
                buf = self._txq.get(timeout=0.005 if self.idle_fill else 0.02)
            except queue.Empty:
                queued = False
                buf = self._take_partial()
                if buf is True:
                    continue
                if buf is False:
                    if not self.idle_fill:
                        continue
                    buf = zeros
            try:
                self.sdr.tx(buf)
            except Exception as exc:
                self._tx_error = exc
                log.error("TX thread: %s", exc)
                return
            finally:
                if queued:
                    self._txq.task_done()
                self._handing = 0

    def wait_tx(self, timeout_s: float = 5.0) -> bool:
        """Wait until every queued buffer has been handed to the driver."""
        if self._closed:
            raise RadioError("wait_tx on a closed radio: nothing queued will go out")
        end = time.monotonic() + timeout_s
        while self.tx_backlog and time.monotonic() < end:
            time.sleep(0.005)
        self._raise_tx_error()
        return self.tx_backlog == 0

    def _stop_tx_thread(self) -> None:
        if self._tx_thread is None:
            return
        self._tx_stop.set()
        self._tx_thread.join(timeout=5)
        self._tx_thread = None
        if self._txq is not None:
            while not self._txq.empty():
                self._txq.get_nowait()
                self._txq.task_done()
        with self._pack_lock:  # a fresh, silent buffer: nothing of a dropped burst goes out later
            self._new_pack()

    def _raise_tx_error(self) -> None:
        if self._tx_error is not None:
            exc, self._tx_error = self._tx_error, None
            self._silence()
            raise RadioError(f"Pluto TX failed: {exc}; transmitter silenced") from exc

    def stop_cyclic(self) -> None:
        if self._cyclic:
            self._destroy_tx()

    def _destroy_tx(self) -> None:
        try:
            self.sdr.tx_destroy_buffer()
        finally:
            self._cyclic = False

    @property
    def tx_active(self) -> bool:
        return self._cyclic or self.tx_backlog > 0

    # ---------------------------------------------------------------------- RX
    def rx(self, n: int | None = None) -> RxBlock:
        self._raise_tx_error()
        want = n or self.cfg.rx_buffer_size
        if want != self.cfg.rx_buffer_size:
            raise RadioError(
                f"the Pluto's RX buffer holds {self.cfg.rx_buffer_size} samples (fixed once created); "
                f"rx({want}) would need a new buffer: reconfigure rx_buffer_size instead"
            )
        try:
            raw = self.sdr.rx()
        except Exception as exc:
            self._silence()
            raise RadioError(
                f"Pluto RX failed ({exc}); the device may be gone. Transmitter silenced"
            ) from exc
        now = time.monotonic()
        flags, lost = 0, 0
        dur = want / self.cfg.sample_rate_hz
        if self._rx_captured is not None:
            # where the reader is in device time: _rx_captured is when the last sample it read was
            # captured. A read that returns before this block could have been captured waited
            # for it: the reader is caught up. Otherwise it is behind by now - captured; the
            # kernel buffers absorb up to kernel_buffers buffers of that, beyond which the DMA
            # had nowhere to write. A reader slightly slower than real time on every read falls
            # behind that far too, with no single late read: the lag is cumulative.
            captured = self._rx_captured + dur
            late = now - captured
            gap = late - dur * self.cfg.kernel_buffers
            if gap > 0.5 * dur:
                lost = int(gap * self.cfg.sample_rate_hz)
                flags |= BlockFlag.OVERFLOW | BlockFlag.LOST
                self.overflows += 1
                log.warning("RX late by %.1f ms: about %d samples lost (overflow)", gap * 1e3, lost)
                # the DMA wrote again once this read freed a buffer: the ones still queued are
                # old, then the data is from now
                captured = now - dur * (self.cfg.kernel_buffers - 1)
            self._rx_captured = min(captured, now)
        else:
            self._rx_captured = now
        raw = np.asarray(raw)
        if raw.ndim != 1 or len(raw) != want:
            raise RadioError(f"Pluto returned {raw.shape} samples, expected [{want}]")
        self._counter += lost
        blk = RxBlock(
            (raw / ADC_FS).astype(np.complex64), counter=self._counter, flags=flags, lost=lost
        )
        self._counter += want
        return blk

    def _retune(self, new: RadioConfig, changed: set[str]) -> None:
        sdr = self.sdr
        try:
            if "lo_hz" in changed:
                sdr.rx_lo = int(new.lo_hz)
                sdr.tx_lo = int(new.lo_hz)
            if "tx_gain_db" in changed:
                sdr.tx_hardwaregain_chan0 = float(new.tx_gain_db)
            if "rx_gain_db" in changed:
                sdr.rx_hardwaregain_chan0 = float(new.rx_gain_db)
        except Exception as exc:
            raise RadioError(
                f"changing {sorted(changed)} on the Pluto at {new.uri} failed: {exc}"
            ) from exc
        if "lo_hz" in changed:
            got = float(sdr.rx_lo)
            if abs(got - new.lo_hz) > 10:
                raise RadioError(f"rx_lo read back as {got:g} Hz, asked {new.lo_hz:g}")

    def poll_hw_status(self) -> dict[str, int] | None:
        """Read and clear the ADC core's overflow and the DAC core's underflow bits.

        The HDL sets them (sticky, write-1-to-clear, ``direct_reg_access`` at 0x80000088) when
        the RX DMA had nowhere to write or the TX DMA ran dry: the device's own account of lost
        samples, beside the reader's lag estimate in ``rx``. Each poll that finds a bit set
        counts one event (GNU Radio's PlutoSDR blocks poll the same registers). Returns the
        counts so far, or None where the device has no register access (older pyadi-iio, fakes).
        """
        if self.sdr is None:
            return self.hw_status
        addr = PCORE_MAGIC | REG_STATUS
        ctx = getattr(self.sdr, "_ctx", None)  # pyadi-iio's libiio context
        if ctx is None or not hasattr(ctx, "find_device"):
            return self.hw_status
        for name, bit, key in (
            (ADC_CORE_DEVICE, ADC_STATUS_OVF, "hw_overflows"),
            (DAC_CORE_DEVICE, DAC_STATUS_UNF, "underflows"),
        ):
            dev = ctx.find_device(name)
            if dev is None or not hasattr(dev, "reg_read"):
                continue
            try:
                status = int(dev.reg_read(addr))
                if status & bit:
                    dev.reg_write(addr, bit)
            except Exception as exc:
                log.debug("reading %s's status register: %s", name, exc)
                continue
            counts = self.hw_status if self.hw_status is not None else {}
            counts[key] = counts.get(key, 0) + bool(status & bit)
            self.hw_status = counts
        return self.hw_status

    def set_rx_gain(self, gain_db: float) -> None:
        if self.cfg.rx_gain_mode != "manual":
            raise RadioError(
                f"the driver ignores rx gain writes in gain mode {self.cfg.rx_gain_mode!r}; set rx_gain_mode = 'manual'"
            )
        self.sdr.rx_hardwaregain_chan0 = float(gain_db)

    # ------------------------------------------------------------------- close
    def _silence(self) -> None:
        if self.sdr is None:
            return
        self._stop_tx_thread()
        try:
            self.sdr.tx_destroy_buffer()
        except Exception as exc:
            log.warning("tx_destroy_buffer failed: %s", exc)
        self._cyclic = False
        try:
            self.sdr.rx_destroy_buffer()
        except Exception as exc:
            log.warning("rx_destroy_buffer failed: %s", exc)

    def close(self) -> None:
        self._closed = True
        self._silence()
        _OPEN.discard(self)
