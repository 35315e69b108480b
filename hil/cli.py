"""The ``hil`` command."""

from __future__ import annotations

import argparse
import json
import sys


def _demo(args) -> int:
    from .demos import channel_tour, grad_flow

    rc = channel_tour.main()
    print()
    return rc or grad_flow.main()


def _gradflow(args) -> int:
    from .demos import grad_flow

    return grad_flow.main()


def _train(args) -> int:
    from .jscc.train import ExperimentConfig, train

    cfg = ExperimentConfig.load(args.config)
    if args.steps is not None or args.grad_mode is not None or args.dataset is not None:
        d = cfg.to_dict()
        if args.steps is not None:
            d["train"]["steps"] = args.steps
        if args.grad_mode is not None:
            d["train"]["grad_mode"] = args.grad_mode
        if args.dataset is not None:
            d["train"]["dataset"] = args.dataset
        cfg = ExperimentConfig.from_dict(d)
    doc = train(
        cfg,
        args.out,
        resume=args.resume,
        progress=not args.quiet,
        until=args.until,
        init=args.init,
    )
    if doc:
        last = doc["history"][-1] if doc["history"] else {}
        print(
            json.dumps(
                {
                    "checkpoint": str(args.out),
                    "fingerprint": doc["fingerprint"],
                    "step": doc["step"],
                    "train_seconds": round(doc["train_seconds"], 1),
                    "images_per_second": round(doc["images_per_second"], 1),
                    "eval": last.get("eval"),
                },
                indent=2,
            )
        )
    return 0


def _export(args) -> int:
    from .jscc.checkpoint import export_checkpoint

    print(export_checkpoint(args.checkpoint, args.out, args.sample_rate))
    return 0


def _keys(args) -> int:
    from .transport.security import generate_keypair

    pub, sec = generate_keypair(args.dir, args.name)
    print(f"public key (give it to the peers): {pub}\nsecret key (keep it here, mode 0600): {sec}")
    return 0


def _eval(args) -> int:
    from .apps.evaluate import run_eval

    return run_eval(args)


def _app(name):
    def run(args) -> int:
        import importlib

        return importlib.import_module(f"hil.apps.{name}").main(args.rest)

    return run


