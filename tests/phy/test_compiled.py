"""The compiled receive path against the torch one: the same estimates, tracking and
equalisation (to float32 rounding) for every option, batch and payload size; its FFT and
segment cutting against numpy's; the stream receiver's events the same either way."""

import itertools

import numpy as np
import pytest
import torch

from hil.channel.functional import phase_ramp
from hil.phy import FrameBuilder, FrameReceiver, OfdmConfig
from hil.phy.compiled import CompiledReceiver, _fft, _fft_tables
from hil.phy.receive import ChannelEstimate, OfdmReceiver
from hil.phy.sequences import payload_phases
from hil.phy.stream import warm_up

from .helpers import impair, make_frames, make_stream, run_receiver

CFG = OfdmConfig()
FB = FrameBuilder(CFG)
FIELDS = (
    "symbols",
    "h",
    "n0",
    "snr_db",
    "cfo_norm",
    "evm_pilots",
    "symbol_gain",
    "header_llr",
    "pilots",
)


def _frames(k: int, b: int, snr_db: float, seed: int = 0) -> torch.Tensor:
    """b frames of k payload symbols through 3-tap multipath, a CFO and noise, cut from the
    long training field: [b, n] complex64."""
    rng = np.random.default_rng(seed)
    frames, _, _ = make_frames(FB, rng, b, max(k, 1))  # k = 0: the header pass's cut
    n = CFG.lts_len + (CFG.header_symbols + CFG.payload_symbols(k)) * CFG.symbol_len
    out = []
    for i, f in enumerate(frames):
        y = impair(
            np.r_[f, np.zeros(64, np.complex64)],
            snr_db=snr_db,
            cfo_hz=3e3 * (i - b / 2),
            taps=[1.0, 0.5j, -0.25],
            delays=[0, 3, 9],
            seed=seed + i,
        )
        out.append(y[CFG.sts_len : CFG.sts_len + n])
    return torch.from_numpy(np.array(out, np.complex64))


def _close(a: torch.Tensor, b: torch.Tensor, name: str, tol: float = 2e-5) -> None:
    """Equal up to float32 rounding, relative to the field's largest value."""
    assert a.shape == b.shape and a.dtype == b.dtype, (name, a.shape, b.shape, a.dtype, b.dtype)
    a, b = a.numpy(), b.numpy()
    if a.size:
        scale = max(float(np.max(np.abs(a))), 1e-6)
        err = float(np.max(np.abs(a - b))) / scale
        assert err < tol, f"{name}: relative error {err:.2e}"


def _same(r1, r2, fields=FIELDS, tol: float = 2e-5) -> None:
    for f in fields:
        _close(getattr(r1, f), getattr(r2, f), f, tol)


@pytest.mark.parametrize("k", [0, 1, 47, 48, 480])
@pytest.mark.parametrize("snr_db", [0.0, 25.0])
def test_forward_equals_the_torch_receiver(k, snr_db):
    rx = OfdmReceiver(CFG)
    fast = CompiledReceiver(rx)
    x = _frames(k, 4, snr_db, seed=int(snr_db) + k)
    with torch.inference_mode():
        _same(rx(x, k), fast(x, k))
        # with the header known (what the stream does once its CRC passed)
        hdr = torch.sign(rx(x, 0).header_llr).reshape(4, CFG.header_symbols, CFG.n_data)
        _same(rx(x, k, hdr), fast(x, k, hdr))


@pytest.mark.parametrize(
    ("equalizer", "smoothing", "track", "smooth_tracking", "estimate_cfo"),
    list(
        itertools.product(
            ("mmse", "zf"), ("lmmse", "none"), (True, False), (True, False), (True, False)
        )
    ),
)
def test_every_option_equals_the_torch_receiver(
    equalizer, smoothing, track, smooth_tracking, estimate_cfo
):
    rx = OfdmReceiver(
        CFG,
        equalizer=equalizer,
        smoothing=smoothing,
        track=track,
        smooth_tracking=smooth_tracking,
        estimate_cfo=estimate_cfo,
        phase_noise_hz=300.0,
    )
    fast = CompiledReceiver(rx)
    x = _frames(96, 3, 12.0, seed=5)
    with torch.inference_mode():
        _same(rx(x, 96), fast(x, 96))


