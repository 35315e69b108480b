"""Shared process plumbing: logging, graceful stop on SIGINT/SIGTERM, items and references."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if (
    TYPE_CHECKING
):  # the radio process never imports torch: seconds of start-up CPU beside a live stream
    import torch

DEFAULT_CHECKPOINT = "jscc_k6"


@contextlib.contextmanager
def cpu_threads(n: int) -> Iterator[None]:
    """torch's intra-op threads and the BLAS pools numpy and scipy load limited to ``n``
    (at least 1) inside the block, restored after.

    The receive path's matrix products are small (the header's GF(2) inversion is a
    [frames, 288] x [288, 288] product): a BLAS pool of several threads gains nothing there and,
    on a machine whose other cores run the radio and the transmitter, waits for them. On two
    busy cores the header stage of dense frames took 8x longer with numpy's default pool
    (1.84 s against 0.23 s for 908 frames)."""
    import torch
    from threadpoolctl import threadpool_limits

    n = max(1, int(n))
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with threadpool_limits(limits=n, user_api="blas"):
            yield
    finally:
        torch.set_num_threads(before)


def shipped_checkpoint(name: str = DEFAULT_CHECKPOINT) -> Path:
    """Path (stem) of a checkpoint shipped inside the package."""
    p = Path(str(resources.files("hil") / "assets" / "checkpoints" / name))
    if not p.with_suffix(".json").exists():
        raise FileNotFoundError(f"shipped checkpoint {name} not found under {p.parent}")
    return p


def resolve_checkpoint(arg: str | None) -> Path:
    if arg is None or arg in ("k6", "jscc_k6"):
        return shipped_checkpoint("jscc_k6")
    if arg in ("k12", "jscc_k12"):
        return shipped_checkpoint("jscc_k12")
    return Path(arg)


def setup_logging(name: str, verbose: bool = False) -> logging.Logger:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format=f"%(asctime)s {name} %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    return logging.getLogger(f"hil.{name}")


class StopFlag:
    """Set by SIGINT/SIGTERM (in the main thread) or by code; processes poll it."""

    def __init__(self, install: bool = True):
        self.event = threading.Event()
        self.signal: int | None = None
        if install and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, self._handle)

    def _handle(self, signum, _frame):
        self.signal = signum
        self.event.set()

    def __bool__(self) -> bool:
        return self.event.is_set()

    def set(self) -> None:
        self.event.set()


def items(dataset: str, crop: int, count: int, seed: int = 0) -> tuple[torch.Tensor, list[str]]:
    """The link's items: deterministic held-out tiles, so tx and rx agree on item ids without talking."""
    from ..jscc.data import fixed_tiles, open_dataset

    return fixed_tiles(open_dataset(dataset, "test"), crop, count, seed)


def add_whole_image_args(p) -> None:
    """``--image``/``--images``/``--whole-mode``: the photographs hil tx (and hil link) send whole."""
    p.add_argument(
        "--image",
        action="append",
        metavar="FILE",
        help="send this photograph whole, at its own size (repeatable; instead of --dataset)",
    )
    p.add_argument("--images", action="append", metavar="DIR", help="send every image in DIR whole")
    p.add_argument(
        "--whole-mode",
        choices=["tiles", "interleaved", "full"],
        default="tiles",
        help="--image/--images: 32x32 tiles, their symbols interleaved within segments of a few "
        "frames, each segment sent while the next is encoded and decoded as soon as it is in "
        "(scheme 253; the default); 'interleaved': the same tiles interleaved across the whole "
        "photograph (scheme 254: nothing goes out before all is encoded, nor is decoded before "
        "all arrived); 'full': whole at full resolution (kept for comparison). Also sets the "
        "digital baseline's symbol budget; see scripts/whole_images.py",
    )


def add_precision_arg(p) -> None:
    """``--precision``: what the JSCC encoder or decoder computes in (``JsccModel.set_precision``)."""
    p.add_argument(
        "--precision",
        choices=["auto", "float32", "bfloat16"],  # hil.jscc.model.PRECISIONS (a test checks)
        default="auto",
        help="JSCC network arithmetic: bfloat16 is 2-3x faster on a CPU with native bfloat16 "
        "(AVX512-BF16, AMX) within 0.03 dB of PSNR; auto (default) takes it there, float32 elsewhere",
    )


def add_curve_args(p) -> None:
    """CURVE options shared by the processes (see hil.transport.security)."""
    g = p.add_argument_group("authentication (ZeroMQ CURVE, for endpoints off this machine)")
    g.add_argument(
        "--curve-secret", help="this process's secret certificate (NAME.key_secret from hil keys)"
    )
    g.add_argument(
        "--curve-clients", help="binding side: folder of authorised clients' public certificates"
    )
    g.add_argument(
        "--curve-server-key", help="connecting side: the server's public certificate (NAME.key)"
    )


def curve_server(a):
    from ..transport.security import CurveServer

    if getattr(a, "curve_secret", None) and getattr(a, "curve_clients", None):
        return CurveServer(a.curve_secret, a.curve_clients)
    return None


def curve_client(a):
    from ..transport.security import CurveClient

    if getattr(a, "curve_secret", None) and getattr(a, "curve_server_key", None):
        return CurveClient(a.curve_secret, a.curve_server_key)
    return None
