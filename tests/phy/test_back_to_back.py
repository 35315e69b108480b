"""Frames back to back with no gap: an echo detected late in a payload must not hide the
frame right behind it (found while writing docs/frame-format.md)."""

import numpy as np
import pytest

from hil.phy import FrameBuilder, FrameReceiver, Header, OfdmConfig


@pytest.mark.parametrize("gap", [0, 1, 37])
@pytest.mark.parametrize("payload", ["pulses", "random"])
def test_frames_back_to_back_all_decode(gap, payload):
    cfg = OfdmConfig()
    fb = FrameBuilder(cfg)
    k = 480
    if payload == "pulses":  # exp(j 2 pi i / 7): every OFDM symbol a sharp pulse (PAPR 15 dB)
        s = np.exp(2j * np.pi * np.arange(k) / 7).astype(np.complex64)
    else:
        rng = np.random.default_rng(5)
        s = ((rng.normal(size=k) + 1j * rng.normal(size=k)) / np.sqrt(2)).astype(np.complex64)
    parts = [np.zeros(500, np.complex64)]
    for seq in range(4):
        h = Header(seq, seq, bytes(range(1, 9)), k, (3, 32, 32))
        parts += [fb.build_numpy(s, h), np.zeros(gap, np.complex64)]
    x = np.concatenate([*parts, np.zeros(2000, np.complex64)])
    fr = FrameReceiver(cfg)
    events = []
    for a in range(0, len(x), 4096):
        events += fr.push(x[a : a + 4096])
    assert [(e.status, e.header.seq) for e in events] == [("ok", i) for i in range(4)]
    for e in events:
        assert np.mean(np.abs(e.symbols - s) ** 2) < 1e-3


@pytest.mark.parametrize("chunk", [997, 1 << 16])
def test_each_frame_is_estimated_once_and_equalised_like_a_whole_frame(chunk):
    """The header pass estimates CFO and channel from the long training field; the payload pass
    reuses that estimate (one ``estimate`` call per frame, however the chunks fall), and its
    symbols are those of one receive call over the frame at the detector's timing and CFO
    (without the header's refinement of the estimate: ``refine_payload=False``)."""
    import torch

    from tests.phy.helpers import impair, make_frames, make_stream, run_receiver

    cfg = OfdmConfig()
    rng = np.random.default_rng(5)
    frames, headers, _ = make_frames(FrameBuilder(cfg), rng, 6, k=480)
    x, _ = make_stream(frames, rng)
    y = impair(x, snr_db=18.0, cfo_hz=3e3, seed=2)
    fr = FrameReceiver(cfg, refine_payload=False)
    calls = []
    # the compiled path's estimate step (estimate, and the header pass's, which also keeps
    # the bins it computed: ChannelEstimate.known_bins)
    real = fr.path._estimate
    fr.path._estimate = lambda z, kb: calls.append(z.shape[0]) or real(z, kb)
    events = run_receiver(fr, y, chunk)
    assert [e.header.seq for e in events if e.status == "ok"] == [h.seq for h in headers]
    assert sum(calls) == len(events) == 6
    del fr.path._estimate
    for e in events:
        start = e.frame_start + cfg.sts_len
        seg = torch.from_numpy(y[start : start + cfg.frame_len(480)])[None]
        m = torch.arange(seg.shape[1], dtype=torch.float64)
        ramp = torch.exp(-2j * np.pi * (e.detector_cfo_hz / cfg.sample_rate_hz) * m)
        with torch.inference_mode():
            ref = fr.rx((seg * ramp).to(torch.complex64), 480)
        # apart from float32 rounding and the stream's slow DC removal
        assert abs(ref.cfo_norm.item() * cfg.sample_rate_hz + e.detector_cfo_hz - e.cfo_hz) < 1.0
        assert np.abs(ref.symbols[0].numpy() - e.symbols).max() < 1e-3


def test_an_echo_in_a_payload_read_in_the_same_pass_skips_the_costly_decoders(monkeypatch):
    """A preamble inside a long payload (as structured photographs' payloads give on the
    two-Pluto link) is detected before its frame's header says how long the frame is: read
    in the same pass, its failing header must not go on to the prior, the list decoder and
    the re-reads (~30 ms each: they made hil rx 3x slower on whole photographs)."""
    import hil.phy.stream as stream

    cfg = OfdmConfig()
    fb = FrameBuilder(cfg)
    rng = np.random.default_rng(3)
    k = 4800
    s = ((rng.normal(size=k) + 1j * rng.normal(size=k)) / np.sqrt(2)).astype(np.complex64)
    fp = bytes(range(1, 9))
    frame = fb.build_numpy(s, Header(0, 0, fp, k, (3, 32, 32)))
    # a preamble and a header of random bits, 3000 samples into the payload
    bogus = fb.build_numpy(s[:48], Header(1, 1, fp, 48, (3, 32, 32)))
    at = cfg.frame_len(0) + 3000
    n_fake = cfg.sts_len + cfg.lts_len + cfg.header_len
    fake = bogus[:n_fake].copy()
    fake[cfg.sts_len + cfg.lts_len :] = np.exp(2j * np.pi * rng.random(cfg.header_len))
    frame = frame.copy()
    frame[at : at + n_fake] = fake
    x = np.concatenate([np.zeros(500, np.complex64), frame, np.zeros(3000, np.complex64)])
    calls = []
    plain = stream.viterbi_decode_batch

    def counted(llr, c, n_list=16, prior=None):
        calls.append((len(llr), n_list, prior is not None))
        return plain(llr, c, n_list, prior)

    monkeypatch.setattr(stream, "viterbi_decode_batch", counted)
    fr = FrameReceiver(cfg, fingerprint=fp)
    events = fr.push(x)  # one chunk: both detections are queued before a header is read
    assert [(e.status, e.header.seq) for e in events] == [("ok", 0)]
    assert fr.stats.echoes == 1 and fr.stats.reread == 0
    assert calls == [(2, 1, False)]  # one plain pass over both, nothing after it


def test_push_runs_the_receive_path_on_its_own_thread_count_and_restores_the_process_s():
    """The receive path's tensors are small: push runs it with FrameReceiver(threads=1) by
    default and gives the process its own setting back, whatever happens inside."""
    import torch

    cfg = OfdmConfig()
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        seen = []
        for threads, want in ((1, 1), (None, 2), (2, 2)):
            fr = FrameReceiver(cfg, threads=threads)
            fr._process = lambda: seen.append(torch.get_num_threads()) or []
            assert fr.push(np.zeros(64, np.complex64)) == []
            assert torch.get_num_threads() == 2 and seen[-1] == want
        fr = FrameReceiver(cfg).after_gap()
        assert fr.threads == 1

        def boom():
            raise RuntimeError("inside")

        fr._process = boom
        with pytest.raises(RuntimeError, match="inside"):
            fr.push(np.zeros(64, np.complex64))
        assert torch.get_num_threads() == 2
        for bad in (0, -1):
            with pytest.raises(ValueError, match="threads must be >= 1 or None"):
                FrameReceiver(cfg, threads=bad)
    finally:
        torch.set_num_threads(before)
