"""The simulated ADALM-PLUTO.

``SimEngine`` is the device: a TX timeline of bursts through the channel
chain of ``hil.channel`` (sample level, no gradients), the RX front end
(gain or AGC, IQ imbalance, DC offset, thermal noise between bursts, 12-bit
ADC at +-2048 with saturation), stale kernel buffers at RX start, injected
sample drops, and optional pacing at the sample rate. ``SimRadio`` is the
backend that drives it through the radio interface (flushing stale buffers
like the Pluto backend does). The Pluto twin serves the same engine over the
libiio protocol.

Units inside the engine: ADC/DAC codes (+-2048 at full scale, 12 bits); the
DAC takes the top 12 bits of the int16 the driver writes (drive level 2**14
for full scale 1.0, i.e. about -6 dBFS of the int16 range).
"""

from __future__ import annotations

import math
import time
from collections import deque

import numpy as np
import torch

from ..channel import CarrierFrequencyOffset, ChannelChain, DCOffset, IQImbalance, PhaseNoise
from ..convert import to_numpy, to_torch
from .ad9363 import ADC_FULL_SCALE, DAC_DISCARDED_BITS, DAC_DRIVE, RX_GAIN_DB
from .base import BlockFlag, Radio, RadioError, RxBlock, check_tx_samples
from .config import RadioConfig

ADC_FS = float(ADC_FULL_SCALE)
REF_GAIN_DB = 40.0  # sim.noise_dbfs and the signal level are referred to this RX gain
LATENCY = 2048  # samples between tx() and the burst reaching the antenna


def _bursts(x: np.ndarray, min_gap: int = 256) -> list[tuple[int, int]]:
    """[start, end) of the non-silent runs of x, split at runs of >= min_gap zero samples."""
    nz = np.flatnonzero(x)
    if len(nz) == 0:
        return []
    cuts = np.flatnonzero(np.diff(nz) > min_gap)
    starts = np.concatenate([[nz[0]], nz[cuts + 1]])
    ends = np.concatenate([nz[cuts] + 1, [nz[-1] + 1]])
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


