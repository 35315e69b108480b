"""Flat block fading: Rayleigh and Rician."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from . import functional as F
from .base import ChannelModule, ChannelOutput, register


@register("fading")
class BlockFading(ChannelModule):
    """y[n] = h_b x[n], one complex gain per block of ``block_length`` samples.

    Rician with factor K (linear): h = sqrt(K/(K+1)) e^{j theta} + sqrt(1/(K+1)) g,
    g ~ CN(0, 1), theta uniform (or ``los_phase_rad`` when set); E|h|^2 = 1.
    K = 0 is Rayleigh.

    Args:
        model: "rayleigh" or "rician".
        k_factor_db: Rician K in dB (ignored for Rayleigh).
        block_length: samples per fading block; None means one gain per row.
        los_phase_rad: fixed phase of the line-of-sight part; None draws it uniformly.
    """

    def __init__(
        self,
        model: str = "rayleigh",
        k_factor_db: float = 0.0,
        block_length: int | None = None,
        los_phase_rad: float | None = None,
    ):
        super().__init__()
        if model not in ("rayleigh", "rician"):
            raise ValueError(f"model must be 'rayleigh' or 'rician', got {model!r}")
        if block_length is not None and block_length < 1:
            raise ValueError(f"block_length must be >= 1, got {block_length}")
        self.model = model
        self.k_factor_db = float(k_factor_db)
        self.block_length = block_length
        self.los_phase_rad = los_phase_rad

    @property
    def k_linear(self) -> float:
        return 0.0 if self.model == "rayleigh" else 10 ** (self.k_factor_db / 10)

    def draw(
        self,
        shape: tuple[int, ...],
        *,
        generator: torch.Generator | None,
        dtype: torch.dtype,
        device: torch.device | str,
    ) -> Tensor:
        """Draw gains h: returns [*shape] (in forward [B, n_blocks]) of ``dtype``, complex64
        or complex128."""
        k = self.k_linear
        g = F.complex_normal(shape, generator=generator, dtype=dtype, device=device)
        if k == 0.0:
            return g
        rdt = F.real_dtype_of(dtype)
        if self.los_phase_rad is None:
            theta = F.draw_uniform(
                shape, 0.0, 2 * math.pi, generator=generator, dtype=rdt, device=device
            )
        else:
            theta = torch.full(shape, float(self.los_phase_rad), dtype=rdt, device=device)
        los = torch.polar(torch.full_like(theta, math.sqrt(k / (k + 1))), theta)
        return los.to(dtype) + math.sqrt(1 / (k + 1)) * g

    def forward(
        self, x: Tensor, h: Tensor | None = None, *, generator: torch.Generator | None = None
    ) -> ChannelOutput:
        """x: [B, N] complex64/complex128; h: optional complex gains [B] or [B, n_blocks]
        (cast to x's dtype). Returns y [B, N] of x's dtype; record h: [B, n_blocks]."""
        self._check(x)
        b, n = x.shape
        nblk = 1 if self.block_length is None else math.ceil(n / self.block_length)
        if h is None:
            h = self.draw((b, nblk), generator=generator, dtype=x.dtype, device=x.device)
        else:
            h = torch.as_tensor(h, dtype=x.dtype, device=x.device)
            if h.dim() == 1:
                h = h[:, None]
            if h.shape != (b, nblk):
                raise ValueError(f"h must have shape [{b}] or [{b}, {nblk}], got {tuple(h.shape)}")
        blk = n if self.block_length is None else self.block_length
        gains = torch.repeat_interleave(h, blk, dim=1)[:, :n]
        return ChannelOutput(x * gains, {"h": h.detach()})
