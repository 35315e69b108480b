"""Image quality metrics: PSNR and SSIM, per image, images in [0, 1]."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def psnr(x: Tensor, y: Tensor) -> Tensor:
    """PSNR in dB per image for [B, C, H, W] in [0, 1] (peak 1); identical images -> 100 dB cap."""
    mse = ((x - y) ** 2).flatten(1).mean(1)
    return 10 * torch.log10(1.0 / mse.clamp_min(1e-10))


def _gauss(size: int = 11, sigma: float = 1.5, dtype=torch.float32, device="cpu") -> Tensor:
    t = torch.arange(size, dtype=dtype, device=device) - (size - 1) / 2
    g = torch.exp(-(t**2) / (2 * sigma**2))
    g = g / g.sum()
    return g[:, None] * g[None, :]


def ssim(x: Tensor, y: Tensor, window: int = 11, sigma: float = 1.5) -> Tensor:
    """SSIM per image (Wang, Bovik, Sheikh & Simoncelli 2004): Gaussian window 11, sigma 1.5,
    K1 = 0.01, K2 = 0.03, data range 1, mean over channels and valid positions.
    Images smaller than the window use a window of their size."""
    c = x.shape[1]
    window = min(window, x.shape[-1], x.shape[-2])
    w = _gauss(window, sigma, x.dtype, x.device).expand(c, 1, window, window)
    c1, c2 = 0.01**2, 0.03**2

    def f(t):
        return F.conv2d(t, w, groups=c)

    mx, my = f(x), f(y)
    sxx = f(x * x) - mx * mx
    syy = f(y * y) - my * my
    sxy = f(x * y) - mx * my
    s = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx * mx + my * my + c1) * (sxx + syy + c2))
    return s.flatten(1).mean(1)
