"""``hil dashboard``: the live bench view (hil.dashboard) of a link's telemetry.

    hil dashboard --telemetry tcp://127.0.0.1:5601 --telemetry tcp://127.0.0.1:5602
    hil link --dashboard            # starts one for the link, prints its URL
    hil rx ... --dashboard          # one for a receiver (a live radio, hil replay, a recording)

Each ``--telemetry`` is a process's PUB endpoint (the radio's ``--telemetry``, the receiver's
``--telemetry``). The page is at http://127.0.0.1:8750/ unless ``--port`` says otherwise.
It is read-only unless ``--control EP`` names the radio's ``--settings`` endpoint: then its
control panel sets RX/TX gain and LO, each value checked here and by the radio.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from pathlib import Path

from .common import setup_logging


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hil dashboard", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--telemetry",
        action="append",
        required=True,
        help="a process's telemetry endpoint (SUB connects); repeat for several",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to serve on (default loopback)")
    p.add_argument("--port", type=int, default=8750, help="0 picks a free port")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --host; a token is then required in the URL",
    )
    p.add_argument(
        "--control",
        metavar="EP",
        help="let the page change the radio's RX/TX gain and LO through this endpoint (the "
        "radio's --settings); without it the dashboard is read-only",
    )
    p.add_argument("--url-file", help="write the page's URL here once serving")
    p.add_argument("--max-seconds", type=float, help="stop after this long (tests, scripts)")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    setup_logging("dashboard", a.verbose)
    from ..dashboard.server import Dashboard

    for flag, e in [*(("--telemetry", t) for t in a.telemetry), ("--control", a.control)]:
        if e is not None and not e.startswith(("tcp://", "ipc://")):
            raise ValueError(f"{flag} {e!r}: expected tcp://host:port or ipc://path")
    dash = Dashboard(a.telemetry, a.host, a.port, allow_remote=a.allow_remote, control=a.control)

    async def go() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if a.max_seconds is not None:
            loop.call_later(a.max_seconds, stop.set)
        await dash.run(stop, Path(a.url_file) if a.url_file else None)

    asyncio.run(go())
    return 0
