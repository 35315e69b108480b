#!/usr/bin/env python3
"""Over-the-air test: sweep the TX gain, run the link at each step, plot PSNR vs estimated SNR.

With ``--schemes jscc,QPSK-3/4,16QAM-3/4`` each step also runs the separation
baseline (JPEG/WebP + 5G LDPC + QAM in the same payload symbols) on the same radio.

Runs unchanged on a real Pluto and on the simulated one (there the TX gain moves
the SNR exactly as an attenuator would):

    python scripts/ota_sweep.py --radio pluto --uri ip:192.168.2.1 \
        --profile firmware_configs/pluto_loopback_cable.toml --tx-gains=-40,-35,-30,-25,-20,-15,-10
    python scripts/ota_sweep.py --radio sim --profile firmware_configs/sim_two_pluto.toml

Writes <out>/sweep.json, <out>/sweep.csv and <out>/psnr_vs_snr.png; prints a table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--radio", choices=["sim", "pluto"], default="sim")
    p.add_argument("--uri")
    p.add_argument("--profile", default=str(ROOT / "firmware_configs/sim_two_pluto.toml"))
    p.add_argument("--tx-gains", default="-30,-27,-24,-21,-18,-15,-12,-9,-6")
    p.add_argument("--count", type=int, default=32)
    p.add_argument("--checkpoint", default=None)
    p.add_argument("--out", default=None)
    p.add_argument(
        "--schemes", default="jscc", help="comma-separated: jscc and/or baseline MCS keys"
    )
    a = p.parse_args(argv)
    if a.radio == "pluto" and not a.uri:
        p.error("--radio pluto needs --uri")
    out = Path(a.out or f"runs/ota-sweep-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    gains = [float(g) for g in a.tx_gains.split(",")]
    rows = []
    schemes = [x.strip() for x in a.schemes.split(",") if x.strip()]
    print(
        "| scheme | TX gain (dB) | SNR estimate (dB) | PSNR (dB) | SSIM | decoded / sent "
        "| header failed | missed |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for scheme, g in ((sc, g) for sc in schemes for g in gains):
        tag = scheme.replace("/", "_")
        cmd = [
            sys.executable,
            "-m",
            "hil.cli",
            "link",
            "--radio",
            a.radio,
            "--profile",
            a.profile,
            "--tx-gain",
            str(g),
            "--count",
            str(a.count),
            "--json",
            "--out",
            str(out / f"{tag}_txgain_{g:g}"),
            "--scheme",
            scheme,
        ]
        if a.uri:
            cmd += ["--uri", a.uri]
        if a.checkpoint:
            cmd += ["--checkpoint", a.checkpoint]
        r = subprocess.run(cmd, capture_output=True, text=True)
        try:
            s = json.loads(r.stdout)
        except json.JSONDecodeError:
            print(
                f"| {scheme} | {g:g} | link failed (exit {r.returncode}): "
                f"{r.stderr.strip().splitlines()[-1:]} |"
            )
            continue
        c = s.get("counts", {})
        row = {
            "scheme": scheme,
            "tx_gain_db": g,
            "snr_est_db": s.get("snr_est_db_mean"),
            "psnr_db": s.get("psnr_db_mean"),
            "ssim": s.get("ssim_mean"),
            **{k: c.get(k) for k in ("sent", "decoded", "header_failed", "missed")},
        }
        rows.append(row)
        fmt = lambda v, f: "n/a" if v is None else format(v, f)  # noqa: E731
        print(
            f"| {scheme} | {g:g} | {fmt(row['snr_est_db'], '.2f')} | {fmt(row['psnr_db'], '.2f')} | {fmt(row['ssim'], '.3f')} | "
            f"{row['decoded']}/{row['sent']} | {row['header_failed']} | {row['missed']} |",
            flush=True,
        )
    (out / "sweep.json").write_text(json.dumps(rows, indent=1))
    with open(out / "sweep.csv", "w") as fh:
        fh.write("scheme,tx_gain_db,snr_est_db,psnr_db,ssim,sent,decoded,header_failed,missed\n")
        for r in rows:
            fh.write(
                ",".join(
                    str(r[k])
                    for k in (
                        "scheme",
                        "tx_gain_db",
                        "snr_est_db",
                        "psnr_db",
                        "ssim",
                        "sent",
                        "decoded",
                        "header_failed",
                        "missed",
                    )
                )
                + "\n"
            )
    pts = [r for r in rows if r["psnr_db"] is not None and r["snr_est_db"] is not None]
    if pts:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.5), dpi=120)
        for sc in schemes:
            mine = [r for r in pts if r["scheme"] == sc]
            ax.plot([r["snr_est_db"] for r in mine], [r["psnr_db"] for r in mine], "o-", label=sc)
        if len(schemes) > 1:
            ax.legend(fontsize=7)
        for r in pts:
            ax.annotate(f"{r['tx_gain_db']:g}", (r["snr_est_db"], r["psnr_db"]), fontsize=6)
        ax.set_xlabel("estimated SNR (dB)")
        ax.set_ylabel("PSNR (dB)")
        ax.set_title(f"{a.radio}: {Path(a.profile).stem} (labels: TX gain dB)", fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(out / "psnr_vs_snr.png")
    print(f"\nwritten: {out}/sweep.json, sweep.csv, psnr_vs_snr.png")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
