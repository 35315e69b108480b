#!/usr/bin/env python3
"""Soak: run the sim link paced in real time for N minutes; report frames, accounting, PSNR drift and RSS.

    python scripts/soak.py --minutes 60 [--profile firmware_configs/sim_two_pluto.toml] [--out runs/soak]

Starts hil radio (paced at the sample rate), hil rx and hil tx (paced, repeating
the item set), samples the resident memory of the three processes every
--interval seconds, stops the transmitter after --minutes (it ends its streams
cleanly), waits for the receiver's summary and prints: frames sent/decoded/
header-failed/missed and whether the accounting balances, mean PSNR per
interval (drift), and RSS per process over time with its growth from the first
sample after warm-up to the last. Exit code 0 when every frame is accounted for
and no process grew by more than 5 %.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rss_mib(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--minutes", type=float, default=60.0)
    p.add_argument("--profile", default=str(ROOT / "firmware_configs/sim_two_pluto.toml"))
    p.add_argument("--interval", type=float, default=30.0, help="seconds between samples")
    p.add_argument(
        "--gap",
        type=int,
        default=36_000,
        help="silent samples after each frame (sets the frame rate)",
    )
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from hil.transport import free_tcp_endpoints

    out = Path(a.out or tempfile.mkdtemp(prefix="hil-soak-"))
    out.mkdir(parents=True, exist_ok=True)
    prof = out / "paced_profile.toml"
    text = Path(a.profile).read_text()
    if "[radio.sim]" in text and "paced" not in text:
        text = text.replace("[radio.sim]", "[radio.sim]\npaced = true", 1)
    prof.write_text(text)
    ep_tx, ep_rx, ep_ctrl = free_tcp_endpoints(3)
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")

    def start(name, *args):
        log = open(out / f"{name}.log", "w")
        return subprocess.Popen(
            [sys.executable, "-m", "hil.cli", name, *map(str, args)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        ), log

    procs = {}
    procs["radio"] = start(
        "radio", "--profile", prof, "--tx", ep_tx, "--rx", ep_rx, "--max-tx-backlog", "1.0"
    )
    procs["rx"] = start(
        "rx",
        "--radio",
        ep_rx,
        "--control",
        ep_ctrl,
        "--count",
        64,
        "--summary",
        out / "summary.json",
        "--metrics",
        out / "frames.jsonl",
        "--idle-timeout",
        120,
    )
    procs["tx"] = start(
        "tx",
        "--radio",
        ep_tx,
        "--control",
        ep_ctrl,
        "--count",
        64,
        "--repeat",
        1_000_000,
        "--gap",
        a.gap,
        "--pace",
    )
    t0 = time.monotonic()
    samples = []  # (t, {name: rss})
    end = t0 + a.minutes * 60
    try:
        while time.monotonic() < end:
            if any(p.poll() is not None for p, _ in procs.values()):
                print(
                    "a process exited early:",
                    {n: p.poll() for n, (p, _) in procs.items()},
                    file=sys.stderr,
                )
                break
            samples.append(
                (time.monotonic() - t0, {n: rss_mib(p.pid) for n, (p, _) in procs.items()})
            )
            print(
                f"[{samples[-1][0] / 60:6.1f} min] RSS MiB "
                + ", ".join(f"{n} {v:.0f}" for n, v in samples[-1][1].items() if v is not None),
                flush=True,
            )
            time.sleep(min(a.interval, max(0.0, end - time.monotonic())))
        samples.append((time.monotonic() - t0, {n: rss_mib(p.pid) for n, (p, _) in procs.items()}))
        procs["tx"][0].send_signal(signal.SIGTERM)  # ends its streams with EOS / done
        procs["tx"][0].wait(60)
        procs["rx"][0].wait(300)
    finally:
        for n in ("tx", "rx", "radio"):
            p, log = procs[n]
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
            log.close()
    minutes = (time.monotonic() - t0) / 60
    s = json.loads((out / "summary.json").read_text())
    c = s["counts"]
    print(f"\n## Soak: {minutes:.1f} min, sim link paced at 4 MSps ({Path(a.profile).name})\n")
    print(
        f"frames sent {c['sent']}, decoded {c['decoded']}, header failed {c['header_failed']}, "
        f"missed {c['missed']}, refused {c['refused']}; accounting balanced: {c['balanced']}"
    )
    recs = [json.loads(line) for line in (out / "frames.jsonl").read_text().splitlines()]
    if recs:
        t_first = recs[0]["time"]
        span = max(recs[-1]["time"] - t_first, 1e-9)
        print("\n| interval | frames | mean PSNR (dB) |\n| --- | --- | --- |")
        for i in range(6):
            lo, hi = t_first + span * i / 6, t_first + span * (i + 1) / 6
            part = [
                r["psnr_db"]
                for r in recs
                if lo <= r["time"] < hi + (1e-6 if i == 5 else 0) and "psnr_db" in r
            ]
            if part:
                print(f"| {i + 1}/6 | {len(part)} | {sum(part) / len(part):.2f} |")
    warm = next((i for i, (t, _) in enumerate(samples) if t >= min(60.0, a.minutes * 60 / 4)), 0)
    ok = c["balanced"]
    print(
        "\n| process | RSS after warm-up (MiB) | RSS at the end (MiB) | growth |\n| --- | --- | --- | --- |"
    )
    for n in ("radio", "rx", "tx"):
        first, last = samples[warm][1].get(n), samples[-1][1].get(n)
        if first and last:
            g = (last - first) / first
            ok &= g < 0.05
            print(f"| {n} | {first:.0f} | {last:.0f} | {100 * g:+.1f} % |")
    print(f"\nreport folder: {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
