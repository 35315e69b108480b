#!/usr/bin/env python3
"""Large-recording benchmark: SigMF write and replay throughput and memory.

    python scripts/bench_record.py [--gb 2] [--dir /tmp]

Writes a recording of --gb gigabytes through SigMFWriter in 65536-sample chunks
(pre-generated, so the figure is the writer's), closes it (SHA-512 and
validation by the sigmf library), then replays it with the replay path
(SigMFReader chunks -> SampleSender -> ZeroMQ PUSH over tcp loopback -> a
PULL consumer thread). Prints MSps and the process's resident memory at
intervals: it must stay flat, since nothing holds the recording in memory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import zmq


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--gb", type=float, default=2.0)
    p.add_argument("--dir", default=None, help="where to write (default: a temporary folder)")
    a = p.parse_args(argv)
    from hil.record import SigMFReader, SigMFWriter
    from hil.transport import SampleReceiver, SampleSender, free_tcp_endpoint, make_socket

    d = Path(a.dir or tempfile.mkdtemp(prefix="hil-bench-rec-"))
    d.mkdir(parents=True, exist_ok=True)
    chunk = 65536
    n_chunks = int(a.gb * 2**30 / (8 * chunk))
    total = n_chunks * chunk
    x = (
        ((np.random.default_rng(0).standard_normal(2 * chunk)) * 0.1)
        .astype(np.float32)
        .view(np.complex64)
    )
    rss0 = rss_mb()
    marks = []
    t0 = time.perf_counter()
    w = SigMFWriter(d / "big", 4e6, 2.4e9, hw="benchmark")
    for i in range(n_chunks):
        w.write(x, i * chunk)
        if i % max(n_chunks // 4, 1) == 0:
            marks.append(rss_mb())
    t_write = time.perf_counter() - t0
    t1 = time.perf_counter()
    w.close()
    t_close = time.perf_counter() - t1
    marks.append(rss_mb())
    size_gb = (d / "big.sigmf-data").stat().st_size / 2**30

    r = SigMFReader(d / "big")
    ctx = zmq.Context()
    ep = free_tcp_endpoint()
    pull = make_socket(ctx, zmq.PULL, ep, bind=True)
    push = make_socket(ctx, zmq.PUSH, ep, bind=False)
    got = [0]

    def consume():
        rx = SampleReceiver(pull)
        while got[0] < total:
            m = rx.recv(timeout_s=10)
            if m is None:
                break
            got[0] += m.header.n_samples

    th = threading.Thread(target=consume)
    th.start()
    rmarks = []
    t2 = time.perf_counter()
    tx = SampleSender(push, sample_rate_hz=r.sample_rate_hz)
    for i, c in enumerate(r.chunks(chunk)):
        tx.send(c.samples, offset=c.global_index)
        if i % max(n_chunks // 4, 1) == 0:
            rmarks.append(rss_mb())
    th.join()
    t_replay = time.perf_counter() - t2
    rmarks.append(rss_mb())
    push.close(0)
    pull.close(0)
    ctx.term()

    print(
        f"\n## SigMF recording: {size_gb:.2f} GiB ({total / 1e6:.0f} M samples), chunks of {chunk}\n"
    )
    print("| step | time (s) | MSamples/s | resident memory during the step (MiB) |")
    print("| --- | --- | --- | --- |")
    print(
        f"| write (cf32_le, streamed) | {t_write:.1f} | {total / t_write / 1e6:.0f} | "
        f"{' -> '.join(f'{m:.0f}' for m in marks[:-1])} |"
    )
    print(
        f"| close: SHA-512 + metadata validation | {t_close:.1f} | {total / t_close / 1e6:.0f} | {marks[-1]:.0f} |"
    )
    print(
        f"| replay (file read -> wire -> consumer) | {t_replay:.1f} | {total / t_replay / 1e6:.0f} | "
        f"{' -> '.join(f'{m:.0f}' for m in rmarks)} |"
    )
    print(
        f"\nReceived on replay: {got[0]} of {total} samples. Memory at start {rss0:.0f} MiB; "
        f"the recording is {size_gb * 1024:.0f} MiB."
    )
    if a.dir is None:
        shutil.rmtree(d)
    else:
        os.remove(d / "big.sigmf-data")
    return 0 if got[0] == total else 1


if __name__ == "__main__":
    raise SystemExit(main())
