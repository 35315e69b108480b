"""The receive path against a reference written from its definitions (the module docstring
of ``hil.phy.receive``), in numpy, one step at a time: Moose CFO, LS channel and noise from
the two long training symbols, the LMMSE smoother R (R + s I)^-1 with a uniform power-delay
profile over the CP, the whole-frame phase tracker (ramp plus the exponential smoother of a
random walk), the pilots' timing slope and its line, ZF/MMSE, post-equaliser SNR, EVM and the
header LLRs, the payload's scrambling undone. Every field of the result must equal the reference, in every configuration the
receiver offers, and keep the input's precision."""

import itertools
import math

import numpy as np
import pytest
import torch

from hil.phy import FrameBuilder, Header, OfdmConfig, OfdmReceiver
from hil.phy.ofdm import map_resources, modulate
from hil.phy.receive import line_fit
from hil.phy.sequences import lts_freq, lts_time_symbol, payload_phases, pilot_values

CFG = OfdmConfig()


def reference(cfg, x, k, equalizer, smoothing, track, smooth_tracking, estimate_cfo, pn_hz):
    """x [B, L] complex128 from the LTS start, n_payload k -> dict of the RxResult fields."""
    n, cp, bo = cfg.fft_size, cfg.cp_len, cfg.fft_backoff
    a = math.sqrt(n / cfg.n_used)
    used, data = cfg.bins(cfg.used), cfg.bins(cfg.data_carriers)
    pil = cfg.bins(cfg.pilot_carriers)
    s_pay = cfg.payload_symbols(k)
    s_all = cfg.header_symbols + s_pay
    x = x[:, : cfg.lts_len + s_all * cfg.symbol_len].copy()
    b = len(x)
    if estimate_cfo:  # Moose: the phase between the two identical long symbols
        first = x[:, cfg.lts_cp : cfg.lts_cp + n]
        second = x[:, cfg.lts_cp + n : cfg.lts_cp + 2 * n]
        cfo = np.angle(np.sum(np.conj(first) * second, -1)) / (2 * np.pi * n)
        x = x * np.exp(-2j * np.pi * cfo[:, None] * np.arange(x.shape[1]))
    else:
        cfo = np.zeros(b)
    s0 = cfg.lts_cp - bo
    y1 = np.fft.fft(x[:, s0 : s0 + n], norm="ortho")[:, used]
    y2 = np.fft.fft(x[:, s0 + n : s0 + 2 * n], norm="ortho")[:, used]
    h = (y1 + y2) / (2 * a * lts_freq(cfg)[used].real)
    n0 = np.maximum(np.mean(np.abs(y1 - y2) ** 2, -1) / 2, 1e-12)
    ls_var = n0 / (2 * a**2)  # each bin's LS error variance: two symbols averaged
    es = np.maximum(np.mean(np.abs(h) ** 2, -1) - ls_var, 0.01 * n0)
    if smoothing == "lmmse":
        kk = cfg.used.astype(float)
        d = np.arange(cp + 1)  # paths within the CP (the FFT backoff adds its delay)
        r = np.exp(-2j * np.pi * (kk[:, None, None] - kk[None, :, None]) * d / n).mean(-1)
        eye = np.eye(len(kk))
        h = np.stack([r @ np.linalg.solve(r + ls_var[i] * eye, h[i]) for i in range(b)])
    hf = np.zeros((b, n), complex)
    hf[:, used] = h
    grid = np.stack(
        [
            np.fft.fft(x[:, o : o + n], norm="ortho")
            for o in cfg.lts_len + np.arange(s_all) * cfg.symbol_len + cp - bo
        ],
        1,
    )  # [B, S, N]
    pv = pilot_values(cfg, s_all)
    hp = hf[:, pil]
    sgn = np.where(np.arange(n) >= n // 2, np.arange(n) - n, np.arange(n))
    if track:
        z = grid[..., pil] * np.conj(hp)[:, None] * pv[None]
        idx = np.arange(s_all)
        if smooth_tracking and s_all > 1:
            zs = z.sum(-1)
            ramp = np.angle(np.sum(zs[:, 1:] * np.conj(zs[:, :-1]), -1))
            zr = zs * np.exp(-1j * ramp[:, None] * idx)
            var = n0 / np.maximum(2 * a**2 * np.sum(np.abs(hp) ** 2, -1), 1e-30)
            q = 2 * np.pi * pn_hz * cfg.symbol_len / cfg.sample_rate_hz
            lam = q / var
            rho = np.maximum(1 + lam / 2 - np.sqrt(lam + lam**2 / 4), 1e-30)
            kern = rho[:, None, None] ** np.abs(idx[:, None] - idx[None, :])
            phi = np.angle(np.einsum("bij,bj->bi", kern, zr)) + ramp[:, None] * idx
        else:
            phi = np.angle(z.sum(-1))
        resid = np.angle(z * np.exp(-1j * phi)[..., None])
        w = np.abs(hp) ** 2
        kp = cfg.pilot_carriers.astype(float)
        beta = (
            np.sum(w[:, None] * kp * resid, -1) / np.maximum(np.sum(w * kp**2, -1), 1e-30)[:, None]
        )
        if smooth_tracking and s_all > 2:
            beta = np.stack([np.polyval(np.polyfit(idx, row, 1), idx) for row in beta])
        grid = grid * np.exp(-1j * (phi[..., None] + beta[..., None] * sgn))
    hn = hf[:, None]
    if equalizer == "zf":
        eq = grid / (a * np.where(np.abs(hn) ** 2 > 1e-20, hn, 1e-10))
    else:
        eq = np.conj(hn) * grid / (a * (np.abs(hn) ** 2 + n0[:, None, None] / a**2))
    post = a**2 * np.abs(hf) ** 2 / n0[:, None]
    pz = grid[..., pil] / (a * np.where(np.abs(hp) ** 2 > 1e-20, hp, 1e-10))[:, None]
    hs = cfg.header_symbols
    llr = 4 * eq[:, :hs][..., data].real * post[:, None, data]
    if equalizer == "mmse":
        p = post[:, None, data]
        llr = llr * (p + 1) / np.maximum(p, 1e-30)
    return {
        # the payload's scrambling rotations undone (format version 3)
        "symbols": eq[:, hs:][..., data].reshape(b, -1)[:, :k] * np.conj(payload_phases(k)),
        "h": hf,
        "n0": n0,
        "snr_db": 10 * np.log10(es / n0),
        "cfo_norm": cfo,
        "evm_pilots": np.sqrt(np.mean(np.abs(pz - pv[None]) ** 2, (1, 2))),
        "symbol_gain": np.tile(post[:, data], (1, s_pay))[:, :k],
        "header_llr": llr.reshape(b, -1),
        "pilots": (pz * pv[None]).reshape(b, -1),
    }


def _received(k, seed, b=3):
    """b frames through different 3-tap channels, CFOs, levels (one weak: the estimators'
    guards) and noise (2, 11, 20 dB SNR), from the LTS start."""
    rng = np.random.default_rng(seed)
    fb = FrameBuilder(CFG)
    rows = []
    for i in range(b):
        hdr = Header(seq=i, item_id=i, fingerprint=b"refrence", payload_len=k, shape=(3, 8, 8))
        sym = (rng.normal(size=k) + 1j * rng.normal(size=k)) / math.sqrt(2)
        f = fb.build_numpy(sym.astype(np.complex64), hdr).astype(np.complex128)
        taps = (rng.normal(size=3) + 1j * rng.normal(size=3)) * np.array([1.0, 0.5, 0.3])
        y = np.convolve(f, taps)[: len(f)]
        y *= np.exp(
            2j * np.pi * rng.uniform(-2e-3, 2e-3) * np.arange(len(y)) + 1j * rng.uniform(0, 6)
        )
        amp = (1.0, 0.02, 3.0)[i % 3]
        y *= amp
        sigma = amp * 10 ** (-(2 + 9 * i) / 20)
        y += sigma * (rng.normal(size=len(y)) + 1j * rng.normal(size=len(y))) / math.sqrt(2)
        rows.append(y[CFG.sts_len :])
    return np.stack(rows)


OPTIONS = list(
    itertools.product(
        ("mmse", "zf"), ("lmmse", "none"), (True, False), (True, False), (True, False)
    )
)


SHORT = OfdmConfig(header_symbols=1)  # frames of 1, 2 and 3 OFDM symbols


@pytest.mark.parametrize("k", [0, 48, 49, 480])  # with SHORT 1, 2, 3 symbols; with CFG 22
@pytest.mark.parametrize("opts", OPTIONS, ids=["-".join(map(str, o)) for o in OPTIONS])
def test_every_field_equals_the_reference(opts, k):
    equalizer, smoothing, track, smooth, cfo = opts
    cfg = CFG if k == 480 else SHORT
    kw = dict(
        equalizer=equalizer,
        smoothing=smoothing,
        track=track,
        smooth_tracking=smooth,
        estimate_cfo=cfo,
    )
    x = _received(k, seed=k + 7, b=3) if cfg is CFG else _short_frames(k)
    rx = OfdmReceiver(cfg, phase_noise_hz=300.0, **kw)
    with torch.no_grad():
        got = rx(torch.from_numpy(x), k)
    want = reference(cfg, x, k, pn_hz=300.0, **kw)
    for name, ref in want.items():
        val = getattr(got, name)
        assert val.dtype == (torch.complex128 if np.iscomplexobj(ref) else torch.float64), name
        assert tuple(val.shape) == ref.shape, name
        np.testing.assert_allclose(val.numpy(), ref, rtol=1e-7, atol=1e-9, err_msg=name)


def _short_frames(k):
    """SHORT frames (a one-symbol header) with k payload symbols, from the LTS start: the
    LTS, then OFDM symbols of random QPSK with the pilots, through a 2-tap channel with a
    small CFO and noise. Built from the OFDM maps directly (a header does not fit one symbol;
    the receive path does not read it)."""
    cfg = SHORT
    rng = np.random.default_rng(3 + k)
    s = cfg.header_symbols + cfg.payload_symbols(k)
    lts = lts_time_symbol(cfg).astype(np.complex128)
    rows = []
    for i in range(3):
        qpsk = (
            rng.choice([-1.0, 1.0], (1, s, cfg.n_data))
            + 1j * rng.choice([-1.0, 1.0], (1, s, cfg.n_data))
        ) / math.sqrt(2)
        grid = map_resources(cfg, torch.from_numpy(qpsk))
        body = modulate(cfg, grid)[0].numpy()
        f = np.concatenate([lts[-cfg.lts_cp :], lts, lts, body])
        y = f + 0.3 * (0.5 + 0.4j * i) * np.roll(f, 3)
        y = y * np.exp(2j * np.pi * (1e-3 * (i - 1)) * np.arange(len(y)))
        rows.append(y + 0.05 * (rng.normal(size=len(y)) + 1j * rng.normal(size=len(y))))
    return np.stack(rows)


@pytest.mark.parametrize("equalizer", ["mmse", "zf"])
def test_single_precision_keeps_its_dtype_and_the_reference_values(equalizer):
    x = _received(96, seed=11)
    for track, smooth, cfo in itertools.product((True, False), repeat=3):
        kw = dict(equalizer=equalizer, track=track, smooth_tracking=smooth, estimate_cfo=cfo)
        with torch.no_grad():
            got = OfdmReceiver(CFG, **kw)(torch.from_numpy(x.astype(np.complex64)), 96)
        want = reference(CFG, x, 96, smoothing="lmmse", pn_hz=100.0, **kw)
        for name, ref in want.items():
            val = getattr(got, name)
            assert val.dtype == (torch.complex64 if np.iscomplexobj(ref) else torch.float32), name
            scale = np.abs(ref).max() + 1e-30
            assert np.abs(val.numpy() - ref).max() / scale < 2e-3, (name, kw)


def test_a_missing_long_training_field_is_guarded_not_divided_by():
    """No energy in the LTS: the channel estimate is exactly zero; ZF and the pilots' EVM divide
    by 1e-10 in its place (finite, and as the reference)."""
    x = _received(48, seed=5)
    x[:, : CFG.lts_len] = 0
    for equalizer, track in itertools.product(("zf", "mmse"), (True, False)):
        kw = dict(equalizer=equalizer, smoothing="none", track=track, smooth_tracking=True)
        with torch.no_grad():
            got = OfdmReceiver(CFG, estimate_cfo=False, **kw)(torch.from_numpy(x), 48)
        want = reference(CFG, x, 48, estimate_cfo=False, pn_hz=100.0, **kw)
        assert np.all(want["h"] == 0)
        for name, ref in want.items():
            np.testing.assert_allclose(getattr(got, name).numpy(), ref, rtol=1e-9, err_msg=name)
            assert torch.isfinite(getattr(got, name)).all()


def test_line_fit_is_the_least_squares_line():
    rng = np.random.default_rng(0)
    for s in (2, 3, 7, 22):
        y = rng.normal(size=(4, s))
        want = np.stack([np.polyval(np.polyfit(np.arange(s), row, 1), np.arange(s)) for row in y])
        got = line_fit(torch.from_numpy(y))
        assert got.dtype == torch.float64
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)
        got32 = line_fit(torch.from_numpy(y.astype(np.float32)))
        assert got32.dtype == torch.float32
        np.testing.assert_allclose(got32.numpy(), want, atol=1e-5)


