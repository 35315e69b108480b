"""Streaming receiver under injected impairments: exact frame counts, estimates within tolerance."""

import numpy as np
import pytest

from hil.phy import FrameBuilder, FrameReceiver, OfdmConfig
from hil.phy.sequences import lts_time_symbol, sts_time
from hil.phy.sync import StreamSync

from .helpers import impair, make_frames, make_stream, run_receiver

CFG = OfdmConfig()
FB = FrameBuilder(CFG)
FB_STS = sts_time(CFG)


def _check(events, starts, headers, *, cfo_hz=None, cfo_tol=2e3, timing_tol=0):
    ok = [e for e in events if e.status == "ok"]
    assert len(events) == len(starts), [(e.status, e.frame_start, e.error) for e in events]
    assert [e.header for e in ok] == headers
    for e, s in zip(ok, starts, strict=True):
        assert abs(e.frame_start - s) <= timing_tol, (e.frame_start, s)
        if cfo_hz is not None:
            assert abs(e.cfo_hz - cfo_hz) < cfo_tol, (e.cfo_hz, cfo_hz)


@pytest.mark.parametrize("cfo_hz", [-120e3, -96e3, -40e3, -1e3, 0.0, 15e3, 62.5e3, 96e3, 120e3])
def test_cfo_across_acquisition_range(cfo_hz, rng):
    frames, headers, _ = make_frames(FB, rng, 4)
    x, starts = make_stream(frames, rng)
    y = impair(x, snr_db=15, cfo_hz=cfo_hz, seed=1)
    ev = run_receiver(FrameReceiver(CFG), y, 4096)
    # fine CFO from two 64-sample symbols: std ~160 Hz at 15 dB; 5 sigma per frame
    _check(ev, starts, headers, cfo_hz=cfo_hz, cfo_tol=800.0)
    assert abs(np.mean([e.cfo_hz for e in ev]) - cfo_hz) < 400.0


@pytest.mark.parametrize("lead", [0, 1, 17, 4095, 4096, 10_001])
def test_timing_offsets_anywhere(lead, rng):
    frames, headers, _ = make_frames(FB, rng, 3)
    x, starts = make_stream(frames, rng, lead=lead)
    y = impair(x, snr_db=20, cfo_hz=3e3, seed=2)
    ev = run_receiver(FrameReceiver(CFG), y, 4096)
    _check(ev, starts, headers)


@pytest.mark.parametrize("delay", [0.3, 0.5, 0.77])
def test_fractional_timing(delay, rng):
    frames, headers, _ = make_frames(FB, rng, 3)
    x, starts = make_stream(frames, rng)
    y = impair(x, snr_db=20, delay=delay, seed=3)
    ev = run_receiver(FrameReceiver(CFG), y, 3000)
    _check(ev, starts, headers, timing_tol=1)


@pytest.mark.parametrize("chunk", [1, 7, 64, 999, 1 << 16])
def test_frames_straddling_chunk_boundaries(chunk, rng):
    frames, headers, _ = make_frames(FB, rng, 3, k=100)
    x, starts = make_stream(frames, rng, gap=(100, 400))
    y = impair(x, snr_db=20, cfo_hz=-20e3, seed=4)
    ev = run_receiver(FrameReceiver(CFG), y, chunk)
    _check(ev, starts, headers, cfo_hz=-20e3, cfo_tol=500.0)


def test_back_to_back_frames(rng):
    frames, headers, _ = make_frames(FB, rng, 8)
    x, starts = make_stream(frames, rng, gap=(0, 1), lead=500)
    y = impair(x, snr_db=15, cfo_hz=30e3, seed=5)
    ev = run_receiver(FrameReceiver(CFG), y, 5000)
    _check(ev, starts, headers, cfo_hz=30e3)


