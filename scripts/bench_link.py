#!/usr/bin/env python3
"""Link figures: HIL gap vs the ideal differentiable channel, processing vs airtime,
transport throughput vs raw pyzmq.

Usage:
    python scripts/bench_link.py                 # all three (a few minutes)
    python scripts/bench_link.py --only gap,speed,transport --count 64
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import zmq

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "firmware_configs/sim_two_pluto.toml"


def _link(args: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run(
            [sys.executable, "-m", "hil.cli", "link", "--json", "--out", d, *args],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if r.returncode != 0:
            raise RuntimeError(f"hil link failed: {r.stderr[-2000:]}")
        return json.loads(r.stdout)


def gap(count: int):
    from hil.apps.common import items, shipped_checkpoint
    from hil.channel import profile
    from hil.jscc.checkpoint import load_checkpoint
    from hil.jscc.train import evaluate

    model, phy, _, _ = load_checkpoint(shipped_checkpoint())
    tiles = items("builtin", 32, count)[0]
    print(
        f"\n## HIL gap: {count} images through the whole link (sim backend, {PROFILE.name}: multipath, "
        "10 ppm XO offset, DC, IQ imbalance, phase noise, 12-bit) vs the same model and images on the "
        "ideal differentiable multipath_cfo channel at the same SNR\n"
    )
    print(
        "| SNR set (dB) | frames decoded | link PSNR (dB) | ideal PSNR, same decoded items (dB) | gap (dB) | "
        "ideal PSNR, all items (dB) | link SNR estimate (dB) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for snr in (5.0, 10.0, 20.0):
        s = _link(["--profile", str(PROFILE), "--snr", str(snr), "--count", str(count)])
        got = sorted(
            {
                r["item_id"]
                for r in s["per_frame"]
                if r.get("status") == "decoded" and "psnr_db" in r
            }
        )
        ideal_all = evaluate(model, phy, profile("multipath_cfo"), [snr], tiles)[snr]["psnr_db"]
        ideal_dec = (
            evaluate(model, phy, profile("multipath_cfo"), [snr], tiles[got])[snr]["psnr_db"]
            if got
            else float("nan")
        )
        c = s["counts"]
        print(
            f"| {snr:g} | {c['decoded']}/{c['sent']} | {s['psnr_db_mean']:.2f} | {ideal_dec:.2f} | "
            f"{ideal_dec - s['psnr_db_mean']:+.2f} | {ideal_all:.2f} | {s['snr_est_db_mean']:.2f} |"
        )
    print(
        "\ngap = ideal - link on the items the link delivered (a frame the receiver does not detect has no "
        "image to score; those are counted in 'frames decoded')."
    )


def speed(count: int):
    print(f"\n## Processing vs airtime ({count} images of 32x32, one frame each, 4 MSps)\n")
    print(
        "| mode | images/s | airtime (s) | receiver busy time (s) | real-time factor | samples lost | decoded |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for mode, extra in (
        ("free-running (sim as fast as possible)", []),
        ("paced at 4 MSps", ["--pace"]),
    ):
        s = _link(
            [
                "--profile",
                str(ROOT / "firmware_configs/sim_clean.toml"),
                "--count",
                str(count),
                *extra,
            ]
        )
        air = s["stream_samples"] / s["sample_rate_hz"]
        busy = s["stream_seconds"]
        c = s["counts"]
        print(
            f"| {mode} | {c['decoded'] / max(busy, 1e-9):.0f} | {air:.2f} | {busy:.2f} | {air / max(busy, 1e-9):.2f}x | "
            f"{s['receiver']['lost_samples']} | {c['decoded']}/{c['sent']} |"
        )
    print(
        "\nreal-time factor = airtime received / wall time from the first to the last RX message; "
        "above 1x the receiver outruns the radio. Paced, it equals the radio's pace (1x) when processing keeps up."
    )


def transport(n_msgs: int = 2000, size: int = 65536):
    from hil.transport import SampleReceiver, SampleSender, free_tcp_endpoint, make_socket

    x = (np.random.default_rng(0).standard_normal(2 * size).astype(np.float32)).view(np.complex64)

    def run(kind: str) -> float:
        ctx = zmq.Context()
        ep = free_tcp_endpoint()
        pull = make_socket(ctx, zmq.PULL, ep, bind=True)
        push = make_socket(ctx, zmq.PUSH, ep, bind=False)
        done = threading.Event()

        def consume():
            if kind == "hil":
                rx = SampleReceiver(pull)
                for _ in range(n_msgs):
                    rx.recv()
            else:
                for _ in range(n_msgs):
                    f = pull.recv(copy=False)
                    np.frombuffer(f.buffer, np.complex64)
            done.set()

        t = threading.Thread(target=consume)
        t.start()
        time.sleep(0.2)
        t0 = time.perf_counter()
        if kind == "hil":
            tx = SampleSender(push, sample_rate_hz=4e6)
            for _ in range(n_msgs):
                tx.send(x)
        else:
            for _ in range(n_msgs):
                push.send(x, copy=False)
        done.wait()
        dt = time.perf_counter() - t0
        t.join()
        push.close(0)
        pull.close(0)
        ctx.term()
        return n_msgs * size / dt

    raw = [run("raw") for _ in range(3)]
    ours = [run("hil") for _ in range(3)]
    r, o = max(raw), max(ours)
    print(
        f"\n## Transport throughput, tcp loopback, {n_msgs} messages of {size} samples (best of 3)\n"
    )
    print("| path | MSamples/s | vs raw pyzmq |")
    print("| --- | --- | --- |")
    print(f"| raw pyzmq (send/recv one frame, zero-copy) | {r / 1e6:.0f} | 1.00x |")
    print(
        f"| hil.transport (header + payload, validated incl. NaN check) | {o / 1e6:.0f} | {o / r:.2f}x |"
    )


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--only", default="gap,speed,transport")
    p.add_argument("--count", type=int, default=64)
    a = p.parse_args(argv)
    only = set(a.only.split(","))
    if "gap" in only:
        gap(a.count)
    if "speed" in only:
        speed(max(a.count, 256))
    if "transport" in only:
        transport()


if __name__ == "__main__":
    main()
