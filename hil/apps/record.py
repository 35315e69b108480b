"""``hil record``: capture a radio process's RX stream into a SigMF recording.

Connects to the RX endpoint of any ``hil radio`` (Pluto, sim, the twin) and
streams the samples to ``<out>.sigmf-data`` in chunks (never the whole
recording in memory) for ``--seconds`` of stream time or ``--frames``
detected frames. Overflow/drop flags become annotations and capture segments;
frames the receiver detects become annotations (header fields, SNR/CFO
estimates). With ``--control`` / ``--truth`` bound, the transmitter's manifest
and the sim radio's ground truth annotate each frame as sent.

It is ``hil rx --no-decode --record`` under another name: same receiver, no
model weights loaded.
"""

from __future__ import annotations

import argparse

from . import rx


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="hil record", description=__doc__)
    p.add_argument("--radio", required=True, help="the radio process's RX endpoint")
    p.add_argument("--out", required=True, help="recording stem")
    p.add_argument("--seconds", type=float, default=None, help="stream time to record")
    p.add_argument("--frames", type=int, default=None, help="stop after this many detected frames")
    p.add_argument("--control", help="bind: the transmitter's manifest")
    p.add_argument("--truth", help="bind: the sim radio's ground truth")
    p.add_argument("--checkpoint", default=None, help="whose PHY to detect with (default: shipped)")
    p.add_argument("--idle-timeout", type=float, default=30.0)
    a = p.parse_args(argv)
    if a.seconds is None and a.frames is None:
        p.error("give --seconds or --frames (or both)")
    args = [
        "--radio",
        a.radio,
        "--record",
        a.out,
        "--no-decode",
        "--idle-timeout",
        str(a.idle_timeout),
    ]
    if a.seconds is not None:
        args += ["--max-seconds", str(a.seconds)]
    if a.frames is not None:
        args += ["--max-frames", str(a.frames)]
    for k in ("control", "truth", "checkpoint"):
        v = getattr(a, k)
        if v:
            args += [f"--{k}", v]
    return rx.main(args)