@pytest.mark.parametrize(
    ("taps", "delays"),
    [
        ([0.8, 0.5j, -0.3], [0, 3, 9]),
        ([0.4, 0.9, 0.2 - 0.2j], [0, 2, 11]),  # strongest path not first
        ([1.0, 0.0, 0.7], [0, 5, 12]),  # echo within the CP
    ],
)
def test_multipath_within_cp(taps, delays, rng):
    frames, headers, payloads = make_frames(FB, rng, 4)
    x, starts = make_stream(frames, rng)
    y = impair(x, snr_db=25, cfo_hz=10e3, taps=taps, delays=delays, seed=6)
    ev = run_receiver(FrameReceiver(CFG), y, 4096)
    _check(ev, starts, headers, cfo_hz=10e3, timing_tol=12)
    for e, s in zip(ev, payloads, strict=True):
        # equalised symbols close to the sent ones: EVM well under the SNR floor
        mse = np.mean(np.abs(e.symbols - s) ** 2)
        assert mse < 0.05, mse


@pytest.mark.parametrize("snr_db", [5, 10, 20, 30])
def test_snr_estimate_in_stream(snr_db, rng):
    frames, headers, _ = make_frames(FB, rng, 10)
    x, starts = make_stream(frames, rng)
    y = impair(x, snr_db=snr_db, cfo_hz=5e3, seed=7)
    ev = run_receiver(FrameReceiver(CFG), y, 8192)
    _check(ev, starts, headers)
    est = np.mean([e.snr_db for e in ev])
    # per-frame estimate from 2 x 52 noise samples: mean over 10 frames within 1 dB
    assert abs(est - snr_db) < 1.0, est


def test_pure_noise_no_false_alarms(rng):
    """2e7 noise samples: some autocorrelation windows pass the (low) threshold, about 50
    at 0.1, and the long-training gate rejects every one (bench_phy.py prints the curve
    on 1e8 samples)."""
    rx = FrameReceiver(CFG)
    ev = []
    for _ in range(20):
        z = rng.normal(size=1_000_000) + 1j * rng.normal(size=1_000_000)
        ev += run_receiver(rx, (z / np.sqrt(2)).astype(np.complex64), 1 << 16)
    assert ev == [] and rx.stats.detections == 0
    assert rx.stats.rejected > 10  # the gate was tried, not only the threshold


@pytest.mark.parametrize("snr_db,least", [(0.0, 0.95), (-1.0, 0.78), (-2.0, 0.27)])
def test_frames_delivered_at_and_below_0_db(snr_db, least, rng):
    """Frames found and headers read at the SNR where the JSCC still gives a picture: 200
    frames through AWGN with a CFO, per-sample SNR. Measured (bench_phy.py, 2000 frames, list
    Viterbi header decoding): 99.15 % at 0 dB, 89.1 % at -1 dB, 43.4 % at -2 dB; the bounds
    sit about 5 binomial standard deviations below (plain Viterbi: 95.6, 70.4, 21.8 %)."""
    got = 0
    for b in range(4):
        frames, headers, _ = make_frames(FB, rng, 50, k=96)
        x, starts = make_stream(frames, rng, gap=(300, 1500))
        y = impair(x, snr_db=snr_db, cfo_hz=float(rng.uniform(-96e3, 96e3)), seed=b)
        ev = run_receiver(FrameReceiver(CFG), y, 1 << 14)
        truth = dict(zip(starts, headers, strict=True))
        got += sum(
            1
            for e in ev
            if e.status == "ok"
            and any(abs(e.frame_start - s) <= 2 and truth[s] == e.header for s in truth)
        )
    assert got >= least * 200, got


def test_header_list_is_checked():
    assert FrameReceiver(CFG).header_list == 64
    assert FrameReceiver(CFG, header_list=1).header_list == 1
    for bad in (0, 65):
        with pytest.raises(ValueError, match="header_list"):
            FrameReceiver(CFG, header_list=bad)


def test_tone_and_dc_are_rejected(rng):
    n = np.arange(200_000)
    x = (0.5 + 0.3 * np.exp(2j * np.pi * 0.01 * n)).astype(np.complex64)
    x += ((rng.normal(size=len(n)) + 1j * rng.normal(size=len(n))) * 0.05).astype(np.complex64)
    rx = FrameReceiver(CFG)
    assert run_receiver(rx, x, 10_000) == []
    assert rx.stats.frames == 0


