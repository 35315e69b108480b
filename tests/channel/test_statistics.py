"""Statistics of the random stages, each with >= 1e5 draws and a stated tolerance."""

import math

import numpy as np
import pytest
import torch

from hil.channel import AWGN, BlockFading, CarrierFrequencyOffset, PhaseNoise, TappedDelayLine

N_DRAWS = 200_000


@pytest.mark.parametrize("snr_db", [-5.0, 0.0, 10.0, 30.0])
def test_awgn_noise_variance_convention(snr_db, gen):
    """N0 = Es / SNR per complex sample, N0/2 per real dimension (Es = 1, normalised)."""
    x = torch.zeros(2, N_DRAWS // 2, dtype=torch.complex128)
    out = AWGN()(x, snr_db, generator=gen)
    n0 = 10 ** (-snr_db / 10)
    noise = out.y
    # Var estimate of N draws has relative std sqrt(2/N) ~ 0.3 %; tolerance 1.5 % (5 sigma).
    assert abs((noise.abs() ** 2).mean().item() / n0 - 1) < 0.015
    assert abs((noise.real**2).mean().item() / (n0 / 2) - 1) < 0.02
    assert abs((noise.imag**2).mean().item() / (n0 / 2) - 1) < 0.02
    assert abs(noise.mean().abs().item()) < 5 * math.sqrt(n0 / N_DRAWS)
    torch.testing.assert_close(out.record["n0"], torch.full((2,), n0, dtype=torch.float64))


def test_awgn_measured_power(gen):
    x = torch.full((1, N_DRAWS), 3.0 + 0j, dtype=torch.complex128)  # Es = 9
    out = AWGN(measure_power=True)(x, 10.0, generator=gen)
    assert abs(((out.y - x).abs() ** 2).mean().item() / 0.9 - 1) < 0.015


def test_rayleigh_power_is_exponential_with_mean_one(gen):
    h = BlockFading("rayleigh").draw(
        (N_DRAWS,), generator=gen, dtype=torch.complex128, device="cpu"
    )
    p = (h.abs() ** 2).numpy()
    # Exponential(1): mean 1, var 1, P(p > t) = exp(-t). Tolerances ~5 sigma.
    assert abs(p.mean() - 1) < 0.012
    assert abs(p.var() - 1) < 0.04
    for t in (0.1, 1.0, 3.0):
        assert abs((p > t).mean() - math.exp(-t)) < 0.005


@pytest.mark.parametrize("k_db", [0.0, 6.0, 10.0])
def test_rician_k_factor(k_db, gen):
    h = BlockFading("rician", k_factor_db=k_db, los_phase_rad=0.3).draw(
        (N_DRAWS,), generator=gen, dtype=torch.complex128, device="cpu"
    )
    k = 10 ** (k_db / 10)
    los = h.mean()  # fixed LOS phase: the mean is the LOS component
    scatter = ((h - los).abs() ** 2).mean()
    k_est = (los.abs() ** 2 / scatter).item()
    assert abs(k_est / k - 1) < 0.03  # ~2 % std at K = 10 dB, 3 % tolerance
    assert abs((h.abs() ** 2).mean().item() - 1) < 0.01
    assert abs(np.angle(los.item()) - 0.3) < 0.02


def test_cfo_phase_slope(gen):
    fs, cfo = 4e6, 37_123.0
    x = torch.ones(1, N_DRAWS, dtype=torch.complex128)
    out = CarrierFrequencyOffset(sample_rate_hz=fs)(x, cfo_hz=cfo, phase0=0.5, generator=gen)
    ph = np.unwrap(np.angle(out.y[0].numpy()))
    slope, icpt = np.polyfit(np.arange(N_DRAWS), ph, 1)
    assert abs(slope * fs / (2 * math.pi) - cfo) < 1e-6  # noiseless: numerically exact
    assert abs(icpt - 0.5) < 1e-6


def test_cfo_is_phase_continuous_across_chunks():
    stage = CarrierFrequencyOffset(sample_rate_hz=1e6)
    x = torch.ones(1, 1000, dtype=torch.complex128)
    whole = stage(x, cfo_hz=1234.5, phase0=0.1).y
    parts = [
        stage(x[:, a : a + 250], cfo_hz=1234.5, phase0=0.1, start=a).y for a in range(0, 1000, 250)
    ]
    torch.testing.assert_close(torch.cat(parts, 1), whole, atol=1e-12, rtol=0)


def test_phase_noise_increment_variance(gen):
    stage = PhaseNoise(linewidth_hz=500.0, sample_rate_hz=1e6)
    out = stage(torch.ones(4, N_DRAWS // 4, dtype=torch.complex128), generator=gen)
    inc = torch.diff(out.record["phase"], dim=1).flatten()
    want = 2 * math.pi * 500.0 / 1e6
    assert abs(inc.var().item() / want - 1) < 0.015  # rel. std sqrt(2/N) = 0.3 %
    # and the output really carries that phase
    torch.testing.assert_close(
        torch.angle(out.y), torch.remainder(out.record["phase"] + math.pi, 2 * math.pi) - math.pi
    )


def test_multipath_mean_power_and_profile(gen):
    tdl = TappedDelayLine("listed", delays_samples=[0, 2, 5], powers_db=[0.0, -3.0, -10.0])
    taps = tdl.draw(N_DRAWS, generator=gen, dtype=torch.complex128, device="cpu")
    p = (taps.abs() ** 2).mean(0).numpy()
    want = np.array([1, 10**-0.3, 0.1]) / (1 + 10**-0.3 + 0.1)
    np.testing.assert_allclose(p, want, rtol=0.02)
    assert abs((taps.abs() ** 2).sum(1).mean().item() - 1) < 0.01
