"""``hil replay``: play a SigMF recording into the link exactly where a radio process would.

Binds the RX endpoint (PUSH) like ``hil radio`` and sends the recording as
sample messages with the same wire format: sample offsets from the
recording's global indices, DROP|OVERFLOW on the first message after a
discontinuity, EOS at the end. Paced at the recorded sample rate or as fast
as possible; once or looped (offsets keep increasing across loops). ``hil rx``
runs unchanged on it; ``hil rx --recording`` decodes a file directly.
"""

from __future__ import annotations

import argparse
import time

import zmq

from ..record import SigMFReader
from ..transport import DROP, OVERFLOW, SampleSender, make_socket
from .common import StopFlag, setup_logging


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hil replay", description=__doc__)
    p.add_argument("recording", help="SigMF stem or .sigmf-meta path")
    p.add_argument(
        "--rx", required=True, help="endpoint to bind for RX samples (PUSH), as hil radio does"
    )
    p.add_argument("--pace", action="store_true", help="send at the recorded sample rate")
    p.add_argument("--loop", type=int, default=1, help="play this many times")
    p.add_argument(
        "--chunk", type=int, default=None, help="samples per message (default: as recorded)"
    )
    p.add_argument(
        "--raw",
        action="store_true",
        help="bare complex64, no header (GNU Radio's zeromq.pull_source; no offsets, no end marker)",
    )
    p.add_argument("--allow-remote", action="store_true")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    log = setup_logging("replay", a.verbose)
    stop = StopFlag()
    rec = SigMFReader(a.recording)
    chunk = a.chunk or int(rec.global_field("hil:chunk", 16384))
    ctx = zmq.Context()
    sock = make_socket(ctx, zmq.PUSH, a.rx, bind=True, allow_remote=a.allow_remote)
    out = SampleSender(
        sock,
        stream_id=2,
        sample_rate_hz=rec.sample_rate_hz,
        center_freq_hz=rec.center_freq_hz,
        raw=a.raw,
    )
    span = rec.captures[-1][1] + (
        rec.n - rec.captures[-1][0]
    )  # global index one past the last sample
    t0 = time.monotonic()
    sent = 0
    log.info(
        "replaying %s: %d samples at %.3f MSps, %d capture segment(s), chunk %d, %s, %d loop(s)",
        a.recording,
        rec.n,
        rec.sample_rate_hz / 1e6,
        len(rec.captures),
        chunk,
        "paced" if a.pace else "as fast as possible",
        a.loop,
    )
    try:
        for k in range(a.loop):
            shift = k * span
            for c in rec.chunks(chunk):
                if stop:
                    raise KeyboardInterrupt
                flags = (DROP | OVERFLOW) if c.new_capture else 0
                while not out.send(
                    c.samples, flags=flags, offset=c.global_index + shift, timeout_s=0.5
                ):
                    if stop:
                        raise KeyboardInterrupt
                sent += len(c.samples)
                if a.pace:
                    ahead = sent / rec.sample_rate_hz - (time.monotonic() - t0)
                    if ahead > 0:
                        time.sleep(ahead)
    except KeyboardInterrupt:
        log.warning("interrupted")
    finally:
        if not a.raw:  # a raw stream has no end marker: the reader sees it stop
            out.end(timeout_s=5.0)
        sock.close(linger=5000)
        ctx.term()
    dt = time.monotonic() - t0
    log.info("replayed %d samples in %.2f s (%.1f MSps)", sent, dt, sent / max(dt, 1e-9) / 1e6)
    return 130 if stop.signal else 0
