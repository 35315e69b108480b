"""OFDM modulation and demodulation in torch (differentiable).

Orthonormal FFTs throughout: a fully loaded symbol with unit-power subcarriers
scaled by a = sqrt(N / n_used) has unit mean power in time, and white noise of
variance N0 per sample stays N0 per bin.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..channel.functional import cis
from .numerology import OfdmConfig
from .sequences import carrier_scale, pilot_values


def _index(cfg: OfdmConfig, k: np.ndarray, device) -> Tensor:
    return torch.as_tensor(cfg.bins(k), dtype=torch.long, device=device)


def map_resources(cfg: OfdmConfig, data: Tensor, first_symbol: int = 0) -> Tensor:
    """Data symbols [B, S, n_data] -> frequency grid [B, S, N] with pilots, scaled by a.

    data: complex64/complex128; returns the same dtype.
    """
    b, s, nd = data.shape
    if nd != cfg.n_data:
        raise ValueError(f"data must have {cfg.n_data} symbols per OFDM symbol, got {nd}")
    grid = torch.zeros(b, s, cfg.fft_size, dtype=data.dtype, device=data.device)
    grid[..., _index(cfg, cfg.data_carriers, data.device)] = data
    pil = torch.as_tensor(pilot_values(cfg, s, first_symbol), device=data.device).to(data.dtype)
    grid[..., _index(cfg, cfg.pilot_carriers, data.device)] = pil.expand(b, s, -1)
    return grid * carrier_scale(cfg)


def modulate(cfg: OfdmConfig, grid: Tensor) -> Tensor:
    """Frequency grid [B, S, N] -> time samples [B, S (N + CP)] with cyclic prefix.

    grid: complex64/complex128; returns the same dtype.
    """
    t = torch.fft.ifft(grid, dim=-1, norm="ortho")
    t = torch.cat([t[..., -cfg.cp_len :], t], dim=-1)
    return t.reshape(grid.shape[0], -1)


def demodulate(cfg: OfdmConfig, x: Tensor, n_symbols: int) -> Tensor:
    """Time samples [B, >= S (N + CP)] starting at a CP -> grid [B, S, N] (S = n_symbols).

    x: complex64/complex128; returns the same dtype.

    The FFT window starts ``fft_backoff`` samples before the end of each CP.
    """
    L = cfg.symbol_len
    if x.shape[-1] < n_symbols * L:
        raise ValueError(f"need {n_symbols * L} samples for {n_symbols} symbols, got {x.shape[-1]}")
    sym = x[..., : n_symbols * L].reshape(x.shape[0], n_symbols, L)
    start = cfg.cp_len - cfg.fft_backoff
    return torch.fft.fft(sym[..., start : start + cfg.fft_size], dim=-1, norm="ortho")


def backoff_phase(cfg: OfdmConfig, device: torch.device | str, dtype: torch.dtype) -> Tensor:
    """Per-bin phase exp(-j 2 pi k b / N) that an FFT window b samples early adds; [N] of
    ``dtype`` (complex64/complex128; computed in float64), on ``device``."""
    k = torch.arange(cfg.fft_size, device=device, dtype=torch.float64)
    ph = -2 * np.pi * k * cfg.fft_backoff / cfg.fft_size
    return cis(ph).to(dtype)
