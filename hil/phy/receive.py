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
3. common phase error and sampling-offset (linear phase across subcarriers)
   tracking from the pilots (weighted least squares per symbol), over the whole
   frame: a residual-CFO ramp plus smoothed phase noise, a timing line;
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

from ..channel.functional import cis, phase_ramp
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


def line_fit(y: Tensor) -> Tensor:
    """y: [B, S] real -> [B, S] its least-squares straight line over the index s (a timing
    offset plus a sampling-frequency drift, seen through noisy per-symbol estimates)."""
    s = y.shape[-1]
    t = torch.arange(s, device=y.device, dtype=y.dtype) - (s - 1) / 2
    slope = (y * t).sum(-1, keepdim=True) / (t**2).sum()
    return y.mean(-1, keepdim=True) + slope * t


class OfdmReceiver(nn.Module):
    """Estimate, track and equalise one frame per batch row.

    Args:
        cfg: numerology.
        equalizer: "mmse" or "zf".
        smoothing: "none" or "lmmse" channel-estimate smoothing.
        track: pilot phase/timing tracking.
        smooth_tracking: track over the whole frame (the common phase as a residual-CFO
            ramp plus smoothed oscillator phase noise, the timing slope as a line over the
            symbols) rather than each symbol from its own four pilots, which is noisy at and
            below 0 dB.
        phase_noise_hz: oscillator linewidth (Wiener model) the phase smoother assumes.
        estimate_cfo: estimate and remove residual CFO from the long training field.
    """

    def __init__(
        self,
        cfg: OfdmConfig | None = None,
        equalizer: str = "mmse",
        smoothing: str = "lmmse",
        track: bool = True,
        estimate_cfo: bool = True,
        smooth_tracking: bool = True,
        phase_noise_hz: float = 100.0,
    ):
        super().__init__()
        if equalizer not in ("mmse", "zf"):
            raise ValueError(f"equalizer must be 'mmse' or 'zf', got {equalizer!r}")
        if smoothing not in ("none", "lmmse"):
            raise ValueError(f"smoothing must be 'none' or 'lmmse', got {smoothing!r}")
        self.cfg = cfg = cfg or OfdmConfig()
        self.equalizer, self.smoothing = equalizer, smoothing
        self.track, self.estimate_cfo = bool(track), bool(estimate_cfo)
        self.smooth_tracking = bool(smooth_tracking)
        if not phase_noise_hz > 0:
            raise ValueError(f"phase_noise_hz must be > 0, got {phase_noise_hz}")
        # random-walk phase variance per OFDM symbol: 2 pi linewidth T_symbol
        self.q_phase = 2 * math.pi * phase_noise_hz * cfg.symbol_len / cfg.sample_rate_hz
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
        self.register_buffer(
            "lts_ref", torch.as_tensor(self.a * lts_freq(cfg)[used].real), persistent=False
        )
        k = np.arange(cfg.fft_size, dtype=np.float64)
        self.register_buffer(  # the signed subcarrier of each FFT bin
            "k_signed",
            torch.as_tensor(np.where(k >= cfg.fft_size // 2, k - cfg.fft_size, k)),
            persistent=False,
        )
        self._cache: dict = {}

    def _const(self, name: str, dtype: torch.dtype, device) -> Tensor:
        """Buffer ``name`` (or a derived constant: ``pilots{S}``, the pilot values of S symbols
        [S, P]; ``dist{S}``, the symbol distances |i - j| [S, S]) in ``dtype`` on ``device``,
        made once per precision, device and grad mode and kept: converting the receive path's
        constants on every call cost a tenth of its time."""
        key = (name, dtype, torch.device(device), torch.is_inference_mode_enabled())
        c = self._cache.get(key)
        if c is None:
            if name.startswith("pilots"):
                c = torch.as_tensor(pilot_values(self.cfg, int(name[6:])))
            elif name.startswith("dist"):
                idx = torch.arange(int(name[4:]), dtype=torch.float64)
                c = (idx[:, None] - idx[None, :]).abs()
            else:
                c = getattr(self, name)
            c = self._cache[key] = c.to(device=device, dtype=dtype)
        return c

    # ------------------------------------------------------------------ steps
    def phase_kernel(self, var: Tensor, s: int) -> Tensor:
        """The phase smoother's weights: var [B] real, one symbol's common-phase estimate
        variance (rad^2) -> [B, S, S] real, rho^|i - j| with rho from the model's
        signal-to-noise ratio lambda = q / var (q: the random walk's step variance): the
        optimal two-sided exponential smoother of a random walk in white noise."""
        lam = self.q_phase / var.clamp_min(1e-12)
        rho = (1 + lam / 2 - torch.sqrt(lam + lam**2 / 4)).clamp_min(1e-30)  # [B] in (0, 1)
        return rho[:, None, None] ** self._const(f"dist{s}", var.dtype, var.device)[None]

    def smoothed_phase_error(self, err: Tensor, var: Tensor) -> Tensor:
        """What the whole-frame tracker makes of per-symbol phase errors, linearised (small
        errors): err [B, S] real, white per-symbol estimate errors of variance var [B] ->
        [B, S] real, the tracker's remaining error (ramp from the end-to-end difference,
        the rest smoothed). For the training surrogate, which draws err."""
        s = err.shape[1]
        idx = torch.arange(s, device=err.device, dtype=err.dtype)
        ramp = (err[:, -1] - err[:, 0]) / (s - 1)  # the mean of adjacent differences
        kern = self.phase_kernel(var, s)
        kern = kern / kern.sum(-1, keepdim=True)
        rest = err - ramp[:, None] * idx
        return (kern @ rest[..., None])[..., 0] + ramp[:, None] * idx

    def _smooth_phase(self, zs: Tensor, n0: Tensor, hp: Tensor) -> Tensor:
        """Common phase error per symbol from the pilots of the whole frame, not one symbol's.

        zs: [B, S] complex, each symbol's MRC-combined pilot observation; returns [B, S] real
        radians. The phase is modelled as a residual-CFO ramp plus a random walk (oscillator
        phase noise of linewidth ``phase_noise_hz``) observed in white noise: the ramp comes
        from all adjacent symbol pairs, and what is left is smoothed by the optimal two-sided
        exponential smoother of that model (``phase_kernel``), whose width grows as the SNR
        falls (one symbol at high SNR, several at 0 dB, where one symbol's four pilots give
        +-0.3 rad).
        """
        s = zs.shape[1]
        rdt = zs.real.dtype
        ramp = torch.angle((zs[:, 1:] * torch.conj(zs[:, :-1])).sum(-1))  # [B] rad per symbol
        idx = torch.arange(s, device=zs.device, dtype=rdt)
        zr = zs * cis(-ramp[:, None] * idx).to(zs.dtype)
        var = n0 / (2 * self.a**2 * _abs2(hp).sum(-1)).clamp_min(1e-30)  # [B]
        zsm = (self.phase_kernel(var.to(rdt), s).to(zs.dtype) @ zr[..., None])[..., 0]
        return torch.angle(zsm) + ramp[:, None] * idx

    def _cfo(self, x: Tensor) -> Tensor:
        c, n = self.cfg, self.cfg.fft_size
        a = x[:, c.lts_cp : c.lts_cp + n]
        b = x[:, c.lts_cp + n : c.lts_cp + 2 * n]
        return torch.angle((torch.conj(a) * b).sum(-1)) / (2 * math.pi * n)

    def _derotate(self, x: Tensor, cfo_norm: Tensor) -> Tensor:
        return x * phase_ramp(-cfo_norm, x.shape[-1]).to(x.dtype)

    def _lts(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """LS channel estimate on used bins [B, U] and noise variance per bin [B]."""
        c, n = self.cfg, self.cfg.fft_size
        s = c.lts_cp - c.fft_backoff
        y1 = torch.fft.fft(x[:, s : s + n], norm="ortho")[:, self.used_bins]
        y2 = torch.fft.fft(x[:, s + n : s + 2 * n], norm="ortho")[:, self.used_bins]
        h = (y1 + y2) / (2 * self._const("lts_ref", x.dtype, x.device))
        n0 = _abs2(y1 - y2).mean(-1) / 2
        return h, n0

    def _smooth(self, h: Tensor, n0: Tensor) -> Tensor:
        # LS error variance per bin: n0 / (2 a^2) (two symbols averaged)
        u = self._const("r_u", h.dtype, h.device)
        lam = self._const("r_lam", n0.dtype, n0.device)
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
        pv = self._const(f"pilots{n_sym}", rdt, x.device)  # [S, P]
        yp = grid[..., self.pilot_bins]
        if self.track:
            z = yp * torch.conj(hp)[:, None, :] * pv[None]
            if self.smooth_tracking and n_sym > 1:
                phi = self._smooth_phase(z.sum(-1), n0, hp)  # common phase error [B, S]
            else:
                phi = torch.angle(z.sum(-1))
            rot = cis(-phi).to(x.dtype)
            resid = torch.angle(z * rot[..., None])  # [B, S, P]
            w = _abs2(hp)[:, None, :].to(rdt)
            pk = self._const("pilot_k", rdt, x.device)
            beta = (w * pk * resid).sum(-1) / (w * pk**2).sum(-1).clamp_min(1e-30)
            if self.smooth_tracking and n_sym > 2:
                beta = line_fit(beta)
            th = -(phi[..., None] + beta[..., None] * self._const("k_signed", rdt, x.device))
            grid = grid * cis(th).to(x.dtype)
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
