"""``hil link`` wires its processes over loopback endpoints that cannot collide."""

import re
from pathlib import Path

from hil.apps.link import _commands, build_parser


def _ports(cmds: dict[str, list[str]]) -> dict[str, set[int]]:
    """Every loopback port each process is told about (endpoints, and the dashboard's --port)."""
    out = {}
    for name, cmd in cmds.items():
        words = [str(w) for w in cmd]
        ports = {int(m) for w in words for m in re.findall(r"tcp://127\.0\.0\.1:(\d+)", w)}
        if "--port" in words:
            ports.add(int(words[words.index("--port") + 1]))
        out[name] = ports
    return out


def test_the_dashboards_free_port_is_chosen_with_the_links_endpoints(tmp_path: Path):
    # "--dashboard-port 0" once let the dashboard bind a port the kernel had just handed
    # out for the radio's control socket (picked, released, not yet bound): the radio then
    # failed with "Address already in use"
    a = build_parser().parse_args(
        ["--dashboard", "--dashboard-port", "0", "--dashboard-control", "--record", "r"]
    )
    for _ in range(20):
        cmds = _commands(a, tmp_path, None, "ckpt")
        ports = _ports(cmds)
        words = [str(w) for w in cmds["dashboard"]]
        dash = int(words[words.index("--port") + 1])
        assert dash != 0
        assert ports["dashboard"] - {dash} <= ports["radio"] | ports["rx"]  # telemetry, control
        others = ports["radio"] | ports["rx"] | ports["tx"]
        assert dash not in others
        assert len(others) == 7  # tx, rx, control, telemetry, view, settings, truth


def test_a_dashboard_port_asked_for_is_kept(tmp_path: Path):
    a = build_parser().parse_args(["--dashboard", "--dashboard-port", "8751"])
    words = [str(w) for w in _commands(a, tmp_path, None, "ckpt")["dashboard"]]
    assert words[words.index("--port") + 1] == "8751"


def test_the_summary_table_shows_the_latency_where_there_is_one(capsys):
    from hil.apps.link import print_table

    s = {
        "counts": {k: 0 for k in ("sent", "decoded", "header_failed", "refused", "missed")}
        | {"balanced": True},
        "psnr_db_mean": None,
        "ssim_mean": None,
        "snr_est_db_mean": None,
        "cfo_hz_mean": None,
        "receiver": {"lost_samples": 0, "resyncs": 0},
        "wall_seconds": 1.0,
        "report": "r",
        "latency_s": {"n": 3, "median": 0.5184, "max": 0.6491},
    }
    print_table(s)
    assert "median 518, max 649 (3 images)" in capsys.readouterr().out
    s["latency_s"] = None
    print_table(s)
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("latency")]
    assert line.endswith("n/a")
