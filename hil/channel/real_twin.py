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
    """[..., N] complex64/complex128 -> [..., N, 2] real (float32/float64 to match)."""
    return torch.stack((x.real, x.imag), dim=-1)


def iq_to_complex(v: Tensor) -> Tensor:
    """[..., N, 2] real (float32/float64) -> [..., N] complex (complex64/complex128 to match)."""
    return torch.complex(v[..., 0], v[..., 1])


def apply_2x2(v: Tensor, m: Tensor) -> Tensor:
    """Apply 2x2 real matrices m ([..., 2, 2], broadcast over [B, N]) to (I, Q) vectors v.

    v: [B, N, 2] real (float32/float64); m: [2, 2] or [B, N, 2, 2], the dtype of v; returns
    [B, N, 2] of that dtype.
    """
    i, q = v[..., 0], v[..., 1]
    return torch.stack(
        (m[..., 0, 0] * i + m[..., 0, 1] * q, m[..., 1, 0] * i + m[..., 1, 1] * q), dim=-1
    )


def rotate(v: Tensor, gain_re: Tensor, gain_im: Tensor) -> Tensor:
    """Multiply by complex gains a + jb as [[a, -b], [b, a]] on (I, Q).

    v: [B, N, 2] real (float32/float64); gain_re, gain_im: [B, N] real, the dtype of v;
    returns [B, N, 2] of that dtype.
    """
    m = torch.stack((torch.stack((gain_re, -gain_im), -1), torch.stack((gain_im, gain_re), -1)), -2)
    return apply_2x2(v, m)


def real_fading(v: Tensor, h: Tensor) -> Tensor:
    """Flat fading with h: [B] complex, applied as a real rotation-scaling.

    v: [B, N, 2] real (float32/float64); h: [B] complex64/complex128 of matching precision;
    returns [B, N, 2] of v's dtype.
    """
    return rotate(v, h.real[:, None].expand(v.shape[:2]), h.imag[:, None].expand(v.shape[:2]))


def real_cfo(v: Tensor, cfo_norm: Tensor, phase0: Tensor, start: int = 0) -> Tensor:
    """CFO phase ramp as cos/sin rotations.

    v: [B, N, 2] real (float32/float64); cfo_norm (cycles/sample), phase0 (rad): [B] real;
    returns [B, N, 2] of v's dtype. The phase is computed in v's dtype (the complex path's
    :func:`hil.channel.functional.frequency_offset` uses float64).
    """
    n = torch.arange(start, start + v.shape[1], dtype=v.dtype, device=v.device)
    theta = 2 * math.pi * cfo_norm[:, None] * n[None, :] + phase0[:, None]
    return rotate(v, torch.cos(theta), torch.sin(theta))


def real_iq_imbalance(v: Tensor, gain_db: float, phase_deg: float) -> Tensor:
    """I' = I, Q' = g (Q cos phi - I sin phi) as a fixed 2x2 matrix.

    v: [..., 2] real (float32/float64), in practice [B, N, 2]; returns the same shape and dtype.
    """
    g = 10 ** (gain_db / 20)
    phi = math.radians(phase_deg)
    m = torch.tensor(
        [[1.0, 0.0], [-g * math.sin(phi), g * math.cos(phi)]], dtype=v.dtype, device=v.device
    )
    return apply_2x2(v, m)


REAL_KINDS = ("awgn", "fading", "multipath", "cfo", "phase_noise", "iq_imbalance")


def real_tdl(v: Tensor, taps: Tensor, delays: tuple[int, ...]) -> Tensor:
    """Tapped delay line on (I, Q): sum of delayed copies, each rotated by its tap.

    v: [B, N, 2] real (float32/float64); taps: [B, L] complex (complex64/complex128 of
    matching precision), one per entry of ``delays``; returns [B, N, 2] of v's dtype.
    """
    out = torch.zeros_like(v)
    n = v.shape[1]
    for l, d in enumerate(delays):
        if d >= n:
            continue
        shifted = v if d == 0 else torch.nn.functional.pad(v[:, : n - d], (0, 0, d, 0))
        out = out + rotate(
            shifted,
            taps[:, l, None].real.expand(v.shape[:2]),
            taps[:, l, None].imag.expand(v.shape[:2]),
        )
    return out


def apply_real_chain(
    chain, x: Tensor, snr_db: float | Tensor | None, generator: torch.Generator | None = None
) -> Tensor:
    """Apply a ChannelChain to complex x as real arithmetic on (I, Q) pairs.

    Realisations are drawn from each stage's own distribution (not the same
    draws as the complex path). Supports the stages in REAL_KINDS.

    chain: a :class:`hil.channel.ChannelChain`; x: [B, N] complex64/complex128; snr_db:
    scalar or [B] real, or None for each AWGN stage's own; returns [B, N] of x's dtype.
    """
    from . import functional as F

    b, n = x.shape
    v = complex_to_iq(x)
    rdt = v.dtype
    for name, st in chain.stages.items():
        if st.kind not in REAL_KINDS:
            raise ValueError(
                f"stage {name!r} ({st.kind}) has no real 2x2 twin; grad-mode 'real' supports {list(REAL_KINDS)}"
            )
        if st.kind == "awgn":
            snr = F.as_batch_values(
                st.snr_db if snr_db is None else snr_db, b, like=x, name="snr_db"
            )
            es = (v**2).sum(-1).mean(-1) if st.measure_power else torch.full_like(snr, st.es)
            n0 = F.n0_from_snr_db(snr, es)
            noise = complex_to_iq(
                F.complex_normal((b, n), generator=generator, dtype=x.dtype, device=x.device)
            )
            v = v + torch.sqrt(n0)[:, None, None] * noise
        elif st.kind == "fading":
            h = st.draw((b, 1), generator=generator, dtype=x.dtype, device=x.device)[:, 0]
            if st.block_length is not None:
                raise ValueError(
                    "grad-mode 'real' supports one fading gain per row (block_length unset)"
                )
            v = real_fading(v, h)
        elif st.kind == "multipath":
            v = real_tdl(
                v, st.draw(b, generator=generator, dtype=x.dtype, device=x.device), st.delays
            )
        elif st.kind == "cfo":
            cfo = F.draw_uniform(
                (b,), -st.max_cfo_hz, st.max_cfo_hz, generator=generator, dtype=rdt, device=x.device
            )
            ph = F.draw_uniform(
                (b,), 0.0, 2 * math.pi, generator=generator, dtype=rdt, device=x.device
            )
            v = real_cfo(
                v, cfo / st.sample_rate_hz, ph if st.random_phase else torch.zeros_like(ph)
            )
        elif st.kind == "phase_noise":
            g_dev = generator.device if generator is not None else torch.device("cpu")
            inc = torch.randn((b, n), generator=generator, dtype=rdt, device=g_dev).to(x.device)
            phi = torch.cumsum(inc * math.sqrt(st.increment_variance), dim=-1)
            v = rotate(v, torch.cos(phi), torch.sin(phi))
        elif st.kind == "iq_imbalance":
            v = real_iq_imbalance(v, st.gain_db, st.phase_deg)
    return iq_to_complex(v)
