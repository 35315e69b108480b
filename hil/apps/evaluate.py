"""``hil eval``: PSNR/SSIM vs SNR of a checkpoint on held-out images, through the full simulated path."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..channel import ChainConfig, check_sample_rate, load_chain, profile
from ..jscc.checkpoint import load_checkpoint
from ..jscc.data import fixed_tiles, open_dataset
from ..jscc.train import evaluate, pick_device


def resolve_channel(spec: str | None, doc: dict) -> tuple[str, list[dict]]:
    """(name, stage tables) of ``--channel``: the checkpoint's training channel (None), a chain
    TOML, or a named profile at the checkpoint's PHY rate; stages in Hz must run at that rate."""
    fs = doc["phy"]["sample_rate_hz"]
    if spec is None:
        stages = doc.get("config", {}).get("channel", {}).get("stages")
        if not stages:
            raise ValueError("the checkpoint records no training channel; pass --channel")
        name = "trained"
    elif Path(spec).suffix == ".toml":
        name, stages = spec, load_chain(spec).config.to_tables()
    else:
        name, stages = spec, profile(spec, fs)
    check_sample_rate(stages, fs, f"--channel {name}")
    return name, stages


def parse_snrs(spec: str) -> list[float]:
    """'0,5,10' or a range 'start:stop:step' (stop included)."""
    try:
        if ":" in spec:
            a, b, step = (float(v) for v in spec.split(":"))
            if step <= 0 or b < a:
                raise ValueError
            n = round((b - a) / step)
            return [round(a + i * step, 6) for i in range(n + 1)]
        return [float(s) for s in spec.split(",") if s.strip()]
    except ValueError as exc:
        raise ValueError(
            f"--snr must be comma-separated numbers or start:stop:step, got {spec!r}"
        ) from exc


def run_eval(args) -> int:
    device = pick_device()
    model, phy, doc, _ = load_checkpoint(args.checkpoint, device=device)
    model.set_precision(getattr(args, "precision", "float32"))
    snrs = parse_snrs(args.snr)
    dataset = args.dataset or doc.get("config", {}).get("train", {}).get("dataset", "builtin")
    crop = doc.get("config", {}).get("train", {}).get("crop", 32)
    tiles, _ = fixed_tiles(open_dataset(dataset, "test"), crop, args.tiles)
    if getattr(args, "baseline", False):
        return run_baseline(args, model, phy, doc, snrs, tiles, dataset)
    name, stages = resolve_channel(args.channel, doc)
    ChainConfig.from_tables(stages)
    res = evaluate(model, phy, stages, snrs, tiles, seed=args.seed)
    out = {
        "checkpoint": str(args.checkpoint),
        "fingerprint": doc["fingerprint"],
        "bandwidth_ratio": doc["model"]["bandwidth_ratio"],
        "channel": name,
        "dataset": f"{dataset} (test split)",
        "tiles": len(tiles),
        "precision": model.precision_name,
        "results": [{"snr_db": s, **res[s]} for s in snrs],
    }
    if args.plot:
        plot_psnr(out, args.plot)
        out["plot"] = args.plot
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(
            f"{out['checkpoint']} (k/n {out['bandwidth_ratio']}, fingerprint {out['fingerprint']}), "
            f"channel {name}, {len(tiles)} held-out tiles, {out['precision']}"
        )
        print(
            f"{'SNR dB':>7} {'PSNR dB':>8} {'SSIM':>6} {'SNR est':>8}  colour shift R/G/B (8-bit)"
        )
        for r in out["results"]:
            rgb = "/".join(f"{v:+.2f}" for v in r["colour_shift_rgb"])
            print(
                f"{r['snr_db']:>7g} {r['psnr_db']:>8.2f} {r['ssim']:>6.3f} {r['snr_est_db']:>8.2f}"
                f"  {rgb}"
            )
    sys.stdout.flush()
    return 0


def run_baseline(args, model, phy, doc, snrs, tiles, dataset) -> int:
    from ..baseline.digital import mcs_by_key
    from ..baseline.evaluate import compare, plot

    specs = (args.channel or "awgn,multipath_cfo").split(",")
    channels = {}
    for spec in specs:
        name, stages = resolve_channel(spec.strip(), doc)
        ChainConfig.from_tables(stages)
        channels[name] = stages
    mcs = [mcs_by_key(k) for k in args.mcs.split(",")] if args.mcs else None
    out = compare(
        model,
        phy,
        channels,
        snrs,
        tiles.cpu(),
        seed=args.seed,
        mcs_indices=mcs,
        progress=lambda m: print(m, file=sys.stderr, flush=True),  # stdout stays the table / JSON
    )
    out.update(
        {
            "checkpoint": str(args.checkpoint),
            "fingerprint": doc["fingerprint"],
            "bandwidth_ratio": doc["model"]["bandwidth_ratio"],
            "dataset": f"{dataset} (test split)",
        }
    )
    if args.plot:
        plot(out, args.plot, label=f"JSCC k/n={doc['model']['bandwidth_ratio']}")
        out["plot"] = args.plot
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print_baseline(out)
    sys.stdout.flush()
    return 0


def print_baseline(out: dict) -> None:
    print(
        f"{out['checkpoint']} (k/n {out['bandwidth_ratio']}), {out['tiles']} held-out tiles of "
        f"{out['dataset']}, {out['n_symbols']} payload symbols per image in every scheme"
    )
    for name, c in out["channels"].items():
        print(f"\n## {name}: PSNR (dB)\n")
        snrs = out["snrs"]
        show = [s for s in snrs if s in (0, 5, 10, 15, 20)] or snrs
        print("| scheme | " + " | ".join(f"{s:g} dB" for s in show) + " | cliff (dB) |")
        print("| --- |" + " --- |" * (len(show) + 1))
        print(
            "| JSCC | " + " | ".join(f"{c['jscc'][s]['psnr_db']:.2f}" for s in show) + " | none |"
        )
        for k, d in c["digital"].items():
            cl = c["cliff_snr_db"][k]
            cliff = "never" if cl is None else f"{cl:g}"
            print(
                f"| {d['name']} ({d['bytes']} B) | "
                + " | ".join(f"{d['by_snr'][s]['psnr_db']:.2f}" for s in show)
                + f" | {cliff} |"
            )
        print(
            "| adaptive MCS (genie) | "
            + " | ".join(f"{c['adaptive'][s]['psnr_db']:.2f}" for s in show)
            + " | |"
        )
        print("| bound | " + " | ".join(f"{c['bound'][s]['psnr_db']:.2f}" for s in show) + " | |")
        print(
            "| **JSCC - best digital** | "
            + " | ".join(f"**{c['jscc_minus_best_digital_db'][s]:+.2f}**" for s in show)
            + " | |"
        )
        print(
            f"\nJSCC's largest PSNR drop per dB of SNR on the grid: "
            f"{c['jscc_max_drop_db_per_db']:.2f} dB/dB (cliff: > 3)"
        )


def plot_psnr(doc: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5), dpi=120)
    x = [r["snr_db"] for r in doc["results"]]
    ax.plot(
        x, [r["psnr_db"] for r in doc["results"]], "o-", label=f"JSCC k/n={doc['bandwidth_ratio']}"
    )
    ax.set_xlabel("SNR (dB)")
    ax.set_ylabel("PSNR (dB)")
    ax.set_title(f"channel: {doc['channel']}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
