"""Pure functions behind the channel modules.

Every parameter is explicit; nothing here draws random numbers except the
``draw_*`` helpers, which take a ``torch.Generator``. All functions accept
batched complex tensors ``x: [B, N]`` (complex64 or complex128) and return the
same dtype. They are built from ordinary complex tensor operations, so PyTorch's
complex autograd (conjugate Wirtinger derivative) differentiates through them.

Conventions (see DESIGN.md): SNR is Es/N0 per complex sample. A complex
Gaussian of variance N0 has N0/2 in each real dimension.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from numba import njit
from torch import Tensor

__all__ = [
    "as_batch_values",
    "complex_normal",
    "dc_offset",
    "draw_uniform",
    "frequency_offset",
    "iq_imbalance",
    "iq_imbalance_coefficients",
    "n0_from_snr_db",
    "quantize",
    "rapp",
    "resample",
    "saleh",
    "signal_power",
    "tapped_delay_line",
    "wiener_phase",
]


def real_dtype_of(dtype: torch.dtype) -> torch.dtype:
    """float32 for complex64, float64 for complex128."""
    if dtype == torch.complex64:
        return torch.float32
    if dtype == torch.complex128:
        return torch.float64
    raise TypeError(f"expected a complex64 or complex128 tensor, got {dtype}")


def check_complex(x: Tensor, name: str = "x") -> None:
    """Raise unless x is a torch tensor of shape [B, N], dtype complex64 or complex128."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in (torch.complex64, torch.complex128):
        raise TypeError(f"{name} must be complex64 or complex128, got {x.dtype}")
    if x.dim() != 2:
        raise ValueError(f"{name} must have shape [B, N], got {tuple(x.shape)}")


def as_batch_values(value, batch: int, *, like: Tensor, name: str) -> Tensor:
    """A per-call scalar or ``[B]`` value as a real ``[B]`` tensor on ``like``'s device.

    Args:
        value: float, sequence or tensor of shape [] or [B], any real dtype.
        batch: B.
        like: complex64/complex128 tensor (any shape) whose real dtype and device to use.

    Returns:
        [B] float32 (for complex64 ``like``) or float64 (for complex128); finite.
    """
    rdt = real_dtype_of(like.dtype)
    t = torch.as_tensor(value, dtype=rdt, device=like.device)
    if t.dim() == 0:
        t = t.expand(batch)
    if t.shape != (batch,):
        raise ValueError(f"{name} must be a scalar or have shape [{batch}], got {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} must be finite, got {value!r}")
    return t


def _gen_device(generator: torch.Generator | None) -> torch.device:
    return generator.device if generator is not None else torch.device("cpu")


def complex_normal(
    shape: tuple[int, ...],
    *,
    generator: torch.Generator | None,
    dtype: torch.dtype,
    device: torch.device | str,
) -> Tensor:
    """Circularly-symmetric CN(0, 1) samples: variance 1/2 per real dimension.

    ``dtype`` is complex64 or complex128; returns [*shape] of that dtype on ``device``.
    """
    rdt = real_dtype_of(dtype)
    z = torch.randn((*shape, 2), generator=generator, dtype=rdt, device=_gen_device(generator))
    z = z.to(device) * math.sqrt(0.5)
    return torch.complex(z[..., 0], z[..., 1])


def draw_uniform(
    shape: tuple[int, ...],
    low: float,
    high: float,
    *,
    generator: torch.Generator | None,
    dtype: torch.dtype,
    device: torch.device | str,
) -> Tensor:
    """Uniform real samples in [low, high).

    ``dtype`` is a real floating dtype (float32/float64); returns [*shape] of that dtype
    on ``device``.
    """
    u = torch.rand(shape, generator=generator, dtype=dtype, device=_gen_device(generator))
    return (low + (high - low) * u).to(device)


