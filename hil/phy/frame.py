"""Frame builder: preamble, header, payload OFDM symbols with pilots.

Frame = short training field (detection, coarse CFO) | long training field
(fine timing, fine CFO, channel and noise estimation) | header OFDM symbols
(BPSK, coded) | payload OFDM symbols (arbitrary complex symbols on the data
subcarriers, pilots on every symbol). Every part has unit mean power (before
scaling to full scale). The payload symbols are rotated by the scrambler's
phases (``sequences.payload_phases``) and the header's coded bits scrambled
(``header.encode_header_bits``), so that no content piles up into peaks.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..convert import to_numpy, to_torch
from .header import Header, header_symbols
from .numerology import OfdmConfig
from .ofdm import map_resources, modulate
from .sequences import lts_time, payload_phases, sts_time

# complex symbols per frame (100 OFDM symbols) hil tx sends; a larger image takes several
MAX_PAYLOAD = 4800


def scramble_payload(symbols: Tensor, inverse: bool = False) -> Tensor:
    """Payload symbols [B, k] complex64/complex128 -> [B, k], same dtype and device: symbol i
    times exp(j pi/2 q_i) (``sequences.payload_phases``), or its conjugate with ``inverse``
    (the receiver). Unit-modulus, so powers and gradients pass unchanged."""
    if not torch.is_complex(symbols) or symbols.dim() != 2:
        raise ValueError(
            f"symbols must be [B, k] complex, got {symbols.dtype} {tuple(symbols.shape)}"
        )
    ph = payload_phases(symbols.shape[1])
    ph = np.conj(ph) if inverse else ph
    return symbols * torch.as_tensor(ph, device=symbols.device).to(symbols.dtype)


class FrameBuilder:
    """Builds frames for a numerology; torch (differentiable in the payload) and numpy entry points."""

    def __init__(self, cfg: OfdmConfig | None = None):
        self.cfg = cfg or OfdmConfig()
        self._sts = sts_time(self.cfg)
        self._lts = lts_time(self.cfg)

    def payload_grid(self, symbols: Tensor) -> Tensor:
        """symbols [B, k] (complex64/complex128, or any dtype) -> [B, S, n_data] of the same
        dtype, zero padded to whole OFDM symbols."""
        b, k = symbols.shape
        s = self.cfg.payload_symbols(k)
        pad = s * self.cfg.n_data - k
        if pad:
            symbols = torch.nn.functional.pad(symbols, (0, pad))
        return symbols.reshape(b, s, self.cfg.n_data)

    def build(self, symbols: Tensor, header_bpsk: Tensor | None = None) -> Tensor:
        """Frames [B, frame_len(k)] (same dtype as ``symbols``: [B, k] complex).

        Args:
            symbols: [B, k] complex64/complex128 payload, any complex values (the JSCC's are
                unit mean power).
            header_bpsk: [B, header_symbols, n_data] real +-1 (any real dtype; cast to the
                dtype of ``symbols``), or None for an all-zero-bits header (training, where
                the header carries nothing).

        Returns:
            [B, frame_len(k)], the dtype of ``symbols``, on its device.
        """
        if not torch.is_complex(symbols) or symbols.dim() != 2:
            raise ValueError(
                f"symbols must be [B, k] complex, got {symbols.dtype} {tuple(symbols.shape)}"
            )
        if symbols.shape[1] < 1:
            raise ValueError("a frame carries at least one payload symbol (k >= 1), got k = 0")
        cfg, b, dev, dt = self.cfg, symbols.shape[0], symbols.device, symbols.dtype
        if header_bpsk is None:
            header_bpsk = torch.ones(b, cfg.header_symbols, cfg.n_data)
        hdr = modulate(cfg, map_resources(cfg, header_bpsk.to(dev, dt), first_symbol=0))
        pay = modulate(
            cfg,
            map_resources(
                cfg, self.payload_grid(scramble_payload(symbols)), first_symbol=cfg.header_symbols
            ),
        )
        pre = to_torch(np.concatenate([self._sts, self._lts]), dt, dev).expand(b, -1)
        return torch.cat([pre, hdr, pay], dim=-1)

    def build_numpy(self, symbols: np.ndarray, header: Header) -> np.ndarray:
        """One frame for the air: symbols [k] complex (any precision; built in complex64) ->
        [frame_len(k)] complex64 (unit power, unscaled)."""
        if header.payload_len != len(symbols):
            raise ValueError(
                f"header.payload_len={header.payload_len} but {len(symbols)} symbols given"
            )
        s = to_torch(np.asarray(symbols)[None])
        h = torch.from_numpy(header_symbols(header, self.cfg))[None]
        return to_numpy(self.build(s, h))[0]


def clip_amplitude(x: Tensor, limit: float | Tensor) -> Tensor:
    """Soft-limiter: |y| = min(|x|, limit), phase kept (differentiable almost everywhere).

    x: [...] complex64/complex128, any shape (elementwise); limit: float or real tensor
    broadcastable to x; returns the shape and dtype of x.
    """
    mag = x.abs()
    scale = torch.where(mag > limit, limit / mag.clamp_min(1e-30), torch.ones_like(mag))
    return x * scale.to(x.dtype)


def to_full_scale(
    x: np.ndarray, rms_dbfs: float = -12.0, clip_papr_db: float | None = None
) -> tuple[np.ndarray, dict]:
    """Scale a unit-power frame for the DAC: |y| <= 1 (full scale).

    The frame is scaled to ``rms_dbfs`` RMS; samples above full scale are
    clipped (peak-limited), and with ``clip_papr_db`` clipped further at
    that ratio above the unclipped RMS (PAPR control by clipping). Returns the samples
    (complex64) and what happened: fraction clipped, PAPR before/after.

    x: [n] complex, any precision (cast to complex64; any shape is scaled as a whole);
    returns ([n] complex64, stats dict of floats).
    """
    x = np.asarray(x, np.complex64)
    rms = 10 ** (rms_dbfs / 20)
    p = np.abs(x) ** 2
    mean = float(p.mean()) if p.size else 1.0
    limit = 1.0
    if clip_papr_db is not None:
        limit = min(1.0, rms * 10 ** (clip_papr_db / 20))
    y = x * np.float32(rms / np.sqrt(mean))
    mag = np.abs(y)
    over = mag > limit
    y[over] *= (limit / mag[over]).astype(np.float32)
    py = np.abs(y) ** 2
    stats = {
        "clipped_fraction": float(over.mean()) if x.size else 0.0,
        "papr_in_db": float(10 * np.log10(p.max() / mean)) if x.size else 0.0,
        "papr_out_db": float(10 * np.log10(py.max() / py.mean())) if x.size else 0.0,
        "rms_dbfs": float(10 * np.log10(py.mean())) if x.size else -np.inf,
    }
    return y.astype(np.complex64), stats
