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
from .sequences import carrier_scale, lts_freq, payload_phases, pilot_values


@dataclass
class ChannelEstimate:
    """What a frame's long training field gives, per batch row: enough to equalise the rest
    of the frame. Complex fields have the samples' dtype, real ones its real dtype.

    Attributes:
        cfo_norm: [B] float32/float64 CFO, cycles/sample (0 where not estimated).
        h: [B, N] complex64/complex128 channel per FFT bin (zero on unused bins).
        n0: [B] float32/float64 noise variance per complex sample (> 0).
        snr_db: [B] float32/float64 Es/N0 per complex time-domain sample.
        known_bins: None, or (the compiled receive path's, ``hil.phy.compiled``)
            [B, 1 + header_symbols, P + D] complex128 numpy: per frame, the long training
            field's least-squares estimate and the header symbols' FFT bins, on the pilot
            then the data subcarriers, derotated by ``cfo_norm``: what the header's
            refinement and the payload's equalisation would otherwise compute again.
    """

    cfo_norm: Tensor
    h: Tensor
    n0: Tensor
    snr_db: Tensor
    known_bins: np.ndarray | None = None

    def rows(self, idx: list[int]) -> ChannelEstimate:
        """The estimate of the frames at batch rows ``idx`` (in that order)."""
        i = torch.as_tensor(idx, dtype=torch.long, device=self.h.device)
        kb = None if self.known_bins is None else self.known_bins[np.asarray(idx, np.int64)]
        return ChannelEstimate(self.cfo_norm[i], self.h[i], self.n0[i], self.snr_db[i], kb)

    @staticmethod
    def cat(parts: list[ChannelEstimate]) -> ChannelEstimate:
        """Estimates of several batches, stacked row-wise in the order given (``known_bins``
        kept only where every part has them)."""
        if not parts:
            raise ValueError("cat needs at least one estimate")
        kb = [p.known_bins for p in parts]
        return ChannelEstimate(
            *(torch.cat([getattr(p, f) for p in parts]) for f in ("cfo_norm", "h", "n0", "snr_db")),
            None if any(k is None for k in kb) else np.concatenate(kb),
        )


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
        known_bins: None, or [B, 1 + header_symbols, P + D] complex128 numpy: the
            estimate's ``known_bins`` (the compiled path's header pass keeps them).
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
    known_bins: np.ndarray | None = None

    @property
    def estimate(self) -> ChannelEstimate:
        """The channel estimate these results came from (shares their tensors)."""
        return ChannelEstimate(self.cfo_norm, self.h, self.n0, self.snr_db, self.known_bins)