def _corpus(args) -> int:
    from collections import Counter

    from .jscc import corpus as C

    m = C.load_manifest()
    sources = C.CI_SOURCES if args.ci else None
    photos = [p for p in m.photos if sources is None or p.source in sources]
    by = Counter((p.source, p.split) for p in photos)
    print(f"{len(photos)} photographs (manifest {C.MANIFEST}, {m.digest[:16]})")
    print(f"{'source':<32} {'train':>5} {'test':>5} {'whole':>5}  licence")
    for src in sorted({p.source for p in photos}):
        lic = ", ".join(m.sources[src].get("licence", []))
        print(f"{src:<32} {by[src, 'train']:>5} {by[src, 'test']:>5} {by[src, 'whole']:>5}  {lic}")
    if not args.ci:
        print(f"Debian packages: {' '.join(m.apt_packages)}")
    out = C.build(m, sources, progress=not args.quiet)
    print(f"verified (SHA-256) and cached under {out}")
    if args.export_whole:
        files = C.export_whole(args.export_whole, sources, args.count, m)
        print(f"{len(files)} whole photographs written to {args.export_whole} (PNG)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hil", description="Deep JSCC hardware-in-the-loop")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="the channel library and the gradient-flow demonstration")
    d.set_defaults(func=_demo)
    d = sub.add_parser("gradflow", help="why the channel must not be detached")
    d.set_defaults(func=_gradflow)

    d = sub.add_parser("train", help="train a JSCC codec through the channel and the PHY")
    d.add_argument(
        "--config", required=True, help="training TOML ([model], [phy], [channel], [train])"
    )
    d.add_argument(
        "--out", required=True, help="checkpoint stem: writes <out>.safetensors and <out>.json"
    )
    d.add_argument("--resume", help="checkpoint to resume from")
    d.add_argument(
        "--init",
        help="start from this checkpoint's weights at step 0 with a fresh optimizer (fine-tune "
        "a trained model, e.g. on another channel); not with --resume",
    )
    d.add_argument("--steps", type=int, help="override train.steps")
    d.add_argument(
        "--until", type=int, help="stop after this step (checkpointed); continue with --resume"
    )
    d.add_argument(
        "--grad-mode", choices=["complex", "detach", "real"], help="override train.grad_mode"
    )
    d.add_argument(
        "--dataset",
        help="override train.dataset: builtin | corpus | corpus-ci | cifar10:<dir> | folder:<dir>",
    )
    d.add_argument("--quiet", action="store_true", help="no progress output")
    d.set_defaults(func=_train)

    d = sub.add_parser(
        "corpus", help="list, verify and cache the photograph corpus (hil/assets/corpus)"
    )
    d.add_argument(
        "--ci", action="store_true", help="only the scikit-image photographs (no Debian package)"
    )
    d.add_argument("--quiet", action="store_true", help="no progress bar")
    d.add_argument(
        "--export-whole",
        metavar="DIR",
        help="write the held-out whole photographs (768 px long side) to DIR as PNG files, to "
        "send with hil link --images DIR",
    )
    d.add_argument("--count", type=int, default=None, help="--export-whole: the first N only")
    d.set_defaults(func=_corpus)

    d = sub.add_parser(
        "export", help="copy a checkpoint without optimiser/RNG state (for shipping)"
    )
    d.add_argument("--checkpoint", required=True)
    d.add_argument("--out", required=True)
    d.add_argument(
        "--sample-rate",
        type=float,
        default=None,
        metavar="HZ",
        help="the copy's PHY at this sample rate (same weights; a new fingerprint): for a "
        "radio profile at another rate, e.g. 20e6",
    )
    d.set_defaults(func=_export)

    for name, helptext in (
        ("tx", "encode images and stream framed IQ to the radio process"),
        ("radio", "own a radio backend: TX samples in, RX samples out"),
        ("rx", "find, decode and score frames in the RX stream"),
        ("link", "run radio, rx and tx as processes on loopback (sim by default)"),
        ("record", "capture a radio's RX stream into a SigMF recording"),
        ("replay", "play a SigMF recording into the link where a radio would"),
        ("twin", "serve a simulated Pluto over the libiio network protocol (ip:127.0.0.1:30431)"),
        ("dashboard", "serve the live view of a link's telemetry (http://127.0.0.1:8750/)"),
        ("finetune", "fine-tune the decoder on recordings of the air (encoder as deployed)"),
    ):
        d = sub.add_parser(name, help=helptext, add_help=False)
        d.add_argument("rest", nargs=argparse.REMAINDER)
        d.set_defaults(func=_app(name))

    d = sub.add_parser("keys", help="generate a CURVE key pair for authenticated remote endpoints")
    d.add_argument("name", help="key name, e.g. the host: writes NAME.key and NAME.key_secret")
    d.add_argument("--dir", default="keys", help="folder to write them to")
    d.set_defaults(func=_keys)

    d = sub.add_parser("eval", help="PSNR/SSIM vs SNR of a checkpoint on held-out images")
    d.add_argument("--checkpoint", required=True)
    d.add_argument("--snr", default="0,5,10,15,20", help="comma-separated SNRs in dB")
    d.add_argument(
        "--channel",
        default=None,
        help="profile name or TOML with [[channel]] tables "
        "(default: the channel the checkpoint was trained on)",
    )
    d.add_argument(
        "--dataset", default=None, help="default: the checkpoint's data set (test split)"
    )
    d.add_argument("--tiles", type=int, default=512, help="held-out tiles to score")
    d.add_argument("--seed", type=int, default=1234)
    d.add_argument("--json", action="store_true", help="print a JSON document")
    d.add_argument("--plot", help="write a PSNR-vs-SNR PNG here")
    d.add_argument(
        "--baseline",
        action="store_true",
        help="also JPEG/WebP + 5G LDPC + QAM (each MCS, genie-adaptive) and the capacity bound on "
        "the same frames; --channel may list several (default awgn,multipath_cfo); "
        "--snr accepts a range start:stop:step",
    )
    d.add_argument("--mcs", help="with --baseline: comma-separated MCS keys (default: all)")
    d.add_argument(
        "--precision",
        choices=["auto", "float32", "bfloat16"],
        default="float32",
        help="the JSCC networks' arithmetic (default float32: the model as trained; hil tx/rx "
        "default to auto)",
    )
    d.set_defaults(func=_eval)
    return p


APPS = ("tx", "radio", "rx", "link", "record", "replay", "twin", "dashboard", "finetune")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in APPS:  # the processes parse their own arguments
        import importlib

        try:
            return int(importlib.import_module(f"hil.apps.{argv[0]}").main(argv[1:]) or 0)
        except (ValueError, FileNotFoundError) as exc:
            print(f"hil {argv[0]}: error: {exc}", file=sys.stderr)
            return 2
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, OSError) as exc:
        print(f"hil {args.cmd}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
