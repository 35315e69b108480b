"""Known sequences: short and long training symbols and pilots.

The training symbols are designed here for any numerology rather than copied
from a standard: BPSK/QPSK values drawn from a fixed-seed generator, keeping
the candidate with the lowest peak-to-average power ratio among a few dozen
(low PAPR keeps the preamble clear of the clipping applied to full scale).
The short training sequence occupies every (N / sts_period)-th used
subcarrier, which makes it periodic with period ``sts_period`` (Schmidl & Cox
1997). Pilots are BPSK +1 on every symbol, with a per-symbol polarity from a
length-127 m-sequence (x^7 + x^4 + 1, as 802.11a's scrambler) to avoid
spectral lines. The same sequence scrambles the header's coded bits and
rotates the payload symbols (``header_scrambler``, ``payload_phases``; format
version 3): structured content (a header of mostly zero fields, a JSCC tile
with flat latents) otherwise piles up into time-domain peaks that the DAC's
full scale clips.

Every OFDM symbol is scaled so that a fully loaded symbol has unit mean power
in the time domain (orthonormal IFFT, subcarriers scaled by sqrt(N / n_used));
the short training symbol is scaled to unit power as well.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .numerology import OfdmConfig

_SEED = 20261202
_CANDIDATES = 48


def _papr_db(x: np.ndarray) -> float:
    p = np.abs(x) ** 2
    return 10 * np.log10(p.max() / p.mean())


def _time(cfg: OfdmConfig, grid: np.ndarray) -> np.ndarray:
    return np.fft.ifft(grid, norm="ortho")


@lru_cache(maxsize=16)
def _design(cfg: OfdmConfig) -> tuple[np.ndarray, np.ndarray]:
    n = cfg.fft_size
    rng = np.random.default_rng(_SEED)
    step = n // cfg.sts_period
    sts_k = np.array([k for k in cfg.used if k % step == 0])
    best = (np.inf, None, None)
    for _ in range(_CANDIDATES):
        sts = np.zeros(n, complex)
        q = rng.integers(0, 4, len(sts_k))
        sts[cfg.bins(sts_k)] = np.exp(1j * (np.pi / 4 + np.pi / 2 * q))
        lts = np.zeros(n, complex)
        lts[cfg.bins(cfg.used)] = 1 - 2 * rng.integers(0, 2, cfg.n_used)
        score = max(_papr_db(_time(cfg, sts)), _papr_db(_time(cfg, lts)))
        if score < best[0]:
            best = (score, sts, lts)
    _, sts, lts = best
    sts *= np.sqrt(n / len(sts_k))
    return sts, lts


def sts_freq(cfg: OfdmConfig) -> np.ndarray:
    """Short training symbol in the frequency domain, [N] complex128, unit time-domain power."""
    return _design(cfg)[0].copy()


def lts_freq(cfg: OfdmConfig) -> np.ndarray:
    """Long training symbol values on the FFT bins, [N] complex128 (real valued): +-1 on used
    bins, 0 elsewhere."""
    return _design(cfg)[1].copy()


def carrier_scale(cfg: OfdmConfig) -> float:
    """a = sqrt(N / n_used): subcarrier amplitude of a unit-power time-domain symbol."""
    return float(np.sqrt(cfg.fft_size / cfg.n_used))


def sts_time(cfg: OfdmConfig) -> np.ndarray:
    """The short training field: sts_repeats periods, [sts_len] complex64."""
    one = _time(cfg, sts_freq(cfg))[: cfg.sts_period]
    return np.tile(one, cfg.sts_repeats).astype(np.complex64)


def lts_time_symbol(cfg: OfdmConfig) -> np.ndarray:
    """One long training symbol in time, [N] complex64, unit mean power."""
    return (_time(cfg, lts_freq(cfg)) * carrier_scale(cfg)).astype(np.complex64)


def lts_time(cfg: OfdmConfig) -> np.ndarray:
    """The long training field: lts_cp guard (cyclic) then two symbols, [lts_len] complex64."""
    s = lts_time_symbol(cfg)
    return np.concatenate([s[-cfg.lts_cp :], s, s]).astype(np.complex64)


@lru_cache(maxsize=4)
def _mseq127() -> np.ndarray:
    state = [1] * 7
    out = []
    for _ in range(127):
        b = state[6] ^ state[3]  # x^7 + x^4 + 1
        out.append(b)
        state = [b, *state[:6]]
    return 1.0 - 2.0 * np.array(out)


def mseq_bits(n: int) -> np.ndarray:
    """The m-sequence's bits m_0 .. m_{n-1} (0/1, period 127; p_i = 1 - 2 m_i is the pilot
    polarity), [n] uint8."""
    return ((1 - _mseq127()[np.arange(n) % 127]) / 2).astype(np.uint8)


@lru_cache(maxsize=16)
def header_scrambler(n: int) -> np.ndarray:
    """[n] uint8, read-only (kept per n): what the header's n coded, interleaved bits (in air
    order: header symbol by symbol, data subcarriers ascending, padding included) are XORed
    with: m_{p mod 127} at position p."""
    v = mseq_bits(n)
    v.setflags(write=False)
    return v


@lru_cache(maxsize=64)
def _payload_phases(n: int) -> np.ndarray:
    m = mseq_bits(2 * n).astype(np.int64)
    q = 2 * m[0::2] + m[1::2]
    return np.exp(0.5j * np.pi * q)


def payload_phases(n: int) -> np.ndarray:
    """[n] complex128 unit rotations of payload symbols 0 .. n-1: symbol i is sent times
    exp(j pi/2 q_i), q_i = 2 m_{2i mod 127} + m_{(2i + 1) mod 127} (so one of 1, j, -1, -j);
    the receiver multiplies by the conjugate."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return _payload_phases(int(n)).copy()


def pilot_values(cfg: OfdmConfig, n_symbols: int, first: int = 0) -> np.ndarray:
    """Pilot values [n_symbols, n_pilots] float64 +-1 for symbols first .. first + n_symbols - 1.

    Symbol index 0 is the first header symbol; payload symbols continue the count.
    """
    pol = _mseq127()[(first + np.arange(n_symbols)) % 127]
    base = np.where(
        cfg.pilot_carriers == cfg.pilot_carriers.max(), -1.0, 1.0
    )  # 802.11a-like [1,1,1,-1]
    return pol[:, None] * base[None, :]