def cis(theta: Tensor) -> Tensor:
    """exp(j theta): theta [*] float32/float64 -> [*] complex64/complex128 (its precision).

    ``torch.complex(cos, sin)``: the same values and gradient as
    ``torch.polar(ones, theta)`` at about a third of its CPU time."""
    return torch.complex(torch.cos(theta), torch.sin(theta))


def phase_ramp(
    cfo_norm: Tensor, n: int, start: int = 0, phase0: Tensor | None = None, block: int = 64
) -> Tensor:
    """exp(j (2 pi f m + phi0)) for m = start .. start + n - 1: cfo_norm f [B] real (any
    precision), phase0 [B] real or None (0) -> [B, n] complex128.

    The phase is computed in float64 (long streams keep sub-milliradian accuracy) and
    factored as the product of a per-block phasor and a within-block one, so it costs
    n / block + block sines and cosines a row rather than n.
    """
    f = cfo_norm.double()
    q = -(-n // block)  # blocks
    m0 = start + block * torch.arange(q, device=f.device, dtype=torch.float64)
    outer = 2 * math.pi * f[:, None] * m0[None, :]  # [B, q]
    if phase0 is not None:
        outer = outer + phase0.double()[:, None]
    inner = 2 * math.pi * f[:, None] * torch.arange(block, device=f.device, dtype=torch.float64)
    rot = cis(outer)[:, :, None] * cis(inner)[:, None, :]  # [B, q, block]
    return rot.reshape(f.shape[0], q * block)[:, :n]


def signal_power(x: Tensor) -> Tensor:
    """Mean |x|^2 per row (over the last dim). x: [..., N] complex64/complex128 -> [...] real
    (float32/float64 to match)."""
    return (x.real**2 + x.imag**2).mean(dim=-1)


def n0_from_snr_db(snr_db: Tensor, es: Tensor) -> Tensor:
    """Noise variance per complex sample: N0 = Es / 10^(SNR/10).

    snr_db, es: real (float32/float64) tensors of broadcastable shapes, in practice [B];
    returns their broadcast shape ([B]), real.
    """
    return es / torch.pow(10.0, snr_db / 10.0)


def frequency_offset(x: Tensor, cfo_norm: Tensor, phase0: Tensor, start: int = 0) -> Tensor:
    """Multiply by the phase ramp exp(j(2 pi f n + phi0)), n = start, start+1, ...

    Args:
        x: [B, N] complex64/complex128.
        cfo_norm: [B] real (any precision; the phase is computed in float64), CFO in cycles
            per sample (cfo_hz / sample_rate_hz).
        phase0: [B] real, phase at n = 0 in radians.
        start: index of x[:, 0] in the stream, so chunked calls stay phase-continuous.

    Returns:
        [B, N], the dtype of x.
    """
    rot = phase_ramp(cfo_norm, x.shape[-1], start, phase0).to(x.dtype)
    return x * rot


def wiener_phase(increments: Tensor, phase0: Tensor) -> Tensor:
    """Wiener phase process: phi[n] = phi0 + sum_{m<=n} increments[m].

    increments: [B, N] real (float32/float64), radians; phase0: [B] real; returns [B, N]
    real (their promoted dtype).
    """
    return phase0[:, None] + torch.cumsum(increments, dim=-1)


def iq_imbalance_coefficients(gain_db: float, phase_deg: float) -> tuple[complex, complex]:
    """K1, K2 of y = K1 x + K2 conj(x) for a Q branch with gain g and phase error phi.

    The model keeps I and gives Q a gain g = 10^(gain_db/20) and a quadrature
    error phi: y = I + j g (Q cos phi - I sin phi). Then
    K1 = (1 + g e^{-j phi}) / 2 and K2 = (1 - g e^{j phi}) / 2.
    Image rejection ratio = |K1|^2 / |K2|^2.
    """
    g = 10.0 ** (gain_db / 20.0)
    phi = math.radians(phase_deg)
    k1 = (1 + g * complex(math.cos(phi), -math.sin(phi))) / 2
    k2 = (1 - g * complex(math.cos(phi), math.sin(phi))) / 2
    return k1, k2


def iq_imbalance(x: Tensor, gain_db: float, phase_deg: float) -> Tensor:
    """y = K1 x + K2 conj(x); see :func:`iq_imbalance_coefficients`.

    x: [...] complex64/complex128, any shape (elementwise); returns the same shape and dtype.
    """
    k1, k2 = iq_imbalance_coefficients(gain_db, phase_deg)
    return k1 * x + k2 * torch.conj(x)


def dc_offset(x: Tensor, offset: Tensor) -> Tensor:
    """y = x + d. x: [B, N] complex64/complex128; offset d: [B] complex; returns [B, N]
    (the promoted dtype: that of x when d has the same precision)."""
    return x + offset[:, None]


def tapped_delay_line(x: Tensor, taps: Tensor, delays: tuple[int, ...]) -> Tensor:
    """y[n] = sum_l taps[l] x[n - delays[l]], output as long as the input.

    Args:
        x: [B, N] complex64/complex128.
        taps: [B, L] complex tap gains, the dtype of x.
        delays: L non-negative integer delays in samples.

    Returns:
        [B, N], the dtype of x.
    """
    y = torch.zeros_like(x)
    n = x.shape[-1]
    for l, d in enumerate(delays):
        if d >= n:
            continue
        shifted = x if d == 0 else torch.nn.functional.pad(x[:, : n - d], (d, 0))
        y = y + taps[:, l, None] * shifted
    return y


def _windowed_sinc(u: Tensor, half_width: int) -> Tensor:
    """Hann-windowed sinc kernel, zero for |u| >= half_width."""
    w = 0.5 * (1 + torch.cos(math.pi * u / half_width))
    w = torch.where(u.abs() < half_width, w, torch.zeros_like(w))
    return torch.sinc(u) * w


def resample(x: Tensor, positions: Tensor, half_width: int = 8) -> Tensor:
    """Band-limited interpolation of x at fractional sample positions.

    y[b, n] = sum_k x[b, k] h(positions[b, n] - k), h a Hann-windowed sinc with
    ``half_width`` taps each side. Samples outside x count as zero. Integer
    positions reproduce x exactly. Linear in x, so differentiable in x.

    Args:
        x: [B, N] complex64/complex128.
        positions: [B, M] real (float32/float64), where to read x (in samples).

    Returns:
        [B, M], the dtype of x.
    """
    if x.device.type == "cpu" and not (
        torch.is_grad_enabled() and (x.requires_grad or positions.requires_grad)
    ):
        # nothing to differentiate (the sim radio, evaluation): the same sum, compiled
        y = _resample_kernel(
            x.detach().resolve_conj().numpy(), positions.detach().double().numpy(), int(half_width)
        )
        return torch.from_numpy(y).to(x.dtype)
    base = torch.floor(positions)
    frac = positions - base
    offs = torch.arange(-half_width + 1, half_width + 1, device=x.device)
    idx = base.long()[..., None] + offs  # [B, M, 2W]
    weights = _windowed_sinc(frac[..., None] - offs.to(frac.dtype), half_width)
    n = x.shape[-1]
    valid = (idx >= 0) & (idx < n)
    idx_c = idx.clamp(0, n - 1)
    gathered = torch.gather(x, 1, idx_c.reshape(x.shape[0], -1)).reshape(idx.shape)
    weights = torch.where(valid, weights, torch.zeros_like(weights)).to(x.dtype)
    return (gathered * weights).sum(dim=-1)


@njit(cache=True, nogil=True)
def _resample_kernel(x, pos, half_width):
    """``resample``'s sum for x [B, N] complex, pos [B, M] float64 -> [B, M] complex128.

    With u = f - k (f the position's fraction, k the integer offset), sin(pi u) is
    (-1)^k sin(pi f) and the window's cos(pi u / W) is cos(a) cos(b_k) + sin(a) sin(b_k)
    (a = pi f / W, b_k = pi k / W): three sines and cosines per output sample instead of
    two per tap."""
    b, n = x.shape
    m = pos.shape[1]
    w = half_width
    taps = 2 * w
    cb = np.empty(taps)
    sb = np.empty(taps)
    sign = np.empty(taps)
    for j in range(taps):
        k = j - w + 1
        cb[j] = math.cos(math.pi * k / w)
        sb[j] = math.sin(math.pi * k / w)
        sign[j] = 1.0 if k % 2 == 0 else -1.0
    out = np.zeros((b, m), np.complex128)
    for r in range(b):
        for i in range(m):
            p = pos[r, i]
            base = math.floor(p)
            f = p - base
            sf = math.sin(math.pi * f)
            ca = math.cos(math.pi * f / w)
            sa = math.sin(math.pi * f / w)
            acc = 0j
            for j in range(taps):
                k = j - w + 1
                idx = int(base) + k
                u = f - k
                if idx < 0 or idx >= n or abs(u) >= w:
                    continue
                sinc = 1.0 if u == 0.0 else sign[j] * sf / (math.pi * u)
                acc += x[r, idx] * (sinc * 0.5 * (1.0 + ca * cb[j] + sa * sb[j]))
            out[r, i] = acc
    return out


def _abs2(x: Tensor) -> Tensor:
    return x.real**2 + x.imag**2


def rapp(x: Tensor, saturation: float, smoothness: float, gain: float = 1.0) -> Tensor:
    """Rapp solid-state PA AM/AM, no AM/PM (Rapp 1991).

    |y| = g r / (1 + (g r / A_sat)^(2p))^(1/(2p)), phase kept. Computed from
    r^2 so the gradient is smooth at r = 0.

    x: [...] complex64/complex128, any shape (elementwise); returns the same shape and dtype.
    """
    ratio = (gain**2) * _abs2(x) / saturation**2
    scale = gain * torch.pow(1 + torch.pow(ratio, smoothness), -1.0 / (2 * smoothness))
    return x * scale.to(x.dtype)


def saleh(x: Tensor, alpha_a: float, beta_a: float, alpha_phi: float, beta_phi: float) -> Tensor:
    """Saleh TWT amplifier model (Saleh 1981), AM/AM and AM/PM.

    A(r) = alpha_a r / (1 + beta_a r^2), Phi(r) = alpha_phi r^2 / (1 + beta_phi r^2).

    x: [...] complex64/complex128, any shape (elementwise); returns the same shape and dtype.
    """
    r2 = _abs2(x)
    am = alpha_a / (1 + beta_a * r2)
    pm = alpha_phi * r2 / (1 + beta_phi * r2)
    return x * torch.polar(am, pm).to(x.dtype)


def quantize(x: Tensor, bits: int, full_scale: float, surrogate: bool = False) -> Tensor:
    """Uniform mid-tread quantiser of I and Q with clipping at +-full_scale.

    Levels: step = full_scale / 2^(bits-1); codes in [-2^(bits-1), 2^(bits-1) - 1],
    like a two's-complement ADC. The gradient is that of the clipping alone
    (1 inside the range, 0 where clipped): the rounding is invisible to autograd
    (straight-through estimator, Bengio et al. 2013). With ``surrogate=True``
    the function returns the clipped signal without rounding, the function
    whose exact derivative the straight-through gradient is; tests use it to
    check that gradient by finite differences.

    x: [...] complex64/complex128, any shape (elementwise); returns the same shape and dtype.
    """
    step = full_scale / 2 ** (bits - 1)
    lo = -(2 ** (bits - 1)) * step
    hi = (2 ** (bits - 1) - 1) * step

    def one(v: Tensor) -> Tensor:
        c = torch.clamp(v, lo, hi)
        if surrogate:
            return c
        return c + (torch.round(c / step) * step - c).detach()

    return torch.complex(one(x.real), one(x.imag))
