"""The Pluto twin's device: the simulated Pluto that the protocol server (``server.py``) serves.

``TwinDevice`` holds what a Pluto holds: the IIO attributes (``model.py``), the open
buffers, the DMA cores' status bits and device time; behind them runs the sim
backend's engine (``hil.radio.sim.SimEngine``). It knows nothing of sockets: the
server parses the libiio protocol and calls it (``attr``, ``open_buffer``,
``rx_samples``, ``tx_samples``, ``close_buffer``, ``release``), one thread per
connection, all under one lock (``lock``).

Device time is the engine's RX sample count. While an RX buffer is open,
reading it moves time on (paced: no faster than the sample rate); a transmit
buffer's samples wait while the transmit queue holds more than the kernel
buffers would, as the DMA does. With no RX buffer open, time runs by itself
(paced: the wall clock; unpaced: as fast as the transmitter pushes).

The DMA cores' status registers (``direct_reg_access``, register 0x80000088, which
GNU Radio's PlutoSDR blocks poll every second) report what really happened: RX
overflow when samples were lost (a paced client reading late, the engine's
injected drops), TX underflow while a pushed non-cyclic buffer has run dry.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from dataclasses import dataclass, replace

import numpy as np

from ..radio.ad9363 import (
    ADC_FULL_SCALE,
    ADC_STATUS_OVF,
    DAC_DRIVE,
    DAC_STATUS_UNF,
    RATE_NATIVE_MIN_HZ,
)
from ..radio.config import RadioConfig
from ..radio.sim import SimEngine
from .model import (
    Device,
    IioError,
    PlutoState,
    build_pluto,
    clamp_gain,
    context_xml,
    mask_channels,
    rssi_db,
)

log = logging.getLogger("hil.twin")

MAX_SAMPLES = 1 << 24  # samples in one buffer
ENSM_ACTIVE = ("fdd", "pinctrl", "pinctrl_fdd_indep")


@dataclass
class Buffer:
    """An open IIO buffer: its device, size in samples, enabled scan channels (in mask-bit
    order), the mask as the client wrote it, cyclic or not, and the connection that owns it."""

    dev: Device
    samples: int
    channels: list  # enabled scan channels, in mask-bit order
    mask: str
    cyclic: bool
    owner: int  # connection id

    @property
    def output(self) -> bool:
        return self.channels[0].output

    pushed: bool = False  # TX: a WRITEBUF has started the DMA

    @property
    def sample_bytes(self) -> int:
        return 2 * len(self.channels)


class TwinDevice:
    """A simulated ADALM-PLUTO: attributes, buffers, status registers and device time.

    Args:
        cfg: radio configuration whose ``sim`` section is the channel and front end
            (the ``[radio]`` values seed the attributes; clients then set them).
        paced: run device time at the sample rate (as a real Pluto does).
    """

    def __init__(self, cfg: RadioConfig | None = None, paced: bool = False):
        cfg = cfg or RadioConfig()
        self.cfg = cfg.replace(backend="sim", uri=None, sim=replace(cfg.sim, paced=False))
        self.paced = paced
        warm = SimEngine(self.cfg)  # first use of the channel code is slow: not on a client's time
        warm.tx_dac(np.full(4096, 0.1 + 0.1j))
        warm.rx(8192)
        self.engine = SimEngine(self.cfg)
        self.engine.stale_left = 0
        self.lock = threading.Condition(threading.RLock())
        self.state = PlutoState(
            rx_lo=int(cfg.lo_hz),
            tx_lo=int(cfg.lo_hz),
            sample_rate=int(cfg.sample_rate_hz),
            rx_bw=int(cfg.rx_bw),
            tx_bw=int(min(cfg.tx_bw, 40e6)),
            gain_mode=cfg.rx_gain_mode,
            rx_gain=cfg.rx_gain_db,
            tx_gain=cfg.tx_gain_db,
            loopback=cfg.loopback,
        )
        self.state.current_gain = lambda: self.engine.gain_db
        self.state.current_rssi = self._rssi
        self.state.on_change = self._apply
        self.state.poll_status = self.poll_status
        self.devices = build_pluto(self.state)
        self.xml = context_xml(self.devices).encode()
        self.buffers: dict[str, Buffer] = {}  # device id -> open buffer
        self.kernel_buffers: dict[str, int] = {}
        self.t0 = time.monotonic()  # device sample a is due at t0 + a / rate (paced)
        self._rate = self.state.stream_rate
        self._jump: tuple[int, int] | None = None  # paced overflow: (at, to) device time
        self._starved = False  # TX: an underflow counted for the current gap
        self.last_power_dbfs = float("-inf")
        # the server adds its own counters (connections, commands, errors) to this dict
        self.stats = {"rx_samples": 0, "tx_samples": 0}
        self.closed = threading.Event()

    def close(self) -> None:
        """Stop: a transmit push waiting for room gives up, the engine closes."""
        self.closed.set()
        with self.lock:
            self.lock.notify_all()
            self.engine.close()

    # ----------------------------------------------------------------- buffers
    def open_buffer(self, cid: int, dev: Device, samples: int, mask: str, cyclic: bool) -> Buffer:
        """OPEN: a buffer of ``samples`` on ``dev`` with the channels of ``mask`` (hex), owned
        by connection ``cid``."""
        if samples > MAX_SAMPLES:
            raise IioError(errno.ENOMEM, f"{samples} samples")
        channels = mask_channels(dev, mask)
        output = channels[0].output
        if cyclic and not output:
            raise IioError(errno.EINVAL, "an input buffer cannot be cyclic")
        with self.lock:
            if dev.id in self.buffers:
                raise IioError(errno.EBUSY, f"{dev.id} already has a buffer open")
            if not output:
                self.run_clock()  # the buffer starts filling now
                self._jump = None
            b = self.buffers[dev.id] = Buffer(dev, samples, channels, mask.lower(), cyclic, cid)
            self._dds()  # a TX buffer takes the DAC from the DDS
            if not output:
                self.engine.stale_left = self.cfg.sim.stale_buffers
        return b

    def read_chunk(self, buf: Buffer) -> int:
        """Samples per reply for a READBUF on ``buf`` about to start: the whole request while
        stale kernel buffers are served or unpaced, 10 ms of samples paced (so a client's 5 s
        read timeout never bites); paced, a client that read late meets its overflow here."""
        with self.lock:
            stale = self.engine.stale_left > 0
            if self.paced and not stale:
                self._overflow(buf)
        if stale or not self.paced:
            return buf.samples
        return max(1, int(0.01 * self.state.stream_rate))

    # ----------------------------------------------------------------- engine glue
    def _apply(self, what: str) -> None:
        """An attribute changed: carry it into the engine (called with the lock held)."""
        s, e = self.state, self.engine
        with self.lock:
            if what in ("sample_rate", "fir", "rx_dec8"):  # device time carries on at the new rate
                pos = max(e.rx_count, int((time.monotonic() - self.t0) * self._rate))
                self.t0 = time.monotonic() - pos / s.stream_rate
            self._rate = s.stream_rate
            cfg = e.cfg.replace(
                lo_hz=float(s.rx_lo),
                sample_rate_hz=float(s.sample_rate),
                fir_enable=s.fir_en or s.sample_rate < RATE_NATIVE_MIN_HZ,
                rx_gain_mode=s.gain_mode,
                tx_gain_db=s.tx_gain,
                rx_gain_db=clamp_gain(s.rx_gain),
                loopback=s.loopback,
            )
            if cfg.sample_rate_hz != e.cfg.sample_rate_hz:
                self._rechain(cfg)
            e.cfg = cfg
            e.cfo_hz = cfg.sim.ppm * 1e-6 * cfg.lo_hz
            e.lo_offset_hz = float(s.tx_lo - s.rx_lo)
            e.loopback = s.loopback
            e.enabled = s.ensm_mode in ENSM_ACTIVE
            self._dds()
            if what == "rx_gain" or (what == "gain_mode" and s.gain_mode == "manual"):
                e.set_gain(
                    s.rx_gain if what == "rx_gain" else e.gain_db
                )  # manual keeps the AGC's gain
                s.rx_gain = e.gain_db

    def _rechain(self, cfg: RadioConfig) -> None:
        """The channel's stages in Hz (the residual CFO, phase noise) at the new sample rate: built
        at the profile's rate and left there, a +-3 kHz CFO drawn at 4 MSps would be +-46 kHz at
        61.44 MSps. A profile whose stages are pinned to one rate keeps them (with a warning)."""
        from ..channel import ChannelChain
        from ..radio.config import ConfigError

        try:
            stages = cfg.sim.stages(cfg.sample_rate_hz)
        except ConfigError as exc:
            log.warning("channel stages kept at the profile's rate: %s", exc)
            return
        self.engine.chain = ChannelChain.from_tables(stages) if stages else None

    def _dds(self) -> None:
        """The DDS radiates while any tone is enabled (raw = 1) and no TX buffer is open: two tones
        on I (TX1_I_F1, F2) and two on Q (TX1_Q_F1, F2); scale 1 is the DAC's full scale."""
        d = self.state.dds
        if self.has_buffer(output=True) or not any(d[i]["raw"] for i in d):
            self.engine.tone = None
            return
        fs = float(self.state.sample_rate)
        tones = [(d[i]["scale"], d[i]["frequency"], d[i]["phase"]) for i in range(4)]

        def tone(idx: np.ndarray) -> np.ndarray:
            def part(k):
                scale, f, ph = tones[k]
                return scale * np.sin(2 * np.pi * f / fs * idx + np.deg2rad(ph / 1000))

            # sine generators; the I tones' default phase (90 degrees) makes I + jQ = exp(+j w n)
            return 2.0 * ((part(0) + part(1)) + 1j * (part(2) + part(3)))

        self.engine.tone = tone

    def _rssi(self) -> float:
        return rssi_db(self.last_power_dbfs)

    def has_buffer(self, output: bool) -> bool:
        """Is a TX (output) or RX buffer open, on any connection?"""
        return any(b.output == output for b in self.buffers.values())

    def run_clock(self) -> None:
        """Without an RX buffer open, device time passes by itself (paced: with the wall clock)."""
        if self.has_buffer(output=False) or not self.paced:
            return
        due = self._now()
        if due > self.engine.rx_count:
            self.engine.advance(due - self.engine.rx_count)

    def rx_samples(self, buf: Buffer, n: int) -> np.ndarray:
        """n samples of the enabled channels as int16 [n, channels] (12-bit codes)."""
        if self.paced:
            while True:
                with self.lock:
                    due = self.t0 + (self.engine.rx_count + n) / self.state.stream_rate
                wait = due - time.monotonic()
                if wait <= 0:
                    break
                time.sleep(min(wait, 0.05))
        with self.lock:
            blk = self.engine.rx(n)
            if blk.lost:  # the engine dropped samples (drop_every / inject_drop): an overflow
                self.stats["rx_lost"] = self.stats.get("rx_lost", 0) + blk.lost
                self._set_overflow()
            self.poll_status()
            self.lock.notify_all()
        # float32 throughout: the samples are 12-bit codes / ADC_FULL_SCALE, exact in single precision
        f = np.ascontiguousarray(blk.samples, np.complex64).view(np.float32).reshape(-1, 2)
        if len(f):
            flat = f.ravel()
            p = float(np.dot(flat, flat)) / len(f)
            self.last_power_dbfs = 10 * np.log10(p) if p > 0 else float("-inf")
        iq = np.rint(f * np.float32(ADC_FULL_SCALE)).astype(np.int16)
        cols = [int(c.id[-1]) for c in buf.channels]
        self.stats["rx_samples"] += n
        return iq[:, cols]

    def _set_overflow(self) -> None:
        """Samples were lost in the RX path: the ADC core's overflow bit, as the HDL sets it."""
        self.stats["overflows"] = self.stats.get("overflows", 0) + 1
        self.state.core_status["adc"] |= ADC_STATUS_OVF

    def _device_time(self) -> int:
        """Where the DAC is now: the wall clock (paced) or the RX sample count."""
        return max(self._now(), self.engine.rx_count) if self.paced else self.engine.rx_count

    def poll_status(self) -> None:
        """The TX DMA is starving (a non-cyclic buffer open and pushed, its queue run dry while
        device time went on): the DAC core's underflow bit, as the HDL sets it, again after a
        clear while the starving lasts (counted once per gap in ``stats``). Checked when the
        status register is read or written, when RX samples move, and before each push."""
        with self.lock:
            b = next((b for b in self.buffers.values() if b.output), None)
            if b is None or b.cyclic or not b.pushed:
                return
            if self._device_time() > self.engine.tx_time:
                if not self._starved:
                    self.stats["underflows"] = self.stats.get("underflows", 0) + 1
                self._starved = True
                self.state.core_status["dac"] |= DAC_STATUS_UNF

    def _now(self) -> int:
        """Device time by the wall clock (paced)."""
        return int((time.monotonic() - self.t0) * self.state.stream_rate)

    def _overflow(self, buf: Buffer) -> None:
        """Paced: a client reading late gets the kernel buffers filled before it fell behind,
        then a gap (the DMA had nowhere to write), then samples from when it read again."""
        e = self.engine
        if self._jump is not None and e.rx_count >= self._jump[0]:
            if self._jump[1] > e.rx_count:
                e.advance(self._jump[1] - e.rx_count)
            self._jump = None
        held = self.kernel_buffers.get(buf.dev.id, 4) * buf.samples
        now = self._now()
        if self._jump is None and now - e.rx_count > held:
            self._jump = (e.rx_count + held, now)
            self.stats["rx_lost"] = self.stats.get("rx_lost", 0) + now - e.rx_count - held
            self._set_overflow()

    def tx_samples(self, buf: Buffer, raw: bytes) -> None:
        """A WRITEBUF's bytes (little-endian int16 of the enabled channels) to the DAC: a cyclic
        buffer replaces what repeats; otherwise queued, waiting (up to 4 s) while the queue holds
        more than the kernel buffers would."""
        data = np.frombuffer(raw, "<i2").reshape(-1, len(buf.channels)).astype(np.float64)
        iq = np.zeros((len(data), 2))
        for k, c in enumerate(buf.channels):
            iq[:, int(c.id[-1])] = data[:, k]
        x = (iq[:, 0] + 1j * iq[:, 1]) / DAC_DRIVE
        limit = self.kernel_buffers.get(buf.dev.id, 4) * buf.samples
        with self.lock:
            self.stats["tx_samples"] += len(x)
            if buf.cyclic:
                self.engine.tx_dac(x, cyclic=True, now=self._now() if self.paced else None)
                return
            deadline = time.monotonic() + 4.0  # under the client's 5 s timeout
            while not self.closed.is_set():
                if self.paced:  # the DAC drains the queue in real time
                    if self.engine.tx_time - self._now() + len(x) <= limit:
                        break
                else:
                    if self.engine.tx_backlog + len(x) <= limit:
                        break
                    if not self.has_buffer(output=False):
                        self.engine.advance(self.engine.tx_backlog + len(x) - limit)
                        break
                if time.monotonic() > deadline:
                    log.warning("TX queue full for 4 s (is anyone reading RX?); accepting anyway")
                    break
                self.run_clock()
                self.lock.wait(0.005)
            self.poll_status()  # a gap before this push is an underflow
            self.engine.tx_dac(x, now=self._now() if self.paced else None)
            buf.pushed, self._starved = True, False

    def release(self, cid: int) -> None:
        """Close every buffer this connection holds (CLOSE or a disconnect)."""
        with self.lock:
            for _dev_id, b in list(self.buffers.items()):
                if b.owner == cid:
                    self.close_buffer(b)

    def close_buffer(self, b: Buffer) -> None:
        """CLOSE (or its connection went away): a cyclic transmitter stops, the DDS may take
        the DAC back, anyone waiting on the lock is woken."""
        with self.lock:
            del self.buffers[b.dev.id]
            if b.cyclic:
                self.engine.stop_cyclic()
            if not b.output:
                self._jump = None
            self._dds()
            self.lock.notify_all()

    def device(self, name: str) -> Device:
        """A device by id (iio:device3) or name (cf-ad9361-lpc); -ENODEV otherwise."""
        for d in self.devices:
            if name in (d.id, d.name):
                return d
        raise IioError(errno.ENODEV, f"no device {name}")

    def attr(self, words: list[str]):
        """[dev, (DEBUG|BUFFER|INPUT chn|OUTPUT chn)?, attr] -> Attr."""
        if len(words) < 2:
            raise IioError(errno.EINVAL, "missing device or attribute")
        dev = self.device(words[0])
        kind = words[1].upper()
        if kind in ("INPUT", "OUTPUT"):
            if len(words) != 4:
                raise IioError(errno.EINVAL, "syntax: INPUT|OUTPUT <channel> <attr>")
            table = dev.channel(words[2], kind == "OUTPUT").attrs
            name = words[3]
        elif kind in ("DEBUG", "BUFFER") and len(words) == 3:
            table = dev.debug if kind == "DEBUG" else dev.buffer
            name = words[2]
        elif len(words) == 2:
            table, name = dev.attrs, words[1]
        else:
            raise IioError(errno.EINVAL, "syntax")
        if name not in table:
            raise IioError(errno.ENOENT, f"no attribute {name}")
        return table[name]

    def own(self, cid: int, name: str, output: bool) -> Buffer:
        """The buffer connection ``cid`` holds on device ``name`` in that direction, or -EBADF /
        -EINVAL."""
        dev = self.device(name)
        b = self.buffers.get(dev.id)
        if b is None or b.owner != cid:
            raise IioError(errno.EBADF, f"{dev.id} is not open on this connection")
        if b.output != output:
            raise IioError(errno.EINVAL, f"{dev.id} is an {'output' if b.output else 'input'}")
        return b
