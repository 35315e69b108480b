"""``hil rx``: find frames in the RX stream, decode the images, score them, account for every frame.

For every frame the transmitter reports sending (control channel), the
summary says exactly one of: decoded, header_failed, refused (encoded by
another model, or a scheme nobody decodes), cut (by a sample drop) or missed
(never detected).

The rooms: ``sources`` (radio socket, raw GNU Radio frames, SigMF recording),
``receiver`` (the loop: frames found, decoded, scored), ``accounting`` (what
became of each frame), ``hil.jscc.decoders`` (decoders by scheme byte). This
module is the process: arguments, sockets, live view, files.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
import zmq

from ..phy.stream import warm_up
from ..transport import make_socket, recv_json
from .common import (
    StopFlag,
    add_curve_args,
    add_precision_arg,
    cpu_threads,
    curve_client,
    items,
    resolve_checkpoint,
    setup_logging,
)
from .receiver import Receiver
from .sources import open_source

READY_WAIT_S = 2.0  # --ready-file: at the latest this long after the first samples


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hil rx", description=__doc__)
    p.add_argument(
        "--checkpoint", default=None, help="checkpoint stem (default: the shipped k/n=1/6 model)"
    )
    p.add_argument(
        "--radio", default=None, help="the radio process's RX endpoint (PULL connects here)"
    )
    p.add_argument(
        "--raw", action="store_true", help="raw complex64 frames without our header (GNU Radio ZMQ)"
    )
    p.add_argument(
        "--control", default=None, help="endpoint to bind for the transmitter's manifest (PULL)"
    )
    p.add_argument(
        "--dataset", default="builtin", help="where the reference images come from (test split)"
    )
    p.add_argument("--crop", type=int, default=32)
    p.add_argument(
        "--count", type=int, default=32, help="items the transmitter draws from (for references)"
    )
    p.add_argument(
        "--image",
        action="append",
        metavar="FILE",
        help="a whole photograph the transmitter may send (repeatable): found by the content id "
        "in its manifest, it is the reference the received image is scored against",
    )
    p.add_argument(
        "--images", action="append", metavar="DIR", help="every image in DIR, as --image"
    )
    p.add_argument("--metrics", help="write one JSON line per frame here")
    p.add_argument("--summary", help="write the summary JSON here")
    p.add_argument(
        "--save-images", help="folder for received images (PNG) and constellation samples (.npy)"
    )
    p.add_argument(
        "--save-images-max",
        type=int,
        default=64,
        help="save at most this many images (PNG is slow)",
    )
    p.add_argument(
        "--keep-frames",
        type=int,
        default=2000,
        help="per-frame records and statuses kept for the summary (all records go to --metrics); "
        "bounds memory on long runs",
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=30.0,
        help="this long without samples ends the stream (exit 0); with none ever received, exit 1",
    )
    p.add_argument(
        "--ready-file",
        help="touch this file once the receiver has caught up with the stream (hil link starts "
        "tx then)",
    )
    p.add_argument(
        "--truth", help="endpoint to bind for the sim radio's per-burst ground truth (PULL)"
    )
    p.add_argument("--record", help="also write the received stream as a SigMF recording <stem>")
    p.add_argument(
        "--recording", help="decode a SigMF recording instead of a live stream (offline)"
    )
    p.add_argument(
        "--chunk",
        type=int,
        default=None,
        help="--recording: samples per step (default: as recorded)",
    )
    p.add_argument(
        "--no-decode",
        action="store_true",
        help="detect and account only (no images, no model weights)",
    )
    p.add_argument(
        "--max-seconds", type=float, default=None, help="stop after this much stream time"
    )
    p.add_argument(
        "--max-frames", type=int, default=None, help="stop after this many detected frames"
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU threads for torch and numpy's BLAS (1: leaves cores to the radio, and results "
        "do not depend on the machine)",
    )
    p.add_argument(
        "--telemetry",
        help="endpoint to bind a PUB socket on for the live view (hil dashboard); never blocks",
    )
    p.add_argument(
        "--dashboard",
        action="store_true",
        help="also serve the live view (hil dashboard) of this receiver, on loopback",
    )
    p.add_argument("--dashboard-port", type=int, default=8750)
    p.add_argument(
        "--radio-telemetry", help="with --dashboard: the radio process's telemetry endpoint too"
    )
    p.add_argument(
        "--radio-settings",
        help="with --dashboard: the radio's --settings endpoint, so the page can set RX/TX gain "
        "and LO (hil dashboard --control)",
    )
    add_precision_arg(p)
    p.add_argument("-v", "--verbose", action="store_true")
    add_curve_args(p)
    return p


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    if not a.recording and not a.radio:
        raise ValueError("give --radio ENDPOINT (live) or --recording STEM (offline)")
    with cpu_threads(a.threads):
        return _main(a)


def _decoding(a, ckpt):
    """(phy, fingerprint, decoders, references) for the checkpoint; no model with --no-decode."""
    from ..jscc.checkpoint import load_checkpoint, read_meta
    from ..jscc.finetune import transmitter_fingerprint
    from ..phy import OfdmConfig

    if a.no_decode:
        doc = read_meta(ckpt)
        return OfdmConfig.from_dict(doc["phy"]), transmitter_fingerprint(doc), None, []
    from ..jscc.decoders import Decoders

    model, phy, doc, _ = load_checkpoint(ckpt)
    model.set_precision(a.precision)
    _warm_up(model, (3, a.crop, a.crop))
    refs, _ids = items(a.dataset, a.crop, a.count)
    return phy, transmitter_fingerprint(doc), Decoders(model), refs


def _whole_refs(a) -> dict[str, torch.Tensor]:
    """--image/--images: content id -> [3, H, W] float32 reference."""
    if not (a.image or a.images):
        return {}
    from ..jscc.images import gather_images

    return {im.content_id: im.as_float() for im in gather_images(a.image, a.images)}


def _warm_up(model, shape: tuple[int, int, int]) -> None:
    """One decode and one score of a dummy image: the first call of each costs far more than
    the rest (allocations, kernel choice), which a live stream must not wait for."""
    from ..jscc.metrics import psnr, ssim

    k = model.cfg.n_symbols(shape)
    with torch.inference_mode():
        img = model.decode_received(
            torch.zeros(1, k, dtype=torch.complex64), torch.tensor([10.0]), shape, torch.ones(1, k)
        ).clamp(0, 1)
        psnr(img, img.flip(-1))
        ssim(img, img.flip(-1))


def _main(a) -> int:
    log = setup_logging("rx", a.verbose)
    stop = StopFlag()
    ckpt = resolve_checkpoint(a.checkpoint)
    phy, my_fp, decoders, refs = _decoding(a, ckpt)
    warm_up(phy)  # the receive path's compiled kernels, before the first samples
    tap, dash = _live_view(a, log)  # bound before samples flow: its subscribers miss nothing
    ctx = zmq.Context()
    src = open_source(a, log, curve_client(a) if a.radio and not a.recording else None)
    ctrl = make_socket(ctx, zmq.PULL, a.control, bind=True) if a.control else None
    truth_sock = make_socket(ctx, zmq.PULL, a.truth, bind=True) if a.truth else None
    writer = None
    if a.record:
        from ..record import SigMFWriter

        writer = SigMFWriter(
            a.record,
            src.sample_rate or phy.sample_rate_hz,
            0.0,
            hw="ADALM-PLUTO via hil radio",
            extra_global={
                "hil:fingerprint": my_fp.hex(),
                "hil:phy": phy.to_dict(),
                # what the references are, so the recording alone pairs frames with images
                "hil:dataset": a.dataset,
                "hil:crop": a.crop,
                "hil:count": a.count,
            },
        )
    img_dir = Path(a.save_images) if a.save_images else None
    if img_dir:
        img_dir.mkdir(parents=True, exist_ok=True)
    metrics = open(a.metrics, "w") if a.metrics else None
    rx = Receiver(
        phy,
        my_fp,
        decoders,
        refs,
        log,
        manifest=bool(a.control),
        keep_frames=a.keep_frames,
        writer=writer,
        tap=tap,
        metrics=metrics,
        img_dir=img_dir,
        save_images_max=a.save_images_max,
        whole_refs=_whole_refs(a),
    )
    meta = {
        "fingerprint": my_fp.hex(),
        "source": a.recording or a.radio,
        "decoder": decoders is not None,
    }

    def control() -> None:
        for sock in (ctrl, truth_sock):
            while sock is not None:
                m = recv_json(sock, timeout_s=0)
                if m is None:
                    break
                rx.message(m)

    t0 = time.monotonic()
    last_print = last_data = t0
    first_data = None
    eos = idle_end = False
    try:
        while not stop and not eos:
            control()
            got = src.next()
            now = time.monotonic()
            if got is None:
                rx.decode_waiting()  # nothing came: what waits is decoded now
                if now - last_data > a.idle_timeout:
                    if first_data is None:
                        log.error("no samples for %.0f s; giving up", a.idle_timeout)
                    else:  # a stream that stops is an end (GNU Radio sends no end marker)
                        log.info("no samples for %.0f s: the stream ended", a.idle_timeout)
                        idle_end = True
                    break
                continue
            last_data = now
            if first_data is None:
                first_data = now
            # samples already queued: the frames found may wait for a bigger decoder batch
            behind = not got.eos and src.waiting()
            rx.feed(got, more=behind)
            if len(got.samples):
                if tap is not None:
                    tap.samples(got.samples)
                    if tap.status_due():
                        tap.status(rx.acc.live(), src.stats_dict(), rx.stats(), meta)
                # ready once caught up with the live stream: what the radio sent before the
                # receiver started (0.4 s in hil link) is read first, not while frames arrive;
                # a receiver that stays behind says so after READY_WAIT_S all the same
                if a.ready_file and (not behind or now - first_data > READY_WAIT_S):
                    Path(a.ready_file).touch()
                    a.ready_file = None
            eos = got.eos
            if (
                a.max_seconds is not None
                and rx.stream_samples >= a.max_seconds * phy.sample_rate_hz
            ):
                log.info("max-seconds reached")
                break
            if a.max_frames is not None and rx.fr.stats.detections >= a.max_frames:
                log.info("max-frames reached")
                break
            if now - last_print > 2.0:
                last_print = now
                rx.progress()
    finally:
        src.close()
    try:
        # late manifest and truth messages
        if ctrl is not None or truth_sock is not None:
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                control()
                time.sleep(0.05)
        for s_ in (ctrl, truth_sock):
            if s_ is not None:
                s_.close(linger=0)
        ctx.term()
        # images still waiting for lost frames: decoded, concealed (and their records written)
        rx.finish()
        if writer is not None:
            _close_recording(writer, rx, src, log)
    finally:
        if metrics:
            metrics.close()
    summary = rx.summary()
    summary["precision"] = decoders.model.precision_name if decoders else None
    summary.update(
        {
            "stream": src.stats_dict(),
            "end_of_stream": eos,
            "wall_seconds": time.monotonic() - t0,
            "stream_seconds": (last_data - first_data) if first_data is not None else 0.0,
            "recording": a.record or a.recording,
        }
    )
    if img_dir is not None and rx.constellation:
        np.save(
            img_dir / "constellation.npy",
            np.concatenate(rx.constellation).astype(np.complex64),
            allow_pickle=False,
        )
    if a.summary:
        Path(a.summary).write_text(json.dumps(summary, indent=1))
    if tap is not None:
        tap.status(summary["counts"], summary["stream"], summary["receiver"], meta)
        tap.summary(summary)
        tap.close()
    if dash is not None:
        time.sleep(1.0)  # the page gets the summary
        dash.terminate()
        dash.wait(10)
    c = summary["counts"]
    log.info(
        "sent %d: decoded %d, header-failed %d, refused %d, cut by drops %d, missed %d; mean PSNR %s dB",
        c["sent"],
        c["decoded"],
        c["header_failed"],
        c["refused"],
        c["cut"],
        c["missed"],
        f"{summary['psnr_db_mean']:.2f}" if summary["psnr_db_mean"] is not None else "n/a",
    )
    stopped_on_limit = a.max_seconds is not None or a.max_frames is not None
    return 0 if (eos or idle_end or rx.acc.done or stopped_on_limit) else 1


def _close_recording(writer, rx: Receiver, src, log) -> None:
    """Annotate the recording with frames as sent and as detected, and the radio's settings."""
    _annotate(writer, rx.detections, rx.manifest, rx.truths)
    writer.fc = src.center_freq_hz
    if rx.radio_info:
        rc_ = rx.radio_info["config"]
        uri = f", {rc_.get('uri')}" if rc_.get("uri") else ""
        writer.hw = f"ADALM-PLUTO ({rc_.get('backend')} backend{uri})"
        writer.extra["hil:radio_profile"] = rx.radio_info.get("profile")
        writer.extra["hil:radio_config"] = rc_
        writer.extra["hil:rx_gain_mode"] = rc_.get("rx_gain_mode")
        writer.extra["hil:rx_gain_db"] = rc_.get("rx_gain_db")
        writer.extra["hil:tx_gain_db"] = rc_.get("tx_gain_db")
    writer.extra["hil:chunk"] = int(src.first_chunk or 16384)  # replay in the same steps
    # what the transmitter said it sent (seq -> item id), so the recording alone pairs frames
    # with images (hil finetune); bounded: a very long run keeps the annotations only
    sent = sorted((int(m["seq"]), m.get("item_id")) for m in rx.manifest.values())
    if sent and len(sent) <= 200_000:
        writer.extra["hil:sent"] = {"seq": [s for s, _ in sent], "item_id": [i for _, i in sent]}
    path = writer.close()
    log.info(
        "recording written: %s (%d samples, %d annotations)",
        path,
        writer.n,
        len(writer.annotations),
    )