def test_corrupted_header_reported_not_raised(rng):
    frames, _headers, _ = make_frames(FB, rng, 3)
    f = frames[1].copy()
    a = CFG.preamble_len
    noise = rng.normal(size=(CFG.header_len, 2)) @ np.array([1, 1j]) * 3.0
    f[a : a + CFG.header_len] += noise.astype(np.complex64)  # header at about -10 dB SNR
    x, _starts = make_stream([frames[0], f, frames[2]], rng)
    y = impair(x, snr_db=25, seed=8)
    rx = FrameReceiver(CFG)
    ev = run_receiver(rx, y, 4096)
    assert [e.status for e in ev] == ["ok", "header_error", "ok"]
    assert "CRC" in ev[1].error or "version" in ev[1].error
    assert rx.stats.header_errors == 1


def test_nonfinite_samples_counted(rng):
    frames, _headers, _ = make_frames(FB, rng, 2)
    x, _starts = make_stream(frames, rng)
    y = impair(x, snr_db=20, seed=9)
    y[5] = np.nan
    rx = FrameReceiver(CFG)
    ev = run_receiver(rx, y, 4096)
    assert rx.stats.nonfinite == 1 and len(ev) == 2


def test_bad_push_arguments():
    rx = FrameReceiver(CFG)
    with pytest.raises(TypeError, match="complex64"):
        rx.push(np.zeros(10, np.float32))
    with pytest.raises(ValueError, match="1-D"):
        rx.push(np.zeros((2, 10), np.complex64))


@pytest.mark.parametrize("cfo_hz", [-37e3, 23e3])
def test_detector_cfo_estimate_against_truth(cfo_hz):
    """The detector's own estimate (coarse from the STS + fine from the LTS), not the total
    the receive path corrects afterwards: at 30 dB its RMS error over 24 frames is about
    35-40 Hz; a fine estimate with the wrong sign doubles the coarse error (about 90 Hz)
    while the receive path's residual estimate still hides it in the total."""
    rng = np.random.default_rng(3)
    frames, headers, _ = make_frames(FB, rng, 24)
    x, starts = make_stream(frames, rng)
    ev = run_receiver(FrameReceiver(CFG), impair(x, snr_db=30, cfo_hz=cfo_hz, seed=5), 4096)
    _check(ev, starts, headers)  # every frame, at its exact start
    err = np.array([e.detector_cfo_hz for e in ev]) - cfo_hz
    assert np.sqrt(np.mean(err**2)) < 55.0, err
    assert abs(err.mean()) < 25.0


# --- StreamSync against its definition, by brute force (mutation testing, docs/mutation.md)


def test_thresholds_defaults_and_limits():
    s = StreamSync(CFG)
    assert (s.threshold, s.lts_threshold, s.last_captured) == (0.1, 0.35, 0.0)
    assert (s.L, s.W, s.search) == (16, 6, 64)
    StreamSync(CFG, threshold=0.999, lts_threshold=0.0)
    for t, lt in ((0.0, 0.35), (1.0, 0.35), (0.3, 1.0), (0.3, -0.01), (1.5, 0.35), (0.3, 1.5)):
        with pytest.raises(ValueError) as e:
            StreamSync(CFG, threshold=t, lts_threshold=lt)
        assert str(e.value) == "thresholds must lie in (0, 1)"


