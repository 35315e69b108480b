#!/usr/bin/env python3
"""Start-of-session check for a Pluto on the bench: reachable, firmware, LO range, loopback self-test.

    python scripts/bench_session.py --uri ip:192.168.2.1
    python scripts/bench_session.py --backend sim          # the same checks against the simulated Pluto

The self-test uses the AD9361's digital loopback (FPGA, TX -> RX inside the
chip: no cable, nothing radiated): a cyclic frame is transmitted, received,
detected, its header decoded and its payload compared with what was sent.
Exit code 0 when every check passes; [INFO] lines report, they do not pass or fail.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

# the loopback self-test passes when the payload comes back this close to what was sent
MAX_EVM = 0.10
MIN_FRAMES = 3


def check(name: str, ok: bool, detail: str) -> bool:
    print(f"[{'PASS' if ok else 'FAIL'}] {name}: {detail}", flush=True)
    return ok


def info(name: str, detail: str) -> None:
    print(f"[INFO] {name}: {detail}", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--uri", help="ip:192.168.2.1, usb:1.2.5, ...")
    p.add_argument("--backend", choices=["pluto", "sim"], default="pluto")
    a = p.parse_args(argv)
    from hil.phy import FrameBuilder, FrameReceiver, Header, to_full_scale
    from hil.radio import RadioConfig, RadioError
    from hil.radio.pluto import PlutoRadio, open_pluto
    from hil.radio.sim import SimRadio

    results = []
    if a.backend == "pluto":
        if not a.uri:
            p.error("--uri is required for a Pluto (libiio would scan every bus without one)")
        t = time.monotonic()
        try:
            sdr = open_pluto(a.uri)
        except RadioError as exc:
            check("reachable", False, str(exc))
            return 1
        try:  # reachable = it answers an attribute read, not merely that a context opened
            rate = float(sdr.sample_rate)
            results.append(
                check(
                    "reachable",
                    rate > 0,
                    f"{a.uri} answered in {time.monotonic() - t:.2f} s (sample rate {rate:g})",
                )
            )
        except Exception as exc:
            results.append(check("reachable", False, f"{a.uri} opened but reads fail: {exc}"))
            return 1
        attrs = getattr(getattr(sdr, "ctx", None), "attrs", {}) or {}
        fw = attrs.get("fw_version", "unknown")
        results.append(
            check(
                "firmware",
                fw != "unknown",
                f"fw_version {fw}, model {attrs.get('hw_model', '?')}, "
                f"serial {attrs.get('hw_serial', '?')}",
            )
        )
        wide = False
        try:
            sdr.rx_lo = int(70e6)
            wide = abs(float(sdr.rx_lo) - 70e6) < 1e3
        except Exception:
            wide = False
        info(
            "LO range",
            "70 MHz accepted: AD9364 mode (70 MHz-6 GHz)"
            if wide
            else "70 MHz refused: AD9363 mode (325 MHz-3.8 GHz); see firmware_configs/pluto/README.md",
        )
        cfg = RadioConfig(
            backend="pluto",
            uri=a.uri,
            loopback=1,
            rx_buffer_size=32768,
            tx_buffer_size=32768,
            rx_gain_mode="manual",
            rx_gain_db=20.0,
            tx_gain_db=-10.0,
        )
        radio = PlutoRadio(cfg, device=sdr)
    else:
        cfg = RadioConfig(backend="sim", rx_buffer_size=32768, loopback=1)  # as the Pluto test
        radio = SimRadio(cfg)
        info("backend", "simulated Pluto (nothing to reach)")
    fb = FrameBuilder()
    h = Header(seq=1, item_id=0, fingerprint=b"selftest", payload_len=480, shape=(3, 32, 32))
    sym = np.exp(2j * np.pi * np.random.default_rng(0).random(480)).astype(np.complex64)
    x, _ = to_full_scale(fb.build_numpy(sym, h), rms_dbfs=-12.0)
    try:
        radio.tx(np.concatenate([x, np.zeros(4000, np.complex64)]), cyclic=True)
        fr = FrameReceiver(fb.cfg)
        events = []
        for _ in range(6):
            events += fr.push(radio.rx().samples)
        ok = [e for e in events if e.status == "ok" and e.header == h]
        if ok:
            e = ok[0]
            evm = max(float(np.sqrt(np.mean(np.abs(f.symbols - sym) ** 2))) for f in ok)
            results.append(
                check(
                    "loopback self-test",
                    len(ok) >= MIN_FRAMES and evm <= MAX_EVM,
                    f"{len(ok)} frames (need {MIN_FRAMES}), SNR {e.snr_db:.1f} dB, "
                    f"CFO {e.cfo_hz:.0f} Hz, worst payload EVM {100 * evm:.1f} % "
                    f"(need <= {100 * MAX_EVM:.0f} %)",
                )
            )
        else:
            results.append(check("loopback self-test", False, f"no frame decoded ({fr.stats})"))
    finally:
        radio.close()
    results.append(
        check("transmitter silent after close", not radio.tx_active, "cyclic buffer destroyed")
    )
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
