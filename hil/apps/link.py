"""``hil link``: the whole system on one machine: radio, rx and tx as separate processes on loopback.

Starts them, waits for the transmitter and the receiver to finish, stops the
radio, prints a summary table (``--json``: the summary as JSON) and writes a
report folder: original-vs-received image grid, constellation, PSNR per
frame, and the summary JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ..radio.ad9363 import same_rate
from ..transport import free_tcp_endpoints
from .common import (
    add_precision_arg,
    add_whole_image_args,
    items,
    resolve_checkpoint,
    setup_logging,
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hil link", description=__doc__)
    p.add_argument(
        "--radio", choices=["sim", "pluto"], default="sim", help="backend (default: sim)"
    )
    p.add_argument("--uri", help="Pluto URI, e.g. ip:192.168.2.1 (or the twin's ip:127.0.0.1:PORT)")
    p.add_argument(
        "--profile",
        help="TOML profile: a path, or a shipped profile by name (default: sim_two_pluto for sim)",
    )
    p.add_argument("--snr", type=float, default=None, help="sim: Es/N0 during frames, dB")
    p.add_argument("--tx-gain", type=float, default=None, help="override the profile's tx_gain_db")
    p.add_argument("--checkpoint", default=None, help="default: the shipped k/n=1/6 model")
    p.add_argument("--count", type=int, default=32, help="images to send")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--crop", type=int, default=32)
    p.add_argument("--dataset", default="builtin")
    p.add_argument(
        "--pace", action="store_true", help="transmit in real time (sim: also pace the radio)"
    )
    p.add_argument(
        "--gap", type=int, default=None, help="silent samples after each frame (tx --gap)"
    )
    p.add_argument(
        "--scheme",
        default="jscc",
        help="jscc, or a separation-baseline MCS for tx (e.g. 16QAM-3/4): JPEG/WebP + 5G LDPC + QAM",
    )
    add_whole_image_args(p)
    add_precision_arg(p)
    p.add_argument("--out", default=None, help="report folder (default runs/link-<time>)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument(
        "--record", help="also record the RX stream as SigMF <stem>, with ground-truth annotations"
    )
    p.add_argument(
        "--dashboard",
        action="store_true",
        help="serve the live view (hil dashboard) of the link on loopback; its URL is printed",
    )
    p.add_argument("--dashboard-port", type=int, default=8750, help="0 picks a free port")
    p.add_argument(
        "--dashboard-control",
        action="store_true",
        help="with --dashboard: let the page change the radio's RX/TX gain and LO (checked values)",
    )
    p.add_argument(
        "--dashboard-hold",
        type=float,
        default=0.0,
        help="keep the dashboard up this many seconds after the link ends",
    )
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def _cmd(*args) -> list[str]:
    return [sys.executable, "-m", "hil.cli", *map(str, args)]


def _announce(url_file: Path, proc, log) -> None:
    """Wait (briefly) for the dashboard to serve, then print where."""
    end = time.monotonic() + 30
    while not url_file.exists() and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    if url_file.exists():
        print(f"dashboard at {url_file.read_text().strip()}", file=sys.stderr, flush=True)
    else:
        log.error("the dashboard did not start (log: %s)", url_file.with_name("dashboard.log"))


def _check_rates(profile: str, ckpt: str) -> None:
    """The radio profile's sample rate must be the checkpoint PHY's (the one source of it)."""
    from ..jscc.checkpoint import read_meta
    from ..radio.config import load_profile

    phy_hz = float(read_meta(ckpt)["phy"]["sample_rate_hz"])
    radio_hz = load_profile(profile)["radio"].sample_rate_hz
    if not same_rate(radio_hz, phy_hz):
        raise ValueError(
            f"profile {Path(profile).name} sets sample_rate_hz = {radio_hz:g}, the checkpoint's "
            f"PHY runs at {phy_hz:g} Hz: set the profile's rate to the PHY's"
        )


def run_link(a) -> tuple[int, dict, Path]:
    """Start the processes of a link (radio, rx, tx, and the dashboard if asked), wait for tx
    and rx, stop the rest; returns (exit code, the receiver's summary with the run's
    settings, the report folder)."""
    log = setup_logging("link", a.verbose)
    out = Path(a.out or f"runs/link-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    profile = a.profile or ("sim_two_pluto" if a.radio == "sim" else None)
    if profile:
        from ..radio.config import resolve_profile

        profile = str(resolve_profile(profile))  # a clear error here, not in a child process
    ckpt = str(resolve_checkpoint(a.checkpoint))
    if profile:
        _check_rates(profile, ckpt)
    cmds = _commands(a, out, profile, ckpt)
    t0 = time.monotonic()
    rc, exit_codes = _supervise(cmds, out, a, log)
    wall = time.monotonic() - t0
    summary_path = out / "summary_rx.json"
    if not summary_path.exists():
        return rc or 1, {"error": "the receiver wrote no summary", "report": str(out)}, out
    summary = json.loads(summary_path.read_text())
    summary["wall_seconds"] = wall
    summary["report"] = str(out)
    summary["radio"] = a.radio
    summary["profile"] = profile
    summary["checkpoint"] = ckpt
    summary["snr_db_set"] = a.snr
    summary["exit_codes"] = exit_codes
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    try:
        write_report(out, summary, a)
    except Exception as exc:
        log.error("report plots failed: %s", exc)
    return rc, summary, out


def _commands(a, out: Path, profile: str | None, ckpt: str) -> dict[str, list[str]]:
    """The command line of each process, by name (radio, rx, tx, dashboard), wired together
    over free loopback endpoints."""
    # the dashboard's port (when it may be any) is chosen with the rest: one the kernel gave
    # the dashboard itself could be one of these, picked and released but not yet bound
    eps = free_tcp_endpoints(8)
    ep_tx, ep_rx, ep_ctrl, ep_tel, ep_view, ep_settings, ep_truth = eps[:7]
    dash_port = a.dashboard_port or int(eps[7].rsplit(":", 1)[1])
    radio_cmd = _cmd("radio", "--tx", ep_tx, "--rx", ep_rx, "--telemetry", ep_tel)
    if profile:
        radio_cmd += ["--profile", profile]
    if a.radio == "pluto":
        radio_cmd += ["--backend", "pluto"]
        if a.uri:
            radio_cmd += ["--uri", a.uri]
    if a.snr is not None:
        radio_cmd += ["--snr", str(a.snr)]
    if a.tx_gain is not None:
        radio_cmd += ["--tx-gain", str(a.tx_gain)]
    # what tx and rx must agree on: the manifest channel, the model and the items
    shared = [
        "--control",
        ep_ctrl,
        "--checkpoint",
        ckpt,
        "--dataset",
        a.dataset,
        "--crop",
        a.crop,
        "--count",
        a.count,
        "--precision",
        a.precision,
    ]
    for f in a.image or []:
        shared += ["--image", str(Path(f).resolve())]
    for d in a.images or []:
        shared += ["--images", str(Path(d).resolve())]
    rx_cmd = _cmd(
        "rx",
        "--radio",
        ep_rx,
        *shared,
        "--summary",
        out / "summary_rx.json",
        "--metrics",
        out / "frames.jsonl",
        "--save-images",
        out / "received",
        "--ready-file",
        out / "rx.ready",
    )
    if a.dashboard:
        rx_cmd += ["--telemetry", ep_view]
        dash_cmd = _cmd(
            "dashboard",
            *("--telemetry", ep_view, "--telemetry", ep_tel),
            *("--port", dash_port, "--url-file", out / "dashboard.url"),
        )
        if a.dashboard_control:
            radio_cmd += ["--settings", ep_settings]
            dash_cmd += ["--control", ep_settings]
    if a.record:
        rx_cmd += ["--record", str(a.record), "--truth", ep_truth]
        radio_cmd += ["--truth", ep_truth]  # the radio's settings (and on the sim, per-burst truth)
    tx_cmd = _cmd(
        "tx",
        "--radio",
        ep_tx,
        *shared,
        "--repeat",
        a.repeat,
    )
    tx_cmd += ["--start-file", str(out / "rx.ready")]
    if a.image or a.images:
        tx_cmd += ["--whole-mode", a.whole_mode]
    if a.pace:
        tx_cmd.append("--pace")
    if a.gap is not None:
        tx_cmd += ["--gap", str(a.gap)]
    if a.scheme != "jscc":
        tx_cmd += ["--scheme", a.scheme]
    cmds = {"radio": radio_cmd, "rx": rx_cmd, "tx": tx_cmd}
    if a.dashboard:
        cmds["dashboard"] = dash_cmd
    return cmds


def _supervise(cmds: dict[str, list[str]], out: Path, a, log) -> tuple[int, dict[str, int]]:
    """Run the processes (logs in ``out``): the dashboard first, then radio, rx and tx; wait
    for tx and rx, stopping everything at once when one fails or the timeout passes; then
    stop the rest. Returns (exit code, each process's exit code)."""
    env = dict(
        os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1")
    )
    logs = {n: open(out / f"{n}.log", "w") for n in cmds}
    procs = {}
    t0 = time.monotonic()
    rc = 0
    (out / "rx.ready").unlink(missing_ok=True)  # a stale one would start tx at once

    def start(name: str) -> None:
        procs[name] = subprocess.Popen(
            cmds[name], stdout=logs[name], stderr=subprocess.STDOUT, env=env
        )

    try:
        if a.dashboard:
            (out / "dashboard.url").unlink(missing_ok=True)
            start("dashboard")
            _announce(out / "dashboard.url", procs["dashboard"], log)
        start("radio")
        start("rx")
        # a real-time radio drops what nobody reads: the transmitter loads and encodes now,
        # beside the others' start-up (not beside the live stream), and sends once the
        # receiver takes samples
        start("tx")
        deadline = t0 + a.timeout
        # wait for tx and rx; if any process dies with an error, stop the others at once
        reported: set[str] = set()

        def report_failed() -> bool:
            bad = [n for n, p in procs.items() if p.poll() not in (None, 0) and n not in reported]
            for n in bad:
                logs[n].flush()
                log.error(
                    "%s exited with %s (log: %s); it ended with:\n%s",
                    n,
                    procs[n].returncode,
                    out / f"{n}.log",
                    _tail(out / f"{n}.log"),
                )
                reported.add(n)
            return bool(bad)

        while any(procs[n].poll() is None for n in ("tx", "rx")):
            if report_failed():
                rc = 1
                break
            if time.monotonic() > deadline:
                log.error("the link did not finish within %.0f s", a.timeout)
                rc = 1
                break
            time.sleep(0.1)
        # both may have ended between two polls: what failed is still named
        if report_failed() or reported:
            rc = rc or 1
        if a.dashboard and a.dashboard_hold > 0 and procs["dashboard"].poll() is None:
            log.info("holding the dashboard for %.0f s", a.dashboard_hold)
            time.sleep(a.dashboard_hold)
    except KeyboardInterrupt:
        rc = 130
    finally:
        for name in ("tx", "rx", "radio", "dashboard"):
            p = procs.get(name)
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for name, p in procs.items():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                log.error("%s did not stop; killing it", name)
                p.kill()
                p.wait()
        for f in logs.values():
            f.close()
    return rc, {n: p.returncode for n, p in procs.items()}


def _tail(path: Path, lines: int = 15) -> str:
    """The last lines of a child's log (a traceback, usually), for the error that names it."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"(unreadable: {exc})"
    return "\n".join("  | " + ln for ln in text[-lines:])


def write_report(out: Path, summary: dict, a) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    whole = bool(a.image or a.images)
    if whole:  # the photographs sent, shown whole
        from ..jscc.images import gather_images

        refs = [im.as_float() for im in gather_images(a.image, a.images)]
    else:
        refs, _ = items(a.dataset, a.crop, a.count)
    recv = sorted((out / "received").glob("seq*_item*.png"))
    shown = {}
    for p in recv:
        m = re.search(r"_item(\d+)", p.stem)
        if m is not None and int(m.group(1)) < len(refs):
            shown.setdefault(int(m.group(1)), p)
    keys = sorted(shown)[: 6 if whole else 16]
    if keys:
        w = 3.2 if whole else 1.1
        aspect = max(refs[k].shape[1] / refs[k].shape[2] for k in keys)  # height / width
        fig, axes = plt.subplots(
            2, len(keys), figsize=(w * len(keys), 2 * w * aspect + 0.6), dpi=120, squeeze=False
        )
        psnr_by_item = {
            r["item_id"]: r.get("psnr_db")
            for r in summary["per_frame"]
            if r.get("status") == "decoded"
        }
        for j, k in enumerate(keys):
            axes[0, j].imshow(refs[k].permute(1, 2, 0).numpy())
            axes[1, j].imshow(np.asarray(Image.open(shown[k])))
            axes[1, j].set_xlabel(f"{psnr_by_item.get(k, float('nan')):.1f}", fontsize=6)
            for r in (0, 1):
                axes[r, j].set_xticks([])
                axes[r, j].set_yticks([])
        axes[0, 0].set_ylabel("sent", fontsize=7)
        axes[1, 0].set_ylabel("received", fontsize=7)
        fig.suptitle("original (top) vs received (bottom), PSNR dB", fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "grid.png")
        plt.close(fig)
    cpath = out / "received" / "constellation.npy"
    if cpath.exists():
        c = np.load(cpath, allow_pickle=False)
        fig, ax = plt.subplots(figsize=(3.5, 3.5), dpi=120)
        ax.plot(c.real, c.imag, ".", ms=1, alpha=0.4)
        ax.set_aspect("equal")
        ax.set_title("equalised JSCC symbols (analog)", fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(out / "constellation.png")
        plt.close(fig)
    dec = [r for r in summary["per_frame"] if r.get("status") == "decoded" and "psnr_db" in r]
    if dec:
        dec.sort(key=lambda r: r["seq"])
        fig, ax = plt.subplots(figsize=(5, 2.6), dpi=120)
        ax.plot([r["seq"] for r in dec], [r["psnr_db"] for r in dec], ".-", lw=0.6)
        ax.set_xlabel("frame (seq)")
        ax.set_ylabel("PSNR (dB)")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(out / "psnr_per_frame.png")
        plt.close(fig)
        with open(out / "psnr_per_frame.csv", "w") as fh:
            fh.write("seq,item_id,psnr_db,ssim,snr_est_db,cfo_hz\n")
            for r in dec:
                fh.write(
                    f"{r['seq']},{r['item_id']},{r['psnr_db']},{r.get('ssim')},{r['snr_db']},{r['cfo_hz']}\n"
                )


def print_table(summary: dict) -> None:
    c = summary["counts"]
    rows = [
        ("frames sent", c["sent"]),
        ("decoded", c["decoded"]),
        ("header failed", c["header_failed"]),
        ("refused (other model)", c["refused"]),
        ("cut by sample drops", c.get("cut", 0)),
        ("missed", c["missed"]),
        ("accounting balanced", c["balanced"]),
        (
            "mean PSNR (dB)",
            f"{summary['psnr_db_mean']:.2f}" if summary["psnr_db_mean"] is not None else "n/a",
        ),
        ("mean SSIM", f"{summary['ssim_mean']:.3f}" if summary["ssim_mean"] is not None else "n/a"),
        (
            "mean SNR estimate (dB)",
            f"{summary['snr_est_db_mean']:.2f}"
            if summary["snr_est_db_mean"] is not None
            else "n/a",
        ),
        (
            "mean CFO estimate (Hz)",
            f"{summary['cfo_hz_mean']:.0f}" if summary["cfo_hz_mean"] is not None else "n/a",
        ),
        (
            "latency, tx start to decoded (ms)",
            f"median {lat['median'] * 1e3:.0f}, max {lat['max'] * 1e3:.0f} ({lat['n']} images)"
            if (lat := summary.get("latency_s"))
            else "n/a",
        ),
        (
            "samples lost / resyncs",
            f"{summary['receiver']['lost_samples']} / {summary['receiver']['resyncs']}",
        ),
        ("wall time (s)", f"{summary['wall_seconds']:.1f}"),
        ("report", summary["report"]),
    ]
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{w}}  {v}")


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    if a.radio == "pluto" and not (a.uri or a.profile):
        print("hil link: --radio pluto needs --uri (or a profile with radio.uri)", file=sys.stderr)
        return 2
    if a.dashboard_control and not a.dashboard:
        print("hil link: --dashboard-control needs --dashboard", file=sys.stderr)
        return 2
    rc, summary, _ = run_link(a)
    if a.json:
        print(json.dumps({k: v for k, v in summary.items() if k != "frame_status"}, indent=1))
    elif "counts" in summary:
        print_table(summary)
    else:
        print(json.dumps(summary))
    return rc
