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

Two architectures, chosen by ``JsccConfig.arch`` through a registry:

- ``bdjscc``: the baseline above (what the first shipped checkpoints use);
- ``resgdn``: the stronger one. GDN / inverse GDN nonlinearities (Ballé,
  Laparra & Simoncelli, "Density Modeling of Images Using a Generalized
  Normalization Transformation", ICLR 2016), which the learned-compression
  literature and DeepJSCC-Q use in place of PReLU after strided layers;
  pre-activation residual blocks (He et al. 2016) at the latent resolution;
  sub-pixel (PixelShuffle) upsampling in the decoder instead of transposed
  convolutions, which avoid the checkerboard pattern transposed convolutions
  leave on flat areas such as sky (Odena, Dumoulin & Olah, Distill 2016);
  AF modules after every decoder block; the per-symbol SNR plane as an input.

Both are fully convolutional (any H, W divisible by 4); the number of output
channels c sets the bandwidth ratio k/n = (c/2 * H/4 * W/4) / (3 H W) = c / 96:
c = 16 for 1/6, c = 8 for 1/12.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import asdict, dataclass
from fractions import Fraction

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass(frozen=True)
class JsccConfig:
    """Static model configuration (stored in every checkpoint).

    Attributes:
        bandwidth_ratio: k/n as a string fraction ("1/6", "1/12", ...): complex
            channel symbols per real source value. Must give an even integer c.
        hidden: feature channels of the hidden layers (``resgdn``: at full/2
            resolution; the latent-resolution blocks use 2 * hidden).
        snr_adaptive: AF modules in the decoder conditioned on the SNR estimate.
        use_symbol_gain: feed the per-symbol post-equalisation SNR to the decoder.
        arch: ``bdjscc`` or ``resgdn`` (see the module docstring).
        res_blocks: ``resgdn`` only: residual blocks at the latent resolution, per side.
    """

    bandwidth_ratio: str = "1/6"
    hidden: int = 32
    snr_adaptive: bool = True
    use_symbol_gain: bool = False
    arch: str = "bdjscc"
    res_blocks: int = 2

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
        if self.arch not in ARCHITECTURES:
            raise ValueError(f"arch must be one of {sorted(ARCHITECTURES)}, got {self.arch!r}")
        if not 0 <= self.res_blocks <= 16:
            raise ValueError(f"res_blocks must be in 0..16, got {self.res_blocks}")

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
        d = asdict(self)
        if self.arch == "bdjscc":
            # the fields added with ``resgdn``: a bdjscc config reads (and
            # fingerprints) exactly as it did before they existed
            del d["arch"], d["res_blocks"]
        return d

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
    """[B, k] complex64/complex128 -> [B, k] of the same dtype with mean |z|^2 = 1 per row
    (exactly, up to rounding)."""
    p = (z.real**2 + z.imag**2).mean(dim=1, keepdim=True)
    return z / torch.sqrt(p.clamp_min(1e-12)).to(z.dtype)


# inference precision: "auto" takes bfloat16 where the CPU has native bfloat16 arithmetic
PRECISIONS = ("auto", "float32", "bfloat16")


def native_bfloat16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX): there autocast to
    bfloat16 runs the convolutions 2-3x faster than float32 (``python scripts/bench_link.py
    --only whole`` times both); elsewhere it is emulated and slower."""
    cpu = getattr(torch, "cpu", None)
    for probe in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        f = getattr(cpu, probe, None)
        if f is not None and f():
            return True
    return False


def resolve_precision(name: str) -> torch.dtype:
    """A precision's name ("auto", "float32" or "bfloat16") -> the dtype the encoder's and
    decoder's convolutions compute in (``JsccModel.set_precision``); "auto" is bfloat16 on a CPU with native
    bfloat16, else float32."""
    if name not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {name!r}")
    if name == "auto":
        return torch.bfloat16 if native_bfloat16() else torch.float32
    return getattr(torch, name)


def _compute(module: nn.Module, x: Tensor) -> contextlib.AbstractContextManager:
    """The context a network trunk runs in: nothing at float32, else autocast to the
    module's ``compute_dtype`` (inputs, weights and outputs of the convolutions and linear
    layers in it; their sums accumulate in float32)."""
    dt = getattr(module, "compute_dtype", torch.float32)
    if dt == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(x.device.type, dtype=dt)


def _layout(x: Tensor) -> Tensor:
    """A trunk's input [B, C, H, W] in channels-last memory order where no gradient is
    followed (inference): the same values, and on CPUs oneDNN's convolutions in float32
    take less time in that order (the shipped model, 384 tiles of 32x32, one thread, an
    A/B in one process: encode 1.2x, decode 1.3x faster; bfloat16 gains nothing there).
    Training keeps the default order (no faster there: ``scripts/bench_train.py``), so
    its steps are as before."""
    if torch.is_grad_enabled() or x.dim() != 4:
        return x
    return x.contiguous(memory_format=torch.channels_last)


def _widen(t: Tensor) -> Tensor:
    """A trunk's output back to float32 where it ran in bfloat16 (any other dtype kept)."""
    return t.float() if t.dtype == torch.bfloat16 else t