def _abs2(x: Tensor) -> Tensor:
    """|x|^2: x [*] complex -> [*] real (one op fewer than re^2 + im^2, same values)."""
    return torch.view_as_real(x).square().sum(-1)


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
        # the used bins, pilots first then data: what tracking and equalisation work on
        self.n_pilots = len(cfg.pilot_carriers)
        pd = np.concatenate([cfg.pilot_carriers, cfg.data_carriers])
        self.register_buffer("pd_bins", torch.as_tensor(cfg.bins(pd)), persistent=False)
        self.register_buffer("k_pd", torch.as_tensor(pd, dtype=torch.float64), persistent=False)
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
        self.register_buffer(
            "lts_index", torch.arange(cfg.lts_len, dtype=torch.float64), persistent=False
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
            elif name.startswith("descramble"):
                c = torch.as_tensor(np.conj(payload_phases(int(name[10:]))))
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

    def _smooth_phase(self, zs: Tensor, n0: Tensor, pilot_power: Tensor) -> Tensor:
        """Common phase error per symbol from the pilots of the whole frame, not one symbol's.

        zs: [B, S] complex, each symbol's MRC-combined pilot observation; n0: [B] real noise
        variance; pilot_power: [B] real, sum of |H|^2 over the pilots; returns [B, S] real
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
        var = n0 / (2 * self.a**2 * pilot_power).clamp_min(1e-30)  # [B]
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
        # both symbols in one FFT: [B, 2, U]
        y = torch.fft.fft(x[:, s : s + 2 * n].reshape(-1, 2, n), norm="ortho")[..., self.used_bins]
        y1, y2 = y[:, 0], y[:, 1]
        h = (y1 + y2) / (2 * self._const("lts_ref", x.dtype, x.device))
        n0 = _abs2(y1 - y2).mean(-1) / 2
        return h, n0

    def _on_bins(self, h_used: Tensor, n0: Tensor) -> Tensor:
        """An LS estimate on the used bins, h_used [B, U] complex (error variance that of two
        observations at noise n0 [B] real), smoothed as configured -> [B, N] complex on every
        FFT bin (zero on the unused ones)."""
        if self.smoothing == "lmmse":
            h_used = self._smooth(h_used, n0)
        h = torch.zeros(
            h_used.shape[0], self.cfg.fft_size, dtype=h_used.dtype, device=h_used.device
        )
        return h.index_copy(1, self.used_bins, h_used)

    def _smooth(self, h: Tensor, n0: Tensor) -> Tensor:
        # LS error variance per bin: n0 / (2 a^2) (two symbols averaged)
        u = self._const("r_u", h.dtype, h.device)
        lam = self._const("r_lam", n0.dtype, n0.device)
        sig2 = n0 / (2 * self.a**2)
        gain = (lam[None, :] / (lam[None, :] + sig2[:, None])).to(h.dtype)  # [B, U]
        coef = (h @ torch.conj(u)) * gain  # U^H h, per row
        return coef @ u.T

    def receive_frame(self, x: Tensor, n_payload: int, header: Tensor | None = None) -> RxResult:
        """A whole frame from its first sample (the STS's first; what ``FrameBuilder.build``
        makes and what a frame start means everywhere): x [B, >= frame_len(k)] complex64/128,
        n_payload k, header as for ``forward``. The short training field is for detection;
        the receive path starts at the long one, which this skips."""
        if not torch.is_complex(x) or x.dim() != 2:
            raise ValueError(f"x must be [B, L] complex, got {x.dtype} {tuple(x.shape)}")
        return self(x[:, self.cfg.sts_len :], n_payload, header)

    def forward(self, x: Tensor, n_payload: int, header: Tensor | None = None) -> RxResult:
        """x: [B, >= lts_len + header_len + S symbol_len] complex64/complex128 from the LTS
        start (the stream receiver cuts there after detection; from the frame start use
        ``receive_frame``); n_payload: k; header: None, or the header's symbols as known
        [B, header_symbols, n_data] real +-1 (a header read and passed by its CRC; in
        training, the one sent): then the payload is equalised with the estimate they refine
        (``refine_estimate(..., noise=True)``), as the stream receiver does. Returns an
        :class:`RxResult` in x's precision.

        ``estimate`` then ``equalize``: a caller that already holds the frame's estimate
        (the stream receiver, from the header pass) calls ``equalize`` alone."""
        x = self._frame(x, n_payload)
        est = self.estimate(x)
        if self.estimate_cfo:
            x = self._derotate(x, est.cfo_norm)
        if header is not None:
            est = self.refine_estimate(x, est, header, noise=True)
        return self.equalize(x, est, n_payload)

    def _frame(self, x: Tensor, n_payload: int) -> Tensor:
        """x checked ([B, L] complex, long enough for k = n_payload) and cut to the frame."""
        c = self.cfg
        if not torch.is_complex(x) or x.dim() != 2:
            raise ValueError(f"x must be [B, L] complex, got {x.dtype} {tuple(x.shape)}")
        n_sym = c.header_symbols + c.payload_symbols(n_payload)
        need = c.lts_len + n_sym * c.symbol_len
        if x.shape[-1] < need:
            raise ValueError(f"frame needs {need} samples from the LTS start, got {x.shape[-1]}")
        return x[:, :need]

    def estimate(self, x: Tensor) -> ChannelEstimate:
        """What the long training field says: x [B, >= lts_len] complex64/complex128 from the
        LTS start (as received: the CFO is estimated here, and removed before the channel
        estimate) -> :class:`ChannelEstimate` in x's precision."""
        c = self.cfg
        if not torch.is_complex(x) or x.dim() != 2 or x.shape[-1] < c.lts_len:
            raise ValueError(
                f"x must be [B, >= {c.lts_len}] complex, got {x.dtype} {tuple(x.shape)}"
            )
        x = x[:, : c.lts_len]
        b = x.shape[0]
        if self.estimate_cfo:
            cfo = self._cfo(x)
            # the long training field alone: one phase per sample, in float64, is fewer
            # operations than the block-factored ramp a whole frame needs
            m = self._const("lts_index", torch.float64, x.device)
            x = x * cis(m * (-2 * math.pi) * cfo.double()[:, None]).to(x.dtype)
        else:
            cfo = torch.zeros(b, dtype=x.real.dtype, device=x.device)
        h_used, n0 = self._lts(x)
        n0 = n0.clamp_min(1e-12)
        # Es from the unsmoothed LS estimate, whose noise variance n0 / (2 a^2) is known exactly
        es = torch.maximum(
            _abs2(h_used).mean(-1) - n0 / (2 * self.a**2), 0.01 * n0
        )  # floor: -20 dB
        h = self._on_bins(h_used, n0)
        return ChannelEstimate(cfo_norm=cfo, h=h, n0=n0, snr_db=10 * torch.log10(es / n0))

    def refine_estimate(
        self, x: Tensor, est: ChannelEstimate, header: Tensor, noise: bool = False
    ) -> ChannelEstimate:
        """Decision-directed channel estimate: the header's BPSK symbols, as decided, serve as
        pilots besides the long training field's two symbols and each symbol's pilots.

        x: [B, >= lts_len + header_len] complex64/complex128 from the LTS start, with
        ``est.cfo_norm`` removed (as for ``equalize``); est: the frames' estimate from the long
        training field; header: [B, header_symbols, n_data] real +-1 (any real dtype), the
        header symbols as decided (e.g. the decoder's best path re-encoded; a few wrong ones
        only shrink the estimate slightly). Returns a :class:`ChannelEstimate` whose channel
        averages 2 + header_symbols observations per used bin (LMMSE-smoothed as configured),
        the CFO, noise and SNR of ``est``. For a header that fails its CRC: read again with
        this estimate, it often passes (``FrameReceiver`` does so).

        noise: also re-estimate the noise and the SNR from the header's residuals (12 x 52
        observations against the long training field's 52 differences; each header symbol's
        common phase taken out first, as the receiver's tracking does). Only for decisions
        that are right (a header that passed its CRC): wrong ones count as noise."""
        c = self.cfg
        b = x.shape[0]
        n_h = c.header_symbols
        if header.shape != (b, n_h, c.n_data):
            raise ValueError(
                f"header must be [{b}, {n_h}, {c.n_data}] +-1, got {tuple(header.shape)}"
            )
        x = self._frame(x, 0)
        h_ls, _ = self._lts(x)  # [B, U], the long training field's two symbols averaged
        grid = demodulate(c, x[:, c.lts_len :], n_h)  # [B, H, N]
        ref = torch.zeros(b, n_h, c.fft_size, dtype=x.real.dtype, device=x.device)
        pv = self._const(f"pilots{n_h}", x.real.dtype, x.device)
        ref = ref.index_copy(2, self.data_bins, header.to(device=x.device, dtype=x.real.dtype))
        ref = ref.index_copy(2, self.pilot_bins, pv.expand(b, -1, -1))[..., self.used_bins]
        obs = grid[..., self.used_bins]  # [B, H, U], each a H_u ref + noise
        # each header symbol's common phase against the long training field's estimate
        # (residual CFO, phase noise: 0.4 rad RMS over a header at 100 Hz linewidth) taken
        # out, so the observations add up in phase
        cpe = (obs * torch.conj(h_ls[:, None, :] * ref)).sum(-1)  # [B, H]
        obs = obs * (torch.conj(cpe) / torch.abs(cpe).clamp_min(1e-30))[..., None]
        # LS per used bin over 2 LTS + H header observations, each of amplitude a |H|
        h_used = (2 * h_ls + (obs * ref).sum(1) / self.a) / (2 + n_h)
        n0, snr_db = est.n0, est.snr_db
        if noise:
            pred = self.a * h_used[:, None, :] * ref
            cpe = (obs * torch.conj(pred)).sum(-1)  # [B, H]: what phase is left
            cpe = cpe / torch.abs(cpe).clamp_min(1e-30)
            # the LS fit took one of the 2 + H observations per bin
            dof = (1 - 1 / (2 + n_h)) * n_h * h_used.shape[-1]
            n0 = (_abs2(obs - pred * cpe[..., None]).sum((-1, -2)) / dof).clamp_min(1e-12)
            es = torch.maximum(
                _abs2(h_used).mean(-1) - n0 / ((2 + n_h) * self.a**2), 0.01 * n0
            )  # floor: -20 dB, as for the long training field's estimate
            snr_db = 10 * torch.log10(es / n0)
        # _smooth's noise model is two observations: scale n0 to match
        h = self._on_bins(h_used, n0 * 2 / (2 + n_h))
        return ChannelEstimate(cfo_norm=est.cfo_norm, h=h, n0=n0, snr_db=snr_db)

    def equalize(self, x: Tensor, est: ChannelEstimate, n_payload: int) -> RxResult:
        """Track, equalise and demap one frame per row with a given estimate.

        x: [B, >= lts_len + header_len + S symbol_len] complex64/complex128 from the LTS
        start, with ``est.cfo_norm`` already removed (``forward`` derotates; the stream
        receiver folds it into its own float64 ramp); est: the frames' :class:`ChannelEstimate`
        (``estimate``, or ``RxResult.estimate`` of an earlier pass over the same frames);
        n_payload: k. Returns an :class:`RxResult` in x's precision.

        Only the used bins are tracked and equalised, pilots first then data (``pd_bins``):
        the receive path costs its number of tensor operations more than their size."""
        c = self.cfg
        x = self._frame(x, n_payload)
        s_pay = c.payload_symbols(n_payload)
        n_sym = c.header_symbols + s_pay
        b = x.shape[0]
        rdt, dev = x.real.dtype, x.device
        h, n0 = est.h, est.n0
        if h.shape != (b, c.fft_size) or n0.shape != (b,):
            raise ValueError(
                f"estimate of shape h {tuple(h.shape)}, n0 {tuple(n0.shape)} for {b} frames"
            )
        a, n_p = self.a, self.n_pilots
        g = demodulate(c, x[:, c.lts_len :], n_sym)[..., self.pd_bins]  # [B, S, P + D]
        hu = h[:, self.pd_bins]  # [B, P + D]
        p2 = _abs2(hu)
        hp, w = hu[:, :n_p], p2[:, :n_p]  # pilots: channel, power
        pv = self._const(f"pilots{n_sym}", rdt, dev)  # [S, P]
        if self.track:
            # pilots after ZF: z = Y conj(a H) p  (MRC-weighted phase observations)
            z = g[..., :n_p] * (torch.conj(hp)[:, None, :] * pv)  # [B, S, P]
            zs = z.sum(-1)
            if self.smooth_tracking and n_sym > 1:
                phi = self._smooth_phase(zs, n0, w.sum(-1))  # common phase error [B, S]
            else:
                phi = torch.angle(zs)
            resid = torch.angle(z * cis(-phi)[..., None].to(x.dtype))  # [B, S, P]
            pk = self._const("pilot_k", rdt, dev)
            wpk = (w * pk)[:, None, :]
            beta = (wpk * resid).sum(-1) / (wpk * pk).sum(-1).clamp_min(1e-30)
            if self.smooth_tracking and n_sym > 2:
                beta = line_fit(beta)
            th = phi[..., None] + beta[..., None] * self._const("k_pd", rdt, dev)
            g = g * cis(-th).to(x.dtype)
        safe = torch.where(p2 > 1e-20, hu, torch.full_like(hu, 1e-10))
        if self.equalizer == "zf":
            wgt = 1 / (a * safe[:, n_p:])
        else:
            wgt = torch.conj(hu[:, n_p:]) / (a * (p2[:, n_p:] + (n0 / a**2)[:, None]))
        eq = g[..., n_p:] * wgt[:, None, :]  # [B, S, D]
        post = (a**2 * p2[:, n_p:] / n0[:, None]).to(rdt)  # [B, D] ZF output SNR per data bin

        # pilots after tracking and ZF, for EVM
        pz = g[..., :n_p] / (a * safe[:, None, :n_p])
        evm = torch.sqrt(_abs2(pz - pv).mean((-1, -2)))

        # header LLRs: 4 Re(z) p for ZF; MMSE scales the symbol by p / (p + 1), undone here
        scale = (
            4 * post if self.equalizer == "zf" else 4 * post * (post + 1) / post.clamp_min(1e-30)
        )
        llr = eq[:, : c.header_symbols].real * scale[:, None, :]
        # the scrambler's rotations undone (format version 3)
        pay = eq[:, c.header_symbols :].reshape(b, -1)[:, :n_payload]
        pay = pay * self._const(f"descramble{n_payload}", x.dtype, dev)
        gain = post[:, None, :].expand(b, s_pay, -1).reshape(b, -1)[:, :n_payload]
        return RxResult(
            symbols=pay,
            h=h,
            n0=n0,
            snr_db=est.snr_db,
            cfo_norm=est.cfo_norm,
            evm_pilots=evm,
            symbol_gain=gain,
            header_llr=llr.reshape(b, -1),
            pilots=(pz * pv).reshape(b, -1),
        )