def test_smoothed_phase_error_is_the_trackers_linearisation():
    """The surrogate's draw of the tracker's error: the end-to-end ramp, and the rest through
    the normalised exponential kernel of the phase smoother."""
    rx = OfdmReceiver(CFG, phase_noise_hz=500.0)
    rng = np.random.default_rng(1)
    err = rng.normal(size=(3, 9)) * 0.1
    var = np.array([1e-4, 1e-2, 1.0])
    q = 2 * math.pi * 500.0 * CFG.symbol_len / CFG.sample_rate_hz
    assert rx.q_phase == pytest.approx(q, rel=1e-12)
    idx = np.arange(9)
    want = []
    for e, v in zip(err, var, strict=True):
        lam = q / v
        rho = 1 + lam / 2 - math.sqrt(lam + lam**2 / 4)
        kern = rho ** np.abs(idx[:, None] - idx[None, :])
        kern /= kern.sum(1, keepdims=True)
        ramp = (e[-1] - e[0]) / 8
        want.append(kern @ (e - ramp * idx) + ramp * idx)
    got = rx.smoothed_phase_error(torch.from_numpy(err), torch.from_numpy(var))
    np.testing.assert_allclose(got.numpy(), np.stack(want), rtol=1e-10, atol=1e-12)
    kern = rx.phase_kernel(torch.tensor([1e-2], dtype=torch.float64), 5)
    assert kern.shape == (1, 5, 5) and kern.dtype == torch.float64
    assert torch.all(kern[0].diagonal() == 1)