class SimEngine:
    """Device model; times are RX sample indices."""

    def __init__(self, cfg: RadioConfig):
        self.cfg = cfg
        s = cfg.sim
        self.rng = np.random.default_rng(s.seed)
        self.gen = torch.Generator().manual_seed(s.seed + 1)
        stages = s.stages(cfg.sample_rate_hz)
        self.chain = ChannelChain.from_tables(stages) if stages else None
        self.rx_count = 0  # device time (RX samples since start, including lost ones)
        self.tx_time = 0  # end of the last queued burst
        self.bursts: deque[tuple[int, np.ndarray]] = (
            deque()
        )  # (start, complex128 at the RX antenna, full-scale units)
        self.cyclic: tuple[int, np.ndarray] | None = None
        self.gain_db = cfg.rx_gain_db if cfg.rx_gain_mode == "manual" else 71.0  # AGC starts high
        self.stale_left = s.stale_buffers
        self.blocks = 0
        self.pending_drop = 0
        if s.ppm:  # the SFO's compiled resampler loaded now: on the first burst it held the
            # stream for half a second (numba's cache), as long as a photograph's airtime x 5
            from ..channel import TimingOffset

            TimingOffset(sfo_ppm=s.ppm)(torch.zeros(1, 64, dtype=torch.complex128), delay=0.0)
        self.t0 = time.monotonic()
        self.cfo_hz = s.ppm * 1e-6 * cfg.lo_hz
        self.lo_offset_hz = 0.0  # TX LO minus RX LO (the twin sets them apart)
        self.loopback = cfg.loopback  # 1: digital loopback in the FPGA (TX codes straight to RX)
        self.enabled = True  # the ENSM: False in sleep/wait/alert (nothing radiated or received)
        # the DDS tone generator (the twin sets it): device sample indices -> DAC units
        self.tone = None
        self.last_truth: dict | None = None
        self._pn_phase = 0.0
        self.dc = 0j
        if s.dc_offset_dbfs is not None:
            a = 10 ** (s.dc_offset_dbfs / 20) * ADC_FS
            self.dc = a * np.exp(1j * self.rng.uniform(0, 2 * np.pi))
        self._stage_key = None
        self.closed = False

    def _stages(self):
        """The radio's own impairments as the hil.channel stages training uses (one model of
        the world; tests/radio/test_sim_parity.py), built for the current settings: a client
        of the twin changes the sample rate at run time, and the stages in Hz follow it."""
        s, fs = self.cfg.sim, self.cfg.sample_rate_hz
        key = (fs, s.phase_noise_hz, s.iq_gain_db, s.iq_phase_deg)
        if key != self._stage_key:
            self._stage_key = key
            self.cfo_stage = CarrierFrequencyOffset(sample_rate_hz=fs, random_phase=False)
            self.pn_stage = PhaseNoise(linewidth_hz=s.phase_noise_hz, sample_rate_hz=fs)
            self.iq_stage = IQImbalance(gain_db=s.iq_gain_db, phase_deg=s.iq_phase_deg)
            self.dc_stage = DCOffset()
        return self

    # -------------------------------------------------------------------- TX
    def dac(self, x: np.ndarray) -> np.ndarray:
        """Full-scale complex -> what the DAC emits: int16 at 2**14 drive, top 12 bits kept."""
        d = DAC_DISCARDED_BITS
        i16 = np.clip(np.round(x.real * DAC_DRIVE), -32768, 32767).astype(np.int32) >> d << d
        q16 = np.clip(np.round(x.imag * DAC_DRIVE), -32768, 32767).astype(np.int32) >> d << d
        return (i16 + 1j * q16) / DAC_DRIVE

    def _through_channel(self, x: np.ndarray, start: int) -> np.ndarray:
        """Full-scale TX samples -> complex128 at the RX antenna (before RX gain), incl. XO offset.

        Sets ``last_truth``: where the burst lands and what the channel did to it.
        """
        if self.loopback == 1:  # digital loopback: the DAC codes, no RF, no channel
            self.last_truth = {"rx_offset": int(start), "n": len(x), "loopback": 1}
            return self.dac(x)
        if abs(self.lo_offset_hz) >= self.cfg.sample_rate_hz / 2:  # TX outside the RX band
            self.last_truth = {"rx_offset": int(start), "n": len(x), "out_of_band": True}
            return np.zeros(len(x))
        x = self.dac(x) * 10 ** ((self.cfg.tx_gain_db + self.cfg.sim.path_gain_db) / 20)
        t = to_torch(x[None], torch.complex128)
        tail = 32  # room for the multipath/resampling tail
        t = torch.nn.functional.pad(t, (0, tail))
        truth: dict = {
            "rx_offset": int(start),
            "n": len(x),
            "cfo_hz": float(self.cfo_hz),
            "delays": [0],
            "tap_power_db": [0.0],
        }
        if self.chain is not None:
            out = self.chain(t, generator=self.gen)
            t = out.y
            for rec in out.record.values():
                if "cfo_hz" in rec:
                    truth["cfo_hz"] += float(rec["cfo_hz"][0])
                if "taps" in rec:
                    p = (rec["taps"][0].abs() ** 2).tolist()
                    truth["delays"] = list(rec["delays"])
                    truth["tap_power_db"] = [round(10 * np.log10(max(v, 1e-12)), 2) for v in p]
        nz = np.flatnonzero(np.abs(x) > 0)
        if len(nz):
            y_frame = to_numpy(t[0], np.complex128)[nz[0] : nz[-1] + 1]
            truth["snr_db"] = float(
                10 * np.log10(np.mean(np.abs(y_frame) ** 2) / 10 ** (self.cfg.sim.noise_dbfs / 10))
            )
            truth["frame_offset"] = int(start + nz[0])
        self.last_truth = truth
        if self.cfg.sim.ppm:
            from ..channel import TimingOffset

            t = TimingOffset(sfo_ppm=self.cfg.sim.ppm)(t, delay=0.0).y
        y = to_numpy(t[0], np.complex128)
        cfo = self.cfo_hz + self.lo_offset_hz
        if cfo:  # the XO offset: a CFO ramp in device time (phase-continuous across bursts)
            t = (
                self._stages()
                .cfo_stage(torch.from_numpy(y)[None], cfo_hz=cfo, phase0=0.0, start=start)
                .y
            )
            y = t[0].numpy()
        return y

    def tx(self, samples: np.ndarray, cyclic: bool = False) -> None:
        """Full-scale samples (validated: |x| <= 1), as the radio interface takes them."""
        self.tx_dac(check_tx_samples(samples).astype(np.complex128), cyclic)

    def tx_dac(self, x: np.ndarray, cyclic: bool = False, now: int | None = None) -> None:
        """Samples in DAC units (int16 / 2**14, so up to +-2 before the DAC clips), unvalidated:
        what the twin receives from a libiio client. ``now``: device time when it arrives
        (default: the RX sample count; a paced twin passes the wall clock's)."""
        if self.closed:
            raise RadioError("sim radio is closed")
        x = np.asarray(x, np.complex128)
        start = max(self.tx_time, max(self.rx_count, now or 0) + LATENCY)
        if cyclic:
            self.cyclic = (start, self._through_channel(x, start)[: len(x)] if len(x) else x)
            return
        if len(x) == 0:
            return
        if not self.enabled:  # ENSM not in an active state: nothing is radiated
            self.tx_time = start + len(x)
            return
        # a device buffer packs bursts and silence; only the bursts go through the channel
        for a, b in _bursts(x):
            self.bursts.append((start + a, self._through_channel(x[a:b], start + a)))
        self.tx_time = start + len(x)

    def stop_cyclic(self) -> None:
        self.cyclic = None

    @property
    def tx_active(self) -> bool:
        return self.cyclic is not None or any(s + len(b) > self.rx_count for s, b in self.bursts)

    @property
    def tx_backlog(self) -> int:
        """Samples queued but not yet on the air."""
        return max(0, self.tx_time - self.rx_count)

    def advance(self, n: int) -> None:
        """Let n samples of device time pass unread (no RX buffer open)."""
        self.rx_count += int(n)
        while self.bursts and self.bursts[0][0] + len(self.bursts[0][1]) <= self.rx_count:
            self.bursts.popleft()

    # -------------------------------------------------------------------- RX
    def inject_drop(self, n: int) -> None:
        """Lose the next n samples (as a USB overrun would)."""
        self.pending_drop += int(n)

    def set_gain(self, gain_db: float) -> None:
        """Like the driver: ignored unless the gain mode is manual."""
        if self.cfg.rx_gain_mode == "manual":
            self.gain_db = float(np.clip(gain_db, *RX_GAIN_DB))

    def _signal(self, a: int, n: int) -> np.ndarray:
        out = np.zeros(n, np.complex128)
        for s, b in self.bursts:
            lo, hi = max(a, s), min(a + n, s + len(b))
            if lo < hi:
                out[lo - a : hi - a] += b[lo - s : hi - s]
        if self.cyclic is not None:
            s, b = self.cyclic
            if len(b):
                idx = np.arange(a, a + n)
                on = idx >= s
                out[on] += b[(idx[on] - s) % len(b)]
        if self.tone is not None and self.enabled:
            idx = np.arange(a, a + n)
            t = self.tone(idx)  # DAC units, straight to the antenna (no multipath: a steady tone)
            if self.loopback != 1:
                g = 10 ** ((self.cfg.tx_gain_db + self.cfg.sim.path_gain_db) / 20)
                cfo = self.cfo_hz + self.lo_offset_hz
                t = t * g * np.exp(2j * np.pi * cfo / self.cfg.sample_rate_hz * idx)
                if abs(self.lo_offset_hz) >= self.cfg.sample_rate_hz / 2:
                    t = t * 0
            out += t
        while self.bursts and self.bursts[0][0] + len(self.bursts[0][1]) <= a:
            self.bursts.popleft()
        return out

    def rx(self, n: int) -> RxBlock:
        if self.closed:
            raise RadioError("sim radio is closed")
        if n < 1:
            raise ValueError("rx needs n >= 1")
        if self.stale_left > 0:  # kernel buffers filled before the configuration took effect
            self.stale_left -= 1
            z = self.rng.standard_normal(2 * n).view(np.complex128) * ADC_FS * 0.5
            return RxBlock(self._adc(z), counter=-1)
        flags, lost = 0, 0
        s = self.cfg.sim
        self.blocks += 1
        if s.drop_every and self.blocks % s.drop_every == 0:
            self.pending_drop += s.drop_samples
        if self.pending_drop:
            lost = self.pending_drop
            self.rx_count += lost
            self.pending_drop = 0
            flags |= BlockFlag.OVERFLOW | BlockFlag.LOST
        a = self.rx_count
        if s.paced:
            due = self.t0 + (a + n) / self.cfg.sample_rate_hz
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        sig = self._signal(a, n)
        if self.loopback == 1 or not self.enabled:
            self.rx_count += n
            codes = (
                sig * (DAC_DRIVE >> DAC_DISCARDED_BITS)
                if self.enabled
                else np.zeros(n, np.complex128)
            )
            return RxBlock(self._adc(codes), counter=a, flags=flags, lost=lost)
        v = self.impair(sig)
        self._agc(v)
        self.rx_count += n
        return RxBlock(self._adc(v), counter=a, flags=flags, lost=lost)

    def impair(self, sig: np.ndarray) -> np.ndarray:
        """What the RX chain does to the signal at the antenna, before the ADC: the oscillators'
        phase noise, thermal noise, the RX gain, the mixer's IQ imbalance and the DC offset.
        sig: [n] complex (full-scale units at REF_GAIN_DB) -> [n] complex64 in ADC codes. The
        impairments are the hil.channel stages training uses (tests/radio/test_sim_parity.py)."""
        s = self.cfg.sim
        n = len(sig)
        self._stages()
        # single precision: ADC codes need 12 bits, float32 carries 24
        sig = sig.astype(np.complex64)
        if s.phase_noise_hz:  # the oscillators' Wiener phase noise, continuous across blocks
            # float32 steps: the walk restarts from a phase in [0, 2 pi) each block, so single
            # precision holds it to ~1e-4 rad over a block (4x faster than float64)
            inc = self.rng.standard_normal(n, dtype=np.float32)
            inc *= np.float32(math.sqrt(self.pn_stage.increment_variance))
            out = self.pn_stage(
                torch.from_numpy(sig)[None],
                phase0=self._pn_phase,
                increments=torch.from_numpy(inc)[None],
            )
            self._pn_phase = float(out.record["phase"][0, -1]) % (2 * np.pi)
            sig = out.y[0].numpy()
        noise_amp = 10 ** (s.noise_dbfs / 20) / math.sqrt(2)
        g = 10 ** ((self.gain_db - REF_GAIN_DB) / 20)
        v = self.rng.standard_normal(2 * n, dtype=np.float32).view(np.complex64)
        v *= np.float32(noise_amp)
        v += sig
        v *= np.float32(g * ADC_FS)
        if self.iq_stage.gain_db or self.iq_stage.phase_deg:  # the RX mixer's IQ imbalance
            v = self.iq_stage(torch.from_numpy(v)[None]).y[0].numpy()
        if self.dc:  # the RX DC offset, in ADC codes
            v = self.dc_stage(torch.from_numpy(v)[None], offset=complex(self.dc)).y[0].numpy()
        return v

    def _agc(self, v: np.ndarray) -> None:
        mode = self.cfg.rx_gain_mode
        if mode == "manual":
            return
        rms = math.sqrt(float(np.mean(np.abs(v) ** 2)) + 1e-12) / ADC_FS
        err = -12.0 - 20 * math.log10(max(rms, 1e-9))  # aim at -12 dBFS RMS
        step = err if mode == "fast_attack" else float(np.clip(err, -3.0, 1.0))
        self.gain_db = float(np.clip(self.gain_db + step, *RX_GAIN_DB))

    @staticmethod
    def _adc(v: np.ndarray) -> np.ndarray:
        """12-bit ADC: codes -2048..2047 with saturation -> full scale 1.0, complex64."""
        f = np.ascontiguousarray(v, np.complex64).view(np.float32)
        out = np.clip(np.round(f), -ADC_FULL_SCALE, ADC_FULL_SCALE - 1)
        out *= np.float32(1 / ADC_FS)
        return out.view(np.complex64)

    def raw_rx(self, n: int) -> tuple[np.ndarray, RxBlock]:
        """rx as pyadi-iio returns it: complex128 ADC codes."""
        blk = self.rx(n)
        return blk.samples.astype(np.complex128) * ADC_FS, blk

    def close(self) -> None:
        self.cyclic = None
        self.bursts.clear()
        self.tx_time = self.rx_count
        self.closed = True


