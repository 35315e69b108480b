"""Image quality metrics: PSNR and SSIM, per image, images in [0, 1]."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def psnr(x: Tensor, y: Tensor) -> Tensor:
    """PSNR in dB per image for x, y [B, C, H, W] real (float32/float64) in [0, 1] (peak 1);
    returns [B] of their dtype; identical images -> 100 dB cap."""
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
    Images smaller than the window use a window of their size.

    x, y: [B, C, H, W] real (float32/float64) in [0, 1]; returns [B] of x's dtype."""
    c = x.shape[1]
    window = min(window, x.shape[-1], x.shape[-2])
    w = _gauss(window, sigma, x.dtype, x.device).expand(5 * c, 1, window, window)
    c1, c2 = 0.01**2, 0.03**2
    # the five local means in one grouped convolution (a 512x768 photograph: 27 ms against
    # 74 ms as five calls, on two threads)
    m = F.conv2d(torch.cat([x, y, x * x, y * y, x * y], 1), w, groups=5 * c)
    mx, my, mxx, myy, mxy = m.split(c, 1)
    sxx = mxx - mx * mx
    syy = myy - my * my
    sxy = mxy - mx * my
    s = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx * mx + my * my + c1) * (sxx + syy + c2))
    return s.flatten(1).mean(1)


MS_SSIM_MIN_SIDE = 161  # five scales of an 11-tap window: the side must exceed 10 * 2**4


def ms_ssim(x: Tensor, y: Tensor) -> Tensor:
    """MS-SSIM per image (Wang, Simoncelli & Bovik 2003; five scales, weights 0.0448 ..
    0.1333, Gaussian window 11, sigma 1.5) for x, y [B, 3, H, W] real in [0, 1] (any float
    dtype; computed in float32), computed by ``pytorch_msssim``; returns [B] float32. Defined
    only for images whose sides exceed 160 pixels: smaller ones (a 32x32 tile) raise
    ValueError rather than get a non-standard variant."""
    if min(x.shape[-2:]) < MS_SSIM_MIN_SIDE:
        raise ValueError(
            f"MS-SSIM needs images of at least {MS_SSIM_MIN_SIDE}x{MS_SSIM_MIN_SIDE} "
            f"(five scales of an 11-pixel window), got {tuple(x.shape[-2:])}"
        )
    from pytorch_msssim import ms_ssim as _ms_ssim

    return _ms_ssim(x.float(), y.float(), data_range=1.0, size_average=False)


def colour_shift(x_hat: Tensor, x: Tensor) -> Tensor:
    """Mean colour shift per image and channel, in 8-bit levels: [B, 3] float32, positive
    where the received image is brighter in that channel (R, G, B). A decoder that turns
    green foliage blue shows G < 0 and B > 0 here."""
    return ((x_hat.float() - x.float()).mean(dim=(2, 3))) * 255.0
