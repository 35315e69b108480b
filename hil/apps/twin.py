"""``hil twin``: serve a simulated ADALM-PLUTO over the libiio network protocol.

    hil twin [--profile firmware_configs/sim_two_pluto.toml] [--port 30431] [--paced]

Then point any libiio client at ``ip:127.0.0.1:30431``: ``iio_info -u ...``,
``adi.Pluto(uri=...)``, ``hil radio --backend pluto --uri ...``, GNU Radio's
PlutoSDR Source/Sink (IIO context URI), IIO Oscilloscope (connect, URI).
The profile's ``[radio.sim]`` table is the channel and front end behind it;
its ``[radio]`` values are the twin's power-on settings (clients then set
their own). Loopback only unless ``--host`` names another address and
``--allow-remote`` is given: the libiio protocol has no authentication.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time

from ..radio import RadioConfig, load_profile
from ..transport.sockets import check_bind
from ..twin import DEFAULT_PORT, PlutoTwin
from .common import StopFlag, setup_logging


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hil twin", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--profile", help="TOML profile; its [radio.sim] table is the channel")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="0 picks a free port")
    p.add_argument("--paced", action="store_true", help="run at the sample rate, like hardware")
    p.add_argument(
        "--snr",
        type=float,
        default=None,
        help="Es/N0 during frames (dB) for clients using the profile's tx gain",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="permit a non-loopback --host (no authentication in this protocol)",
    )
    p.add_argument("--max-seconds", type=float, default=None, help="exit after this long")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    log = setup_logging("twin", a.verbose)
    check_bind(f"tcp://{a.host}:{a.port}", allow_remote=a.allow_remote)
    if a.profile:
        cfg = load_profile(a.profile)["radio"]
    else:
        cfg = RadioConfig()
    if a.snr is not None:  # for frames sent at the profile's tx_gain_db and tx_rms_dbfs
        from dataclasses import replace

        from .radio import sim_path_gain_for_snr

        cfg = cfg.replace(sim=replace(cfg.sim, path_gain_db=sim_path_gain_for_snr(cfg, a.snr)))
    stop = StopFlag()
    with PlutoTwin(cfg, a.host, a.port, paced=a.paced) as twin:
        print(f"Pluto twin at {twin.uri}", flush=True)
        t0 = time.monotonic()
        while not stop:
            if a.max_seconds is not None and time.monotonic() - t0 > a.max_seconds:
                break
            time.sleep(0.1)
        log.info("stopping: %s", twin.stats)
    return 0


def start_process(
    profile: str | None = None, paced: bool = False, log=subprocess.DEVNULL, timeout_s: float = 60.0
) -> tuple[subprocess.Popen, str]:
    """Start ``hil twin`` as its own process on a free loopback port; return it and its URI once
    it accepts connections (for tests and benchmarks). Terminate it when done."""
    from ..transport import free_tcp_endpoint

    port = int(free_tcp_endpoint().rsplit(":", 1)[1])
    cmd = [sys.executable, "-m", "hil.cli", "twin", "--port", str(port)]
    cmd += ["--profile", str(profile)] if profile else []
    cmd += ["--paced"] if paced else []
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"ip:127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"hil twin did not start (exit {proc.poll()})") from None
            time.sleep(0.1)