def _conv(cin, cout, stride):
    return nn.Conv2d(cin, cout, 5, stride=stride, padding=2)


def _deconv(cin, cout, stride):
    return nn.ConvTranspose2d(cin, cout, 5, stride=stride, padding=2, output_padding=stride - 1)


class BdEncoder(nn.Module):
    """``bdjscc``: images [B, 3, H, W] float32 in [0, 1] -> symbols [B, k] complex64, unit mean power per image."""

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
        """x: [B, 3, H, W] float32 in [0, 1] (H, W divisible by 4) -> [B, k] complex64,
        k = c/2 * H/4 * W/4, unit mean power per row."""
        with _compute(self, x):
            z = self.net(_layout(x - 0.5))  # [B, c, H/4, W/4]
        z = _widen(z)
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
        """f: [B, ch, h, w] float32 features; snr_db: [B] float32 -> [B, ch, h, w] float32,
        f gated per channel."""
        ctx = torch.cat([f.mean(dim=(2, 3)), (snr_db / 20.0)[:, None]], dim=1)
        return f * self.mlp(ctx)[:, :, None, None]


class BdDecoder(nn.Module):
    """``bdjscc``: symbols [B, k] complex64 (+ SNR estimate [B] dB, + gains [B, k] float32)
    -> images [B, 3, H, W] float32 in [0, 1]."""

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
        """symbols: [B, k] complex64; snr_db: [B] real (cast to float32); shape: (3, H, W);
        symbol_gain: [B, k] real, linear (needed with ``use_symbol_gain``) -> [B, 3, H, W]
        float32 in [0, 1]."""
        z = _symbols_to_planes(symbols, self.cfg, shape, symbol_gain)
        f = _layout(z)
        with _compute(self, z):
            for i, blk in enumerate(self.blocks):
                f = blk(f)
                if self.af is not None:
                    f = self.af[i](f, snr_db.to(f.dtype))
            f = self.out(f)
        return torch.sigmoid(_widen(f)).contiguous()


