"""The end-to-end differentiable path used for training and simulated evaluation:

images -> Encoder -> FrameBuilder (PHY transmit) -> channel chain -> OfdmReceiver
(PHY receive with *estimated* channel, timing known) -> Decoder -> images.

``grad_mode`` chooses how the channel sits in the graph:

- ``complex``: ordinary complex ops (PyTorch complex autograd);
- ``detach``: the seed's way: channel under ``torch.no_grad()``, output
  re-attached with ``requires_grad_()``; the encoder gets no gradient;
- ``real``: the channel as real 2x2 arithmetic on (I, Q) pairs
  (``hil.channel.real_twin``), to show it equals ``complex``.

``surrogate=True`` (per call) replaces frame building, the sample-level channel
and the receiver with ``hil.phy.surrogate.ReceiverSurrogate``: the same
receiver outputs drawn per subcarrier, for the cheap early steps of training.

``through_phy=False`` skips the PHY: the channel acts on the bare symbols and
the decoder is told the true SNR, which is how most Deep JSCC is trained; it
is kept as the baseline the PHY-trained model is measured against.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..channel import ChannelChain
from ..channel.real_twin import apply_real_chain
from ..phy import FrameBuilder, OfdmConfig, OfdmReceiver, RxResult
from ..phy.surrogate import ReceiverSurrogate
from .model import JsccModel

GRAD_MODES = ("complex", "detach", "real")


@dataclass
class LinkOutput:
    """What one pass of the link gives: the decoded images, the symbols sent, the SNR the
    decoder was given, and the receiver's outputs (None on the ideal path, where no receiver
    runs: symbols go straight through the channel and the decoder gets the true SNR)."""

    x_hat: Tensor  # [B, 3, H, W] float32
    symbols: Tensor  # [B, k] complex64 sent
    snr_db: Tensor  # [B] float32: the receiver's estimate, or the true SNR on the ideal path
    rx: RxResult | None


class JsccLink(nn.Module):
    def __init__(
        self,
        model: JsccModel,
        phy: OfdmConfig,
        chain: ChannelChain,
        grad_mode: str = "complex",
        equalizer: str = "mmse",
        through_phy: bool = True,
    ):
        super().__init__()
        if grad_mode not in GRAD_MODES:
            raise ValueError(f"grad_mode must be one of {GRAD_MODES}, got {grad_mode!r}")
        self.model, self.chain, self.grad_mode = model, chain, grad_mode
        self.through_phy = through_phy
        self.phy = phy
        self.fb = FrameBuilder(phy)
        self.rx = OfdmReceiver(phy, equalizer=equalizer)
        self.equalizer = equalizer
        self._surrogate: ReceiverSurrogate | None = None

    def surrogate(self) -> ReceiverSurrogate:
        """The chain's per-subcarrier surrogate (built on first use; ValueError for a chain
        with stages it does not model)."""
        if self._surrogate is None:
            self._surrogate = ReceiverSurrogate(
                self.phy, self.chain.config.to_tables(), self.equalizer
            )
        return self._surrogate

    def channel(self, frames: Tensor, snr_db: Tensor, generator: torch.Generator | None) -> Tensor:
        """The chain in this link's ``grad_mode``: frames [B, L] complex64/complex128 (whole
        frames, or the bare symbols [B, k] off the PHY); snr_db: [B] real -> [B, L] of the
        frames' dtype."""
        if self.grad_mode == "complex":
            return self.chain(frames, snr_db, generator=generator).y
        if self.grad_mode == "real":
            return apply_real_chain(self.chain, frames, snr_db, generator)
        with torch.no_grad():  # the seed's mistake, on purpose
            y = self.chain(frames, snr_db, generator=generator).y
        return y.detach().requires_grad_()

    def forward(
        self,
        x: Tensor,
        snr_db: Tensor,
        generator: torch.Generator | None = None,
        surrogate: bool = False,
    ) -> LinkOutput:
        """x: [B, 3, H, W] float32 in [0, 1]; snr_db: [B] float32 (the channel's Es/N0)."""
        shape = tuple(x.shape[1:])
        s = self.model.encoder(x)
        if surrogate:
            if self.grad_mode != "complex" or not self.through_phy:
                raise ValueError("the surrogate stands in for the PHY in grad_mode 'complex' only")
            r = self.surrogate().to(s.device)(s, snr_db, generator)
            x_hat = self.model.decoder(r.symbols, r.snr_db, shape, r.symbol_gain)
            return LinkOutput(x_hat=x_hat, symbols=s, snr_db=r.snr_db, rx=r)
        if not self.through_phy:  # symbols straight through the channel, true SNR to the decoder
            y = self.channel(s, snr_db, generator)
            gain = torch.full(s.shape, 1.0, device=s.device) * torch.pow(10.0, snr_db / 10)[:, None]
            x_hat = self.model.decoder(y, snr_db, shape, gain)
            return LinkOutput(x_hat=x_hat, symbols=s, snr_db=snr_db, rx=None)
        # the header (all +1: it carries nothing in training) is known to the receiver, as a
        # header that passed its CRC is on the air (FrameReceiver's refine_payload)
        hdr = torch.ones(s.shape[0], self.phy.header_symbols, self.phy.n_data, device=s.device)
        y = self.channel(self.fb.build(s, hdr), snr_db, generator)
        r = self.rx.receive_frame(y, s.shape[1], hdr)
        x_hat = self.model.decoder(r.symbols, r.snr_db, shape, r.symbol_gain)
        return LinkOutput(x_hat=x_hat, symbols=s, snr_db=r.snr_db, rx=r)
