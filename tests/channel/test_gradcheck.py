"""gradcheck in complex128 for every channel stage and for a chain of all of them."""

import pytest
import torch

from hil.channel import REGISTRY, ChannelChain

# One representative configuration per stage; the quantiser is checked through
# its surrogate (see test_quantizer_straight_through_equals_surrogate).
CONFIGS = {
    "awgn": {"snr_db": 5.0, "measure_power": True},
    "fading": {"model": "rician", "k_factor_db": 3.0, "block_length": 4},
    "multipath": {"profile": "listed", "delays_samples": [0, 1, 3], "powers_db": [0, -3, -6]},
    "cfo": {"sample_rate_hz": 1e6, "max_cfo_hz": 5e4},
    "timing": {"max_delay_samples": 2.5, "sfo_ppm": 200.0, "half_width": 4},
    "phase_noise": {"linewidth_hz": 1e3, "sample_rate_hz": 1e6},
    "iq_imbalance": {"gain_db": 0.8, "phase_deg": 3.0},
    "dc_offset": {"offset_re": 0.1, "offset_im": -0.05},
    "pa": {"model": "rapp", "saturation": 0.8, "smoothness": 2.0},
    "quantize": {"bits": 6, "full_scale": 4.0, "surrogate": True},
}
EXTRA = {"pa-saleh": ("pa", {"model": "saleh"})}


def test_every_registered_stage_is_covered():
    assert set(CONFIGS) == set(REGISTRY)


def _x(gen, b=2, n=12):
    return (torch.randn(b, n, dtype=torch.complex128, generator=gen) * 0.5).requires_grad_()


def _fixed(stage, seed=7):
    """The stage as a deterministic function of x (same random draws on every call)."""
    return lambda x: stage(x, generator=torch.Generator().manual_seed(seed)).y


@pytest.mark.parametrize("kind", sorted(CONFIGS) + sorted(EXTRA))
def test_gradcheck_stage(kind, gen):
    k, cfg = EXTRA.get(kind, (kind, CONFIGS.get(kind)))
    stage = REGISTRY[k].from_config(cfg)
    assert torch.autograd.gradcheck(_fixed(stage), (_x(gen),), eps=1e-6, atol=1e-7, rtol=1e-5)


def _chain(surrogate):
    tables = []
    for kind, cfg in CONFIGS.items():
        cfg = dict(cfg)
        if kind == "quantize":
            cfg["surrogate"] = surrogate
        tables.append({"kind": kind, **cfg})
    return ChannelChain.from_tables(tables)


def test_gradcheck_chain_of_all(gen):
    chain = _chain(surrogate=True)
    assert torch.autograd.gradcheck(_fixed(chain), (_x(gen),), eps=1e-6, atol=1e-7, rtol=1e-5)


def test_quantizer_straight_through_equals_surrogate(gen):
    """The hard quantiser's autograd gradient is exactly the surrogate's (checked above by FD)."""
    x = _x(gen).detach()
    hard, soft = _fixed(_chain(False)), _fixed(_chain(True))
    jh = torch.autograd.functional.jacobian(lambda v: torch.view_as_real(hard(v)), x)
    js = torch.autograd.functional.jacobian(lambda v: torch.view_as_real(soft(v)), x)
    assert torch.equal(jh, js)
    # and the forward outputs differ: the hard one really rounds
    assert not torch.allclose(hard(x), soft(x))