def test_steps_equal_the_torch_receiver_one_by_one():
    """estimate, refine_estimate (with and without the noise re-estimate, one header symbol
    wrong) and equalize with a given estimate, each against the torch step."""
    rx = OfdmReceiver(CFG)
    fast = CompiledReceiver(rx)
    x = _frames(200, 5, 8.0, seed=9)
    with torch.inference_mode():
        e1, e2 = rx.estimate(x), fast.estimate(x)
        _same(e1, e2, ("cfo_norm", "h", "n0", "snr_db"))
        xd = x * phase_ramp(-e1.cfo_norm, x.shape[-1]).to(x.dtype)
        hdr = torch.sign(rx.equalize(xd, e1, 0).header_llr).reshape(5, CFG.header_symbols, -1)
        hdr[0, 3, 7] *= -1
        for noise in (False, True):
            r1 = rx.refine_estimate(xd, e1, hdr, noise=noise)
            r2 = fast.refine_estimate(xd, e1, hdr, noise=noise)
            _same(r1, r2, ("cfo_norm", "h", "n0", "snr_db"))
            _same(rx.equalize(xd, r1, 200), fast.equalize(xd, r1, 200))
        # one frame alone gives the row it gave in the batch
        _same(fast.equalize(xd[2:3], r1.rows([2]), 200), rx.equalize(xd[2:3], r1.rows([2]), 200))


def test_the_header_pass_bins_serve_the_refinement_and_the_payload():
    """The header pass keeps the long training field's estimate and the header symbols' bins
    (known_bins); refine_estimate and equalize with known=True give from them what they give
    from the samples, without reading those samples."""
    fast = CompiledReceiver(OfdmReceiver(CFG))
    k, b = 200, 5
    x = _frames(k, b, 8.0, seed=9)
    n_hdr = CFG.lts_len + CFG.header_symbols * CFG.symbol_len
    with torch.inference_mode():
        est = fast(x[:, :n_hdr], 0).estimate
        assert est.known_bins.shape == (b, 1 + CFG.header_symbols, CFG.n_used)
        assert fast.estimate(x).known_bins is None  # only the header pass keeps them
        xd = x * phase_ramp(-est.cfo_norm.double(), x.shape[-1]).to(x.dtype)
        hdr = torch.sign(fast.equalize(xd, est, 0).header_llr).reshape(b, CFG.header_symbols, -1)
        for noise in (False, True):
            r1 = fast.refine_estimate(xd, est, hdr, noise=noise)
            r2 = fast.refine_estimate(None, est, hdr, noise=noise, known=True)
            _same(r1, r2, ("cfo_norm", "h", "n0", "snr_db"))
        assert r2.known_bins is est.known_bins  # the CFO is unchanged: the bins still hold
        blank = xd.clone()
        blank[:, :n_hdr] = 0  # with known=True, the header's samples are not read
        _same(fast.equalize(xd, r1, k), fast.equalize(blank, r2, k, known=True))
        _same(fast.equalize(xd, r1, 0), fast.equalize(None, r2, 0, known=True))
        # rows and cat carry them, row for row
        np.testing.assert_array_equal(est.rows([3, 1]).known_bins, est.known_bins[[3, 1]])
        both = ChannelEstimate.cat([est.rows([0]), est.rows([4])])
        np.testing.assert_array_equal(both.known_bins, est.known_bins[[0, 4]])
        assert ChannelEstimate.cat([est.rows([0]), fast.estimate(x[:1])]).known_bins is None
        _same(
            fast.equalize(xd[[3]], est.rows([3]), k),
            fast.equalize(blank[[3]], est.rows([3]), k, known=True),
        )
        # refused: an estimate without them, or with another batch's
        with pytest.raises(ValueError, match="known_bins"):
            fast.equalize(xd, fast.estimate(x), k, known=True)
        with pytest.raises(ValueError, match="known_bins must be"):
            fast.refine_estimate(None, est.rows([0, 1]), hdr, known=True)


def test_frames_of_another_numerology():
    cfg = OfdmConfig(fft_size=128, cp_len=32, used_half=52, pilots=(-43, -15, 15, 43))
    rx = OfdmReceiver(cfg)
    fast = CompiledReceiver(rx)
    fb = FrameBuilder(cfg)
    frames, _, _ = make_frames(fb, np.random.default_rng(2), 3, 300)
    n = cfg.lts_len + (cfg.header_symbols + cfg.payload_symbols(300)) * cfg.symbol_len
    x = torch.from_numpy(np.array([f[cfg.sts_len : cfg.sts_len + n] for f in frames]))
    x = x * 0.8 + 0.01 * torch.randn(x.shape, dtype=torch.complex64)
    with torch.inference_mode():
        _same(rx(x, 300), fast(x, 300))


@pytest.mark.parametrize("n", [2, 4, 8, 16, 32, 64, 128, 256, 1024])
def test_fft_is_numpys(n):
    rng = np.random.default_rng(n)
    x = rng.normal(size=n) + 1j * rng.normal(size=n)
    out = np.empty(n, np.complex128)
    _fft(x.copy(), *_fft_tables(n), out)  # its input is overwritten
    np.testing.assert_allclose(out, np.fft.fft(x, norm="ortho"), atol=1e-12)


