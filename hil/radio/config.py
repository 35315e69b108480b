"""Radio configuration: frozen dataclasses validated on construction, loaded from TOML.

Ranges are the AD9363's (ADALM-PLUTO) as shipped; the errors name the fix:
- LO 325 MHz - 3.8 GHz; 70 MHz - 6 GHz after switching the firmware to AD9364
  mode (``fw_setenv attr_name compatible; fw_setenv attr_val ad9364``), which
  a profile states with ``ad9364_mode = true``;
- sample rate 2.083 - 61.44 MSps natively; down to ~521 kSps with the
  decimating FIR filter enabled (``fir_enable = true`` and a FIR file), and
  65.1 kSps with the FPGA's decimate-by-8 path;
- RF bandwidth 200 kHz - 56 MHz (RX), up to 40 MHz (TX);
- RX gain -3..71 dB (manual mode only), TX gain -89.75..0 dB in 0.25 dB steps.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from .ad9363 import (
    GAIN_MODES,
    LO_MAX_AD9364_HZ,
    LO_MAX_HZ,
    LO_MIN_AD9364_HZ,
    LO_MIN_HZ,
    RATE_FIR_MIN_HZ,
    RATE_MAX_HZ,
    RATE_NATIVE_MIN_HZ,
    RX_BW_HZ,
    RX_GAIN_DB,
    TX_BW_HZ,
    TX_GAIN_DB,
    TX_GAIN_STEP_DB,
)


class ConfigError(ValueError):
    """A configuration value out of range or unknown, naming the key, the range and the fix."""


def _mhz(x: float) -> str:
    return f"{x / 1e6:g} MHz"


@dataclass(frozen=True)
class SimConfig:
    """The simulated Pluto's world (``[sim]``).

    Attributes:
        channel: channel profile name (its AWGN stage is dropped) or list of
            stage tables without AWGN: the sim adds thermal noise itself.
        path_gain_db: propagation/attenuator gain between the TX and RX ports.
        noise_dbfs: input-referred thermal noise at the ADC, in dBFS, at rx_gain_db = 40.
        ppm: crystal offset of the RX radio relative to TX (CFO = ppm * LO, and SFO).
        dc_offset_dbfs: RX DC offset level (dBFS), None for none.
        iq_gain_db, iq_phase_deg: RX IQ imbalance.
        phase_noise_hz: oscillator linewidth.
        stale_buffers: kernel buffers of stale samples when RX starts.
        drop_every: inject a drop of ``drop_samples`` after every N RX buffers (0 = never).
        drop_samples: samples lost per injected drop.
        paced: run at the sample rate (True) or as fast as possible (False, for CI).
        seed: RNG seed of the simulated world.
    """

    channel: Any = "awgn"
    path_gain_db: float = 0.0
    noise_dbfs: float = -40.0
    ppm: float = 0.0
    dc_offset_dbfs: float | None = None
    iq_gain_db: float = 0.0
    iq_phase_deg: float = 0.0
    phase_noise_hz: float = 0.0
    stale_buffers: int = 4
    drop_every: int = 0
    drop_samples: int = 0
    paced: bool = False
    seed: int = 0

    def __post_init__(self):
        from ..channel import profile

        if isinstance(self.channel, str):
            profile(self.channel, 1e6)  # known; its stages in Hz take the radio's rate later
        elif any(t.get("kind") == "awgn" for t in self.channel):
            raise ConfigError(
                "sim.channel: remove the 'awgn' stage; the sim adds thermal noise from sim.noise_dbfs"
            )
        if abs(self.ppm) > 100:
            raise ConfigError(f"sim.ppm={self.ppm} outside +-100 ppm (Pluto XO spec is +-25 ppm)")
        if self.stale_buffers < 0 or self.drop_every < 0 or self.drop_samples < 0:
            raise ConfigError("sim.stale_buffers, sim.drop_every and sim.drop_samples must be >= 0")

    def stages(self, sample_rate_hz: float) -> list[dict]:
        """The channel stages at the radio's sample rate; a named profile's AWGN is dropped (the
        sim's thermal noise replaces it). A stage in Hz given without a rate takes the radio's;
        one given at another rate is an error."""
        from ..channel import check_sample_rate, profile

        if isinstance(self.channel, str):
            return [t for t in profile(self.channel, sample_rate_hz) if t["kind"] != "awgn"]
        from ..channel.profiles import IN_HZ

        stages = [dict(t) for t in self.channel]
        for t in stages:
            if t.get("kind") in IN_HZ:
                t.setdefault("sample_rate_hz", float(sample_rate_hz))
        try:
            check_sample_rate(stages, sample_rate_hz, "sim.channel")
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        return stages


@dataclass(frozen=True)
class RadioConfig:
    """One radio (``[radio]`` in a profile). Units are in the names."""

    backend: str = "sim"
    uri: str | None = None
    lo_hz: float = 2.4e9
    sample_rate_hz: float = 4e6
    rx_rf_bandwidth_hz: float | None = None  # default: the sample rate
    tx_rf_bandwidth_hz: float | None = None
    rx_gain_mode: str = "manual"
    rx_gain_db: float = 40.0
    tx_gain_db: float = -10.0
    rx_buffer_size: int = 65536
    tx_buffer_size: int = 65536
    kernel_buffers: int = 4
    tx_rms_dbfs: float = -12.0  # drive level of the frames (peak-limited at full scale)
    ad9364_mode: bool = False
    fir_enable: bool = False
    loopback: int = 0  # 0 off, 1 digital TX->RX (FPGA), 2 RF
    sim: SimConfig = field(default_factory=SimConfig)

    def __post_init__(self):
        if self.backend not in ("sim", "pluto"):
            raise ConfigError(f"radio.backend={self.backend!r}: use 'sim' or 'pluto'")
        if self.backend == "pluto" and not self.uri:
            raise ConfigError(
                "radio.uri is required for the pluto backend (e.g. 'ip:192.168.2.1' or 'usb:1.2.5'); "
                "without one libiio scans every bus"
            )
        lo_min, lo_max = (
            (LO_MIN_AD9364_HZ, LO_MAX_AD9364_HZ) if self.ad9364_mode else (LO_MIN_HZ, LO_MAX_HZ)
        )
        if not lo_min <= self.lo_hz <= lo_max:
            hint = (
                (
                    "; an AD9364-mode firmware extends it to 70 MHz-6 GHz (set ad9364_mode = true after "
                    "fw_setenv attr_name compatible; fw_setenv attr_val ad9364)"
                )
                if not self.ad9364_mode
                else ""
            )
            raise ConfigError(
                f"radio.lo_hz={self.lo_hz:g} is outside {_mhz(lo_min)}-{_mhz(lo_max)}{hint}"
            )
        lo_rate = RATE_FIR_MIN_HZ if self.fir_enable else RATE_NATIVE_MIN_HZ
        if not lo_rate <= self.sample_rate_hz <= RATE_MAX_HZ:
            hint = (
                "; rates down to ~521 kSps need the decimating FIR (fir_enable = true, load a .ftr file)"
                if not self.fir_enable and self.sample_rate_hz >= RATE_FIR_MIN_HZ
                else ""
            )
            raise ConfigError(
                f"radio.sample_rate_hz={self.sample_rate_hz:g} is outside {lo_rate / 1e6:.3f}-{RATE_MAX_HZ / 1e6:g} MSps{hint}"
            )
        for name, (lo, hi) in (("rx_rf_bandwidth_hz", RX_BW_HZ), ("tx_rf_bandwidth_hz", TX_BW_HZ)):
            v = getattr(self, name)
            if v is not None and not lo <= v <= hi:
                raise ConfigError(f"radio.{name}={v:g} is outside {_mhz(lo)}-{_mhz(hi)}")
            if v is not None and v > 1.25 * self.sample_rate_hz:
                raise ConfigError(
                    f"radio.{name}={_mhz(v)} is wider than the sample rate {_mhz(self.sample_rate_hz)} "
                    "allows; keep it <= 1.25x the sample rate or raise the rate"
                )
        from ..channel import ChainConfig

        ChainConfig.from_tables(
            self.sim.stages(self.sample_rate_hz)
        )  # the sim's channel, validated
        if self.rx_gain_mode not in GAIN_MODES:
            raise ConfigError(f"radio.rx_gain_mode={self.rx_gain_mode!r}: one of {GAIN_MODES}")
        if not RX_GAIN_DB[0] <= self.rx_gain_db <= RX_GAIN_DB[1]:
            raise ConfigError(
                f"radio.rx_gain_db={self.rx_gain_db} outside {RX_GAIN_DB[0]:g}..{RX_GAIN_DB[1]:g} dB"
            )
        if not TX_GAIN_DB[0] <= self.tx_gain_db <= TX_GAIN_DB[1]:
            raise ConfigError(
                f"radio.tx_gain_db={self.tx_gain_db} outside {TX_GAIN_DB[0]:g}..{TX_GAIN_DB[1]:g} dB "
                "(it is an attenuation: 0 is maximum power)"
            )
        steps = self.tx_gain_db / TX_GAIN_STEP_DB
        if abs(steps - round(steps)) > 1e-9:
            raise ConfigError(
                f"radio.tx_gain_db={self.tx_gain_db} is not a multiple of {TX_GAIN_STEP_DB} dB"
            )
        for name in ("rx_buffer_size", "tx_buffer_size"):
            v = getattr(self, name)
            if not 1024 <= v <= 1 << 24:
                raise ConfigError(f"radio.{name}={v} outside 1024..16777216 samples")
        if not 1 <= self.kernel_buffers <= 64:
            raise ConfigError(f"radio.kernel_buffers={self.kernel_buffers} outside 1..64")
        if not -40 <= self.tx_rms_dbfs <= -3:
            raise ConfigError(f"radio.tx_rms_dbfs={self.tx_rms_dbfs} outside -40..-3 dBFS")
        if self.loopback not in (0, 1, 2):
            raise ConfigError(f"radio.loopback={self.loopback}: 0 (off), 1 (digital) or 2 (RF)")
        if not math.isfinite(self.lo_hz):
            raise ConfigError("radio.lo_hz must be finite")

    @property
    def rx_bw(self) -> float:
        return self.rx_rf_bandwidth_hz or self.sample_rate_hz

    @property
    def tx_bw(self) -> float:
        return self.tx_rf_bandwidth_hz or self.sample_rate_hz

    def to_dict(self) -> dict:
        d = asdict(self)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> RadioConfig:
        d = dict(d)
        allowed = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - allowed)
        if unknown:
            raise ConfigError(f"unknown [radio] key(s) {unknown}; allowed: {sorted(allowed)}")
        sim = d.pop("sim", {})
        if isinstance(sim, dict):
            sallowed = {f.name for f in fields(SimConfig)}
            bad = sorted(set(sim) - sallowed)
            if bad:
                raise ConfigError(f"unknown [radio.sim] key(s) {bad}; allowed: {sorted(sallowed)}")
            sim = SimConfig(**sim)
        try:
            return cls(sim=sim, **d)
        except TypeError as exc:
            raise ConfigError(f"[radio]: {exc}") from exc

    def replace(self, **kw) -> RadioConfig:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d.update(kw)
        return RadioConfig(**d)


def profiles_dir() -> Path:
    """Where the shipped profiles are: inside an installed package (``hil.profiles``, built
    from ``firmware_configs/``), or ``firmware_configs/`` of a source checkout."""
    from importlib.util import find_spec

    spec = find_spec("hil.profiles")  # a namespace package: data files only
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(__file__).resolve().parents[2] / "firmware_configs"


def shipped_profiles() -> list[str]:
    """Names of the shipped profiles (``sim_two_pluto``, ...)."""
    return sorted(p.stem for p in profiles_dir().glob("*.toml"))


def resolve_profile(spec: str | Path) -> Path:
    """A profile path, or the name of a shipped profile (``sim_two_pluto``) -> its path."""
    p = Path(spec)
    if p.exists():
        return p
    if p.parent == Path(".") or p.parent.name == "firmware_configs":
        shipped = profiles_dir() / f"{p.stem}.toml"
        if shipped.is_file():
            return shipped
    raise ConfigError(
        f"no profile {spec}: not a file, and the shipped ones are {shipped_profiles()}"
    )


def load_profile(path: str | Path) -> dict:
    """Read a TOML profile (a path, or a shipped profile's name): returns {'radio': RadioConfig,
    'link': dict, 'name': str, 'doc': raw}."""
    p = resolve_profile(path)
    try:
        with open(p, "rb") as fh:
            doc = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read profile {p}: {exc}") from exc
    unknown = sorted(set(doc) - {"name", "description", "radio", "link", "notes"})
    if unknown:
        raise ConfigError(
            f"{p.name}: unknown section(s) {unknown}; allowed: description, link, name, notes, radio"
        )
    try:
        radio = RadioConfig.from_dict(doc.get("radio", {}))
    except ConfigError as exc:
        raise ConfigError(f"{p.name}: {exc}") from exc
    return {
        "name": doc.get("name", p.stem),
        "radio": radio,
        "link": dict(doc.get("link", {})),
        "doc": doc,
    }
