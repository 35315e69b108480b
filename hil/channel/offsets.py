"""Carrier frequency offset, timing/sampling offset and phase noise."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from . import functional as F
from .base import ChannelModule, ChannelOutput, register


@register("cfo")
class CarrierFrequencyOffset(ChannelModule):
    """y[n] = x[n] exp(j (2 pi cfo_hz / fs (n + start) + phi0)).

    Args:
        sample_rate_hz: fs.
        max_cfo_hz: when no ``cfo_hz`` is given, draw it uniformly in +-max_cfo_hz per row.
        random_phase: draw phi0 uniformly in [0, 2 pi) when none is given (else 0).
    """

    def __init__(
        self, sample_rate_hz: float = 4e6, max_cfo_hz: float = 0.0, random_phase: bool = True
    ):
        super().__init__()
        if sample_rate_hz <= 0:
            raise ValueError(f"sample_rate_hz must be positive, got {sample_rate_hz}")
        if max_cfo_hz < 0 or max_cfo_hz >= sample_rate_hz / 2:
            raise ValueError(f"max_cfo_hz must lie in [0, fs/2), got {max_cfo_hz}")
        self.sample_rate_hz = float(sample_rate_hz)
        self.max_cfo_hz = float(max_cfo_hz)
        self.random_phase = bool(random_phase)

    def forward(
        self,
        x: Tensor,
        cfo_hz: float | Tensor | None = None,
        phase0: float | Tensor | None = None,
        start: int = 0,
        *,
        generator: torch.Generator | None = None,
    ) -> ChannelOutput:
        """x: [B, N] complex64/complex128; cfo_hz, phase0: scalar or [B] real. Returns y
        [B, N] of x's dtype; record cfo_hz, phase0: [B] real (float32/float64 to match x)."""
        self._check(x)
        b = x.shape[0]
        rdt = F.real_dtype_of(x.dtype)
        if cfo_hz is None:
            cfo = F.draw_uniform(
                (b,),
                -self.max_cfo_hz,
                self.max_cfo_hz,
                generator=generator,
                dtype=rdt,
                device=x.device,
            )
        else:
            cfo = F.as_batch_values(cfo_hz, b, like=x, name="cfo_hz")
        if phase0 is None:
            ph = (
                F.draw_uniform(
                    (b,), 0.0, 2 * math.pi, generator=generator, dtype=rdt, device=x.device
                )
                if self.random_phase
                else torch.zeros(b, dtype=rdt, device=x.device)
            )
        else:
            ph = F.as_batch_values(phase0, b, like=x, name="phase0")
        y = F.frequency_offset(x, cfo / self.sample_rate_hz, ph, start)
        return ChannelOutput(y, {"cfo_hz": cfo.detach(), "phase0": ph.detach()})


@register("timing")
class TimingOffset(ChannelModule):
    """Delay by an integer plus fractional number of samples, with optional sampling-rate offset.

    The receiver samples the transmitted signal at t_n = n (1 + sfo_ppm 1e-6) - delay
    (in transmit sample periods), by band-limited (windowed-sinc) interpolation.
    Output has the input's length; samples before the signal starts are zero.

    Args:
        max_delay_samples: when no ``delay`` is given, draw it uniformly in [0, max].
        sfo_ppm: sampling frequency offset of the receiver clock in ppm.
        half_width: interpolation taps each side.
    """

    def __init__(self, max_delay_samples: float = 0.0, sfo_ppm: float = 0.0, half_width: int = 8):
        super().__init__()
        if max_delay_samples < 0:
            raise ValueError(f"max_delay_samples must be >= 0, got {max_delay_samples}")
        if abs(sfo_ppm) > 1000:
            raise ValueError(f"sfo_ppm={sfo_ppm} is beyond +-1000 ppm; no oscillator is that bad")
        if half_width < 1:
            raise ValueError(f"half_width must be >= 1, got {half_width}")
        self.max_delay_samples = float(max_delay_samples)
        self.sfo_ppm = float(sfo_ppm)
        self.half_width = int(half_width)

    def forward(
        self,
        x: Tensor,
        delay: float | Tensor | None = None,
        *,
        generator: torch.Generator | None = None,
    ) -> ChannelOutput:
        """x: [B, N] complex64/complex128; delay: samples, scalar or [B] real. Returns y
        [B, N] of x's dtype; record delay: [B] real (float32/float64 to match x)."""
        self._check(x)
        b, n = x.shape
        rdt = F.real_dtype_of(x.dtype)
        if delay is None:
            d = F.draw_uniform(
                (b,), 0.0, self.max_delay_samples, generator=generator, dtype=rdt, device=x.device
            )
        else:
            d = F.as_batch_values(delay, b, like=x, name="delay")
        t = torch.arange(n, dtype=torch.float64, device=x.device) * (1 + self.sfo_ppm * 1e-6)
        pos = (t[None, :] - d.double()[:, None]).to(rdt)
        y = F.resample(x, pos, self.half_width)
        return ChannelOutput(y, {"delay": d.detach(), "sfo_ppm": self.sfo_ppm})


@register("phase_noise")
class PhaseNoise(ChannelModule):
    """Wiener (random-walk) oscillator phase noise: y[n] = x[n] exp(j phi[n]).

    phi[n] - phi[n-1] ~ N(0, 2 pi beta / fs), beta the two-sided 3 dB linewidth
    of the oscillator's Lorentzian spectrum (Demir et al. 2000).

    Args:
        linewidth_hz: beta.
        sample_rate_hz: fs.
    """

    def __init__(self, linewidth_hz: float = 100.0, sample_rate_hz: float = 4e6):
        super().__init__()
        if linewidth_hz < 0 or sample_rate_hz <= 0:
            raise ValueError("linewidth_hz must be >= 0 and sample_rate_hz > 0")
        self.linewidth_hz = float(linewidth_hz)
        self.sample_rate_hz = float(sample_rate_hz)

    @property
    def increment_variance(self) -> float:
        return 2 * math.pi * self.linewidth_hz / self.sample_rate_hz

    def forward(
        self,
        x: Tensor,
        phase0: float | Tensor = 0.0,
        *,
        generator: torch.Generator | None = None,
        increments: Tensor | None = None,
    ) -> ChannelOutput:
        """x: [B, N] complex64/complex128; phase0: scalar or [B] real, radians; increments:
        optional [B, N] real phase steps (float32/float64). Returns y [B, N] of x's dtype;
        record phase: [B, N] real."""
        self._check(x)
        b, n = x.shape
        rdt = F.real_dtype_of(x.dtype)
        if increments is None:
            g_dev = generator.device if generator is not None else torch.device("cpu")
            increments = torch.randn((b, n), generator=generator, dtype=rdt, device=g_dev).to(
                x.device
            )
            increments = increments * math.sqrt(self.increment_variance)
        ph0 = F.as_batch_values(phase0, b, like=x, name="phase0")
        phi = F.wiener_phase(increments, ph0)
        y = x * F.cis(phi).to(x.dtype)
        return ChannelOutput(y, {"phase": phi.detach()})
