"""The ``hil`` command."""

from __future__ import annotations

import argparse
import sys


def _demo(args) -> int:
    from .demos import channel_tour, grad_flow

    rc = channel_tour.main()
    print()
    return rc or grad_flow.main()


def _gradflow(args) -> int:
    from .demos import grad_flow

    return grad_flow.main()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hil", description="Deep JSCC hardware-in-the-loop")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="the channel library and the gradient-flow demonstration")
    d.set_defaults(func=_demo)
    d = sub.add_parser("gradflow", help="why the channel must not be detached")
    d.set_defaults(func=_gradflow)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
