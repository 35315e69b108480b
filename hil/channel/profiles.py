"""Named channel profiles used by training, evaluation and the simulated radio.

Profiles describe the channel *after* the receiver's stream synchroniser, as
the differentiable training path sees it: timing known, coarse CFO removed, so
only a residual CFO of a few kHz remains (the coarse estimator's error at low
SNR is several hundred Hz; see the PHY benchmark). Sample rate 4 MSps.
"""

from __future__ import annotations

import copy

PROFILES: dict[str, list[dict]] = {
    "awgn": [{"kind": "awgn"}],
    # indoor multipath within the CP (8 taps, exponential decay 2 samples = 0.5 us
    # at 4 MSps) plus a residual CFO of up to +-3 kHz
    "multipath_cfo": [
        {"kind": "multipath", "profile": "exponential", "n_taps": 8, "decay_samples": 2.0},
        {"kind": "cfo", "sample_rate_hz": 4e6, "max_cfo_hz": 3e3},
        {"kind": "awgn"},
    ],
    # what a pair of Plutos adds on top: oscillator phase noise, IQ imbalance,
    # a mildly compressing PA and the 12-bit converters (RMS at -12 dBFS)
    "two_pluto": [
        {"kind": "pa", "model": "rapp", "saturation": 4.0, "smoothness": 3.0},
        {"kind": "multipath", "profile": "exponential", "n_taps": 8, "decay_samples": 2.0},
        {"kind": "cfo", "sample_rate_hz": 4e6, "max_cfo_hz": 3e3},
        {"kind": "phase_noise", "linewidth_hz": 100.0, "sample_rate_hz": 4e6},
        {"kind": "iq_imbalance", "gain_db": 0.2, "phase_deg": 1.0},
        {"kind": "awgn"},
        {"kind": "quantize", "bits": 12, "full_scale": 4.0},
    ],
}


def profile(name: str) -> list[dict]:
    """A copy of the named profile's stage tables."""
    if name not in PROFILES:
        raise ValueError(f"unknown channel profile {name!r}; known: {sorted(PROFILES)}")
    return copy.deepcopy(PROFILES[name])
