#!/usr/bin/env python3
"""Link figures: HIL gap vs the ideal differentiable channel, what full scale costs with and
without the payload's scrambling, processing vs airtime, transport throughput vs raw pyzmq,
the dashboard's cost (none, served, a page reading, a page stalled), a 512x768 photograph
end to end, the receiver on a recorded whole-photograph link with and without skipping the
costly header decoders for echoes (--only echoes), the link paced at 20 MSps (--only
speed20).

Usage:
    python scripts/bench_link.py                 # all six (several minutes)
    python scripts/bench_link.py --only gap,fullscale,speed,speed20,transport,dashboard,whole,echoes --count 64
"""

from __future__ import annotations

import argparse
import json
import os
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
        ideal_all = evaluate(
            model, phy, profile("multipath_cfo", phy.sample_rate_hz), [snr], tiles
        )[snr]["psnr_db"]
        ideal_dec = (
            evaluate(model, phy, profile("multipath_cfo", phy.sample_rate_hz), [snr], tiles[got])[
                snr
            ]["psnr_db"]
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


def fullscale(count: int, snrs=(20.0, 40.0)):
    """The shipped model's tiles as hil tx sends them (to_full_scale at -12 dBFS) through a
    clean AWGN stream and the streaming receiver, with the payload rotated as format 3 sends
    it and as format 2 did (the symbols pre-rotated by the inverse, so the waveform is the
    unrotated one; the receiver's rotation is undone before decoding); decoded with the
    decoder's inputs clamped to the training range (``JsccModel.decode_received``) and not."""
    import torch

    from hil.apps.common import items, shipped_checkpoint
    from hil.apps.tx import encode_items
    from hil.channel import profile
    from hil.jscc.checkpoint import load_checkpoint
    from hil.jscc.metrics import psnr
    from hil.jscc.train import evaluate
    from hil.phy import FrameBuilder, FrameReceiver, Header, to_full_scale
    from hil.phy.sequences import payload_phases

    torch.set_num_threads(1)
    model, phy, _, _ = load_checkpoint(shipped_checkpoint())
    tiles = items("builtin", 32, count)[0]
    syms = encode_items(model, tiles)
    k = len(syms[0])
    ph = payload_phases(k)
    fb = FrameBuilder(phy)
    top = model.trained_snr_db[1]
    ideal = evaluate(model, phy, profile("awgn", phy.sample_rate_hz), [top], tiles)[top]
    print(
        f"\n## Full scale with and without the payload's rotation ({count} tiles, -12 dBFS RMS, "
        f"AWGN, the streaming receiver; the model was trained over {model.trained_snr_db} dB)\n"
    )
    print(
        "| SNR (dB) | payload on the air | frames decoded | samples clipped | PSNR (dB) | "
        "PSNR, decoder inputs not clamped (dB) |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for snr_db in snrs:
        for name, pre in (("rotated (format 3)", 1), ("unrotated (format 2)", np.conj(ph))):
            rng = np.random.default_rng(0)
            parts, clipped, n = [np.zeros(1000, np.complex64)], 0, 0
            for i, s in enumerate(syms):
                h = Header(
                    seq=i, item_id=i, fingerprint=b"\0" * 8, payload_len=k, shape=(3, 32, 32)
                )
                f, st = to_full_scale(fb.build_numpy((s * pre).astype(np.complex64), h), -12.0)
                clipped += st["clipped_fraction"] * len(f)
                n += len(f)
                parts += [f, np.zeros(400, np.complex64)]
            x = np.concatenate(parts)
            sigma2 = 10 ** (-12 / 10) / 10 ** (snr_db / 10)
            noise = rng.normal(size=(len(x), 2)) @ np.array([1, 1j]) * np.sqrt(sigma2 / 2)
            y = (x + noise).astype(np.complex64)
            fr = FrameReceiver(phy, header_prior=False, header_rereads=0)
            ev = [e for a in range(0, len(y), 16384) for e in fr.push(y[a : a + 16384])]
            ok = [e for e in ev if e.status == "ok"]
            # back to what was encoded
            sym = np.stack([e.symbols * np.conj(pre) for e in ok]).astype(np.complex64)
            snr = torch.tensor([e.snr_db for e in ok], dtype=torch.float32)
            gain = torch.from_numpy(np.stack([e.symbol_gain for e in ok]).astype(np.float32))
            ref = tiles[[e.header.item_id for e in ok]]
            with torch.inference_mode():
                sym_t = torch.from_numpy(sym)
                img = model.decode_received(sym_t, snr, (3, 32, 32), gain).clamp(0, 1)
                raw = model.decoder(sym_t, snr, (3, 32, 32), gain).clamp(0, 1)
            print(
                f"| {snr_db:g} | {name} | {len(ok)}/{count} | {100 * clipped / n:.3f} % | "
                f"{float(psnr(img, ref).mean()):.2f} | {float(psnr(raw, ref).mean()):.2f} |"
            )
    print(
        f"\nideal: the same model and tiles on the differentiable AWGN channel at {top:g} dB, "
        f"{ideal['psnr_db']:.2f} dB (no full scale, frame timing known)."
    )


def _pace_row(label: str, s: dict) -> str:
    """A table row from a link's summary: label | images/s | airtime | receiver busy time |
    real-time factor | samples lost | decoded |."""
    air = s["stream_samples"] / s["sample_rate_hz"]
    busy = max(s["stream_seconds"], 1e-9)
    c = s["counts"]
    return (
        f"| {label} | {c['decoded'] / busy:.0f} | {air:.2f} | {busy:.2f} | {air / busy:.2f}x | "
        f"{s['receiver']['lost_samples']} | {c['decoded']}/{c['sent']} |"
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
        print(_pace_row(mode, s))
    print(
        "\nreal-time factor = airtime received / wall time from the first to the last RX message; "
        "above 1x the receiver outruns the radio. Paced, it equals the radio's pace (1x) when processing keeps up."
    )


def speed20(count: int, gaps=(200_000, 100_000, 0)):
    """The link paced at 20 MSps (the AD9361's rates over Ethernet or an FPGA): the shipped
    model exported with its PHY at 20 MSps (``hil export --sample-rate``), the 20 MSps sim
    profile; with a silent gap after every frame (the image rate the JSCC networks keep up
    with on two cores) and back to back."""
    from hil.apps.common import shipped_checkpoint
    from hil.jscc.checkpoint import export_checkpoint

    print(f"\n## Paced at 20 MSps ({count} images of 32x32, one frame each)\n")
    print(
        "| silent gap after each frame (samples) | images/s | airtime (s) | receiver busy time (s) "
        "| real-time factor | samples lost | decoded | PSNR (dB) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as d:
        ckpt = export_checkpoint(shipped_checkpoint(), Path(d) / "k6_20msps", 20e6)
        for g in gaps:
            s = _link(
                [
                    *("--profile", str(ROOT / "firmware_configs/sim_clean_20msps.toml")),
                    *("--checkpoint", str(ckpt), "--count", str(count), "--gap", str(g)),
                    "--pace",
                ]
            )
            print(_pace_row(str(g), s) + f" {s['psnr_db_mean'] or float('nan'):.2f} |")
    print(
        "\nThe sim radio waits for a receiver that falls behind (a real one would drop samples): "
        "a real-time factor of 1x or more is what keeps pace without loss. All three processes "
        "share this machine's cores, the simulated radio among them: it draws 20 M complex "
        "noise samples a second and quantises them."
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


def _link_with_page(args: list[str], page: str | None) -> dict:
    """hil link with --dashboard; ``page``: None (no page open), "reading" (a client that
    takes every push) or "stalled" (a WebSocket opened and never read)."""
    import asyncio
    import socket

    with tempfile.TemporaryDirectory() as d:
        extra = ["--dashboard", "--dashboard-port", "0"] if page is not False else []
        proc = subprocess.Popen(
            [sys.executable, "-m", "hil.cli", "link", "--json", "--out", d, *args, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        url_file = Path(d) / "dashboard.url"
        stop = threading.Event()
        got = [0]
        if page:
            end = time.monotonic() + 60
            while not url_file.exists() and time.monotonic() < end and proc.poll() is None:
                time.sleep(0.02)
            url = url_file.read_text().strip().rstrip("/")
            host, port = url.removeprefix("http://").split(":")
            if page == "stalled":
                s = socket.create_connection((host, int(port)))
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.sendall(
                    b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
                )
            else:

                async def read():
                    import aiohttp

                    async with aiohttp.ClientSession() as cs, cs.ws_connect(url + "/ws") as ws:
                        while not stop.is_set():
                            try:
                                m = await asyncio.wait_for(ws.receive(), 0.5)
                            except TimeoutError:
                                continue
                            if m.type != aiohttp.WSMsgType.TEXT:
                                break  # the dashboard closed at the end of the link
                            got[0] += 1

                th = threading.Thread(target=lambda: asyncio.run(read()), daemon=True)
                th.start()
        out, err = proc.communicate(timeout=1800)
        stop.set()
        if page == "stalled":
            s.close()
        if proc.returncode != 0:
            raise RuntimeError(f"hil link failed: {err[-2000:]}")
        doc = json.loads(out)
        doc["page_messages"] = got[0]
        return doc


def _decode_rate(s: dict) -> float:
    t = sorted(r["time"] for r in s["per_frame"] if r.get("status") == "decoded")
    return (len(t) - 1) / max(t[-1] - t[0], 1e-9)


def dashboard(count: int, rounds: int = 3):
    print(
        f"\n## The dashboard's cost ({count} images, free-running sim, {rounds} rounds, median)\n"
    )
    print("| dashboard | images/s | vs none | samples lost | decoded | pushes read by the page |")
    print("| --- | --- | --- | --- | --- | --- |")
    modes = (
        ("none", False),
        ("served, no page", None),
        ("page reading", "reading"),
        ("page stalled", "stalled"),
    )
    args = ["--profile", str(ROOT / "firmware_configs/sim_clean.toml"), "--count", str(count)]
    res: dict[str, list] = {m: [] for m, _ in modes}
    for _ in range(rounds):  # interleaved, so drift on a shared machine hits every mode alike
        for m, page in modes:
            res[m].append(_link_with_page(args, page))
    base = None
    for m, _ in modes:
        rates = sorted(_decode_rate(s) for s in res[m])
        rate = rates[len(rates) // 2]
        base = base or rate
        lost = sum(s["receiver"]["lost_samples"] + s["stream"]["drop_flags"] for s in res[m])
        dec = sum(s["counts"]["decoded"] for s in res[m])
        sent = sum(s["counts"]["sent"] for s in res[m])
        pushes = sum(s["page_messages"] for s in res[m])
        print(f"| {m} | {rate:.0f} | {rate / base:.3f} | {lost} | {dec}/{sent} | {pushes} |")
    print(
        "\nimages/s = decoded frames / wall time from the first to the last decoded frame"
        " (start-up excluded); samples lost ="
        " receiver gaps + radio drop flags, summed over the rounds."
    )


def _photo_512x768() -> Path:
    """A held-out corpus photograph of 768x512 as a PNG in a temporary folder."""
    from PIL import Image

    from hil.jscc import corpus as C

    images, ids = C.load_split("whole")
    i = next(j for j, im in enumerate(images) if tuple(im.shape[1:]) == (512, 768))
    f = Path(tempfile.mkdtemp()) / f"{ids[i].split('@')[0]}.png"
    Image.fromarray(images[i].permute(1, 2, 0).numpy()).save(f)
    return f


def whole(repeat: int = 8, rounds: int = 5):
    """A 512x768 photograph end to end: each stage timed in one process, then the link."""
    import torch

    from hil.apps.common import shipped_checkpoint
    from hil.apps.tx import encode_whole
    from hil.channel import ChannelChain, profile
    from hil.jscc.checkpoint import load_checkpoint
    from hil.jscc.decoders import JsccDecoder
    from hil.jscc.images import read_image
    from hil.jscc.metrics import psnr
    from hil.jscc.model import native_bfloat16
    from hil.phy import MAX_PAYLOAD, FrameBuilder, FrameReceiver, Header, to_full_scale
    from hil.phy.header import SCHEME_JSCC_TILED

    photo = _photo_512x768()
    im = read_image(photo)
    model, phy, doc, _ = load_checkpoint(shipped_checkpoint())
    model.eval()
    fb = FrameBuilder(phy)
    fp = bytes.fromhex(doc["fingerprint"])
    chain = ChannelChain.from_tables(list(profile("multipath_cfo", phy.sample_rate_hz)))
    precisions = ["float32", "bfloat16"]
    t = {(k, p): [] for k in ("encode", "receive", "decode") for p in precisions}
    quality = {}
    for r in range(rounds):
        for prec in precisions:
            model.set_precision(prec)
            t0 = time.perf_counter()
            s = encode_whole(model, [im], "tiles")[0]
            chunks = [s[i : i + MAX_PAYLOAD] for i in range(0, len(s), MAX_PAYLOAD)]
            bursts = []
            for ci, c in enumerate(chunks):
                h = Header(ci, 0, fp, len(c), (3, *im.size), ci, len(chunks), SCHEME_JSCC_TILED)
                f, _ = to_full_scale(fb.build_numpy(c, h), -12.0)
                bursts.append(np.concatenate([f, np.zeros(400, np.complex64)]))
            tx = np.concatenate(
                [np.zeros(2000, np.complex64), *bursts, np.zeros(20000, np.complex64)]
            )
            t["encode", prec].append(time.perf_counter() - t0)
            with torch.inference_mode():  # the air, not timed: its time is the airtime
                g = torch.Generator().manual_seed(r)
                y = chain(torch.from_numpy(tx)[None], torch.tensor([20.0]), generator=g).y[0]
            air = sum(len(b) for b in bursts) / phy.sample_rate_hz
            t0 = time.perf_counter()
            fr, events = FrameReceiver(phy), []
            y = y.numpy()
            for i in range(0, len(y), 16384):  # as the radio delivers it
                events.extend(e for e in fr.push(y[i : i + 16384]) if e.status == "ok")
            t["receive", prec].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            (d,) = JsccDecoder(model).decode(events)
            t["decode", prec].append(time.perf_counter() - t0)
            quality[prec] = float(psnr(d.image[None], im.as_float()[None]))
    m = {k: float(np.median(v)) for k, v in t.items()}
    latency = {p: m["encode", p] + max(air, m["receive", p]) + m["decode", p] for p in precisions}
    print(
        f"\n## A 512x768 photograph end to end ({photo.name}, k/n "
        f"{model.cfg.bandwidth_ratio}, 32x32 tiles: {len(s)} symbols in {len(chunks)} frames, "
        f"{phy.sample_rate_hz / 1e6:g} MSps, multipath_cfo at 20 dB; median of {rounds}; the "
        f"JSCC networks in float32 and in bfloat16 (this CPU's native bfloat16: "
        f"{native_bfloat16()}), alternating)\n"
    )
    print("| stage | float32 (ms) | bfloat16 (ms) | float32 / bfloat16 |")
    print("| --- | --- | --- | --- |")
    rows = [
        ("encode and frame (tx)", "encode"),
        ("receive: detect, sync, equalise the stream (rx)", "receive"),
        ("decode (rx)", "decode"),
    ]
    for name, k in rows:
        a32, a16 = m[k, "float32"], m[k, "bfloat16"]
        print(f"| {name} | {a32 * 1e3:.0f} | {a16 * 1e3:.0f} | {a32 / a16:.2f}x |")
    print(f"| airtime | {air * 1e3:.0f} | {air * 1e3:.0f} | |")
    l32, l16 = latency["float32"], latency["bfloat16"]
    print(
        f"| end to end: encode + max(airtime, receive) + decode (goal airtime + 100) | "
        f"{l32 * 1e3:.0f} (airtime + {(l32 - air) * 1e3:.0f}) | {l16 * 1e3:.0f} (airtime + "
        f"{(l16 - air) * 1e3:.0f}) | {l32 / l16:.2f}x |"
    )
    print(f"| PSNR (dB) | {quality['float32']:.2f} | {quality['bfloat16']:.2f} | |")
    for p in precisions:
        busy = m["encode", p] + m["receive", p] + m["decode", p]
        print(
            f"\n{p}: one process doing all three in turn: {1 / busy:.2f} photographs/s; "
            f"airtime alone allows {1 / air:.2f}/s."
        )
    lat = {m: [] for m in ("tiles", "interleaved")}
    psnrs = {m: [] for m in lat}
    for _ in range(rounds):  # alternating, so a slow minute of the machine hits both
        for mode in lat:
            s = _link(
                [
                    *("--profile", str(PROFILE), "--image", str(photo), "--repeat", "1"),
                    *("--pace", "--whole-mode", mode),
                ]
            )
            lat[mode].append(s["latency_s"]["median"])
            psnrs[mode].append(s["psnr_db_mean"])
    print(
        f"\nMeasured end to end in the link (hil link --pace, {PROFILE.name}, the photograph "
        f"once; the transmitter starting on it to the receiver having it decoded; tx, radio "
        f"and rx each a process on this machine's {os.cpu_count()} cores; {rounds} rounds, "
        "alternating):\n"
    )
    print("| --whole-mode | scheme | latency (ms), median | min - max | airtime (ms) | PSNR (dB) |")
    print("| --- | --- | --- | --- | --- | --- |")
    scheme = {"tiles": "253, segments streamed", "interleaved": "254, the whole image"}
    for mode, v in lat.items():
        print(
            f"| {mode} | {scheme[mode]} | {np.median(v) * 1e3:.0f} | {min(v) * 1e3:.0f} - "
            f"{max(v) * 1e3:.0f} | {air * 1e3:.0f} | {np.mean(psnrs[mode]):.2f} |"
        )
    print(
        f"\ninterleaved / tiles latency: {np.median(lat['interleaved']) / np.median(lat['tiles']):.2f}x"
    )
    s = _link(
        [
            *("--profile", str(PROFILE), "--image", str(photo), "--repeat", str(repeat)),
            "--pace",
        ]
    )
    c = s["counts"]
    busy = s["stream_seconds"]
    air_l = s["stream_samples"] / s["sample_rate_hz"]
    print(
        f"\nThe link (hil link --pace, {PROFILE.name}, the photograph {repeat} times): "
        f"{c['decoded']}/{c['sent']} frames decoded, {s['receiver']['lost_samples']} samples "
        f"lost, real-time factor {air_l / max(busy, 1e-9):.2f}x, "
        f"{repeat * c['decoded'] / max(c['sent'], 1) / max(busy, 1e-9):.2f} photographs/s "
        f"received, mean PSNR {s['psnr_db_mean'] or float('nan'):.2f} dB (networks in "
        f"{s.get('precision')}, hil link's default --precision auto)."
    )


def echoes(repeat: int = 8, rounds: int = 2):
    """The receiver on a recorded two-Pluto link of a whole photograph, with and without
    skipping the costly header decoders for echoes inside frames read in the same pass."""
    from hil.phy import stream

    photo = _photo_512x768()
    with tempfile.TemporaryDirectory() as d:
        stem = Path(d) / "rec"
        _link(["--profile", str(PROFILE), "--image", str(photo), "--repeat", str(repeat),
               "--record", str(stem)])  # fmt: skip
        code = (
            "import sys, time, json\n"
            "import hil.phy.stream as st\n"
            "if sys.argv[1] == 'off':\n"
            "    st.FrameReceiver._echoes = lambda self, todo, bits, passed: set()\n"
            "from hil.apps import rx\n"
            "t = time.perf_counter()\n"
            "rx.main(['--recording', sys.argv[2], '--image', sys.argv[3], '--summary', sys.argv[4]])\n"
            "print(json.dumps({'seconds': time.perf_counter() - t}))\n"
        )
        res = {"off": [], "on": []}
        for _ in range(rounds):
            for mode in ("off", "on"):
                summary = Path(d) / f"s_{mode}.json"
                r = subprocess.run(
                    [sys.executable, "-c", code, mode, str(stem), str(photo), str(summary)],
                    capture_output=True, text=True, timeout=600,
                )  # fmt: skip
                if r.returncode != 0:
                    raise RuntimeError(f"hil rx failed: {r.stderr[-2000:]}")
                s = json.loads(summary.read_text())
                res[mode].append(
                    (json.loads(r.stdout.strip().splitlines()[-1])["seconds"], s["counts"])
                )
    print(
        f"\n## Echoes in long frames: hil rx on a recorded link ({PROFILE.name}, {photo.name} "
        f"{repeat} times, 41 frames each), the costly header decoders skipped for echoes or not "
        f"(HEADER_LIST = {stream.HEADER_LIST}), by turns, {rounds} rounds\n"
    )
    print("| echo skip | hil rx (s), each round | frames decoded / sent |")
    print("| --- | --- | --- |")
    for mode, name in (("off", "off (the header of every detection decoded in full)"),
                       ("on", "on (the default)")):  # fmt: skip
        runs = res[mode]
        c = runs[-1][1]
        print(
            f"| {name} | {' / '.join(f'{t:.1f}' for t, _ in runs)} | {c['decoded']} / {c['sent']} |"
        )
    off, on = (float(np.median([t for t, _ in res[m]])) for m in ("off", "on"))
    print(f"\nmedian off / on: {off / on:.1f}x")


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--only", default="gap,speed,transport,dashboard,whole")
    p.add_argument("--count", type=int, default=64)
    a = p.parse_args(argv)
    only = set(a.only.split(","))
    if "gap" in only:
        gap(a.count)
    if "fullscale" in only:
        fullscale(a.count)
    if "speed" in only:
        speed(max(a.count, 256))
    if "speed20" in only:
        speed20(max(a.count, 256))
    if "transport" in only:
        transport()
    if "dashboard" in only:
        dashboard(max(a.count, 256))
    if "whole" in only:
        whole()
    if "echoes" in only:
        echoes()


if __name__ == "__main__":
    main()
