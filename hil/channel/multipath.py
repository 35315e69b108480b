"""Multipath as a tapped delay line with random Rayleigh taps."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from . import functional as F
from .base import ChannelModule, ChannelOutput, register


@register("multipath")
class TappedDelayLine(ChannelModule):
    """Frequency-selective channel y[n] = sum_l h_l x[n - d_l], block-static per row.

    Power-delay profile either listed (``delays_samples`` with ``powers_db``) or
    exponential (``n_taps`` taps at 0, 1, ... samples with power exp(-d / tau),
    tau = ``decay_samples``). Taps are independent CN(0, p_l) with the profile
    normalised to sum p_l = 1, so E[sum |h_l|^2] = 1 and the mean received power
    equals the transmitted power. An optional Rician first tap adds a fixed
    line-of-sight component (``first_tap_k_db``).

    Args:
        profile: "exponential" or "listed".
        n_taps: taps of the exponential profile.
        decay_samples: exponential decay constant tau in samples.
        delays_samples: listed integer delays.
        powers_db: listed relative tap powers in dB.
        first_tap_k_db: Rician K of the first tap in dB, None for Rayleigh.
    """

    def __init__(
        self,
        profile: str = "exponential",
        n_taps: int = 8,
        decay_samples: float = 2.0,
        delays_samples: tuple[int, ...] | list[int] | None = None,
        powers_db: tuple[float, ...] | list[float] | None = None,
        first_tap_k_db: float | None = None,
    ):
        super().__init__()
        if profile == "exponential":
            if n_taps < 1:
                raise ValueError(f"n_taps must be >= 1, got {n_taps}")
            if decay_samples <= 0:
                raise ValueError(f"decay_samples must be positive, got {decay_samples}")
            delays = tuple(range(n_taps))
            powers = [math.exp(-d / decay_samples) for d in delays]
        elif profile == "listed":
            if not delays_samples or powers_db is None or len(delays_samples) != len(powers_db):
                raise ValueError(
                    "profile 'listed' needs delays_samples and powers_db of equal, non-zero length"
                )
            if any(int(d) != d or d < 0 for d in delays_samples):
                raise ValueError(f"delays_samples must be non-negative integers: {delays_samples}")
            delays = tuple(int(d) for d in delays_samples)
            powers = [10 ** (p / 10) for p in powers_db]
        else:
            raise ValueError(f"profile must be 'exponential' or 'listed', got {profile!r}")
        total = sum(powers)
        self.profile = profile
        self.n_taps = n_taps
        self.decay_samples = decay_samples
        self.delays_samples = list(delays_samples) if delays_samples is not None else None
        self.powers_db = list(powers_db) if powers_db is not None else None
        self.first_tap_k_db = first_tap_k_db
        self.delays = delays
        self.powers = tuple(p / total for p in powers)

    @property
    def max_delay(self) -> int:
        return max(self.delays)

    @property
    def rms_delay_spread(self) -> float:
        """RMS delay spread of the profile in samples."""
        mean = sum(p * d for p, d in zip(self.powers, self.delays, strict=True))
        return math.sqrt(
            sum(p * (d - mean) ** 2 for p, d in zip(self.powers, self.delays, strict=True))
        )

    def draw(
        self,
        batch: int,
        *,
        generator: torch.Generator | None,
        dtype: torch.dtype,
        device: torch.device | str,
    ) -> Tensor:
        """Tap gains: returns [B, L] (B = ``batch``, L = len(delays)) of ``dtype``, complex64
        or complex128."""
        g = F.complex_normal(
            (batch, len(self.delays)), generator=generator, dtype=dtype, device=device
        )
        amp = torch.tensor(self.powers, dtype=F.real_dtype_of(dtype), device=device).sqrt()
        taps = g * amp.to(dtype)
        if self.first_tap_k_db is not None:
            k = 10 ** (self.first_tap_k_db / 10)
            p0 = self.powers[0]
            los = math.sqrt(p0 * k / (k + 1))
            taps[:, 0] = los + taps[:, 0] * math.sqrt(1 / (k + 1))
        return taps

    def forward(
        self, x: Tensor, taps: Tensor | None = None, *, generator: torch.Generator | None = None
    ) -> ChannelOutput:
        """x: [B, N] complex64/complex128; taps: optional [B, L] complex gains for the
        profile's delays (cast to x's dtype). Returns y [B, N] of x's dtype; record taps:
        [B, L]."""
        self._check(x)
        if taps is None:
            taps = self.draw(x.shape[0], generator=generator, dtype=x.dtype, device=x.device)
        else:
            taps = torch.as_tensor(taps, dtype=x.dtype, device=x.device)
            if taps.shape != (x.shape[0], len(self.delays)):
                raise ValueError(
                    f"taps must have shape [{x.shape[0]}, {len(self.delays)}], got {tuple(taps.shape)}"
                )
        y = F.tapped_delay_line(x, taps, self.delays)
        return ChannelOutput(y, {"taps": taps.detach(), "delays": self.delays})

    def config(self):
        return {
            "profile": self.profile,
            "n_taps": self.n_taps,
            "decay_samples": self.decay_samples,
            "delays_samples": self.delays_samples,
            "powers_db": self.powers_db,
            "first_tap_k_db": self.first_tap_k_db,
        }
