"""Run the radio, rx and tx mains in this process (radio and rx on threads, tx here)."""

import json
import threading
from pathlib import Path

from hil.apps import radio, rx, tx
from hil.transport import free_tcp_endpoints

CLEAN = str(Path(__file__).resolve().parents[2] / "firmware_configs/sim_clean.toml")


def run_trio(
    tmp_path,
    count=4,
    tx_extra=(),
    radio_extra=(),
    rx_extra=(),
    radio_args=("--profile", CLEAN),
    idle_timeout="60",
    join_s=120,
    wait_for_rx=True,
):
    """-> ({process: exit code}, the receiver's summary). ``radio_args`` picks the backend
    (default: the clean sim profile); ``idle_timeout`` None keeps rx's own default;
    ``wait_for_rx`` False lets tx send as soon as it is up (a device that fails after a fixed
    number of buffers must see frames before rx is ready)."""
    ep_tx, ep_rx, ep_ctrl = free_tcp_endpoints(3)
    summary = tmp_path / "s.json"
    results = {}
    radio_argv = [*radio_args, "--tx", ep_tx, "--rx", ep_rx, *radio_extra]
    rx_argv = ["--radio", ep_rx, "--control", ep_ctrl, "--count", str(count)]
    # as hil link does: tx sends once rx has samples (its sockets bound), so the manifest's
    # image entries reach rx before the frames they describe (without it a fast rx could put
    # a photograph together before tx's control socket had connected, and not score it)
    ready = tmp_path / "rx.ready"
    rx_argv += ["--summary", str(summary), "--ready-file", str(ready), *rx_extra]
    if idle_timeout is not None:
        rx_argv += ["--idle-timeout", idle_timeout]
    t_radio = threading.Thread(target=lambda: results.__setitem__("radio", radio.main(radio_argv)))
    t_rx = threading.Thread(target=lambda: results.__setitem__("rx", rx.main(rx_argv)))
    t_radio.start()
    t_rx.start()
    tx_argv = ["--radio", ep_tx, "--control", ep_ctrl, "--count", str(count)]
    if wait_for_rx:
        tx_argv += ["--start-file", str(ready)]
    results["tx"] = tx.main([*tx_argv, *tx_extra])
    t_rx.join(join_s)
    t_radio.join(join_s)
    assert not t_rx.is_alive() and not t_radio.is_alive()
    return results, json.loads(summary.read_text())
