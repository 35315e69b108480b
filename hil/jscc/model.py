"""Deep JSCC encoder and decoder.

Baseline architecture from Bourtsoulatze, Kurka & Gündüz, "Deep Joint
Source-Channel Coding for Wireless Image Transmission" (IEEE TCCN 2019): five
5x5 convolutions with PReLU, two of them strided, a linear last layer, and an
average power constraint; the decoder mirrors it with transposed convolutions
and a sigmoid. Changes that pay here:

- the decoder is SNR-adaptive with attention-feature (AF) modules after each
  block (Xu et al., "Wireless Image Transmission Using Deep Source Channel
  Coding With Attention Modules", IEEE TCSVT 2021, "ADJSCC"): channel-wise
  gates computed from the pooled features and the receiver's SNR estimate;
- the decoder can also take the per-symbol post-equalisation SNR the PHY
  reports (log scale, as an extra input plane), since after OFDM equalisation
  each symbol sees its own subcarrier's SNR.

The encoder is fully convolutional (any H, W divisible by 4); the number of
output channels c sets the bandwidth ratio k/n = (c/2 * H/4 * W/4) / (3 H W)
= c / 96: c = 16 for 1/6, c = 8 for 1/12.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from fractions import Fraction

import torch
from torch import Tensor, nn


@dataclass(frozen=True)
class JsccConfig:
    """Static model configuration (stored in every checkpoint).

    Attributes:
        bandwidth_ratio: k/n as a string fraction ("1/6", "1/12", ...): complex
            channel symbols per real source value. Must give an even integer c.
        hidden: feature channels of the hidden layers.
        snr_adaptive: AF modules in the decoder conditioned on the SNR estimate.
        use_symbol_gain: feed the per-symbol post-equalisation SNR to the decoder.
    """

    bandwidth_ratio: str = "1/6"
    hidden: int = 32
    snr_adaptive: bool = True
    use_symbol_gain: bool = False

    def __post_init__(self):
        try:
            r = Fraction(self.bandwidth_ratio)
        except (ValueError, ZeroDivisionError) as exc:
            raise ValueError(
                f"bandwidth_ratio must be a fraction like '1/6', got {self.bandwidth_ratio!r}"
            ) from exc
        c = r * 96
        if c.denominator != 1 or c < 2 or c % 2:
            raise ValueError(
                f"bandwidth_ratio={self.bandwidth_ratio} gives {c} latent channels; "
                "it must be an even integer (k/n = c/96, e.g. 1/6 -> 16, 1/12 -> 8, 1/24 -> 4)"
            )
        if not 4 <= self.hidden <= 1024:
            raise ValueError(f"hidden must be in 4..1024, got {self.hidden}")

    @property
    def latent_channels(self) -> int:
        return int(Fraction(self.bandwidth_ratio) * 96)

    def n_symbols(self, shape: tuple[int, int, int]) -> int:
        """Complex channel symbols k for an image of shape (C, H, W)."""
        c, h, w = shape
        if c != 3 or h % 4 or w % 4:
            raise ValueError(f"image shape must be (3, H, W) with H, W divisible by 4, got {shape}")
        return self.latent_channels * (h // 4) * (w // 4) // 2

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> JsccConfig:
        allowed = set(cls.__dataclass_fields__)
        unknown = set(d) - allowed
        if unknown:
            raise ValueError(
                f"unknown model config key(s) {sorted(unknown)}; allowed: {sorted(allowed)}"
            )
        return cls(**d)


def power_normalize(z: Tensor) -> Tensor:
    """[B, k] complex -> same with mean |z|^2 = 1 per row (exactly, up to rounding)."""
    p = (z.real**2 + z.imag**2).mean(dim=1, keepdim=True)
    return z / torch.sqrt(p.clamp_min(1e-12)).to(z.dtype)


def _conv(cin, cout, stride):
    return nn.Conv2d(cin, cout, 5, stride=stride, padding=2)


def _deconv(cin, cout, stride):
    return nn.ConvTranspose2d(cin, cout, 5, stride=stride, padding=2, output_padding=stride - 1)


class Encoder(nn.Module):
    """Images [B, 3, H, W] in [0, 1] -> symbols [B, k] complex64 with unit mean power per image."""

    def __init__(self, cfg: JsccConfig):
        super().__init__()
        h, c = cfg.hidden, cfg.latent_channels
        self.net = nn.Sequential(
            _conv(3, h, 2), nn.PReLU(h),
            _conv(h, 2 * h, 2), nn.PReLU(2 * h),
            _conv(2 * h, 2 * h, 1), nn.PReLU(2 * h),
            _conv(2 * h, 2 * h, 1), nn.PReLU(2 * h),
            _conv(2 * h, c, 1),
        )  # fmt: skip

    def forward(self, x: Tensor) -> Tensor:
        z = self.net(x - 0.5)  # [B, c, H/4, W/4]
        b = z.shape[0]
        z = z.reshape(b, 2, -1)  # first half of the channels -> I, second half -> Q
        return power_normalize(torch.complex(z[:, 0], z[:, 1]))


class AFModule(nn.Module):
    """Attention feature module (ADJSCC): channel gates from pooled features and SNR."""

    def __init__(self, ch: int):
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Linear(ch + 1, ch // 2 + 1), nn.ReLU(), nn.Linear(ch // 2 + 1, ch), nn.Sigmoid()
        )

    def forward(self, f: Tensor, snr_db: Tensor) -> Tensor:
        ctx = torch.cat([f.mean(dim=(2, 3)), (snr_db / 20.0)[:, None]], dim=1)
        return f * self.mlp(ctx)[:, :, None, None]


class Decoder(nn.Module):
    """Symbols [B, k] complex (+ SNR estimate [B] dB, + gains [B, k]) -> images [B, 3, H, W]."""

    def __init__(self, cfg: JsccConfig):
        super().__init__()
        self.cfg = cfg
        h, c = cfg.hidden, cfg.latent_channels
        cin = c + (c // 2 if cfg.use_symbol_gain else 0)
        self.blocks = nn.ModuleList([
            nn.Sequential(_deconv(cin, 2 * h, 1), nn.PReLU(2 * h)),
            nn.Sequential(_deconv(2 * h, 2 * h, 1), nn.PReLU(2 * h)),
            nn.Sequential(_deconv(2 * h, 2 * h, 1), nn.PReLU(2 * h)),
            nn.Sequential(_deconv(2 * h, h, 2), nn.PReLU(h)),
        ])  # fmt: skip
        self.af = (
            nn.ModuleList([AFModule(ch) for ch in (2 * h, 2 * h, 2 * h, h)])
            if cfg.snr_adaptive
            else None
        )
        self.out = _deconv(h, 3, 2)

    def forward(
        self,
        symbols: Tensor,
        snr_db: Tensor,
        shape: tuple[int, int, int],
        symbol_gain: Tensor | None = None,
    ) -> Tensor:
        _, hh, ww = shape
        b = symbols.shape[0]
        c = self.cfg.latent_channels
        z = torch.cat([symbols.real, symbols.imag], dim=1).reshape(b, c, hh // 4, ww // 4)
        if self.cfg.use_symbol_gain:
            if symbol_gain is None:
                raise ValueError(
                    "this decoder was built with use_symbol_gain=True and needs symbol_gain"
                )
            g = torch.log10(symbol_gain.clamp_min(1e-3)).reshape(b, c // 2, hh // 4, ww // 4)
            z = torch.cat([z, g.to(z.dtype)], dim=1)
        f = z
        for i, blk in enumerate(self.blocks):
            f = blk(f)
            if self.af is not None:
                f = self.af[i](f, snr_db.to(f.dtype))
        return torch.sigmoid(self.out(f))


class JsccModel(nn.Module):
    """Encoder + decoder of one configuration."""

    def __init__(self, cfg: JsccConfig | None = None):
        super().__init__()
        self.cfg = cfg or JsccConfig()
        self.encoder = Encoder(self.cfg)
        self.decoder = Decoder(self.cfg)

    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
