"""The differentiable OFDM receive path (torch).

Runs in training with gradients (frame timing known) and in the receiver
process under ``torch.inference_mode()`` on frames the stream synchroniser
found: the same module, the same code.

Input: samples starting at the first sample of the long training field
(``[B, lts_len + header_len + S symbol_len]`` complex). Steps:

1. fine CFO from the two identical long training symbols (Moose 1994; range
   +-fs / (2N)), derotation;
2. LS channel estimate on the used subcarriers from the averaged long training
   symbols, noise variance from their difference, optional LMMSE smoothing
   with a uniform power-delay profile over the CP (van de Beek et al. 1995);
3. per-symbol common phase error and sampling-offset (linear phase across
   subcarriers) tracking from the pilots (weighted least squares);
4. ZF or MMSE equalisation of header and payload;
5. SNR estimate Es/N0 per complex time-domain sample, EVM on the pilots,
   header log-likelihood ratios.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from .numerology import OfdmConfig
from .ofdm import demodulate
from .sequences import carrier_scale, lts_freq, pilot_values


@dataclass
class RxResult:
    """Per-frame receive outputs (batched).

    Complex fields have the input's dtype (complex64 or complex128), real ones its real
    dtype (float32 or float64).

    Attributes:
        symbols: [B, k] complex64/complex128 equalised payload symbols.
        h: [B, N] complex64/complex128 channel estimate per FFT bin (zero on unused bins), in
            units where an ideal channel is 1.
        n0: [B] float32/float64 noise variance per complex sample.
        snr_db: [B] float32/float64 Es/N0 per complex time-domain sample.
        cfo_norm: [B] float32/float64 CFO estimated from the long training field, cycles/sample.
        evm_pilots: [B] float32/float64 RMS EVM of the tracked pilots (linear, 1 = 0 dB).
        symbol_gain: [B, k] float32/float64 post-equalisation SNR of each payload symbol
            (linear).
        header_llr: [B, header_symbols * n_data] float32/float64 LLRs of the header bits.
        pilots: [B, S * P] complex64/complex128 pilots after tracking and ZF, sign-corrected
            by the known pilot values (ideally all 1 + 0j), for a constellation display; None
            where a stand-in (the surrogate) has none.
    """

    symbols: Tensor
    h: Tensor
    n0: Tensor
    snr_db: Tensor
    cfo_norm: Tensor
    evm_pilots: Tensor
    symbol_gain: Tensor
    header_llr: Tensor
    pilots: Tensor | None = None


def _abs2(x: Tensor) -> Tensor:
    return x.real**2 + x.imag**2


class OfdmReceiver(nn.Module):
    """Estimate, track and equalise one frame per batch row.

    Args:
        cfg: numerology.
        equalizer: "mmse" or "zf".
        smoothing: "none" or "lmmse" channel-estimate smoothing.
        track: per-symbol pilot phase/timing tracking.
        estimate_cfo: estimate and remove residual CFO from the long training field.
    """

    def __init__(
        self,
        cfg: OfdmConfig | None = None,
        equalizer: str = "mmse",
        smoothing: str = "lmmse",
        track: bool = True,
        estimate_cfo: bool = True,
    ):
        super().__init__()
        if equalizer not in ("mmse", "zf"):
            raise ValueError(f"equalizer must be 'mmse' or 'zf', got {equalizer!r}")
        if smoothing not in ("none", "lmmse"):
            raise ValueError(f"smoothing must be 'none' or 'lmmse', got {smoothing!r}")
        self.cfg = cfg = cfg or OfdmConfig()
        self.equalizer, self.smoothing = equalizer, smoothing
        self.track, self.estimate_cfo = bool(track), bool(estimate_cfo)
        self.a = carrier_scale(cfg)
        used = cfg.bins(cfg.used)
        self.register_buffer("used_bins", torch.as_tensor(used), persistent=False)
        self.register_buffer(
            "data_bins", torch.as_tensor(cfg.bins(cfg.data_carriers)), persistent=False
        )
        self.register_buffer(
            "pilot_bins", torch.as_tensor(cfg.bins(cfg.pilot_carriers)), persistent=False
        )
        self.register_buffer(
            "pilot_k", torch.as_tensor(cfg.pilot_carriers, dtype=torch.float64), persistent=False
        )
        self.register_buffer(
            "lts_used", torch.as_tensor(lts_freq(cfg)[used].real), persistent=False
        )
        # LMMSE smoothing prior: uniform PDP over the CP. R[k, l] = mean_d e^{-j2pi(k-l)d/N}
        k = cfg.used.astype(np.float64)
        # The FFT window starts fft_backoff samples early, which looks like an extra
        # delay of fft_backoff: paths within the CP appear at delays 0..cp_len.
        d = np.arange(cfg.cp_len + 1)
        r = np.exp(-2j * np.pi * (k[:, None] - k[None, :])[..., None] * d / cfg.fft_size).mean(-1)
        # W(s) = R (R + s I)^-1 = U diag(lam / (lam + s)) U^H with R = U diag(lam) U^H:
        # the eigendecomposition is done once, so smoothing costs two matrix products.
        lam, u = np.linalg.eigh(r)
        self.register_buffer("r_lam", torch.as_tensor(np.clip(lam, 0, None)), persistent=False)
        self.register_buffer("r_u", torch.as_tensor(u), persistent=False)

    # ------------------------------------------------------------------ steps
    def _cfo(self, x: Tensor) -> Tensor:
        c, n = self.cfg, self.cfg.fft_size
        a = x[:, c.lts_cp : c.lts_cp + n]
        b = x[:, c.lts_cp + n : c.lts_cp + 2 * n]
        return torch.angle((torch.conj(a) * b).sum(-1)) / (2 * math.pi * n)

    def _derotate(self, x: Tensor, cfo_norm: Tensor) -> Tensor:
        n = torch.arange(x.shape[-1], device=x.device, dtype=torch.float64)
        th = -2 * math.pi * cfo_norm.double()[:, None] * n
        return x * torch.polar(torch.ones_like(th), th).to(x.dtype)

    def _lts(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """LS channel estimate on used bins [B, U] and noise variance per bin [B]."""
        c, n = self.cfg, self.cfg.fft_size
        s = c.lts_cp - c.fft_backoff
        y1 = torch.fft.fft(x[:, s : s + n], norm="ortho")[:, self.used_bins]
        y2 = torch.fft.fft(x[:, s + n : s + 2 * n], norm="ortho")[:, self.used_bins]
        ref = (self.a * self.lts_used).to(x.dtype)
        h = (y1 + y2) / (2 * ref)
        n0 = _abs2(y1 - y2).mean(-1) / 2
        return h, n0

    def _smooth(self, h: Tensor, n0: Tensor) -> Tensor:
        # LS error variance per bin: n0 / (2 a^2) (two symbols averaged)
        u = self.r_u.to(h.dtype)
        lam = self.r_lam.to(n0.dtype)
        sig2 = n0 / (2 * self.a**2)
        gain = (lam[None, :] / (lam[None, :] + sig2[:, None])).to(h.dtype)  # [B, U]
        coef = (h @ torch.conj(u)) * gain  # U^H h, per row
        return coef @ u.T

    def receive_frame(self, x: Tensor, n_payload: int) -> RxResult:
        """A whole frame from its first sample (the STS's first; what ``FrameBuilder.build``
        makes and what a frame start means everywhere): x [B, >= frame_len(k)] complex64/128,
        n_payload k. The short training field is for detection; the receive path starts at the
        long one, which this skips."""
        if not torch.is_complex(x) or x.dim() != 2:
            raise ValueError(f"x must be [B, L] complex, got {x.dtype} {tuple(x.shape)}")
        return self(x[:, self.cfg.sts_len :], n_payload)

    def forward(self, x: Tensor, n_payload: int) -> RxResult:
        """x: [B, >= lts_len + header_len + S symbol_len] complex64/complex128 from the LTS
        start (the stream receiver cuts there after detection; from the frame start use
        ``receive_frame``); n_payload: k. Returns an :class:`RxResult` in x's precision."""
        c = self.cfg
        if not torch.is_complex(x) or x.dim() != 2:
            raise ValueError(f"x must be [B, L] complex, got {x.dtype} {tuple(x.shape)}")
        s_pay = c.payload_symbols(n_payload)
        n_sym = c.header_symbols + s_pay
        need = c.lts_len + n_sym * c.symbol_len
        if x.shape[-1] < need:
            raise ValueError(f"frame needs {need} samples from the LTS start, got {x.shape[-1]}")
        x = x[:, :need]
        b = x.shape[0]
        rdt = x.real.dtype
        if self.estimate_cfo:
            cfo = self._cfo(x)
            x = self._derotate(x, cfo)
        else:
            cfo = torch.zeros(b, dtype=rdt, device=x.device)
        h_used, n0 = self._lts(x)
        n0 = n0.clamp_min(1e-12)
        # Es from the unsmoothed LS estimate, whose noise variance n0 / (2 a^2) is known exactly
        es = torch.maximum(
            _abs2(h_used).mean(-1) - n0 / (2 * self.a**2), 0.01 * n0
        )  # floor: -20 dB
        if self.smoothing == "lmmse":
            h_used = self._smooth(h_used, n0)
        h = torch.zeros(b, c.fft_size, dtype=x.dtype, device=x.device)
        h = h.index_copy(1, self.used_bins, h_used)

        grid = demodulate(c, x[:, c.lts_len :], n_sym)  # [B, S, N]
        # pilots, after ZF: z = Y conj(a H) p  (MRC-weighted phase observations)
        hp = h[:, self.pilot_bins]  # [B, P]
        pv = torch.as_tensor(pilot_values(c, n_sym), dtype=rdt, device=x.device)  # [S, P]
        yp = grid[..., self.pilot_bins]
        k = torch.as_tensor(np.arange(c.fft_size), dtype=torch.float64, device=x.device)
        k = torch.where(k >= c.fft_size // 2, k - c.fft_size, k)  # signed subcarrier of each bin
        if self.track:
            z = yp * torch.conj(hp)[:, None, :] * pv[None]
            phi = torch.angle(z.sum(-1))  # common phase error [B, S]
            rot = torch.polar(torch.ones_like(phi), -phi).to(x.dtype)
            resid = torch.angle(z * rot[..., None])  # [B, S, P]
            w = _abs2(hp)[:, None, :].to(rdt)
            pk = self.pilot_k.to(rdt)
            beta = (w * pk * resid).sum(-1) / (w * pk**2).sum(-1).clamp_min(1e-30)
            th = -(phi[..., None] + beta[..., None] * k.to(rdt))  # [B, S, N]
            grid = grid * torch.polar(torch.ones_like(th), th).to(x.dtype)
        hn = h[:, None, :]
        if self.equalizer == "zf":
            safe = torch.where(_abs2(hn) > 1e-20, hn, torch.full_like(hn, 1e-10))
            eq = grid / (self.a * safe)
        else:
            eq = torch.conj(hn) * grid / (self.a * (_abs2(hn) + (n0 / self.a**2)[:, None, None]))
        post_snr = (self.a**2 * _abs2(h) / n0[:, None]).to(rdt)  # [B, N] ZF output SNR per bin

        # pilots after tracking and ZF, for EVM
        pz = (
            grid[..., self.pilot_bins]
            / (self.a * torch.where(_abs2(hp) > 1e-20, hp, torch.full_like(hp, 1e-10)))[:, None]
        )
        evm = torch.sqrt(_abs2(pz - pv[None]).mean((-1, -2)))

        hdr = eq[:, : c.header_symbols][..., self.data_bins]  # [B, H, n_data]
        llr = 4 * hdr.real * post_snr[:, None, self.data_bins]
        if self.equalizer == "mmse":  # MMSE scales the symbol by g = p / (p + 1); undo for LLRs
            p = post_snr[:, None, self.data_bins]
            llr = llr * (p + 1) / p.clamp_min(1e-30)
        pay = eq[:, c.header_symbols :][..., self.data_bins].reshape(b, -1)[:, :n_payload]
        gain = (
            post_snr[:, self.data_bins][:, None, :]
            .expand(b, s_pay, -1)
            .reshape(b, -1)[:, :n_payload]
        )

        snr_db = 10 * torch.log10(es / n0)
        return RxResult(
            symbols=pay,
            h=h,
            n0=n0,
            snr_db=snr_db,
            cfo_norm=cfo,
            evm_pilots=evm,
            symbol_gain=gain,
            header_llr=llr.reshape(b, -1),
            pilots=(pz * pv[None]).reshape(b, -1),
        )
