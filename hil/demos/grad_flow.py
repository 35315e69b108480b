"""Why a complex channel must stay in the graph.

A tiny encoder -> complex channel -> decoder, with the channel applied four ways:

- ``complex``: ordinary complex tensor operations (what this project does);
- ``no_grad``: the channel inside ``torch.no_grad()``, output re-attached with
  ``requires_grad_()``;
- ``detach``: ``y = channel(x.detach())`` then ``y.requires_grad_()``;
- ``tensor``: ``torch.tensor(y.numpy(), requires_grad=True)``, a round trip
  through numpy.

In the last three the decoder still gets gradients, so training "runs", but the
encoder's gradient is ``None``: the optimiser never changes it. That is the
whole failure. With the complex channel, the encoder gets gradients and they
agree with central finite differences.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..channel import ChannelChain

MODES = ("complex", "no_grad", "detach", "tensor")


class TinyEncoder(nn.Module):
    """Real features [B, d] -> complex symbols [B, k] with unit average power."""

    def __init__(self, d: int = 8, k: int = 4):
        super().__init__()
        self.lin = nn.Linear(d, 2 * k)

    def forward(self, v):
        z = self.lin(v)
        s = torch.complex(*z.view(z.shape[0], 2, -1).unbind(1))
        return s / torch.sqrt((s.abs() ** 2).mean(dim=1, keepdim=True))


class TinyDecoder(nn.Module):
    def __init__(self, d: int = 8, k: int = 4):
        super().__init__()
        self.lin = nn.Linear(2 * k, d)

    def forward(self, y):
        return self.lin(torch.cat((y.real, y.imag), dim=1))


def build(dtype=torch.float64, seed: int = 0):
    with torch.random.fork_rng():  # a fixed example without touching the caller's RNG
        torch.manual_seed(seed)
        enc, dec = TinyEncoder().to(dtype), TinyDecoder().to(dtype)
    chain = ChannelChain.from_tables(
        [
            {"kind": "fading", "model": "rician", "k_factor_db": 3.0},
            {"kind": "cfo", "sample_rate_hz": 1e6, "max_cfo_hz": 2e4},
            {"kind": "awgn", "snr_db": 10.0},
        ]
    )
    return enc, dec, chain


def loss_for(mode: str, enc, dec, chain, v, seed: int = 1):
    """Forward through the channel applied the given way; returns the MSE loss."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    g = torch.Generator().manual_seed(seed)  # same channel realisation on every call
    s = enc(v)
    if mode == "complex":
        y = chain(s, generator=g).y
    elif mode == "no_grad":
        with torch.no_grad():
            y = chain(s, generator=g).y
        y.requires_grad_()
    elif mode == "detach":
        y = chain(s.detach(), generator=g).y
        y.requires_grad_()
    else:
        y = torch.tensor(chain(s, generator=g).y.detach().numpy(), requires_grad=True)
    return ((dec(y) - v) ** 2).mean()


@dataclass
class ModeReport:
    mode: str
    encoder_grad_is_none: bool
    decoder_grad_is_none: bool
    encoder_grad_norm: float
    max_fd_error: float | None  # vs central finite differences, complex mode only


def finite_difference_check(enc, dec, chain, v, eps: float = 1e-6) -> float:
    """Max |autograd - central difference| over every encoder parameter entry."""
    enc.zero_grad()
    dec.zero_grad()
    loss_for("complex", enc, dec, chain, v).backward()
    worst = 0.0
    for p in enc.parameters():
        flat = p.data.view(-1)
        for i in range(flat.numel()):
            old = flat[i].item()
            flat[i] = old + eps
            lp = loss_for("complex", enc, dec, chain, v).item()
            flat[i] = old - eps
            lm = loss_for("complex", enc, dec, chain, v).item()
            flat[i] = old
            fd = (lp - lm) / (2 * eps)
            worst = max(worst, abs(fd - p.grad.view(-1)[i].item()))
    return worst


def run(batch: int = 16) -> list[ModeReport]:
    enc, dec, chain = build()
    v = torch.randn(batch, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    reports = []
    for mode in MODES:
        enc.zero_grad(set_to_none=True)
        dec.zero_grad(set_to_none=True)
        loss_for(mode, enc, dec, chain, v).backward()
        eg = enc.lin.weight.grad
        reports.append(
            ModeReport(
                mode=mode,
                encoder_grad_is_none=eg is None,
                decoder_grad_is_none=dec.lin.weight.grad is None,
                encoder_grad_norm=0.0 if eg is None else float(eg.norm()),
                max_fd_error=finite_difference_check(enc, dec, chain, v)
                if mode == "complex"
                else None,
            )
        )
    return reports


def main() -> int:
    print("encoder -> Rician fading + CFO + AWGN (complex) -> decoder, float64")
    print(
        f"{'channel applied as':<20}{'encoder grad':<16}{'decoder grad':<14}{'|grad enc|':>12}"
        f"{'max |autograd - FD|':>22}"
    )
    for r in run():
        fd = "" if r.max_fd_error is None else f"{r.max_fd_error:.2e}"
        print(
            f"{r.mode:<20}{'None' if r.encoder_grad_is_none else 'yes':<16}"
            f"{'None' if r.decoder_grad_is_none else 'yes':<14}{r.encoder_grad_norm:>12.4g}{fd:>22}"
        )
    print(
        "\nOnly 'complex' trains the encoder; the other three leave it at its random initialisation."
    )
    return 0