def _symbols_to_planes(
    symbols: Tensor, cfg: JsccConfig, shape: tuple[int, int, int], symbol_gain: Tensor | None
) -> Tensor:
    """[B, k] complex (+ [B, k] linear gains) -> decoder input [B, c (+ c/2), H/4, W/4] float32.

    The inverse of the encoders' layout: the first c/2 latent channels are I,
    the second c/2 are Q; the gain plane is log10 of the per-symbol SNR."""
    _, hh, ww = shape
    b, c = symbols.shape[0], cfg.latent_channels
    z = torch.cat([symbols.real, symbols.imag], dim=1).reshape(b, c, hh // 4, ww // 4)
    if not cfg.use_symbol_gain:
        return z
    if symbol_gain is None:
        raise ValueError("this decoder was built with use_symbol_gain=True and needs symbol_gain")
    g = torch.log10(symbol_gain.clamp_min(1e-3)).reshape(b, c // 2, hh // 4, ww // 4)
    return torch.cat([z, g.to(z.dtype)], dim=1)


class GDN(nn.Module):
    """Generalised divisive normalisation (Ballé et al., ICLR 2016), per pixel across channels:
    y_i = x_i / sqrt(beta_i + sum_j gamma_ij x_j^2); ``inverse=True`` multiplies instead (IGDN).

    beta and gamma are kept non-negative by squaring their parameters (a
    simplified form of Ballé's reparametrisation), gamma starting at 0.1 I."""

    def __init__(self, ch: int, inverse: bool = False):
        super().__init__()
        self.inverse = inverse
        self.beta_p = nn.Parameter(torch.ones(ch))
        self.gamma_p = nn.Parameter(torch.eye(ch) * math.sqrt(0.1))

    def forward(self, x: Tensor) -> Tensor:
        """x: [B, ch, H, W] float32 -> [B, ch, H, W] float32."""
        beta = self.beta_p**2 + 1e-6
        gamma = (self.gamma_p**2)[:, :, None, None]
        norm = torch.sqrt(F.conv2d(x * x, gamma, beta))
        return x * norm if self.inverse else x / norm


class ResBlock(nn.Module):
    """Pre-activation residual block: x + conv3(PReLU(conv3(PReLU(x))))."""

    def __init__(self, ch: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.PReLU(ch),
            nn.Conv2d(ch, ch, 3, padding=1),
            nn.PReLU(ch),
            nn.Conv2d(ch, ch, 3, padding=1),
        )

    def forward(self, x: Tensor) -> Tensor:
        """x: [B, ch, H, W] float32 -> [B, ch, H, W] float32."""
        return x + self.body(x)


class ResGdnEncoder(nn.Module):
    """``resgdn``: images [B, 3, H, W] float32 in [0, 1] -> symbols [B, k] complex64, unit mean
    power per image. 5x5/2 conv + GDN, 5x5/2 conv + GDN, ``res_blocks`` residual blocks, 3x3 to c."""

    def __init__(self, cfg: JsccConfig):
        super().__init__()
        h, c = cfg.hidden, cfg.latent_channels
        self.net = nn.Sequential(
            nn.Conv2d(3, h, 5, stride=2, padding=2), GDN(h),
            nn.Conv2d(h, 2 * h, 5, stride=2, padding=2), GDN(2 * h),
            *[ResBlock(2 * h) for _ in range(cfg.res_blocks)],
            nn.PReLU(2 * h), nn.Conv2d(2 * h, c, 3, padding=1),
        )  # fmt: skip

    def forward(self, x: Tensor) -> Tensor:
        """x: [B, 3, H, W] float32 in [0, 1] (H, W divisible by 4) -> [B, k] complex64,
        k = c/2 * H/4 * W/4, unit mean power per row."""
        with _compute(self, x):
            z = self.net(_layout(x - 0.5))  # [B, c, H/4, W/4]
        # first half of the channels -> I, second half -> Q
        z = _widen(z).reshape(z.shape[0], 2, -1)
        return power_normalize(torch.complex(z[:, 0], z[:, 1]))


class ResGdnDecoder(nn.Module):
    """``resgdn``: symbols [B, k] complex64 (+ SNR estimate [B] dB float32, + per-symbol gains
    [B, k] float32) -> images [B, 3, H, W] float32 in [0, 1].

    3x3 conv from the latent planes, ``res_blocks`` residual blocks with an AF
    module after each, 3x3 conv + PixelShuffle(2) + IGDN, one residual block,
    3x3 conv + PixelShuffle(2), sigmoid."""

    def __init__(self, cfg: JsccConfig):
        super().__init__()
        self.cfg = cfg
        h, c = cfg.hidden, cfg.latent_channels
        cin = c + (c // 2 if cfg.use_symbol_gain else 0)
        self.head = nn.Conv2d(cin, 2 * h, 3, padding=1)
        self.blocks = nn.ModuleList([ResBlock(2 * h) for _ in range(cfg.res_blocks)])
        self.up1 = nn.Sequential(
            nn.PReLU(2 * h), nn.Conv2d(2 * h, 4 * h, 3, padding=1), nn.PixelShuffle(2), GDN(h, True)
        )
        self.fine = ResBlock(h)
        self.up2 = nn.Sequential(nn.PReLU(h), nn.Conv2d(h, 12, 3, padding=1), nn.PixelShuffle(2))
        chans = [2 * h] * (cfg.res_blocks + 1) + [h, h]  # after head, each block, up1, fine
        self.af = nn.ModuleList([AFModule(ch) for ch in chans]) if cfg.snr_adaptive else None

    def forward(
        self,
        symbols: Tensor,
        snr_db: Tensor,
        shape: tuple[int, int, int],
        symbol_gain: Tensor | None = None,
    ) -> Tensor:
        """symbols: [B, k] complex64; snr_db: [B] real (cast to float32); shape: (3, H, W);
        symbol_gain: [B, k] real, linear (needed with ``use_symbol_gain``) -> [B, 3, H, W]
        float32 in [0, 1]."""
        z = _symbols_to_planes(symbols, self.cfg, shape, symbol_gain)
        snr = snr_db.to(z.dtype)
        with _compute(self, z):
            f = self.head(_layout(z))
            stages = [*self.blocks, self.up1, self.fine]
            if self.af is not None:
                f = self.af[0](f, snr)
            for i, stage in enumerate(stages):
                f = stage(f)
                if self.af is not None:
                    f = self.af[i + 1](f, snr)
            f = self.up2(f)
        return torch.sigmoid(_widen(f)).contiguous()


# arch name -> (encoder class, decoder class); JsccConfig.arch picks one
ARCHITECTURES: dict[str, tuple[type[nn.Module], type[nn.Module]]] = {
    "bdjscc": (BdEncoder, BdDecoder),
    "resgdn": (ResGdnEncoder, ResGdnDecoder),
}


class JsccModel(nn.Module):
    """Encoder + decoder of one configuration.

    ``trained_snr_db``: the (lowest, highest) SNR in dB the model was trained over, set by
    ``load_checkpoint`` from the training configuration (None: unknown). ``decode_received``
    keeps the decoder's inputs inside it."""

    def __init__(self, cfg: JsccConfig | None = None):
        super().__init__()
        self.cfg = cfg or JsccConfig()
        enc, dec = ARCHITECTURES[self.cfg.arch]
        self.encoder = enc(self.cfg)
        self.decoder = dec(self.cfg)
        self.trained_snr_db: tuple[float, float] | None = None

    def decode_received(
        self,
        symbols: Tensor,
        snr_db: Tensor,
        shape: tuple[int, int, int],
        symbol_gain: Tensor | None = None,
    ) -> Tensor:
        """The decoder on what a receiver measured: symbols [B, k] complex64, SNR estimate
        [B] real (dB), per-symbol post-equalisation SNR [B, k] real (linear) or None ->
        images [B, 3, H, W] float32 (not clamped to [0, 1]).

        With ``trained_snr_db`` = (lo, hi), the SNR estimate is clamped to [lo, hi] and each
        symbol's gain to at most 10^(hi / 10): a cabled link at 30-40 dB otherwise feeds the
        decoder values it never saw, and it does worse than at hi (``python
        scripts/bench_link.py --only fullscale``: the shipped model at 40 dB, 33.25 dB
        unclamped, 34.16 clamped; 34.03 at 20 dB)."""
        if self.trained_snr_db is not None:
            lo, hi = self.trained_snr_db
            snr_db = snr_db.clamp(lo, hi)
            if symbol_gain is not None:
                symbol_gain = symbol_gain.clamp(max=10 ** (hi / 10))
        return self.decoder(symbols, snr_db, shape, symbol_gain)

    @property
    def precision(self) -> torch.dtype:
        """The dtype the encoder's and decoder's networks compute in (float32 unless
        ``set_precision`` chose otherwise). Inputs and outputs keep their dtypes either way;
        the parameters stay float32, so training, checkpoints and fingerprints do not change."""
        return getattr(self.encoder, "compute_dtype", torch.float32)

    @property
    def precision_name(self) -> str:
        """``precision`` as named in ``PRECISIONS`` ("float32" or "bfloat16")."""
        return str(self.precision).removeprefix("torch.")

    def set_precision(self, precision: str | torch.dtype) -> JsccModel:
        """Compute in ``precision``: a name of ``PRECISIONS`` or torch.float32 /
        torch.bfloat16. bfloat16 is for inference on a CPU that has it
        (``native_bfloat16``): 2-3x the images/s there, within 0.03 dB of PSNR (``hil eval
        --precision``, ``python scripts/bench_link.py --only whole``). Returns the model."""
        if isinstance(precision, str):
            precision = resolve_precision(precision)
        if precision not in (torch.float32, torch.bfloat16):
            raise ValueError(f"precision must be torch.float32 or torch.bfloat16, got {precision}")
        self.encoder.compute_dtype = precision
        self.decoder.compute_dtype = precision
        return self

    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
