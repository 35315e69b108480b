"""``hil tx``: encode images, frame them, stream the samples to the radio process.

Sends each frame as one sample message (SOB|EOB), tells the receiver what it
sent on the control channel (JSON: seq, item id, chunk, and when it started on
the image, ``t_start``, for the end-to-end latency), and ends both streams with
EOS / ``done`` so the receiver can account for every frame. Whole photographs
are encoded as the send loop reaches them, in scheme 253 a segment at a time.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
import zmq

from ..convert import to_numpy
from ..jscc.checkpoint import load_checkpoint
from ..jscc.images import TILE, Segments, to_tiles
from ..phy import MAX_PAYLOAD, FrameBuilder, Header, to_full_scale
from ..phy.header import SCHEME_JSCC, SCHEME_JSCC_SEGMENTED, SCHEME_JSCC_TILED
from ..radio.ad9363 import same_rate
from ..transport import CYCLIC, EOB, SOB, SampleSender, make_socket, send_json
from .common import (
    StopFlag,
    add_curve_args,
    add_precision_arg,
    add_whole_image_args,
    curve_client,
    items,
    resolve_checkpoint,
    setup_logging,
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hil tx", description=__doc__)
    p.add_argument(
        "--checkpoint", default=None, help="checkpoint stem (default: the shipped k/n=1/6 model)"
    )
    p.add_argument(
        "--radio", required=True, help="the radio process's TX endpoint (PUSH connects here)"
    )
    p.add_argument(
        "--control", default=None, help="the receiver's control endpoint (frame manifest)"
    )
    p.add_argument(
        "--dataset", default="builtin", help="builtin | cifar10:<dir> | folder:<dir> (test split)"
    )
    p.add_argument("--crop", type=int, default=32, help="image size sent (square, divisible by 4)")
    p.add_argument("--count", type=int, default=32, help="images to send")
    add_whole_image_args(p)
    p.add_argument("--repeat", type=int, default=1, help="send the set this many times")
    p.add_argument("--gap", type=int, default=400, help="silent samples after each frame")
    p.add_argument(
        "--rms-dbfs",
        type=float,
        default=-12.0,
        help="frame RMS level (peaks limited at full scale)",
    )
    p.add_argument(
        "--clip-papr-db", type=float, default=None, help="clip peaks at this PAPR (PAPR control)"
    )
    p.add_argument(
        "--sample-rate",
        type=float,
        default=None,
        help="check only: the checkpoint's PHY config sets the rate (Hz) the wire header states",
    )
    p.add_argument("--pace", action="store_true", help="emit frames no faster than their airtime")
    p.add_argument(
        "--cyclic", action="store_true", help="send the first frame once, flagged for cyclic repeat"
    )
    p.add_argument("--first-seq", type=int, default=0)
    p.add_argument(
        "--scheme",
        default="jscc",
        help="jscc, or a digital baseline MCS (JPEG/WebP + 5G LDPC + QAM in the same payload "
        "symbols), e.g. 16QAM-3/4; see hil.baseline.MCS_TABLE",
    )
    p.add_argument(
        "--start-file",
        help="load, encode the --dataset items and connect first, then send once this file "
        "exists (hil link: the receiver's ready file, so the model's start-up does not compete "
        "with a live stream); whole photographs are encoded as they are sent",
    )
    p.add_argument(
        "--start-timeout", type=float, default=120.0, help="give up waiting for --start-file (s)"
    )
    add_precision_arg(p)
    p.add_argument("-v", "--verbose", action="store_true")
    add_curve_args(p)
    return p


def encode_items(model, x: torch.Tensor, batch: int = 64) -> list[np.ndarray]:
    out = []
    with torch.inference_mode():
        for i in range(0, len(x), batch):
            s = model.encoder(x[i : i + batch])
            out.extend(to_numpy(s))
    return out


def encode_whole(model, images, mode: str = "tiles") -> list[np.ndarray]:
    """Whole photographs, one at a time: ``full`` at their own size (padded for the codec,
    ``pad``), ``tiles`` as 32x32 tiles each encoded alone, their symbols interleaved
    (``interleave``: a lost frame takes a few symbols of every tile, not whole tiles)."""
    from ..jscc.images import interleave, pad, to_tiles

    out = []
    with torch.inference_mode():
        for im in images:
            if mode == "full":
                out.append(to_numpy(model.encoder(pad(im.as_float())[None]))[0])
            else:
                s = to_numpy(model.encoder(to_tiles(im.as_float())))  # [tiles, k]
                out.append(interleave(s))
    return out


def digital_items(key: str, x: torch.Tensor, jscc: list[np.ndarray], log):
    """The separation baseline in the JSCC's payload symbols: per item the symbols (None when
    the image does not fit the MCS's byte budget even at the lowest quality) and scheme ids."""
    from ..baseline import MCS_TABLE, DigitalCodec, best_fit, mcs_by_key, scheme_id

    mi = mcs_by_key(key)
    n = len(jscc[0])
    if n > MAX_PAYLOAD:
        raise ValueError(f"digital frames carry one image per frame: {n} symbols > {MAX_PAYLOAD}")
    codec = DigitalCodec(MCS_TABLE[mi], n)
    out, schemes, lost = [], [], 0
    for img in x.numpy():
        f = best_fit(img, codec.capacity)
        if f is None:
            out.append(None)
            schemes.append(0)
            lost += 1
            continue
        out.append(to_numpy(codec.encode([f[1]])[0]).astype(np.complex64))
        schemes.append(scheme_id(mi, f[0]))
    log.info(
        "digital baseline %s: %d-byte budget per image in %d symbols; %d of %d images do not fit "
        "and are not sent",
        MCS_TABLE[mi].name,
        codec.capacity,
        n,
        lost,
        len(out),
    )
    return out, schemes


