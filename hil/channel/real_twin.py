"""The fading + CFO + IQ-imbalance path as real 2x2 arithmetic on (I, Q) pairs.

This is what people write when they believe autograd cannot handle complex
numbers. It exists to show that it is not needed: tests assert that its
gradients equal PyTorch's complex-autograd gradients to 1e-10 in float64, and
the JSCC's ``--grad-mode real`` trains through it.

Tensors here are real ``[B, N, 2]`` with (I, Q) in the last dimension.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = [
    "complex_to_iq",
    "iq_to_complex",
    "real_cfo",
    "real_fading",
    "real_iq_imbalance",
    "rotate",
]


def complex_to_iq(x: Tensor) -> Tensor:
    """[B, N] complex -> [B, N, 2] real."""
    return torch.stack((x.real, x.imag), dim=-1)


def iq_to_complex(v: Tensor) -> Tensor:
    """[B, N, 2] real -> [B, N] complex."""
    return torch.complex(v[..., 0], v[..., 1])


def apply_2x2(v: Tensor, m: Tensor) -> Tensor:
    """Apply 2x2 real matrices m ([..., 2, 2], broadcast over [B, N]) to (I, Q) vectors v."""
    i, q = v[..., 0], v[..., 1]
    return torch.stack(
        (m[..., 0, 0] * i + m[..., 0, 1] * q, m[..., 1, 0] * i + m[..., 1, 1] * q), dim=-1
    )


def rotate(v: Tensor, gain_re: Tensor, gain_im: Tensor) -> Tensor:
    """Multiply by complex gains a + jb as [[a, -b], [b, a]] on (I, Q)."""
    m = torch.stack((torch.stack((gain_re, -gain_im), -1), torch.stack((gain_im, gain_re), -1)), -2)
    return apply_2x2(v, m)


def real_fading(v: Tensor, h: Tensor) -> Tensor:
    """Flat fading with h: [B] complex, applied as a real rotation-scaling."""
    return rotate(v, h.real[:, None].expand(v.shape[:2]), h.imag[:, None].expand(v.shape[:2]))


def real_cfo(v: Tensor, cfo_norm: Tensor, phase0: Tensor, start: int = 0) -> Tensor:
    """CFO phase ramp as cos/sin rotations. cfo_norm, phase0: [B]."""
    n = torch.arange(start, start + v.shape[1], dtype=v.dtype, device=v.device)
    theta = 2 * math.pi * cfo_norm[:, None] * n[None, :] + phase0[:, None]
    return rotate(v, torch.cos(theta), torch.sin(theta))


def real_iq_imbalance(v: Tensor, gain_db: float, phase_deg: float) -> Tensor:
    """I' = I, Q' = g (Q cos phi - I sin phi) as a fixed 2x2 matrix."""
    g = 10 ** (gain_db / 20)
    phi = math.radians(phase_deg)
    m = torch.tensor(
        [[1.0, 0.0], [-g * math.sin(phi), g * math.cos(phi)]], dtype=v.dtype, device=v.device
    )
    return apply_2x2(v, m)
