"""Named channel profiles used by training, evaluation and the simulated radio.

Profiles describe the channel *after* the receiver's stream synchroniser, as
the differentiable training path sees it: timing known, coarse CFO removed, so
only a residual CFO of a few kHz remains (the coarse estimator's error at low
SNR is several hundred Hz; see the PHY benchmark).

Stages given in Hz (CFO, phase noise) take their sample rate from the caller:
the PHY config is the one source of the sample rate, so ``profile(name,
sample_rate_hz=phy.sample_rate_hz)``. Delays are in samples.
"""

from __future__ import annotations

import copy

PROFILES: dict[str, list[dict]] = {
    "awgn": [{"kind": "awgn"}],
    # indoor multipath within the CP (8 taps, exponential decay 2 samples: 0.5 us at
    # 4 MSps) plus a residual CFO of up to +-3 kHz
    "multipath_cfo": [
        {"kind": "multipath", "profile": "exponential", "n_taps": 8, "decay_samples": 2.0},
        {"kind": "cfo", "max_cfo_hz": 3e3},
        {"kind": "awgn"},
    ],
    # what a pair of Plutos adds on top: oscillator phase noise, IQ imbalance,
    # a mildly compressing PA and the 12-bit converters (RMS at -12 dBFS)
    "two_pluto": [
        {"kind": "pa", "model": "rapp", "saturation": 4.0, "smoothness": 3.0},
        {"kind": "multipath", "profile": "exponential", "n_taps": 8, "decay_samples": 2.0},
        {"kind": "cfo", "max_cfo_hz": 3e3},
        {"kind": "phase_noise", "linewidth_hz": 100.0},
        {"kind": "iq_imbalance", "gain_db": 0.2, "phase_deg": 1.0},
        {"kind": "awgn"},
        {"kind": "quantize", "bits": 12, "full_scale": 4.0},
    ],
}


# stage kinds whose parameters are in Hz and so need the sample rate
IN_HZ = ("cfo", "phase_noise")


def profile(name: str, sample_rate_hz: float | None = None) -> list[dict]:
    """A copy of the named profile's stage tables, its stages in Hz at ``sample_rate_hz``
    (the PHY's rate; required when the profile has such stages)."""
    if name not in PROFILES:
        raise ValueError(f"unknown channel profile {name!r}; known: {sorted(PROFILES)}")
    stages = copy.deepcopy(PROFILES[name])
    for t in stages:
        if t["kind"] in IN_HZ:
            if sample_rate_hz is None:
                raise ValueError(
                    f"channel profile {name!r} has a {t['kind']} stage in Hz: pass "
                    "sample_rate_hz (the PHY config's rate)"
                )
            t["sample_rate_hz"] = float(sample_rate_hz)
    return stages


def check_sample_rate(stages: list[dict], sample_rate_hz: float, where: str) -> None:
    """Stages in Hz must run at the PHY's rate: a mismatch is an error, never a silent
    rescaling of every CFO and linewidth."""
    for t in stages:
        fs = t.get("sample_rate_hz")
        if t.get("kind") in IN_HZ and fs is not None and float(fs) != float(sample_rate_hz):
            raise ValueError(
                f"{where}: the {t['kind']} stage runs at {float(fs) / 1e6:g} MSps, the PHY at "
                f"{float(sample_rate_hz) / 1e6:g} MSps; the PHY config is the one source of the rate"
            )