def _ref_metric(r, L=16, W=6):
    """M and P of every window by their definition, one window at a time, in float64."""
    r = r.astype(np.complex128)
    out_m, out_p = [], []
    for b in range((len(r) - L) // L - W + 1):
        n = np.arange(b * L, (b + W) * L)
        p = np.sum(np.conj(r[n]) * r[n + L])
        e = np.sum(0.5 * (np.abs(r[n]) ** 2 + np.abs(r[n + L]) ** 2))
        out_m.append(abs(p) ** 2 / max(e * e, 1e-30))
        out_p.append(p)
    return np.array(out_m), np.array(out_p)


def test_metric_is_its_definition_exactly():
    """Integer-valued samples up to 1000: every product and sum is exact in float64 and block
    sums exceed float32's 24-bit mantissa, so the sums' precision is tested too; a
    small-amplitude stream checks the energy floor."""
    s = StreamSync(CFG)
    rng = np.random.default_rng(0)
    r = (rng.integers(-1000, 1001, 300) + 1j * rng.integers(-1000, 1001, 300)).astype(np.complex64)
    # (scaled, the complex64 products round: float32 precision)
    for x, tol in ((r, 1e-12), ((r * 1e-6).astype(np.complex64), 1e-5)):
        m, p = s.metric(x)
        rm, rp = _ref_metric(x)
        assert m.dtype == np.float64 and p.dtype == np.complex128 and len(m) == len(rm) == 12
        np.testing.assert_allclose(m, rm, rtol=tol)
        np.testing.assert_allclose(p, rp, rtol=tol)
    # the plateau of a clean STS: exactly 1 for the 4 windows inside it (W = repeats - 4)
    m, _ = s.metric(np.r_[FB_STS, np.zeros(64, np.complex64)])
    assert np.all(np.abs(m[:4] - 1) < 1e-6) and m[4] < 0.99
    # shorter than one window: both empty; one window: one value
    for n, k in ((7 * 16 - 1, 0), (7 * 16, 1)):
        m, p = s.metric(r[:n])
        assert len(m) == len(p) == k and p.dtype == np.complex128


def _one_frame(seed: int, lead: int = 80, tail: int = 200, fb: FrameBuilder = FB) -> np.ndarray:
    """One frame (make_frames with default_rng(seed)) between lead and tail zeros, complex64."""
    frames, _, _ = make_frames(fb, np.random.default_rng(seed), 1)
    return np.r_[np.zeros(lead, np.complex64), frames[0], np.zeros(tail, np.complex64)]


def _one_frame_at_400():
    return impair(_one_frame(9, lead=400, tail=400), snr_db=20, cfo_hz=2e3, seed=6)


def _ref_refine(r, r0, pos, p, c=CFG):
    """Fine timing and CFO by the module docstring, one lag at a time."""
    L = c.sts_period
    coarse = np.angle(p) / (2 * np.pi * L)
    t_pred = pos - ((c.sts_repeats - 1 - 6) * L) // 2 + c.sts_len + c.lts_cp
    sym = lts_time_symbol(c).astype(np.complex128)
    n_fft = c.fft_size
    energy = 2 * np.sum(np.abs(sym) ** 2)
    lags = np.arange(t_pred - 4 * L, t_pred + 4 * L + 1)
    rho, segs = [], []
    for t in lags:
        k = np.arange(t, t + 2 * n_fft)
        x = r[k].astype(np.complex128) * np.exp(-2j * np.pi * coarse * k)
        c1, c2 = np.vdot(sym, x[:n_fft]), np.vdot(sym, x[n_fft:])
        rho.append((abs(c1) + abs(c2)) ** 2 / (np.sum(np.abs(x) ** 2) * energy))
        segs.append(x)
    rho = np.array(rho)
    i = int(np.argmax(rho))
    w = rho[max(i - c.cp_len, 0) : i + c.cp_len + 1]
    captured = float(np.sum(np.maximum(w - np.median(rho), 0)))
    x = segs[i]
    fine = np.angle(np.vdot(x[:n_fft], x[n_fft:])) / (2 * np.pi * n_fft)
    return captured, int(lags[i]) - c.lts_cp, coarse + fine


@pytest.mark.parametrize(("cfo", "scale", "snr_db"), [(0.004, 1.0, 12), (-0.011, 1e-3, 6)])
def test_refine_is_its_definition(cfo, scale, snr_db):
    """A frame at sample 80 of r (r0 = 5000) with CFO and noise: timing, CFO and the captured
    LTS energy equal the brute-force computation; the detection is found exactly when r holds
    needed_after samples, not one fewer."""
    x = _one_frame(7)
    y = impair(x, snr_db=snr_db, cfo_hz=cfo * 4e6, seed=3) * np.float32(scale)
    s = StreamSync(CFG)
    m, p = s.metric(y)
    pos = 6 * 16  # a window on the plateau (windows 5..8 lie inside the STS)
    assert m[6] > 0.5
    captured, lts, cfo_ref = _ref_refine(y, 5000, pos, p[6])
    need = s.needed_after(pos)
    # needed_after has one sample of slack: refine needs need - 1 samples, not need - 2
    assert s.refine(y[: need - 2], 5000, pos, complex(p[6])) is None
    det = s.refine(y[:need], 5000, pos, complex(p[6]))
    assert det is not None
    assert det.lts_metric == s.last_captured and det.lts_metric == pytest.approx(captured, rel=1e-9)
    assert det.lts_start == 5000 + lts and det.frame_start == det.lts_start - 160
    assert det.frame_start == 5080
    assert det.cfo_norm == pytest.approx(cfo_ref, rel=1e-9, abs=1e-12)
    assert abs(det.cfo_norm - cfo) < 2e-4


def test_refine_rejects_noise_and_remembers_what_it_captured():
    rng = np.random.default_rng(11)
    y = ((rng.normal(size=2000) + 1j * rng.normal(size=2000)) / np.sqrt(2)).astype(np.complex64)
    s = StreamSync(CFG)
    _, p = s.metric(y)
    captured, _, _ = _ref_refine(y, 0, 400, p[25])
    assert captured < 0.35
    assert s.refine(y, 0, 400, complex(p[25])) is None
    assert s.last_captured == pytest.approx(captured, rel=1e-9)


@pytest.mark.parametrize(("delay", "inside"), [(16, True), (17, False)])
def test_lts_energy_is_gathered_within_cp_len_of_the_peak(delay, inside):
    """Two equal paths: the echo at cp_len counts toward the captured energy, one sample later
    it does not."""
    x = _one_frame(5)
    y = (x + np.roll(x, delay)) / np.sqrt(2)
    s = StreamSync(CFG)
    _, p = s.metric(y)
    det = s.refine(y, 0, 96, complex(p[6]))
    captured, _, _ = _ref_refine(y, 0, 96, p[6])
    assert det.lts_metric == pytest.approx(captured, rel=1e-9)
    assert (det.lts_metric > 0.75) == inside, det.lts_metric


def test_refine_with_a_128_point_fft():
    """Another numerology (128-point FFT, search window no longer 4 symbols of the LTS): the
    second LTS half is still the one right after the first."""
    cfg = OfdmConfig(fft_size=128, cp_len=32)
    fb = FrameBuilder(cfg)
    x = _one_frame(2, tail=400, fb=fb)
    y = impair(x, snr_db=15, cfo_hz=8e3, seed=4)
    s = StreamSync(cfg)
    m, p = s.metric(y)
    assert m[6] > 0.5
    det = s.refine(y, 0, 96, complex(p[6]))
    captured, lts, cfo_ref = _ref_refine(y, 0, 96, p[6], cfg)
    assert det.frame_start == 80 and det.lts_start == lts
    assert det.lts_metric == pytest.approx(captured, rel=1e-9)
    assert det.cfo_norm == pytest.approx(cfo_ref, rel=1e-9)


@pytest.mark.parametrize("blocks_off", [-7, -6, -5, 5, 6, 7])
def test_refine_from_a_plateau_estimate_more_than_the_search_off(blocks_off):
    """The STS plateau placed 5-7 blocks (80-112 samples) early or late, beyond the +-64-lag
    search: the window then holds a half-aligned LTS peak one period (64 samples) from the
    true one, and refine moves to the true one (before: frames found 64 samples off, their
    headers lost). A quiet gap before a frame stretches the plateau early in just this way."""
    y = _one_frame_at_400()
    s = StreamSync(CFG)
    _, p = s.metric(y)
    right = 400 + 16 * 1  # a window on the plateau: its middle lies 16 samples later
    pos = right + 16 * blocks_off
    det = s.refine(y, 0, pos, complex(p[right // 16]))
    assert det is not None and det.frame_start == 400, det


def test_dense_frames_with_quiet_gaps_all_found_on_time(rng):
    """Frames 120 samples apart at 20 dB: a stray above-threshold window in the previous
    frame's last symbols used to place the plateau too early (1.4 % of such frames lost)."""
    frames, headers, _ = make_frames(FB, rng, 150, k=480)
    x, starts = make_stream(frames, rng, gap=(120, 121), lead=300)
    y = impair(x, snr_db=20, cfo_hz=10e3, seed=8)
    ev = run_receiver(FrameReceiver(CFG), y, 65536)
    _check(ev, starts, headers, cfo_hz=10e3)


def test_refine_moves_a_period_at_both_edges_of_its_window():
    """The plateau estimate d samples off (t_pred - true LTS lag): within the +-64-lag window
    the peak is found; up to one period (64 lags) beyond either end the window holds the
    half-aligned peak and refine moves to the true one, down to the first lag it scores
    (d = 128: one period before the window's first lag) and from the first lag past its end
    (d = -65). The gate is lowered so the half-aligned peaks at the window's very edges pass
    it (0.29 captured at d = 128), and the captured energy is the true peak's wherever the
    search started."""
    y = _one_frame_at_400()
    s = StreamSync(CFG, lts_threshold=0.2)
    _, p = s.metric(y)
    pos0 = 400 + ((CFG.sts_repeats - 1 - s.W) * s.L) // 2  # t_pred on the true lag
    centred = s.refine(y, 0, pos0, complex(p[26]))
    assert centred.frame_start == 400
    for d in (128, 127, 65, 64, 1, -1, -64, -65, -127, -128):
        det = s.refine(y, 0, pos0 + d, complex(p[26]))
        assert det is not None and det.frame_start == 400, d
        assert det.lts_metric == pytest.approx(centred.lts_metric, rel=0.2), d
        assert det.cfo_norm == pytest.approx(centred.cfo_norm, abs=1e-9), d
    for d in (130, -130):  # more than a period beyond the window: nothing there to move to
        det = s.refine(y, 0, pos0 + d, complex(p[26]))
        assert det is None or det.frame_start != 400


def test_refine_gate_threshold_is_inclusive_and_leaves_the_sc_metric_to_its_caller():
    y = _one_frame_at_400()
    s = StreamSync(CFG)
    _, p = s.metric(y)
    det = s.refine(y, 0, 424, complex(p[26]))
    assert det.sc_metric == 0.0  # the stream fills in the Schmidl-Cox metric it found
    s.lts_threshold = det.lts_metric  # exactly at the gate: accepted
    assert s.refine(y, 0, 424, complex(p[26])) is not None
    s.lts_threshold = np.nextafter(det.lts_metric, np.inf)
    assert s.refine(y, 0, 424, complex(p[26])) is None
    # a strong autocorrelation metric lowers the gate to weak_lts, inclusively at both ends
    s.weak_lts = det.lts_metric
    assert s.refine(y, 0, 424, complex(p[26]), s.strong_sc) is not None
    assert s.refine(y, 0, 424, complex(p[26]), np.nextafter(s.strong_sc, 0)) is None
    from hil.phy.sync import WEAK_SC_MAX

    assert s.refine(y, 0, 424, complex(p[26]), np.nextafter(WEAK_SC_MAX, 0)) is not None
    assert s.refine(y, 0, 424, complex(p[26]), WEAK_SC_MAX) is None  # a constant or a tone
    s.weak_lts = np.nextafter(det.lts_metric, np.inf)
    assert s.refine(y, 0, 424, complex(p[26]), 0.5) is None


def test_weak_gate_settings_are_checked():
    assert (StreamSync(CFG).strong_sc, StreamSync(CFG).weak_lts) == (0.15, 0.25)
    assert StreamSync(CFG, lts_threshold=0.2).weak_lts == 0.2
    assert StreamSync(CFG, threshold=0.3).strong_sc == 0.3
    assert StreamSync(CFG, strong_sc=1.0).strong_sc == 1.0  # the metric's top: no weak gate above
    for kw in ({"strong_sc": 0.05}, {"strong_sc": 1.5}, {"weak_lts": 0.4}, {"weak_lts": -0.1}):
        with pytest.raises(ValueError, match="strong_sc"):
            StreamSync(CFG, **kw)


def test_refine_at_the_start_of_the_buffer():
    """r starting exactly at the first long training symbol (a frame cut by the buffer), the
    plateau estimate placing it 10 samples before r: the search window, clipped at r's first
    sample, still holds lag 0 (and not the half-aligned peak at lag 64 to move from)."""
    y = _one_frame_at_400()
    s = StreamSync(CFG)
    _, p = s.metric(y)
    first = 400 + CFG.sts_len + CFG.lts_cp  # the first long symbol
    r = y[first:]
    pos = -CFG.sts_len - CFG.lts_cp + ((CFG.sts_repeats - 1 - s.W) * s.L) // 2 - 10
    det = s.refine(r, 1000, pos, complex(p[26]))
    assert det is not None and det.lts_start == 1000 - CFG.lts_cp
    assert det.frame_start == 1000 - CFG.lts_cp - CFG.sts_len


def test_refine_helpers_equal_their_numpy_definitions():
    from hil.phy.sync import _captured, _lts_scores

    rng = np.random.default_rng(0)
    # the compiled long-training search against its numpy definition: the samples derotated
    # by the coarse CFO (phase counted from the absolute index), correlated with the first
    # long symbol ("valid"), the two symbols' magnitudes added, squared, over the energy
    n, f, start = 64, -3e-3, 1234
    l1 = lts_time_symbol(CFG).astype(np.complex128)
    seg = (rng.normal(size=450) + 1j * rng.normal(size=450)).astype(np.complex64)
    rot, rho = _lts_scores(seg, start, -f, l1, 2 * float(np.sum(np.abs(l1) ** 2)), n)
    want = seg.astype(np.complex128) * np.exp(2j * np.pi * f * (start + np.arange(450)))
    np.testing.assert_allclose(rot, want, atol=1e-12)
    c1 = np.abs(np.correlate(want, l1, mode="valid"))
    e1 = np.convolve(np.abs(want) ** 2, np.ones(n), "valid")
    k = len(c1) - n
    ref = (c1[:k] + c1[n:]) ** 2 / ((e1[:k] + e1[n:]) * 2 * np.sum(np.abs(l1) ** 2))
    assert len(rho) == k == 450 - 2 * n + 1
    np.testing.assert_allclose(rho, ref, rtol=1e-10)
    # captured energy: the lags within +-half of i, clipped to [first, end), above the floor
    v = rng.random(100)
    for i, first, end in ((50, 0, 100), (3, 2, 100), (97, 0, 90), (10, 0, 100)):
        lo, hi = max(i - 16, first), min(i + 17, end)
        want = float(np.clip(v[lo:hi] - 0.4, 0, None).sum())
        assert _captured(v, i, first, end, 16, 0.4) == pytest.approx(want, rel=1e-12)


def test_metric_and_refine_take_real_and_either_complex_precision():
    """The compiled kernels read complex64, complex128 and real samples alike (real ones as
    complex128): the same metric and the same detection from each."""
    x = _one_frame(21)
    y = impair(x, snr_db=15.0, cfo_hz=0.0, seed=4)
    s = StreamSync(CFG)
    m, p = s.metric(y)
    m128, p128 = s.metric(y.astype(np.complex128))
    np.testing.assert_array_equal(m, m128)
    np.testing.assert_array_equal(p, p128)
    re = y.real.astype(np.float64)
    m_re, p_re = s.metric(re)
    m_c, p_c = s.metric(re.astype(np.complex128))
    np.testing.assert_array_equal(m_re, m_c)
    np.testing.assert_array_equal(p_re, p_c)
    d = s.refine(y, 0, 96, complex(p[6]))
    d128 = s.refine(y.astype(np.complex128), 0, 96, complex(p[6]))
    assert d is not None and d == d128
    d_re = s.refine(re, 0, 96, complex(p_re[6]), float(m_re[6]))
    assert d_re == s.refine(re.astype(np.complex128), 0, 96, complex(p_c[6]), float(m_c[6]))