def digital_whole(key: str, images, n_symbols: list[int], log):
    """The separation baseline for whole photographs (``hil.baseline.whole``): per photograph
    its frames' symbols (None when its bitstream does not fit even at the lowest quality) and
    its scheme id, in ``n_symbols[i]`` symbols (the JSCC's for the same photograph)."""
    from ..baseline import CODECS, MCS_TABLE, best_fit, mcs_by_key, scheme_id
    from ..baseline.whole import WholeCodec

    mi = mcs_by_key(key)
    wc = WholeCodec(mi)
    out, schemes = [], []
    for im, n in zip(images, n_symbols, strict=True):
        f = best_fit(im.as_float().numpy(), wc.capacity(n))
        if f is None:
            log.warning("%s: no codec fits %d bytes; not sent", im.name, wc.capacity(n))
            out.append(None)
            schemes.append(0)
            continue
        out.append(wc.encode(f[1], n))
        schemes.append(scheme_id(mi, f[0], whole=True))
        log.info(
            "digital baseline %s: %s, %d of %d bytes (%s) in %d symbols, %d frames",
            MCS_TABLE[mi].name,
            im.name,
            len(f[1]),
            wc.capacity(n),
            CODECS[f[0]],
            n,
            len(out[-1]),
        )
    return out, schemes


class _Segmented:
    """A photograph's frames' payloads in scheme 253 (``Segments``), encoded a segment at a
    time as the send loop asks for them (the first frames go on the air while the rest are
    encoded) and kept for repeats."""

    def __init__(self, model, im):
        self.model, self.im = model, im
        self.lay = Segments.for_image(im.size, model.cfg.n_symbols((3, TILE, TILE)), MAX_PAYLOAD)
        self.made: list[np.ndarray] = []
        self._gen = None

    def __len__(self) -> int:
        return self.lay.chunk_count

    def __iter__(self):
        for i in range(len(self)):
            if i == len(self.made):
                self._gen = self._gen or self._encode()
                self.made.append(next(self._gen))
            yield self.made[i]

    def _encode(self):
        x = to_tiles(self.im.as_float())
        held = np.zeros(0, np.complex64)
        for s, r in enumerate(self.lay.tiles):
            with torch.inference_mode():
                sym = to_numpy(self.model.encoder(x[r.start : r.stop]))
            held = np.concatenate([held, self.lay.air(s, sym)])
            while len(held) >= MAX_PAYLOAD:
                yield held[:MAX_PAYLOAD]
                held = held[MAX_PAYLOAD:]
        if len(held):
            yield held


