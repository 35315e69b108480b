#!/usr/bin/env python3
"""PHY figures: frame overhead, detection and header success vs SNR (AWGN and the
two-Pluto profile), header code comparison, payload MSE vs the perfect-CSI
equaliser, PAPR clipping, receiver throughput.

Usage:
    python scripts/bench_phy.py            # everything (a few minutes on 2 cores)
    python scripts/bench_phy.py --quick    # fewer frames
    python scripts/bench_phy.py --only overhead,detection,header,mse,papr,throughput
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch

from hil.apps.common import cpu_threads
from hil.channel import ChannelChain, profile
from hil.phy import (
    MAX_PAYLOAD,
    FrameBuilder,
    FrameReceiver,
    Header,
    HeaderError,
    OfdmConfig,
    OfdmReceiver,
    to_full_scale,
)
from hil.phy.coding import (
    conv_encode,
    list_viterbi_decode,
    repetition_decode,
    repetition_encode,
    viterbi_decode,
)
from hil.phy.header import HEADER_LEN, HEADER_LIST, decode_header_bits, encode_header_bits
from hil.phy.ofdm import demodulate
from hil.phy.sequences import payload_phases
from hil.phy.stream import warm_up
from hil.phy.sync import WEAK_SC_MAX

CFG = OfdmConfig()
FB = FrameBuilder(CFG)
FP = b"benchphy"


def _payload(rng, k):
    return ((rng.normal(size=k) + 1j * rng.normal(size=k)) / math.sqrt(2)).astype(np.complex64)


def _stream(rng, n_frames, k, gap=(300, 1500)):
    parts, truth = [np.zeros(int(rng.integers(*gap)), np.complex64)], []
    pos = len(parts[0])
    for i in range(n_frames):
        h = Header(seq=i, item_id=i, fingerprint=FP, payload_len=k, shape=(3, 8, 8))
        f = FB.build_numpy(_payload(rng, k), h)
        truth.append((pos, h))
        g = int(rng.integers(*gap))
        parts += [f, np.zeros(g, np.complex64)]
        pos += len(f) + g
    return np.concatenate(parts), truth


def _impair(x, snr_db, cfo_hz, delay, seed):
    chain = ChannelChain.from_tables(
        [
            {"kind": "timing", "half_width": 8},
            {"kind": "cfo", "sample_rate_hz": CFG.sample_rate_hz},
            {"kind": "awgn"},
        ]
    )
    vals = {"timing": {"delay": delay}, "cfo": {"cfo_hz": cfo_hz}}
    y = chain(
        torch.from_numpy(x)[None],
        snr_db=snr_db,
        generator=torch.Generator().manual_seed(seed),
        values=vals,
    )
    return y.y[0].numpy()


def _impair_two_pluto(x, snr_db, delay, seed):
    """The two-Pluto profile (PA, 8-tap multipath, CFO within +-3 kHz, phase noise, IQ
    imbalance, 12-bit ADC) after a fractional delay: one channel draw per call. Returns the
    samples and the draw's SNR in dB: the nominal one plus the multipath taps' energy (Rayleigh
    taps of unit mean energy: a draw fades the whole frame by a few dB, or lifts it)."""
    chain = ChannelChain.from_tables(
        [{"kind": "timing", "half_width": 8}, *profile("two_pluto", CFG.sample_rate_hz)]
    )
    y = chain(
        torch.from_numpy(x)[None],
        snr_db=snr_db,
        generator=torch.Generator().manual_seed(seed),
        values={"timing": {"delay": delay}},
    )
    energy = float((y.record["multipath"]["taps"].abs() ** 2).sum())
    return y.y[0].numpy(), snr_db + 10 * math.log10(energy)


def _decoder(header_list: int, prior: bool = True) -> str:
    d = "plain Viterbi" if header_list == 1 else f"list Viterbi, {header_list} paths"
    return d + (", then held to the receiver's prior" if prior else ", no prior")


def _receiver(header_list: int, prior: bool) -> FrameReceiver:
    """The stream receiver as hil rx runs it: expecting the model fingerprint the frames carry
    (prior on), or knowing nothing of the headers (prior off)."""
    return FrameReceiver(
        CFG, header_list=header_list, fingerprint=FP if prior else None, header_prior=prior
    )


_RECEIVER = {
    True: "one receiver for the whole stream, as hil rx runs it",
    False: "a fresh receiver for every draw (each draw's first frame read cold)",
}


def detection_two_pluto(
    n_frames: int,
    snrs,
    seed=7,
    per_draw=10,
    header_list=HEADER_LIST,
    prior: bool = True,
    warm: bool = True,
):
    """Frames delivered on the two-Pluto profile, against the nominal SNR and the SNR the
    receiver estimates per frame (the figure a bench sees). A frame counts as found within
    12 samples after its start: the receiver's start follows the multipath's strong taps."""
    print(
        f"\n## Detection and header success vs SNR, two-Pluto profile ({n_frames} frames per "
        f"SNR, a new multipath/CFO/phase-noise draw every {per_draw} frames; "
        f"{_RECEIVER[warm]}; header: {_decoder(header_list, prior)})\n"
    )
    print(
        "| SNR (dB) | detected | header ok | false alarms | estimated SNR of the frames detected, "
        "median (dB) | header ok, frames estimated <= 0 dB |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(seed)
    frames = []  # (SNR of the draw, detected, header ok, the receiver's SNR estimate, draw)
    n_draws = 0
    for snr in snrs:
        det = ok = fa = 0
        est, low_ok, low_n = [], 0, 0
        # warm: one receiver for the whole stream, as hil rx runs it (its header prior
        # carries over from frame to frame), the channel redrawn every per_draw frames
        # between two frames; cold: a fresh receiver for every draw
        rx, off = _receiver(header_list, prior), 0  # off: where rx's sample 0 lies
        starts, evs = {}, []  # frame start -> (header, SNR of its draw); (start, event)
        for b in range(0, n_frames, per_draw):
            nb = min(per_draw, n_frames - b)
            x, truth = _stream(rng, nb, 96)
            y, draw_snr = _impair_two_pluto(
                x, snr, float(rng.uniform(0, 1)), int(rng.integers(1 << 30))
            )
            if not warm and b:
                evs += [(off + e.frame_start, e) for e in _flush(rx)]
                rx, off = _receiver(header_list, prior), off + rx.position
            at = off + rx.position
            for i in range(0, len(y), 1 << 14):
                evs += [(off + e.frame_start, e) for e in rx.push(y[i : i + (1 << 14)])]
            starts.update({at + s: (h, draw_snr, n_draws) for s, h in truth})
            n_draws += 1
        evs += [(off + e.frame_start, e) for e in _flush(rx)]
        found = {}  # frame start -> (header ok, SNR estimate)
        for start, e in evs:
            near = [s for s in starts if 0 <= start - s <= 12 and s not in found]
            if not near:
                fa += 1
                continue
            det += 1
            good = e.status == "ok" and e.header == starts[near[0]][0]
            ok += good
            e_snr = e.snr_db if e.snr_db is not None else math.nan
            found[near[0]] = (good, e_snr)
            if math.isfinite(e_snr):
                est.append(e_snr)
                if e_snr <= 0:
                    low_n += 1
                    low_ok += good
        for s, (_, draw_snr, draw) in starts.items():
            good, e_snr = found.get(s, (False, math.nan))
            frames.append((draw_snr, s in found, good, e_snr, draw))
        med = f"{np.median(est):.1f}" if est else "-"
        low = f"{low_ok}/{low_n}" if low_n else "-"
        print(
            f"| {snr:g} | {100 * det / n_frames:.2f} % | {100 * ok / n_frames:.2f} % | {fa} | "
            f"{med} | {low} |",
            flush=True,
        )
    _per_frame_snr(np.array(frames, float), n_frames, snrs, warm)


def _flush(rx: FrameReceiver) -> list:
    """What the receiver still holds once its stream ends: 2048 samples of silence push out
    a frame that ended at the stream's last sample."""
    return rx.push(np.zeros(2048, np.complex64))


