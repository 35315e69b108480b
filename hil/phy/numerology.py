"""OFDM numerology and frame layout.

Default numerology follows IEEE 802.11a: FFT 64, CP 16, subcarriers -26..26
without DC, pilots at -21, -7, 7, 21, leaving 48 data subcarriers.

Default sample rate 4 MSps, chosen because:
- it is inside the AD9363's native range (>= 2.083 MSps), so no FIR decimation
  is needed, and under the ~4-6 MSps that USB 2.0 sustains continuously;
- the 16-sample short training period gives a coarse CFO range of
  +-fs/32 = +-125 kHz, above +-96 kHz, i.e. +-40 ppm of a 2.4 GHz carrier
  (two Plutos at up to +-20 ppm each).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class OfdmConfig:
    """Static OFDM numerology.

    Attributes:
        fft_size: N.
        cp_len: cyclic prefix in samples.
        used_half: subcarriers -used_half..used_half (no DC) carry energy.
        pilots: signed pilot subcarrier indices.
        sample_rate_hz: fs.
        sts_period: samples per short-training repetition (N must be a multiple).
        sts_repeats: repetitions of the short sequence.
        lts_cp: guard before the two long training symbols.
        header_symbols: OFDM symbols of the BPSK header (see ``hil.phy.header``).
        fft_backoff: samples the receiver's FFT window starts inside the CP,
            margin for timing error and channel pre-echo.
    """

    fft_size: int = 64
    cp_len: int = 16
    used_half: int = 26
    pilots: tuple[int, ...] = (-21, -7, 7, 21)
    sample_rate_hz: float = 4e6
    sts_period: int = 16
    sts_repeats: int = 10
    lts_cp: int = 32
    header_symbols: int = 12
    fft_backoff: int = 4

    def __post_init__(self):
        n = self.fft_size
        if n < 16 or n & (n - 1):
            raise ValueError(f"fft_size must be a power of two >= 16, got {n}")
        if not 0 < self.cp_len < n:
            raise ValueError(f"cp_len must be in 1..{n - 1}, got {self.cp_len}")
        if not 2 <= self.used_half < n // 2:
            raise ValueError(f"used_half must be in 2..{n // 2 - 1}, got {self.used_half}")
        if any(p == 0 or abs(p) > self.used_half for p in self.pilots) or len(
            set(self.pilots)
        ) != len(self.pilots):
            raise ValueError(
                f"pilots must be distinct non-zero indices within +-{self.used_half}: {self.pilots}"
            )
        if len(self.pilots) < 2:
            raise ValueError("at least two pilots are needed for phase and timing tracking")
        if n % self.sts_period or self.sts_period < 8:
            raise ValueError(f"sts_period must divide fft_size and be >= 8, got {self.sts_period}")
        if self.sts_repeats < 6:
            raise ValueError(f"sts_repeats must be >= 6 for detection, got {self.sts_repeats}")
        if not 0 <= self.fft_backoff < self.cp_len:
            raise ValueError(f"fft_backoff must be in 0..cp_len-1, got {self.fft_backoff}")
        if self.lts_cp < self.cp_len:
            raise ValueError("lts_cp must be at least cp_len")
        if self.header_symbols < 1:
            raise ValueError("header_symbols must be >= 1")
        if not 1e3 <= self.sample_rate_hz <= 61.44e6:
            raise ValueError(f"sample_rate_hz={self.sample_rate_hz} outside 1 kHz-61.44 MHz")

    # --- subcarrier maps (signed indices and FFT bins) ---------------------------
    @cached_property
    def used(self) -> np.ndarray:
        """[n_used] int64 signed indices of the used subcarriers, -used_half..used_half
        without DC, ascending (cached: do not modify)."""
        k = np.arange(-self.used_half, self.used_half + 1)
        return k[k != 0]

    @cached_property
    def data_carriers(self) -> np.ndarray:
        """[n_data] int64 signed indices of the data subcarriers (used minus pilots),
        ascending."""
        return np.array([k for k in self.used if k not in self.pilots])

    @cached_property
    def pilot_carriers(self) -> np.ndarray:
        """[n_pilots] int64 signed indices of the pilot subcarriers, ascending."""
        return np.array(sorted(self.pilots))

    def bins(self, k: np.ndarray) -> np.ndarray:
        """Signed subcarrier indices k [...] (integer) -> FFT bin indices [...] in 0..N-1,
        same shape and integer dtype (int64 for the maps above)."""
        return np.mod(k, self.fft_size)

    @cached_property
    def n_data(self) -> int:
        return len(self.data_carriers)

    @cached_property
    def n_used(self) -> int:
        return len(self.used)

    @cached_property
    def symbol_len(self) -> int:
        return self.fft_size + self.cp_len

    # --- frame layout ------------------------------------------------------------
    @cached_property
    def sts_len(self) -> int:
        return self.sts_period * self.sts_repeats

    @cached_property
    def lts_len(self) -> int:
        return self.lts_cp + 2 * self.fft_size

    @cached_property
    def header_len(self) -> int:
        return self.header_symbols * self.symbol_len

    @cached_property
    def preamble_len(self) -> int:
        return self.sts_len + self.lts_len

    def payload_symbols(self, n_complex: int) -> int:
        """OFDM symbols needed for n_complex payload symbols."""
        return -(-n_complex // self.n_data)

    def frame_len(self, n_complex: int) -> int:
        return (
            self.preamble_len + self.header_len + self.payload_symbols(n_complex) * self.symbol_len
        )

    @property
    def max_cfo_hz(self) -> float:
        """Coarse CFO acquisition range +-fs / (2 sts_period)."""
        return self.sample_rate_hz / (2 * self.sts_period)

    def to_dict(self) -> dict:
        return {
            "fft_size": self.fft_size,
            "cp_len": self.cp_len,
            "used_half": self.used_half,
            "pilots": list(self.pilots),
            "sample_rate_hz": self.sample_rate_hz,
            "sts_period": self.sts_period,
            "sts_repeats": self.sts_repeats,
            "lts_cp": self.lts_cp,
            "header_symbols": self.header_symbols,
            "fft_backoff": self.fft_backoff,
        }

    @classmethod
    def from_dict(cls, d: dict) -> OfdmConfig:
        allowed = set(cls().to_dict())
        unknown = set(d) - allowed
        if unknown:
            raise ValueError(
                f"unknown OFDM config key(s) {sorted(unknown)}; allowed: {sorted(allowed)}"
            )
        d = dict(d)
        if "pilots" in d:
            d["pilots"] = tuple(d["pilots"])
        return cls(**d)