def test_receiver_state_is_not_saved_and_bad_settings_are_named():
    assert OfdmReceiver(CFG).state_dict() == {}  # all buffers derive from the numerology
    rx = OfdmReceiver(CFG)
    assert (rx.equalizer, rx.smoothing, rx.track, rx.smooth_tracking, rx.estimate_cfo) == (
        "mmse",
        "lmmse",
        True,
        True,
        True,
    )
    assert rx.q_phase == pytest.approx(2 * math.pi * 100.0 * CFG.symbol_len / CFG.sample_rate_hz)
    assert OfdmReceiver(CFG, phase_noise_hz=0.5).q_phase > 0
    with pytest.raises(ValueError) as exc:
        OfdmReceiver(CFG, smoothing="wiener")
    assert str(exc.value) == "smoothing must be 'none' or 'lmmse', got 'wiener'"
    with pytest.raises(ValueError) as exc:
        OfdmReceiver(CFG, equalizer="ZF")
    assert str(exc.value) == "equalizer must be 'mmse' or 'zf', got 'ZF'"
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="phase_noise_hz must be > 0"):
            OfdmReceiver(CFG, phase_noise_hz=bad)
    need = CFG.lts_len + (CFG.header_symbols + 1) * CFG.symbol_len
    with pytest.raises(ValueError) as exc:
        rx(torch.zeros(2, need - 1, dtype=torch.complex64), 48)
    assert str(exc.value) == f"frame needs {need} samples from the LTS start, got {need - 1}"
    with pytest.raises(ValueError, match=r"x must be \[B, L\] complex, got torch.float32 \(2, 5\)"):
        rx(torch.zeros(2, 5), 48)
    with pytest.raises(ValueError, match="x must be"):
        rx(torch.zeros(need, dtype=torch.complex64), 48)
    for bad in (torch.zeros(2, need), torch.zeros(need, dtype=torch.complex64)):
        with pytest.raises(ValueError, match="x must be"):
            rx.receive_frame(bad, 48)
