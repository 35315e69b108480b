"""Exact invariants, dtypes, configs and errors of the channel stages."""

import math

import pytest
import torch

from hil.channel import (
    REGISTRY,
    ChainConfig,
    ChannelChain,
    DCOffset,
    IQImbalance,
    PowerAmplifier,
    Quantizer,
    TappedDelayLine,
    TimingOffset,
    load_chain,
)

from .test_gradcheck import CONFIGS


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_dtype_preserved_exactly(kind, dtype, gen):
    stage = REGISTRY[kind].from_config(CONFIGS[kind])
    x = torch.randn(3, 50, dtype=dtype, generator=gen)
    y = stage(x, generator=gen).y
    assert y.dtype == dtype
    assert y.shape == x.shape


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_chain_dtype(dtype, gen):
    chain = ChannelChain.from_tables([{"kind": k, **v} for k, v in CONFIGS.items()])
    assert chain(torch.randn(2, 40, dtype=dtype, generator=gen), generator=gen).y.dtype == dtype


def test_integer_delay_is_exact_shift(gen):
    x = torch.randn(2, 100, dtype=torch.complex128, generator=gen)
    y = TimingOffset()(x, delay=7.0).y
    torch.testing.assert_close(y[:, 7:], x[:, :-7], atol=1e-12, rtol=0)
    assert y[:, :7].abs().max() < 1e-12


def test_fractional_delay_of_bandlimited_tone():
    n = torch.arange(400, dtype=torch.float64)
    f = 0.05
    x = torch.exp(2j * math.pi * f * n)[None].to(torch.complex128)
    y = TimingOffset(half_width=16)(x, delay=2.37).y
    want = torch.exp(2j * math.pi * f * (n - 2.37))
    # away from the edges the windowed sinc is accurate to ~1e-3 for this tone
    assert (y[0, 40:-40] - want[40:-40]).abs().max() < 2e-3


def test_sampling_offset_stretches_time():
    n = torch.arange(2000, dtype=torch.float64)
    f = 0.01
    x = torch.exp(2j * math.pi * f * n)[None].to(torch.complex128)
    y = TimingOffset(sfo_ppm=500.0, half_width=16)(x, delay=0.0).y
    # sampled at n (1 + 5e-4): frequency scales by the same factor
    ph = torch.angle(y[0, 100:1800] * torch.conj(y[0, 99:1799]))
    assert abs(ph.mean().item() / (2 * math.pi * f) - (1 + 5e-4)) < 1e-5


def test_multipath_single_tap_identity(gen):
    x = torch.randn(2, 30, dtype=torch.complex64, generator=gen)
    tdl = TappedDelayLine("listed", delays_samples=[0, 3], powers_db=[0.0, -3.0])
    y = tdl(x, taps=torch.tensor([[1, 0], [0, 1]], dtype=torch.complex64)).y
    torch.testing.assert_close(y[0], x[0])
    torch.testing.assert_close(y[1, 3:], x[1, :-3])


def test_iq_imbalance_identity_and_image(gen):
    x = torch.randn(2, 30, dtype=torch.complex128, generator=gen)
    torch.testing.assert_close(IQImbalance()(x).y, x)
    tone = torch.exp(2j * math.pi * 6 / 64 * torch.arange(64, dtype=torch.float64))[None]
    y = IQImbalance(gain_db=1.0, phase_deg=5.0)(tone).y
    spec = torch.fft.fft(y[0]).abs() ** 2
    k1, k2 = IQImbalance(1.0, 5.0)(tone).record.values()
    irr = spec[6] / spec[-6]
    assert abs(irr.item() / (abs(k1) ** 2 / abs(k2) ** 2) - 1) < 1e-9


def test_dc_offset_adds_constant():
    x = torch.zeros(2, 5, dtype=torch.complex64)
    y = DCOffset(0.1, -0.2)(x).y
    assert torch.allclose(y, torch.full_like(x, complex(0.1, -0.2)))


def test_rapp_saturates_and_is_linear_at_small_signal():
    r = torch.tensor([[1e-3, 0.1, 1.0, 10.0, 100.0]], dtype=torch.complex128)
    y = PowerAmplifier("rapp", saturation=1.0, smoothness=3.0)(r).y.abs()[0]
    assert abs(y[0].item() - 1e-3) < 1e-9
    assert y[-1].item() < 1.0 + 1e-9 and y[-1].item() > 0.999
    assert abs(y[2].item() - 2 ** (-1 / 6)) < 1e-12