class SimRadio(Radio):
    """The ``sim`` backend."""

    def __init__(self, cfg: RadioConfig | None = None):
        self.engine: SimEngine | None = None
        self.cfg = cfg or RadioConfig()
        self.configure(self.cfg)

    def configure(self, cfg: RadioConfig) -> None:
        if cfg.backend != "sim":
            raise RadioError(f"SimRadio needs backend 'sim', got {cfg.backend!r}")
        if self.engine is not None:
            self.engine.close()
        self.cfg = cfg
        self.engine = SimEngine(cfg)
        for _ in range(cfg.kernel_buffers):  # flush the stale kernel buffers, as on a Pluto
            self.engine.rx(cfg.rx_buffer_size)
        self.engine.stale_left = 0

    def tx(self, samples: np.ndarray, cyclic: bool = False) -> None:
        self.engine.tx(samples, cyclic)

    @property
    def last_truth(self) -> dict | None:
        """Ground truth of the last burst: device offset where it lands, CFO, SNR, multipath."""
        return self.engine.last_truth

    def stop_cyclic(self) -> None:
        self.engine.stop_cyclic()

    def rx(self, n: int | None = None) -> RxBlock:
        return self.engine.rx(n or self.cfg.rx_buffer_size)

    def set_rx_gain(self, gain_db: float) -> None:
        if self.cfg.rx_gain_mode != "manual":
            raise RadioError(
                f"rx gain is set by the AGC in mode {self.cfg.rx_gain_mode!r}; set rx_gain_mode = 'manual' first"
            )
        self.engine.set_gain(gain_db)

    def _retune(self, new: RadioConfig, changed: set[str]) -> None:
        eng = self.engine
        eng.cfg = new  # TX gain is read per burst (and per cyclic block) from the engine's config
        if "lo_hz" in changed:  # the XO error in hertz scales with the LO
            eng.cfo_hz = new.sim.ppm * 1e-6 * new.lo_hz
        if "rx_gain_db" in changed:
            eng.set_gain(new.rx_gain_db)

    @property
    def rx_gain_db(self) -> float:
        return self.engine.gain_db

    @property
    def tx_active(self) -> bool:
        return self.engine is not None and not self.engine.closed and self.engine.tx_active

    @property
    def tx_backlog(self) -> int:
        return self.engine.tx_backlog

    def inject_drop(self, n: int) -> None:
        self.engine.inject_drop(n)

    def wait_tx(self, timeout_s: float = 5.0) -> bool:
        """The simulated device takes each burst when ``tx`` is called (its schedule is the
        device's buffers), so there is nothing to wait for on an open radio."""
        if self.engine is None or self.engine.closed:
            raise RadioError("wait_tx on a closed radio: nothing queued will go out")
        return True

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