def _whole_frames(model, im, a, log):
    """A photograph's frames, prepared when called: () -> (frame payloads or None where a
    digital bitstream does not fit, scheme byte). JSCC tiles go out in scheme 253,
    encoded a segment at a time as they are sent."""

    def prepare():
        from ..jscc.images import whole_symbols

        if a.scheme.lower() != "jscc":
            n = whole_symbols(model.cfg, im.size, a.whole_mode)
            (f,), (scheme,) = digital_whole(a.scheme, [im], [n], log)
            return f, scheme
        if a.whole_mode == "tiles":
            return _Segmented(model, im), SCHEME_JSCC_SEGMENTED
        if a.whole_mode == "interleaved":
            return _cut(encode_whole(model, [im], "tiles")[0]), SCHEME_JSCC_TILED
        return _cut(encode_whole(model, [im], "full")[0]), SCHEME_JSCC

    return prepare


def _cut(s: np.ndarray) -> list[np.ndarray]:
    """An image's symbols in frames of MAX_PAYLOAD, the last one shorter."""
    return [s[i : i + MAX_PAYLOAD] for i in range(0, len(s), MAX_PAYLOAD)]


def _wait_for(path: Path, timeout_s: float, stop) -> bool:
    end = time.monotonic() + timeout_s
    while not path.exists():
        if stop or time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    log = setup_logging("tx", a.verbose)
    stop = StopFlag()
    model, phy, doc, _ = load_checkpoint(resolve_checkpoint(a.checkpoint))
    model.set_precision(a.precision)
    log.info("encoder computes in %s", model.precision_name)
    from ..jscc.finetune import transmitter_fingerprint

    fp = transmitter_fingerprint(doc)
    if a.sample_rate is not None and not same_rate(a.sample_rate, phy.sample_rate_hz):
        raise ValueError(
            f"--sample-rate {a.sample_rate:g} disagrees with the checkpoint's PHY "
            f"({phy.sample_rate_hz:g} Hz), the one source of the sample rate"
        )
    a.sample_rate = phy.sample_rate_hz
    fb = FrameBuilder(phy)
    whole = []
    digital = a.scheme.lower() != "jscc"
    if a.image or a.images:
        from ..jscc.images import gather_images

        whole = gather_images(a.image, a.images)
        shapes = [(3, *im.size) for im in whole]
        log.info(
            "checkpoint %s (k/n %s, fingerprint %s); %d whole photographs (%s): %s",
            a.checkpoint or "shipped",
            model.cfg.bandwidth_ratio,
            doc["fingerprint"],
            len(whole),
            a.scheme if digital else "full size" if a.whole_mode == "full" else "32x32 tiles",
            ", ".join(f"{im.name} {im.size[1]}x{im.size[0]}" for im in whole),
        )
        # prepared when the send loop reaches it (the end-to-end latency counts its encode)
        frames = [_whole_frames(model, im, a, log) for im in whole]
        schemes = [None] * len(whole)  # each photograph's, once prepared
    else:
        x, _ids = items(a.dataset, a.crop, a.count)
        log.info(
            "checkpoint %s (k/n %s, fingerprint %s); %d items of %dx%d from %s",
            a.checkpoint or "shipped",
            model.cfg.bandwidth_ratio,
            doc["fingerprint"],
            len(x),
            a.crop,
            a.crop,
            a.dataset,
        )
        symbols = encode_items(model, x)
        shapes = [(3, a.crop, a.crop)] * len(symbols)
        schemes = [0] * len(symbols)
        if digital:
            symbols, schemes = digital_items(a.scheme, x, symbols, log)
        frames = [None if s is None else _cut(s) for s in symbols]
    ctx = zmq.Context()
    sock = make_socket(ctx, zmq.PUSH, a.radio, bind=False, curve=curve_client(a))
    ctrl = make_socket(ctx, zmq.PUSH, a.control, bind=False) if a.control else None
    sender = SampleSender(sock, stream_id=1, sample_rate_hz=a.sample_rate)
    seq = a.first_seq
    if a.start_file and not _wait_for(Path(a.start_file), a.start_timeout, stop):
        log.error("%s did not appear within %.0f s; nothing sent", a.start_file, a.start_timeout)
        sock.close(linger=0)
        if ctrl is not None:
            ctrl.close(linger=0)
        ctx.term()
        return 130 if stop else 3
    if ctrl is not None:  # which photograph each item is, by content: the receiver's references
        for item_id, im in enumerate(whole):
            send_json(
                ctrl,
                {
                    "type": "image",
                    "item_id": item_id,
                    "content_id": im.content_id,
                    "name": im.name,
                    "size": list(im.size),
                },
            )
    t0 = time.monotonic()
    airtime = 0.0
    sent = 0
    try:
        for _ in range(a.repeat):
            for item_id in range(len(frames)):
                t_start = time.time()  # the transmitter starts on it: the latency's origin
                if callable(frames[item_id]):  # a photograph: encoded now, kept for repeats
                    frames[item_id], schemes[item_id] = frames[item_id]()
                chunks = frames[item_id]
                if chunks is None:  # digital: did not fit the budget, never sent
                    continue
                for ci, c in enumerate(chunks):
                    if stop:
                        raise KeyboardInterrupt
                    h = Header(
                        seq=seq,
                        item_id=item_id,
                        fingerprint=fp,
                        payload_len=len(c),
                        shape=shapes[item_id],
                        chunk_index=ci,
                        chunk_count=len(chunks),
                        scheme=schemes[item_id],
                    )
                    f, _ = to_full_scale(fb.build_numpy(c, h), a.rms_dbfs, a.clip_papr_db)
                    burst = np.concatenate([f, np.zeros(a.gap, np.complex64)])
                    if ctrl is not None:
                        send_json(
                            ctrl,
                            {
                                "type": "sent",
                                "seq": seq,
                                "item_id": item_id,
                                "chunk": ci,
                                "chunks": len(chunks),
                                "samples": len(burst),
                                "msg_seq": sender.seq,
                                "frame_len": len(f),
                                "t_start": t_start,
                            },
                        )
                    flags = SOB | EOB | (CYCLIC if a.cyclic else 0)
                    while not sender.send(burst, flags=flags, timeout_s=0.5):
                        if stop:
                            raise KeyboardInterrupt
                    seq += 1
                    sent += 1
                    airtime += len(burst) / a.sample_rate
                    if a.pace:
                        ahead = airtime - (time.monotonic() - t0)
                        if ahead > 0:
                            time.sleep(ahead)
                    if a.cyclic:
                        break
                if a.cyclic:
                    break
    except KeyboardInterrupt:
        log.warning("interrupted after %d frames", sent)
    finally:
        sender.end(timeout_s=5.0)
        if ctrl is not None:
            send_json(
                ctrl, {"type": "done", "sent": sent, "first_seq": a.first_seq, "last_seq": seq - 1}
            )
        sock.close(linger=5000)
        if ctrl is not None:
            ctrl.close(linger=5000)
        ctx.term()
    log.info("sent %d frames (%.2f s of airtime) in %.2f s", sent, airtime, time.monotonic() - t0)
    return 0 if not stop else 130