def test_saleh_am_pm():
    r = torch.tensor([[0.5 + 0j]], dtype=torch.complex128)
    y = PowerAmplifier("saleh")(r).y[0, 0]
    a = 2.1587 * 0.5 / (1 + 1.1517 * 0.25)
    p = 4.0033 * 0.25 / (1 + 9.1040 * 0.25)
    assert abs(abs(y) - a) < 1e-12
    assert abs(math.atan2(y.imag, y.real) - p) < 1e-12


def test_quantizer_levels_and_clipping():
    q = Quantizer(bits=12, full_scale=2048.0)
    x = torch.tensor(
        [[0.4 + 0.6j, 1000.3 - 2047.6j, 5000 + 0j, -5000 - 5000j]], dtype=torch.complex128
    )
    out = q(x)
    want = torch.tensor([[0 + 1j, 1000 - 2048j, 2047 + 0j, -2048 - 2048j]], dtype=torch.complex128)
    torch.testing.assert_close(out.y, want)
    assert out.record["clipped"].item() == 2


def test_chain_from_toml_and_records(tmp_path, gen):
    p = tmp_path / "ch.toml"
    p.write_text(
        '[[channel]]\nkind = "cfo"\nsample_rate_hz = 1e6\n'
        '[[channel]]\nkind = "awgn"\n[[channel]]\nkind = "awgn"\nname = "second"\n'
    )
    chain = load_chain(p)
    out = chain(
        torch.zeros(2, 10, dtype=torch.complex64),
        snr_db=3.0,
        generator=gen,
        values={"cfo": {"cfo_hz": 100.0}},
    )
    assert list(out.record) == ["cfo", "awgn", "second"]
    assert torch.all(out.record["cfo"]["cfo_hz"] == 100.0)
    assert torch.all(out.record["second"]["snr_db"] == 3.0)
    again = ChainConfig.from_tables(chain.config.to_tables())
    assert again == chain.config


@pytest.mark.parametrize(
    ("tables", "match"),
    [
        ([{"kind": "warp_drive"}], "unknown channel kind 'warp_drive'"),
        ([{"kind": "awgn", "snr": 3}], r"unknown key\(s\) \['snr'\]"),
        ([{"snr_db": 3}], "has no 'kind'"),
        ([{"kind": "fading", "model": "nakagami"}], "rayleigh' or 'rician"),
        ([{"kind": "cfo", "sample_rate_hz": 1e6, "max_cfo_hz": 6e5}], r"\[0, fs/2\)"),
        ([{"kind": "awgn", "name": "a"}, {"kind": "cfo", "name": "a"}], "unique"),
    ],
)
def test_config_errors_are_clear(tables, match):
    with pytest.raises(ValueError, match=match):
        ChannelChain.from_tables(tables)


def test_bad_inputs_raise(gen):
    with pytest.raises(TypeError, match="complex64 or complex128"):
        IQImbalance()(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"shape \[B, N\]"):
        IQImbalance()(torch.zeros(3, dtype=torch.complex64))
    with pytest.raises(ValueError, match="snr_db"):
        REGISTRY["awgn"]()(torch.zeros(2, 3, dtype=torch.complex64), generator=gen)
    with pytest.raises(ValueError, match="finite"):
        REGISTRY["awgn"]()(torch.zeros(2, 3, dtype=torch.complex64), float("nan"))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_resample_compiled_equals_the_differentiable_sum(dtype):
    """Without a gradient to follow, ``resample`` runs a compiled kernel: the same values as
    the torch sum (the one training differentiates) to rounding, at fractional, integer,
    negative and past-the-end positions, for several half widths."""
    from hil.channel import functional as F

    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3000, dtype=dtype, generator=g)
    rdt = x.real.dtype
    t = torch.arange(3100, dtype=torch.float64)[None] * (1 + 237e-6)
    pos = (t - torch.tensor([[0.3], [-2.7]], dtype=torch.float64) - 40).to(rdt)
    pos[0, 50] = 7.0
    for w in (1, 4, 8):
        fast = F.resample(x, pos, w)
        with torch.enable_grad():
            ref = F.resample(x.clone().requires_grad_(True), pos, w).detach()
        assert fast.dtype == dtype and fast.shape == (2, 3100)
        tol = 1e-6 if dtype == torch.complex64 else 1e-12
        assert float((fast - ref).abs().max()) < tol * float(ref.abs().max())
        assert fast[0, 50] == x[0, 7]  # an integer position reads the sample itself
        assert fast[1, -1] == 0  # far past the end: nothing to read
    # a lazily conjugated view (torch's conj bit) reads as its values
    torch.testing.assert_close(F.resample(x.conj(), pos, 8), fast.conj())
