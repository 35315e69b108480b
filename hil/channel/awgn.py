"""Additive white Gaussian noise at a given Es/N0."""

from __future__ import annotations

import torch
from torch import Tensor

from . import functional as F
from .base import ChannelModule, ChannelOutput, register


@register("awgn")
class AWGN(ChannelModule):
    """y = x + n, n ~ CN(0, N0), N0 = Es / 10^(SNR/10).

    SNR is Es/N0 per complex sample: the noise has variance N0 per complex
    sample, N0/2 per real dimension.

    Args:
        snr_db: default SNR when none is given per call; None means it must be given.
        measure_power: if True, Es is the measured mean |x|^2 of each row
            (``[B]``); if False, Es = ``es`` (the signal is taken as normalised).
        es: the assumed signal energy per sample when ``measure_power`` is False.
    """

    def __init__(self, snr_db: float | None = None, measure_power: bool = False, es: float = 1.0):
        super().__init__()
        if es <= 0:
            raise ValueError(f"es must be positive, got {es}")
        self.snr_db = snr_db
        self.measure_power = bool(measure_power)
        self.es = float(es)

    def forward(
        self,
        x: Tensor,
        snr_db: float | Tensor | None = None,
        *,
        generator: torch.Generator | None = None,
        noise: Tensor | None = None,
    ) -> ChannelOutput:
        """x: [B, N] complex64/complex128; snr_db: scalar or [B] real; noise: optional CN(0,1)
        draw [B, N], the dtype of x. Returns y [B, N] of x's dtype; record snr_db, n0, es:
        [B] real (float32/float64 to match x)."""
        self._check(x)
        b = x.shape[0]
        snr_db = self.snr_db if snr_db is None else snr_db
        if snr_db is None:
            raise ValueError("AWGN needs snr_db, per call or at construction")
        snr = F.as_batch_values(snr_db, b, like=x, name="snr_db")
        es = F.signal_power(x) if self.measure_power else torch.full_like(snr, self.es)
        n0 = F.n0_from_snr_db(snr, es)
        if noise is None:
            noise = F.complex_normal(x.shape, generator=generator, dtype=x.dtype, device=x.device)
        y = x + torch.sqrt(n0).to(x.dtype)[:, None] * noise
        return ChannelOutput(y, {"snr_db": snr.detach(), "n0": n0.detach(), "es": es.detach()})