def _live_view(a, log):
    """The telemetry tap (--telemetry), and with --dashboard a dashboard process reading it."""
    if (a.radio_settings or a.radio_telemetry) and not a.dashboard:
        raise ValueError("--radio-telemetry and --radio-settings are for --dashboard")
    if a.dashboard and not a.telemetry:
        from ..transport.sockets import free_tcp_endpoint

        a.telemetry = free_tcp_endpoint()
    if not a.telemetry:
        return None, None
    from ..dashboard.tap import RxTap

    tap = RxTap(a.telemetry)
    dash = None
    if a.dashboard:
        import subprocess
        import sys

        cmd = [sys.executable, "-m", "hil.cli", "dashboard", "--telemetry", a.telemetry]
        if a.radio_telemetry:
            cmd += ["--telemetry", a.radio_telemetry]
        if a.radio_settings:
            cmd += ["--control", a.radio_settings]
        dash = subprocess.Popen([*cmd, "--port", str(a.dashboard_port)])
        log.info("dashboard at http://127.0.0.1:%d/", a.dashboard_port)
    return tap, dash


def _annotate(writer, detections: list[dict], manifest: dict, truths: dict) -> None:
    """Frames as sent (transmitter manifest + sim ground truth) and as detected, as SigMF annotations."""
    for msg_seq, t in sorted(truths.items()):
        m = manifest.get(msg_seq, {})
        start = writer.file_index(t.get("frame_offset", t["rx_offset"]))
        if start is None:
            continue
        writer.annotate(
            start,
            int(m.get("frame_len", t["n"])),
            "frame sent",
            seq=m.get("seq"),
            item_id=m.get("item_id"),
            device_offset=t.get("frame_offset", t["rx_offset"]),
            true_snr_db=round(t.get("snr_db", 0.0), 3),
            true_cfo_hz=round(t.get("cfo_hz", 0.0), 1),
            delays=t.get("delays"),
            tap_power_db=t.get("tap_power_db"),
        )
    for d in detections:
        start = writer.file_index(d["device_offset"])
        if start is None:
            continue
        fields = {k: v for k, v in d.items() if k != "status"}
        writer.annotate(start, 0, f"frame detected ({d['status']})", **fields)
