#!/usr/bin/env python3
"""RX throughput through the Pluto twin with pyadi-iio, beside the sim backend, in one run.

    python scripts/bench_twin.py [--profile firmware_configs/sim_two_pluto.toml] [--seconds 3]

Starts ``hil twin`` (unpaced: as fast as it can serve) as its own process,
then, for each RX buffer size, reads for --seconds with:
  - pyadi-iio ``adi.Pluto(uri).rx()`` over libiio's network backend (what GNU
    Radio and IIO Oscilloscope would see), and
  - the project's Pluto backend (``PlutoRadio.rx()``: pyadi plus scaling and
    the overflow bookkeeping),
and, in this process, the sim backend (``SimRadio.rx()``) on the same
profile: the same engine without the protocol. Prints MSps and the ratio of
each to the sim backend, and the Pluto's real-time needs for scale (4 MSps
used here by default; 61.44 MSps the AD9363's maximum).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rate(fn, n: int, seconds: float) -> float:
    fn()  # warm-up
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        done += n
    return done / (time.perf_counter() - t0) / 1e6


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--profile", default=str(ROOT / "firmware_configs/sim_two_pluto.toml"))
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--sizes", default="16384,65536,262144")
    a = p.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import adi

    from hil.apps.twin import start_process
    from hil.radio import load_profile
    from hil.radio.pluto import PlutoRadio
    from hil.radio.sim import SimRadio

    base = load_profile(a.profile)["radio"]
    twin, uri = start_process(a.profile)
    try:
        print(
            f"## RX throughput: Pluto twin ({uri}, unpaced) vs the sim backend, {Path(a.profile).name}\n"
        )
        print(
            "| RX buffer (samples) | pyadi-iio via twin (MSps) | Pluto backend via twin (MSps) "
            "| sim backend (MSps) | pyadi / sim | Pluto backend / sim |"
        )
        print("| --- | --- | --- | --- | --- | --- |")
        for n in (int(s) for s in a.sizes.split(",")):
            sdr = adi.Pluto(uri=uri)
            sdr.sample_rate = int(base.sample_rate_hz)
            sdr.rx_buffer_size = n
            r_pyadi = rate(sdr.rx, n, a.seconds)
            sdr.rx_destroy_buffer()
            del sdr
            cfg = base.replace(backend="pluto", uri=uri, rx_buffer_size=n)
            radio = PlutoRadio(cfg)
            radio.idle_fill = False  # RX alone: no TX thread feeding zeros
            r_backend = rate(radio.rx, n, a.seconds)
            radio.close()
            sim = SimRadio(base.replace(backend="sim", rx_buffer_size=n))
            r_sim = rate(sim.rx, n, a.seconds)
            sim.close()
            print(
                f"| {n} | {r_pyadi:.1f} | {r_backend:.1f} | {r_sim:.1f} | "
                f"{r_pyadi / r_sim:.2f}x | {r_backend / r_sim:.2f}x |"
            )
        print(
            f"\nreal time needs {base.sample_rate_hz / 1e6:g} MSps at this profile's rate "
            "(61.44 MSps at the AD9363's maximum)"
        )
    finally:
        twin.terminate()
        twin.wait(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