def _per_frame_snr(f: np.ndarray, n_frames: int, snrs, warm: bool, seed=8) -> None:
    """Frames delivered against each frame's own SNR, the frames of every nominal SNR above
    pooled: binned by the SNR of its channel draw (the sim's truth: nominal + taps' energy)
    and by the receiver's estimate (detected frames only; a frame never found has none).

    f: [frames, 5] (draw's SNR, detected, header ok, SNR estimate or NaN, draw index). The
    frames of one draw share a channel, so they are not independent: the 95 % interval of
    header success resamples whole draws (bootstrap, 2000 resamples)."""
    print(
        f"\n## Frames delivered vs the frame's own SNR, two-Pluto profile (the {len(f)} frames "
        f"above, {n_frames} per nominal SNR {', '.join(f'{s:g}' for s in snrs)} dB, pooled; "
        f"1 dB bins; {_RECEIVER[warm]})\n"
    )
    print(
        "| frame SNR (dB) | frames, by the draw's SNR | detected | header ok | header ok, 95 % "
        "interval | frames, by the receiver's estimate | header ok | estimate - draw's SNR, "
        "mean / RMS (dB) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(seed)
    for c in range(int(np.floor(f[:, 0].min())), int(np.ceil(f[:, 0].max())) + 1):
        t = np.abs(f[:, 0] - c) <= 0.5
        e = np.abs(f[:, 3] - c) <= 0.5  # NaN (not detected) compares False
        if t.sum() < 20:
            continue
        d = f[t & np.isfinite(f[:, 3])]
        err = d[:, 3] - d[:, 0]
        err_s = f"{err.mean():+.2f} / {np.sqrt(np.mean(err**2)):.2f}" if len(err) else "-"
        lo, hi = _draw_interval(f[t, 4], f[t, 2], rng)
        print(
            f"| {c:+d} | {int(t.sum())} | {100 * f[t, 1].mean():.1f} % | "
            f"{100 * f[t, 2].mean():.1f} % | {100 * lo:.1f} - {100 * hi:.1f} % | "
            f"{int(e.sum())} | {100 * f[e, 2].mean() if e.any() else math.nan:.1f} % | {err_s} |"
        )


def _draw_interval(draw: np.ndarray, ok: np.ndarray, rng, n: int = 2000) -> tuple[float, float]:
    """95 % bootstrap interval of the fraction ``ok`` [frames] (0/1) when the frames come in
    clusters (``draw`` [frames], a cluster id each): the clusters are resampled whole."""
    _, inv = np.unique(draw, return_inverse=True)
    frames = np.bincount(inv).astype(float)
    good = np.bincount(inv, weights=ok)
    pick = rng.integers(0, len(frames), (n, len(frames)))
    frac = good[pick].sum(1) / frames[pick].sum(1)
    return float(np.percentile(frac, 2.5)), float(np.percentile(frac, 97.5))


def overhead() -> None:
    """Airtime of preamble and header against the payload, per frame kind."""
    print("\n## Frame overhead (airtime, samples at the PHY rate)\n")
    print("| frame | payload symbols | preamble | header | payload | preamble + header |")
    print("| --- | --- | --- | --- | --- | --- |")
    kinds = [
        ("one 32x32 tile, k/n = 1/6", 512),
        (f"whole photograph (MAX_PAYLOAD = {MAX_PAYLOAD})", MAX_PAYLOAD),
    ]
    for name, k in kinds:
        total = CFG.frame_len(k)
        pay = CFG.payload_symbols(k) * CFG.symbol_len
        print(
            f"| {name} | {k} | {CFG.preamble_len} | {CFG.header_len} | {pay} | "
            f"{100 * (total - pay) / total:.1f} % |"
        )


def detection(n_frames: int, snrs, seed=1, header_list=HEADER_LIST, prior: bool = True):
    print(
        f"\n## Detection and header success vs SNR (AWGN, CFO uniform in +-96 kHz, "
        f"random fractional delay and gaps; {n_frames} frames per SNR, fs = {CFG.sample_rate_hz / 1e6:g} MSps; "
        f"header: {_decoder(header_list, prior)})\n"
    )
    print(
        "| SNR (dB) | detected | header ok | false alarms | CFO error RMS (Hz) | timing error max (samples) |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(seed)
    batch = 50
    for snr in snrs:
        det = ok = fa = 0
        cfo_err, t_err = [], []
        for b in range(0, n_frames, batch):
            nb = min(batch, n_frames - b)
            x, truth = _stream(rng, nb, 96)
            cfo = float(rng.uniform(-96e3, 96e3))
            delay = float(rng.uniform(0, 1))
            y = _impair(x, snr, cfo, delay, int(rng.integers(1 << 30)))
            rx = _receiver(header_list, prior)
            evs = []
            for i in range(0, len(y), 1 << 14):
                evs += rx.push(y[i : i + (1 << 14)])
            starts = {s: h for s, h in truth}
            matched = set()
            for e in evs:
                near = [s for s in starts if abs(e.frame_start - s) <= 2 and s not in matched]
                if not near:
                    fa += 1
                    continue
                matched.add(near[0])
                det += 1
                t_err.append(abs(e.frame_start - near[0] - delay))
                if e.status == "ok" and e.header == starts[near[0]]:
                    ok += 1
                    cfo_err.append(e.cfo_hz - cfo)
        print(
            f"| {snr:g} | {100 * det / n_frames:.2f} % | {100 * ok / n_frames:.2f} % | {fa} | "
            f"{math.sqrt(np.mean(np.square(cfo_err))) if cfo_err else float('nan'):.0f} | "
            f"{max(t_err) if t_err else float('nan'):.2f} |"
        )


def false_alarms(n_samples: int, seed=2):
    """The detector's false-alarm curve on white noise: for each Schmidl-Cox threshold, the
    windows that pass it (each then checked against the long training field), the largest
    long-training capture among them (the gate is 0.35, or 0.25 where the window's metric lies
    in [0.15, 0.8)) and the detections left."""
    print(
        f"\n## False alarms on white noise ({n_samples:.0e} samples per threshold; "
        f"long-training gate {FrameReceiver(CFG).sync.lts_threshold:g}, "
        f"{FrameReceiver(CFG).sync.weak_lts:g} where the metric is in "
        f"[{FrameReceiver(CFG).sync.strong_sc:g}, {WEAK_SC_MAX:g}))\n"
    )
    print(
        "| Schmidl-Cox threshold | windows passing | per 1e8 samples | largest LTS capture "
        "| detections |"
    )
    print("| --- | --- | --- | --- | --- |")
    default = FrameReceiver(CFG).sync.threshold
    for thr in (0.06, 0.08, 0.1, 0.15, 0.2, 0.3):
        rng = np.random.default_rng(seed)
        rx = FrameReceiver(CFG, threshold=thr)
        caps = []
        refine = rx.sync.refine

        def counted(*args, _refine=refine, _rx=rx, _caps=caps, **kw):
            d = _refine(*args, **kw)
            _caps.append(_rx.sync.last_captured)
            return d

        rx.sync.refine = counted
        chunk = 1 << 20
        for _ in range(0, n_samples, chunk):
            z = rng.standard_normal(chunk) + 1j * rng.standard_normal(chunk)
            rx.push((z / math.sqrt(2)).astype(np.complex64))
        mark = " (default)" if thr == default else ""
        print(
            f"| {thr:g}{mark} | {len(caps)} | {len(caps) / n_samples * 1e8:.0f} | "
            f"{max(caps) if caps else float('nan'):.3f} | {rx.stats.detections} |"
        )


def header_codes(n: int, snrs, seed=3):
    print(
        f"\n## Header error rate: K=7 rate-1/2 convolutional (Viterbi; list Viterbi, "
        f"{HEADER_LIST} paths, first to pass the CRC) vs rate-1/2 repetition, BPSK, AWGN "
        f"({n} headers per point)\n"
    )
    print(
        "| Es/N0 per BPSK symbol (dB) | conv., Viterbi | conv., list Viterbi + CRC | repetition | wrong headers accepted |"
    )
    print("| --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(seed)
    nbits = 8 * HEADER_LEN

    def parses(d):
        try:
            return Header.unpack(np.packbits(d[:nbits]).tobytes())
        except HeaderError:
            return None

    for snr in snrs:
        n0 = 10 ** (-snr / 10)
        err = {"conv": 0, "list": 0, "rep": 0}
        wrong = 0
        for i in range(n):
            h = Header(seq=i, item_id=i, fingerprint=FP, payload_len=i, shape=(3, 32, 32))
            # the receiver's decoder (interleaved, padded), plain and list, on the same noise
            c = encode_header_bits(h, CFG)
            llr = 4 * ((1 - 2.0 * c) + rng.normal(size=len(c)) * math.sqrt(n0 / 2)) / n0
            for code, n_list in (("conv", 1), ("list", HEADER_LIST)):
                got = parses(decode_header_bits(llr[None], CFG, n_list)[0])
                if got is None:
                    err[code] += 1
                elif got != h and code == "list":  # what the receiver would accept
                    wrong += 1
            c = repetition_encode(np.unpackbits(np.frombuffer(h.pack(), np.uint8)))
            y = (1 - 2.0 * c) + rng.normal(size=len(c)) * math.sqrt(n0 / 2)
            if parses(repetition_decode(4 * y / n0)) is None:
                err["rep"] += 1
        print(
            f"| {snr:g} | {err['conv'] / n:.4f} | {err['list'] / n:.4f} | {err['rep'] / n:.4f} "
            f"| {wrong} |"
        )
    _decoder_times(rng)


def _decoder_times(rng, reps: int = 200) -> None:
    """What one header costs each decoder (compiled kernels, one header per call: a
    receiver's usual batch), the median of ``reps`` calls on one noisy header at 0 dB."""
    bits = rng.integers(0, 2, (1, 8 * HEADER_LEN))
    llr = 4 * ((1 - 2.0 * conv_encode(bits)) + rng.normal(size=(1, 2 * (8 * HEADER_LEN + 6))))
    rows = []
    for name, call in (
        ("Viterbi", lambda: viterbi_decode(llr)),
        (f"list Viterbi, {HEADER_LIST} paths", lambda: list_viterbi_decode(llr, HEADER_LIST)),
        ("list Viterbi, 16 paths", lambda: list_viterbi_decode(llr, 16)),
    ):
        call()  # compiled, or loaded from the cache, on first use
        t = []
        for _ in range(reps if "list" not in name else reps // 10):
            t0 = time.perf_counter()
            call()
            t.append(time.perf_counter() - t0)
        rows.append(f"{name} {np.median(t) * 1e6:.0f} us")
    print(f"\nDecoder time per header ({8 * HEADER_LEN} bits, one per call): " + "; ".join(rows))


def _ideal_mmse(y_from_lts, taps, delays, n0, k):
    """Perfect-CSI MMSE: true channel from the taps (incl. the FFT back-off) and true N0."""
    c = CFG
    a = math.sqrt(c.fft_size / c.n_used)
    kk = np.arange(c.fft_size)
    ks = np.where(kk >= c.fft_size // 2, kk - c.fft_size, kk)
    h = sum(
        taps[:, i, None] * np.exp(-2j * np.pi * ks * (d + c.fft_backoff) / c.fft_size)
        for i, d in enumerate(delays)
    )
    n_sym = c.header_symbols + c.payload_symbols(k)
    grid = demodulate(c, torch.as_tensor(y_from_lts[:, c.lts_len :]), n_sym).numpy()
    h = h[:, None, :]
    eq = np.conj(h) * grid / (a * (np.abs(h) ** 2 + n0 / a**2))
    pay = eq[:, c.header_symbols :][..., c.bins(c.data_carriers)].reshape(len(taps), -1)[:, :k]
    return pay * np.conj(payload_phases(k))  # the payload's scrambling rotations undone


def mse_vs_ideal(n: int, snrs, seed=4):
    print(
        f"\n## Payload symbol MSE after equalisation vs the perfect-CSI MMSE equaliser "
        f"(8-tap exponential multipath, decay 2 samples; {n} frames per SNR)\n"
    )
    print(
        "| SNR (dB) | perfect CSI | LS + MMSE | LMMSE-smoothed + MMSE | LS + ZF | loss of the default (dB) |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    g = torch.Generator().manual_seed(seed)
    k = 480
    for snr in snrs:
        s = torch.randn(n, k, dtype=torch.complex128, generator=g)
        x = FB.build(s)
        chain = ChannelChain.from_tables(
            [{"kind": "multipath", "n_taps": 8, "decay_samples": 2.0}, {"kind": "awgn"}]
        )
        out = chain(x, snr_db=snr, generator=g)
        y = out.y[:, CFG.sts_len :]
        taps = out.record["multipath"]["taps"].numpy()
        res = {}
        for name, rx in [
            ("ls", OfdmReceiver(CFG, smoothing="none")),
            ("lmmse", OfdmReceiver(CFG)),
            ("zf", OfdmReceiver(CFG, smoothing="none", equalizer="zf")),
        ]:
            with torch.inference_mode():
                res[name] = ((rx(y, k).symbols - s).abs() ** 2).mean().item()
        ideal = np.mean(
            np.abs(
                _ideal_mmse(
                    y.numpy(), taps, out.record["multipath"]["delays"], 10 ** (-snr / 10), k
                )
                - s.numpy()
            )
            ** 2
        )
        print(
            f"| {snr:g} | {ideal:.4f} | {res['ls']:.4f} | {res['lmmse']:.4f} | {res['zf']:.4f} | "
            f"{10 * math.log10(res['lmmse'] / ideal):.2f} |"
        )


def papr(n: int, seed=5):
    print(
        f"\n## PAPR control by clipping ({n} frames, 480 symbols each, no noise, -12 dBFS RMS before clipping)\n"
    )
    print(
        "| clip at PAPR (dB) | PAPR out, max (dB) | samples clipped | payload MSE from clipping (dB) |"
    )
    print("| --- | --- | --- | --- |")
    rng = np.random.default_rng(seed)
    frames = []
    for i in range(n):
        s = _payload(rng, 480)
        h = Header(seq=i, item_id=i, fingerprint=FP, payload_len=480, shape=(3, 8, 8))
        frames.append((s, FB.build_numpy(s, h)))
    rx = OfdmReceiver(CFG, estimate_cfo=False)
    for clip in (None, 12.0, 10.0, 8.0, 6.0, 4.0):
        mse, pk, frac = [], [], []
        for s, f in frames:
            y, st = to_full_scale(f, rms_dbfs=-12.0, clip_papr_db=clip)
            pk.append(st["papr_out_db"])
            frac.append(st["clipped_fraction"])
            with torch.inference_mode():
                r = rx.receive_frame(torch.from_numpy(y / 10 ** (-12 / 20))[None], 480)
            mse.append(np.mean(np.abs(r.symbols[0].numpy() - s) ** 2))
        print(
            f"| {'none' if clip is None else clip} | {max(pk):.2f} | {100 * np.mean(frac):.3f} % | "
            f"{10 * math.log10(max(np.mean(mse), 1e-12)):.1f} |"
        )


def throughput(n_samples: int, seed=6, reps: int = 3):
    print(
        f"\n## Streaming receiver throughput, one core ({n_samples / 1e6:g} M samples, chunks of "
        f"65536; each row the best of {reps} runs)\n"
    )
    rng = np.random.default_rng(seed)
    noise = ((rng.standard_normal(n_samples) + 1j * rng.standard_normal(n_samples)) * 0.05).astype(
        np.complex64
    )
    blocks = noise[: n_samples // 64 * 64].reshape(-1, 64)
    fft_rate = 0.0
    for _ in range(reps):
        t = time.perf_counter()
        np.fft.fft(blocks, axis=1)
        fft_rate = max(fft_rate, n_samples / (time.perf_counter() - t))
    warm_up(CFG)  # numba's kernels compiled or loaded before the clock runs

    def run(x, refine=True, compiled=True):
        best = None
        for _ in range(reps):
            rx = FrameReceiver(CFG, refine_payload=refine, compiled=compiled)
            t = time.perf_counter()
            for i in range(0, len(x), 65536):
                rx.push(x[i : i + 65536])
            rate = len(x) / (time.perf_counter() - t)
            if best is None or rate > best[0]:
                best = (rate, rx)
        return best

    rate_noise, _ = run(noise)

    def with_frames(period):
        """The noise stream with a 480-symbol frame every ``period`` samples (20 dB)."""
        x = noise.copy()
        nf = 0
        for pos in range(1000, n_samples - period, period):
            h = Header(seq=nf, item_id=nf, fingerprint=FP, payload_len=480, shape=(3, 8, 8))
            f = FB.build_numpy(_payload(rng, 480), h) * 0.5
            x[pos : pos + len(f)] += f
            nf += 1
        return x, nf

    air = n_samples / CFG.sample_rate_hz
    frame_len = CFG.frame_len(480)
    rows = []
    # ~200 frames/s of airtime at 4 MSps, then dense: frames 120 samples apart
    for name, period in (("sparse", 20_000), ("dense", frame_len + 120)):
        x, nf = with_frames(period)
        rate, rx = run(x)
        rows.append((name, nf, rate, rx))
        # the same stream without the header's refinement of the payload's estimate
        rate, rx = run(x, refine=False)
        rows.append((f"{name}, payload on the long training field's estimate", nf, rate, rx))
        # the same stream through the torch receive module (the path before it was compiled)
        rate, rx = run(x, compiled=False)
        rows.append((f"{name}, the torch receive path (compiled=False)", nf, rate, rx))
    print("| what | MSamples/s | vs numpy FFT floor | real time (4 MSps) |")
    print("| --- | --- | --- | --- |")
    print(
        f"| numpy FFT of the stream in 64-point blocks (floor) | {fft_rate / 1e6:.1f} | 1.00x "
        f"| {fft_rate / CFG.sample_rate_hz:.1f}x |"
    )
    print(
        f"| receiver, noise only (detector) | {rate_noise / 1e6:.1f} | "
        f"{rate_noise / fft_rate:.2f}x | {rate_noise / CFG.sample_rate_hz:.1f}x |"
    )
    for name, nf, rate, _ in rows:
        print(
            f"| receiver, {name}: {nf} frames ({nf / air:.0f} frames/s of airtime) "
            f"| {rate / 1e6:.1f} | {rate / fft_rate:.2f}x | {rate / CFG.sample_rate_hz:.1f}x |"
        )
    for name, nf, _, rx in rows:
        sec = rx.stats.seconds
        tot = sum(sec.values())
        print(
            f"\n{name[0].upper() + name[1:]}: frames decoded {rx.stats.frames}/{nf}. Where the time goes: "
            + ", ".join(f"{k} {v:.2f} s ({100 * v / tot:.0f} %)" for k, v in sec.items())
        )
        print(
            f"Per frame: {1e3 * (sec['refine'] + sec['header'] + sec['payload']) / max(rx.stats.frames, 1):.3f} ms "
            f"(timing/CFO refinement; header receive, decoding and, with the refinement, the "
            f"estimate it refines; payload receive); detection "
            f"{1e9 * sec['detect'] / n_samples:.1f} ns/sample."
        )
    by_name = {name: (rate, rx) for name, _, rate, rx in rows}
    for name in ("sparse", "dense"):
        (r1, a), (r0, b) = (
            by_name[name],
            by_name[f"{name}, the torch receive path (compiled=False)"],
        )

        def per_frame(rx):
            sec = rx.stats.seconds
            return (sec["refine"] + sec["header"] + sec["payload"]) / max(rx.stats.frames, 1)

        print(
            f"\n{name[0].upper() + name[1:]}, compiled against the torch receive path in this run: "
            f"{r1 / r0:.2f}x the samples per second, {per_frame(b) / per_frame(a):.2f}x less time "
            f"per frame ({1e3 * per_frame(a):.3f} against {1e3 * per_frame(b):.3f} ms)."
        )


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true")
    p.add_argument(
        "--only",
        default="overhead,detection,header,mse,papr,throughput",
        help="comma-separated parts; detection = AWGN, two_pluto and the false alarms; "
        "two_pluto alone: the two-Pluto tables only",
    )
    p.add_argument(
        "--header-list",
        type=int,
        default=HEADER_LIST,
        help="detection: paths of the list Viterbi header decoder (1: plain Viterbi)",
    )
    p.add_argument(
        "--header-prior",
        choices=["on", "off"],
        default="on",
        help="detection: decode failing headers again held to what the receiver knows "
        "(version, expected fingerprint, payload_len bound, last seq/item high halves)",
    )
    a = p.parse_args(argv)
    with cpu_threads(1):  # one core: torch and numpy's BLAS
        _run(a)


def _run(a) -> None:
    only = set(a.only.split(","))
    q = a.quick
    if "overhead" in only:
        overhead()
    hl, pr = a.header_list, a.header_prior == "on"
    if "detection" in only:
        detection(300 if q else 2000, [-3, -2, -1, 0, 1, 2, 4, 6, 10, 20], header_list=hl, prior=pr)
    if "detection" in only or "two_pluto" in only:
        # a new channel every 2 frames: ~4000 independent draws, not clustered in 10s
        for warm in (True, False):
            detection_two_pluto(
                200 if q else 1000,
                [-2, -1, 0, 1, 2, 4, 6, 10],
                per_draw=2,
                header_list=hl,
                prior=pr,
                warm=warm,
            )
    if "detection" in only:
        false_alarms(int(1e7) if q else int(1e8))
    if "header" in only:
        header_codes(200 if q else 2000, [-4, -3, -2, -1, 0, 1, 2, 3])
    if "mse" in only:
        mse_vs_ideal(32 if q else 200, [0, 5, 10, 15, 20, 30])
    if "papr" in only:
        papr(20 if q else 100)
    if "throughput" in only:
        throughput(int(4e6) if q else int(2e7))


if __name__ == "__main__":
    main()
