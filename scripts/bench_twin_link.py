#!/usr/bin/env python3
"""Real time through the paced Pluto twin: how many frames this machine keeps.

The paced twin, the radio process (pyadi-iio, libiio), the receiver and the transmitter all
run here at the profile's sample rate. When they need more CPU than the machine has, the
twin overflows exactly as a Pluto does for a late reader, and those frames are lost (the
stream flags the overflow). This prints, per frame spacing (``--gap``, silent samples
after each frame): frames decoded of those sent, overflows the radio flagged and samples the
twin dropped, and the mean PSNR of what was decoded, over ``--runs`` runs each.

Usage:
    python scripts/bench_twin_link.py                       # gaps 200000, 40000, 20000; 3 runs
    python scripts/bench_twin_link.py --gaps 40000 --runs 5 --count 96
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "firmware_configs/twin_two_pluto.toml"


def one_run(gap: int, count: int, profile: Path) -> dict:
    from hil.apps.twin import start_process

    with tempfile.TemporaryDirectory() as d:
        log_path = Path(d) / "twin.log"
        with open(log_path, "w") as log:
            twin, uri = start_process(str(profile), paced=True, log=log)
            try:
                r = subprocess.run(
                    [
                        *(sys.executable, "-m", "hil.cli", "link", "--radio", "pluto"),
                        *("--profile", str(profile), "--uri", uri, "--count", str(count)),
                        *("--pace", "--gap", str(gap), "--out", str(Path(d) / "run"), "--json"),
                    ],
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
            finally:
                twin.terminate()
                twin.wait(20)
        if r.returncode != 0:
            raise RuntimeError(f"hil link failed: {r.stderr[-2000:]}")
        s = json.loads(r.stdout)
        m = re.search(r"'rx_lost': (\d+)", log_path.read_text())
    st = s["stream"]
    return {
        "decoded": s["counts"]["decoded"],
        "sent": s["counts"]["sent"],
        "flagged": st["overflow_flags"] + st["drop_flags"],
        "twin_lost": int(m.group(1)) if m else 0,
        "psnr": s["psnr_db_mean"],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--gaps", default="200000,40000,20000")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--count", type=int, default=48)
    p.add_argument("--profile", type=Path, default=PROFILE)
    a = p.parse_args(argv)
    gaps = [int(g) for g in a.gaps.split(",")]
    print(f"paced twin link, {a.profile.name}, {a.count} frames per run, {a.runs} runs per gap")
    from hil.radio import load_profile

    fs = load_profile(a.profile)["radio"].sample_rate_hz
    print(
        f"{'gap':>8} {'decoded':>12} {'worst run':>10} {'flagged':>8} {'twin lost (s)':>14} "
        f"{'PSNR dB':>8}"
    )
    for gap in gaps:
        rs = []
        for i in range(a.runs):
            rs.append(one_run(gap, a.count, a.profile))
            print(f"  run {i + 1}: {rs[-1]}", file=sys.stderr)
        dec = sum(r["decoded"] for r in rs)
        sent = sum(r["sent"] for r in rs)
        psnrs = [r["psnr"] for r in rs if r["psnr"] is not None]
        print(
            f"{gap:>8} {dec:>5}/{sent:<6} {min(r['decoded'] for r in rs):>10} "
            f"{sum(r['flagged'] for r in rs):>8} {sum(r['twin_lost'] for r in rs) / fs:>14.2f} "
            f"{sum(psnrs) / max(len(psnrs), 1):>8.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
