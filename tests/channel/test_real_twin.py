"""Complex autograd vs the same channel written as real 2x2 arithmetic on (I, Q)."""

import math

import torch

from hil.channel import BlockFading, CarrierFrequencyOffset, IQImbalance
from hil.channel import real_twin as rt

FS = 1e6


def _complex_path(x, h, cfo_hz, phase0, gain_db, phase_deg):
    y = BlockFading()(x, h=h).y
    y = CarrierFrequencyOffset(sample_rate_hz=FS)(y, cfo_hz=cfo_hz, phase0=phase0).y
    return IQImbalance(gain_db, phase_deg)(y).y


def _real_path(v, h, cfo_hz, phase0, gain_db, phase_deg):
    v = rt.real_fading(v, h)
    v = rt.real_cfo(v, cfo_hz / FS, phase0)
    return rt.real_iq_imbalance(v, gain_db, phase_deg)


def test_gradients_agree_to_1e_10(gen):
    b, n = 4, 64
    x = torch.randn(b, n, dtype=torch.complex128, generator=gen)
    h = torch.randn(b, dtype=torch.complex128, generator=gen)
    cfo = torch.tensor([1e3, -2.5e4, 3e4, 7.7e3], dtype=torch.float64)
    ph0 = torch.rand(b, dtype=torch.float64, generator=gen) * 2 * math.pi
    target = torch.randn(b, n, dtype=torch.complex128, generator=gen)
    args = (h, cfo, ph0, 0.7, 4.0)

    xc = x.clone().requires_grad_()
    yc = _complex_path(xc, *args)
    loss_c = (yc - target).abs().pow(2).sum() + (yc.real**3).sum()
    loss_c.backward()

    v = rt.complex_to_iq(x).clone().requires_grad_()
    yr = _real_path(v, *args)
    t = rt.complex_to_iq(target)
    loss_r = (yr - t).pow(2).sum() + (yr[..., 0] ** 3).sum()
    loss_r.backward()

    assert abs(loss_c.item() - loss_r.item()) < 1e-9 * abs(loss_r.item())
    torch.testing.assert_close(rt.iq_to_complex(yr), yc.detach(), atol=1e-12, rtol=0)
    # PyTorch's gradient of a real loss is dL/dI + j dL/dQ (conjugate Wirtinger convention).
    err = (xc.grad - rt.iq_to_complex(v.grad)).abs().max().item()
    assert err < 1e-10, err
