#!/usr/bin/env python3
"""Mutation testing (mutmut 3) of the modules where a bug costs most, one module at a time.

    python scripts/mutation.py [--module wire --module header ...] [--list] [--keep DIR]

For each module it copies ``hil/``, ``tests/`` and ``pyproject.toml`` into a scratch folder
(the checkout is never touched), adds a ``[tool.mutmut]`` section that mutates only that
module and runs only the tests of its area, runs ``mutmut run``, and reads ``mutmut
results --all true``. It prints, per module, killed / survived / other (timeouts,
suspicious, no tests) and the score killed / (killed + survived), then the surviving
mutants' names (``mutmut show NAME`` in the kept folder prints the diff of one).

Slow (minutes per module on two cores) and not part of CI; needs ``pip install
'mutmut==3.8.1'`` (the ``mutation`` extra).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# module key -> (file to mutate, test files of its area)
MODULES: dict[str, tuple[str, list[str]]] = {
    "header": ("hil/phy/header.py", ["tests/phy/test_frame.py"]),
    "coding": ("hil/phy/coding.py", ["tests/phy/test_frame.py"]),
    "sync": ("hil/phy/sync.py", ["tests/phy/test_sync.py"]),
    "receive": ("hil/phy/receive.py", ["tests/phy/test_receive.py", "tests/phy/test_surrogate.py"]),
    "wire": (
        "hil/transport/wire.py",
        ["tests/transport/test_wire.py", "tests/transport/test_properties.py"],
    ),
    "accounting": ("hil/apps/accounting.py", ["tests/apps/test_accounting.py"]),
    "checkpoint": ("hil/jscc/checkpoint.py", ["tests/jscc/test_checkpoint.py"]),
    "digital": ("hil/baseline/digital.py", ["tests/baseline/test_baseline.py"]),
    "sim-converters": ("hil/radio/sim.py", ["tests/radio/test_sim.py"]),
    "twin-model": ("hil/twin/model.py", ["tests/twin/test_twin.py"]),
}


def run_module(key: str, keep: Path | None) -> dict:
    target, tests = MODULES[key]
    work = Path(tempfile.mkdtemp(prefix=f"mutmut-{key}-")) if keep is None else keep / key
    if work.exists() and keep is not None:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    for name in ("hil", "tests", "scripts", "firmware_configs"):
        shutil.copytree(ROOT / name, work / name, ignore=shutil.ignore_patterns("__pycache__"))
    cfg = (ROOT / "pyproject.toml").read_text()
    cfg += (
        "\n[tool.mutmut]\n"
        'source_paths = ["hil"]\n'
        f'only_mutate = ["{target}"]\n'
        'also_copy = ["scripts", "firmware_configs"]\n'
        f"pytest_add_cli_args_test_selection = {tests!r}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-x", "--timeout=120"]\n'
    ).replace("'", '"')
    (work / "pyproject.toml").write_text(cfg)
    mutmut = [sys.executable, "-m", "mutmut"]
    t = time.time()
    subprocess.run([*mutmut, "run", "--max-children", "2"], cwd=work, capture_output=True)
    res = subprocess.run(
        [*mutmut, "results", "--all", "true"], cwd=work, capture_output=True, text=True
    ).stdout
    status: dict[str, str] = {}
    for line in res.splitlines():
        m = re.match(r"\s*(\S+): (.+)$", line)
        if m:
            status[m.group(1)] = m.group(2).strip()
    killed = sum(1 for v in status.values() if v == "killed")
    survived = sorted(k for k, v in status.items() if v == "survived")
    other = len(status) - killed - len(survived)
    if keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "module": key,
        "file": target,
        "killed": killed,
        "survived": survived,
        "other": other,
        "seconds": time.time() - t,
        "folder": str(work) if keep is not None else None,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--module", action="append", choices=sorted(MODULES), help="repeatable; default all")
    p.add_argument("--list", action="store_true", help="print the modules and their tests")
    p.add_argument("--keep", type=Path, help="keep each module's scratch folder under DIR")
    a = p.parse_args(argv)
    if a.list:
        for k, (f, t) in MODULES.items():
            print(f"{k:<15} {f:<28} {' '.join(t)}")
        return 0
    try:
        import mutmut  # noqa: F401
    except ImportError:
        print("mutation testing needs mutmut: pip install 'mutmut==3.8.1'", file=sys.stderr)
        return 2
    rows = []
    print("| module | file | killed | survived | other | score | time (s) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for key in a.module or list(MODULES):
        r = run_module(key, a.keep)
        n = r["killed"] + len(r["survived"])
        score = f"{100 * r['killed'] / n:.1f} %" if n else "-"
        print(
            f"| {key} | {r['file']} | {r['killed']} | {len(r['survived'])} | {r['other']} | "
            f"{score} | {r['seconds']:.0f} |",
            flush=True,
        )
        rows.append(r)
    for r in rows:
        if r["survived"]:
            print(f"\nsurvivors in {r['file']}:")
            for s in r["survived"]:
                print(f"  {s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
