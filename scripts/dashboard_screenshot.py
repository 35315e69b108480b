#!/usr/bin/env python3
"""The README's dashboard screenshot: a paced sim link with ``--dashboard``, seen by headless
Chromium (Debian's chromium and chromium-driver), captured near the end of the run.

Usage:
    python scripts/dashboard_screenshot.py                  # -> docs/dashboard.png
    python scripts/dashboard_screenshot.py --out shot.png --count 300 --snr 12
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=Path, default=ROOT / "docs/dashboard.png")
    p.add_argument("--count", type=int, default=240)
    p.add_argument("--snr", type=float, default=None, help="sim Es/N0 (default: the profile's)")
    a = p.parse_args(argv)
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    with tempfile.TemporaryDirectory() as d:
        cmd = [sys.executable, "-m", "hil.cli", "link", "--count", str(a.count), "--pace"]
        cmd += ["--gap", "20000", "--dashboard", "--dashboard-port", "0", "--dashboard-control"]
        cmd += ["--dashboard-hold", "6", "--out", d]
        if a.snr is not None:
            cmd += ["--snr", str(a.snr)]
        link = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        url_file = Path(d) / "dashboard.url"
        while not url_file.exists():
            if link.poll() is not None:
                raise SystemExit(f"hil link ended: {link.stderr.read().decode()[-2000:]}")
            time.sleep(0.1)
        opts = Options()
        opts.binary_location = "/usr/bin/chromium"
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1180,1060"):
            opts.add_argument(arg)
        browser = webdriver.Chrome(options=opts, service=Service("/usr/bin/chromedriver"))
        try:
            browser.get(url_file.read_text().strip())
            while link.poll() is None:  # the held page after the run shows the final counts
                h = browser.execute_script("return window.hil")
                if h and h.get("summary"):
                    time.sleep(1.0)
                    break
                time.sleep(0.3)
            a.out.parent.mkdir(parents=True, exist_ok=True)
            browser.save_screenshot(str(a.out))
        finally:
            browser.quit()
            link.wait(60)
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