def test_cut_derotates_as_the_phase_ramp_does():
    rng = np.random.default_rng(1)
    buf = (rng.normal(size=5000) + 1j * rng.normal(size=5000)).astype(np.complex64)
    fast = CompiledReceiver(OfdmReceiver(CFG))
    starts = np.array([0, 17, 4000 - 130])
    cfo = np.array([0.0, 1.3e-3, -0.021])
    got = fast.cut(buf, starts, 1000, cfo)
    want = np.stack([buf[s : s + 1000] for s in starts])
    want = want * phase_ramp(torch.from_numpy(-cfo), 1000).numpy()
    assert got.dtype == torch.complex64 and got.shape == (3, 1000)
    np.testing.assert_allclose(got.numpy(), want, atol=1e-5)
    for first in (1, 63, 64, 65, 999, 1000, 2000):  # the head left zero, the rest the same
        part = fast.cut(buf, starts, 1000, cfo, first).numpy()
        assert not part[:, :first].any()
        np.testing.assert_array_equal(part[:, first:], got.numpy()[:, first:])


def test_bad_input_is_refused_as_the_torch_receiver_refuses_it():
    fast = CompiledReceiver(OfdmReceiver(CFG))
    x = _frames(48, 2, 20.0)
    with pytest.raises(ValueError, match="frame needs"):
        fast(x[:, :-1], 48)
    with pytest.raises(ValueError, match="complex"):
        fast(x.real, 48)
    with pytest.raises(ValueError, match="complex"):
        fast(x[0], 48)
    with pytest.raises(ValueError, match="header must be"):
        fast.refine_estimate(x, fast.estimate(x), torch.ones(2, 3, CFG.n_data))
    with pytest.raises(ValueError, match="estimate of shape"):
        fast.equalize(x, fast.estimate(x[:1]), 48)
    with pytest.raises(TypeError, match="OfdmReceiver"):
        CompiledReceiver(object())


class _Subclass(OfdmReceiver):
    pass


def test_the_stream_receives_the_same_frames_either_way():
    """A stream of frames at 6 dB through multipath and CFO, in odd chunks: the compiled path
    (the default) and the torch module give the same events; a receiver of another class
    runs as the torch module."""
    rng = np.random.default_rng(12)
    frames, headers, _ = make_frames(FB, rng, 12, 300)
    x, starts = make_stream(frames, rng)
    y = impair(x, snr_db=6.0, cfo_hz=2500.0, taps=[1.0, 0.4j], delays=[0, 5], seed=4)
    fast = FrameReceiver(CFG)
    slow = FrameReceiver(CFG, compiled=False)
    assert isinstance(fast.path, CompiledReceiver) and slow.path is slow.rx
    sub = FrameReceiver(CFG, receiver=_Subclass(CFG))
    assert isinstance(sub.path, _Subclass)
    e1, e2 = run_receiver(fast, y, 7919), run_receiver(slow, y, 7919)
    assert [e.status for e in e1] == [e.status for e in e2] == ["ok"] * 12
    assert [e.frame_start for e in e1] == [e.frame_start for e in e2] == starts
    assert [e.header for e in e1] == [e.header for e in e2] == headers
    for a, b in zip(e1, e2, strict=True):
        np.testing.assert_allclose(a.symbols, b.symbols, atol=2e-5 * np.abs(b.symbols).max())
        np.testing.assert_allclose(a.symbol_gain, b.symbol_gain, rtol=1e-4)
        assert a.snr_db == pytest.approx(b.snr_db, abs=1e-4)
        assert a.cfo_hz == pytest.approx(b.cfo_hz, abs=1e-3)
        assert a.evm_pilots == pytest.approx(b.evm_pilots, rel=1e-4)


def test_warm_up_reads_a_frame_in_each_numerology():
    warm_up()
    warm_up(OfdmConfig(fft_size=128, cp_len=32, used_half=52, pilots=(-43, -15, 15, 43)))


def test_the_tables_kept_per_frame_length_stay_bounded():
    fast = CompiledReceiver(OfdmReceiver(CFG))
    for k in range(1, 3 * CompiledReceiver.CACHED):
        fast._descr(k)
        fast._pv(k)
    assert len(fast._descramble) <= CompiledReceiver.CACHED
    assert len(fast._pilots) <= CompiledReceiver.CACHED
    np.testing.assert_array_equal(fast._descr(5), np.conj(payload_phases(5)))
