"""A cheap channel surrogate for training: what the OFDM receive path hands the decoder,
drawn per subcarrier in the frequency domain instead of simulated sample by sample.

The full training path builds the frame in time (IFFT, cyclic prefix), runs the
channel chain on every sample and the receiver on the result (FFT, Moose CFO,
LS + LMMSE channel estimate, pilot tracking, MMSE). With the frame timing known
and the multipath inside the cyclic prefix, that is, per used subcarrier m and
OFDM symbol, Y = a H_m X + W with W ~ CN(0, N0), a = ``carrier_scale``. The
surrogate draws exactly that:

- H_m: the frequency response of the chain's own tapped delay line (the same
  ``draw`` of taps), with the receiver's FFT back-off as extra delay;
- the channel estimate: the two long training symbols as received on the
  used subcarriers, then the receiver's *own* estimator on them (LS average,
  noise variance from their difference, the same LMMSE smoothing), so the
  estimation error has the real estimator's statistics;
- the payload: Y on the data subcarriers, equalised with the estimate (MMSE or
  ZF, as the receiver), per-symbol post-equalisation SNR as the receiver
  reports it;
- the phase errors the pilot tracking leaves: per OFDM symbol a common phase
  and a phase slope across subcarriers, Gaussian with the variances of the
  receiver's weighted least-squares estimates from the pilots, then smoothed
  over the frame as the receiver's tracker smooths its estimates (linearised).

What it leaves out (the PHY figures say these are small inside the profiles it
accepts): the residual CFO after the Moose estimate (inter-carrier
interference), the sampling offset, and any non-linear or hardware stage
(PA, phase noise, IQ imbalance, quantisation): a chain with such a stage is
refused, so it is never silently simulated as something milder. Everything
is differentiable in the symbols, so the encoder trains through it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ..channel.awgn import AWGN
from ..channel.functional import cis
from ..channel.multipath import TappedDelayLine
from .numerology import OfdmConfig
from .receive import OfdmReceiver, RxResult, line_fit

SUPPORTED = ("multipath", "cfo", "awgn")


def _abs2(x: Tensor) -> Tensor:
    return x.real**2 + x.imag**2


class ReceiverSurrogate(nn.Module):
    """Symbols [B, k] complex64/complex128 + SNR [B] dB -> the receiver's ``RxResult`` (symbols,
    channel estimate, noise variance, SNR estimate, per-symbol gain) drawn per subcarrier.

    Args:
        cfg: numerology (the PHY the model is trained for).
        stages: the channel chain's stage tables; kinds other than ``SUPPORTED``
            raise ValueError.
        equalizer: ``mmse`` or ``zf``, as ``OfdmReceiver``.
        header_known: the receiver estimates channel and noise with the header's symbols
            as known pilots (``OfdmReceiver.forward(..., header=...)``, what the stream
            receiver does once a header passed its CRC, and what ``JsccLink`` trains on);
            False: the long training field alone.
    """

    def __init__(
        self,
        cfg: OfdmConfig,
        stages: Sequence[Mapping[str, Any]],
        equalizer: str = "mmse",
        header_known: bool = True,
    ):
        super().__init__()
        self.header_known = bool(header_known)
        bad = [t.get("kind") for t in stages if t.get("kind") not in SUPPORTED]
        if bad:
            raise ValueError(
                f"the channel surrogate models only {SUPPORTED}; the chain has {bad}: "
                "train those through the PHY (train.surrogate_until = 0)"
            )
        self.cfg = cfg
        self.rx = OfdmReceiver(cfg, equalizer=equalizer)
        mp = [dict(t) for t in stages if t["kind"] == "multipath"]
        aw = [dict(t) for t in stages if t["kind"] == "awgn"]
        if len(mp) > 1 or len(aw) != 1:
            raise ValueError("the surrogate needs one awgn stage and at most one multipath stage")
        self.multipath = (
            TappedDelayLine.from_config(
                {k: v for k, v in mp[0].items() if k not in ("kind", "name")}
            )
            if mp
            else None
        )
        awgn = AWGN.from_config({k: v for k, v in aw[0].items() if k not in ("kind", "name")})
        if awgn.measure_power:  # the frame is unit power: Es = 1 either way
            self.es = 1.0
        else:
            self.es = awgn.es
        self.default_snr_db = awgn.snr_db
        n = cfg.fft_size
        k = torch.arange(n, dtype=torch.float64)
        self.register_buffer("signed_k", torch.where(k >= n // 2, k - n, k), persistent=False)

    def response(self, taps: Tensor) -> Tensor:
        """Taps [B, L] complex64/complex128 -> frequency response [B, N] of the same dtype, as
        the receiver's FFT sees it (only with a multipath stage)."""
        delays = torch.as_tensor(self.multipath.delays, dtype=torch.float64, device=taps.device)
        d = delays + self.cfg.fft_backoff
        ph = -2 * math.pi * self.signed_k.to(taps.device)[:, None] * d[None, :] / self.cfg.fft_size
        e = cis(ph).to(taps.dtype)  # [N, L]
        return taps @ e.T

    def forward(
        self, symbols: Tensor, snr_db: Tensor, generator: torch.Generator | None = None
    ) -> RxResult:
        """symbols: [B, k] complex64/complex128; snr_db: [B] or scalar, real (Es/N0 per complex
        sample; cast to the symbols' real dtype). Returns an :class:`RxResult` in the symbols'
        precision: symbols [B, k], h [B, N], n0/snr_db [B], symbol_gain [B, k];
        cfo_norm and evm_pilots [B] zeros, header_llr [B, 0], pilots None."""
        if not torch.is_complex(symbols) or symbols.dim() != 2:
            raise ValueError(
                f"symbols must be [B, k] complex, got {symbols.dtype} {tuple(symbols.shape)}"
            )
        c, rx = self.cfg, self.rx
        b, n_pay = symbols.shape
        dt, dev = symbols.dtype, symbols.device
        rdt = symbols.real.dtype
        a = rx.a
        snr_db = torch.as_tensor(snr_db, dtype=rdt, device=dev).expand(b)
        n0 = self.es * torch.pow(10.0, -snr_db / 10)  # [B]
        sd = torch.sqrt(n0)[:, None]

        def noise(*shape):
            re = torch.randn(*shape, generator=generator, dtype=rdt, device=dev)
            im = torch.randn(*shape, generator=generator, dtype=rdt, device=dev)
            return torch.complex(re, im) * math.sqrt(0.5)

        if self.multipath is not None:
            taps = self.multipath.draw(b, generator=generator, dtype=dt, device=dev)
            h_true = self.response(taps)  # [B, N]
        else:
            h_true = torch.ones(b, c.fft_size, dtype=dt, device=dev)
        used = rx.used_bins
        ref = (a * rx.lts_used).to(dt)  # [U]
        hu = h_true[:, used]
        y1 = hu * ref + sd * noise(b, len(used))
        y2 = hu * ref + sd * noise(b, len(used))
        h_ls = (y1 + y2) / (2 * ref)
        n0_hat = (_abs2(y1 - y2).mean(-1) / 2).clamp_min(1e-12)
        n_obs = 2  # observations per used bin in the estimate
        if self.header_known:
            # the header's symbols as known pilots (OfdmReceiver.refine_estimate with
            # noise=True): n_h more observations per bin, each a H d + W (d = 1 stands for
            # any +-1, the noise being symmetric), and the noise from their residuals
            n_h = c.header_symbols
            yh = a * hu[:, None, :] + sd[:, :, None] * noise(b, n_h, len(used))
            n_obs = 2 + n_h
            h_ls = (2 * h_ls + yh.sum(1) / a) / n_obs
            dof = (1 - 1 / n_obs) * n_h * len(used)
            n0_hat = (_abs2(yh - a * h_ls[:, None, :]).sum((-1, -2)) / dof).clamp_min(1e-12)
        es_hat = torch.maximum(_abs2(h_ls).mean(-1) - n0_hat / (n_obs * a**2), 0.01 * n0_hat)
        # _smooth's noise model is two observations
        h_used = rx._smooth(h_ls, n0_hat * 2 / n_obs) if rx.smoothing == "lmmse" else h_ls
        h_hat = torch.zeros(b, c.fft_size, dtype=dt, device=dev).index_copy(1, used, h_used)

        s_pay = c.payload_symbols(n_pay)
        pad = s_pay * c.n_data - n_pay
        x = torch.nn.functional.pad(symbols, (0, pad)).reshape(b, s_pay, c.n_data)
        hd_true = h_true[:, rx.data_bins][:, None, :]  # [B, 1, D]
        y = a * hd_true * x + sd[:, :, None] * noise(b, s_pay, c.n_data)
        # the phase errors pilot tracking leaves per OFDM symbol: its common phase and its
        # phase slope across subcarriers (the sampling-offset term), both weighted least
        # squares on the pilots, so var = 1 / (2 sum_p SNR_p) and 1 / (2 sum_p SNR_p k_p^2)
        # (the tracker runs over header and payload symbols; with smooth_tracking its
        # per-symbol estimates are smoothed, and the same smoothing is applied to the draws)
        p_snr = a**2 * _abs2(h_true[:, rx.pilot_bins]) / n0[:, None]  # [B, P]
        pk = rx.pilot_k.to(rdt)
        n_sym = c.header_symbols + s_pay
        var_phi = 1 / (2 * p_snr.sum(-1).clamp_min(1e-6))  # [B]
        phi = torch.randn(b, n_sym, generator=generator, dtype=rdt, device=dev)
        phi = phi * torch.sqrt(var_phi)[:, None]
        beta = torch.randn(b, n_sym, generator=generator, dtype=rdt, device=dev)
        beta = beta / torch.sqrt(2 * (p_snr * pk**2).sum(-1).clamp_min(1e-6))[:, None]
        if rx.smooth_tracking:
            phi = rx.smoothed_phase_error(phi, var_phi)
            beta = line_fit(beta)
        phi = phi[:, c.header_symbols :, None]
        beta = beta[:, c.header_symbols :, None]
        kd = self.signed_k.to(device=dev, dtype=rdt)[rx.data_bins]
        th = phi + beta * kd
        y = y * cis(th).to(dt)
        hd = h_hat[:, rx.data_bins][:, None, :]
        if rx.equalizer == "zf":
            safe = torch.where(_abs2(hd) > 1e-20, hd, torch.full_like(hd, 1e-10))
            eq = y / (a * safe)
        else:
            eq = torch.conj(hd) * y / (a * (_abs2(hd) + (n0_hat / a**2)[:, None, None]))
        post = (a**2 * _abs2(h_hat) / n0_hat[:, None]).to(rdt)  # [B, N]
        gain = post[:, rx.data_bins][:, None, :].expand(b, s_pay, -1).reshape(b, -1)[:, :n_pay]
        zeros = torch.zeros(b, dtype=rdt, device=dev)
        return RxResult(
            symbols=eq.reshape(b, -1)[:, :n_pay],
            h=h_hat,
            n0=n0_hat,
            snr_db=10 * torch.log10(es_hat / n0_hat),
            cfo_norm=zeros,
            evm_pilots=zeros,
            symbol_gain=gain,
            header_llr=torch.zeros(b, 0, dtype=rdt, device=dev),
        )
