"""Radio front-end impairments: IQ imbalance, DC offset, PA nonlinearity, quantisation."""

from __future__ import annotations

import torch
from torch import Tensor

from . import functional as F
from .base import ChannelModule, ChannelOutput, register


@register("iq_imbalance")
class IQImbalance(ChannelModule):
    """y = K1 x + K2 conj(x): Q branch with gain error ``gain_db`` and quadrature error ``phase_deg``.

    See :func:`hil.channel.functional.iq_imbalance_coefficients`.
    """

    def __init__(self, gain_db: float = 0.0, phase_deg: float = 0.0):
        super().__init__()
        if abs(gain_db) > 6 or abs(phase_deg) > 30:
            raise ValueError(
                f"IQ imbalance gain_db={gain_db} / phase_deg={phase_deg} is outside "
                "+-6 dB / +-30 deg; real front ends are within a fraction of that"
            )
        self.gain_db = float(gain_db)
        self.phase_deg = float(phase_deg)

    def forward(self, x: Tensor, *, generator: torch.Generator | None = None) -> ChannelOutput:
        """x: [B, N] complex64/complex128; returns y [B, N] of x's dtype; record k1, k2: Python
        complex."""
        self._check(x)
        k1, k2 = F.iq_imbalance_coefficients(self.gain_db, self.phase_deg)
        return ChannelOutput(F.iq_imbalance(x, self.gain_db, self.phase_deg), {"k1": k1, "k2": k2})


@register("dc_offset")
class DCOffset(ChannelModule):
    """y = x + d, d a complex constant (``offset_re``, ``offset_im``) or per-call value."""

    def __init__(self, offset_re: float = 0.0, offset_im: float = 0.0):
        super().__init__()
        self.offset_re = float(offset_re)
        self.offset_im = float(offset_im)

    def forward(
        self,
        x: Tensor,
        offset: complex | Tensor | None = None,
        *,
        generator: torch.Generator | None = None,
    ) -> ChannelOutput:
        """x: [B, N] complex64/complex128; offset: complex scalar or [B] complex (cast to x's
        dtype). Returns y [B, N] of x's dtype; record offset: [B] of x's dtype."""
        self._check(x)
        b = x.shape[0]
        d = complex(self.offset_re, self.offset_im) if offset is None else offset
        d = torch.as_tensor(d, dtype=x.dtype, device=x.device)
        if d.dim() == 0:
            d = d.expand(b)
        if d.shape != (b,):
            raise ValueError(f"offset must be a scalar or [{b}], got {tuple(d.shape)}")
        return ChannelOutput(F.dc_offset(x, d), {"offset": d.detach()})


@register("pa")
class PowerAmplifier(ChannelModule):
    """Memoryless PA: Rapp (AM/AM only) or Saleh (AM/AM and AM/PM).

    Args:
        model: "rapp" or "saleh".
        saturation: Rapp output saturation amplitude A_sat.
        smoothness: Rapp p (2-3 for a solid-state PA).
        gain: Rapp small-signal gain.
        alpha_a, beta_a, alpha_phi, beta_phi: Saleh's constants (his TWT fit by default).
    """

    def __init__(
        self,
        model: str = "rapp",
        saturation: float = 1.0,
        smoothness: float = 2.0,
        gain: float = 1.0,
        alpha_a: float = 2.1587,
        beta_a: float = 1.1517,
        alpha_phi: float = 4.0033,
        beta_phi: float = 9.1040,
    ):
        super().__init__()
        if model not in ("rapp", "saleh"):
            raise ValueError(f"model must be 'rapp' or 'saleh', got {model!r}")
        if saturation <= 0 or smoothness <= 0 or gain <= 0:
            raise ValueError("saturation, smoothness and gain must be positive")
        self.model = model
        self.saturation = float(saturation)
        self.smoothness = float(smoothness)
        self.gain = float(gain)
        self.alpha_a, self.beta_a = float(alpha_a), float(beta_a)
        self.alpha_phi, self.beta_phi = float(alpha_phi), float(beta_phi)

    def forward(self, x: Tensor, *, generator: torch.Generator | None = None) -> ChannelOutput:
        """x: [B, N] complex64/complex128; returns y [B, N] of x's dtype."""
        self._check(x)
        if self.model == "rapp":
            y = F.rapp(x, self.saturation, self.smoothness, self.gain)
        else:
            y = F.saleh(x, self.alpha_a, self.beta_a, self.alpha_phi, self.beta_phi)
        return ChannelOutput(y, {"model": self.model})


@register("quantize")
class Quantizer(ChannelModule):
    """ADC/DAC: uniform quantisation of I and Q to ``bits`` with clipping at +-``full_scale``.

    Gradient by the straight-through estimator (see :func:`hil.channel.functional.quantize`);
    ``surrogate=True`` skips the rounding (for checking that gradient numerically).
    The record counts clipped samples, so callers can see saturation.
    """

    def __init__(self, bits: int = 12, full_scale: float = 1.0, surrogate: bool = False):
        super().__init__()
        if not 1 <= bits <= 24:
            raise ValueError(f"bits must be in 1..24, got {bits}")
        if full_scale <= 0:
            raise ValueError(f"full_scale must be positive, got {full_scale}")
        self.bits = int(bits)
        self.full_scale = float(full_scale)
        self.surrogate = bool(surrogate)

    def forward(self, x: Tensor, *, generator: torch.Generator | None = None) -> ChannelOutput:
        """x: [B, N] complex64/complex128; returns y [B, N] of x's dtype; record clipped: [B]
        int64, samples with I or Q at or beyond full scale."""
        self._check(x)
        y = F.quantize(x, self.bits, self.full_scale, surrogate=self.surrogate)
        with torch.no_grad():
            lim = self.full_scale
            clipped = ((x.real.abs() >= lim) | (x.imag.abs() >= lim)).sum(dim=-1)
        return ChannelOutput(y, {"clipped": clipped})
