"""A tour of the channel library: each stage on a unit-power signal, with what it did."""

from __future__ import annotations

import math

import torch

from ..channel import ChannelChain

TOUR = [
    {"kind": "awgn", "snr_db": 10.0},
    {"kind": "fading", "model": "rician", "k_factor_db": 6.0},
    {"kind": "multipath", "profile": "exponential", "n_taps": 6, "decay_samples": 1.5},
    {"kind": "cfo", "sample_rate_hz": 4e6, "max_cfo_hz": 96e3},
    {"kind": "timing", "max_delay_samples": 3.0, "sfo_ppm": 20.0},
    {"kind": "phase_noise", "linewidth_hz": 200.0, "sample_rate_hz": 4e6},
    {"kind": "iq_imbalance", "gain_db": 0.5, "phase_deg": 2.0},
    {"kind": "dc_offset", "offset_re": 0.01, "offset_im": -0.02},
    {"kind": "pa", "model": "rapp", "saturation": 1.0, "smoothness": 2.0},
    {"kind": "quantize", "bits": 12, "full_scale": 2.0},
]


def _fmt(v) -> str:
    if isinstance(v, torch.Tensor):
        v = v.flatten()[:3].tolist()
        return "[" + ", ".join(_fmt(e) for e in v) + (", ...]" if len(v) == 3 else "]")
    if isinstance(v, complex):
        return f"{v.real:+.3f}{v.imag:+.3f}j"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, tuple):
        return str(list(v))
    return str(v)


def main() -> int:
    g = torch.Generator().manual_seed(0)
    b, n = 4, 4096
    x = torch.exp(1j * 2 * math.pi * torch.rand(b, n, generator=g)).to(torch.complex64)
    print(f"input: [{b}, {n}] {x.dtype}, mean power 1 (unit-modulus symbols)\n")
    chain = ChannelChain.from_tables(TOUR)
    x.requires_grad_()
    out = chain(x, generator=g)
    for name, rec in out.record.items():
        print(f"{name:<14}" + "  ".join(f"{k}={_fmt(v)}" for k, v in rec.items()))
    out.y.abs().pow(2).mean().backward()
    print(
        f"\noutput: {out.y.dtype}, |d loss / d x| = {x.grad.abs().mean():.3e} (gradients reach the input)"
    )
    return 0
