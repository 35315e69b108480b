"""``hil eval``: PSNR/SSIM vs SNR of a checkpoint on held-out images, through the full simulated path."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..channel import ChainConfig, load_chain, profile
from .checkpoint import load_checkpoint
from .data import fixed_tiles, open_dataset
from .train import evaluate, pick_device


def resolve_channel(spec: str | None, doc: dict) -> tuple[str, list[dict]]:
    if spec is None:
        stages = doc.get("config", {}).get("channel", {}).get("stages")
        if not stages:
            raise ValueError("the checkpoint records no training channel; pass --channel")
        return "trained", stages
    if Path(spec).suffix == ".toml":
        return spec, load_chain(spec).config.to_tables()
    return spec, profile(spec)


def run_eval(args) -> int:
    device = pick_device()
    model, phy, doc, _ = load_checkpoint(args.checkpoint, device=device)
    name, stages = resolve_channel(args.channel, doc)
    ChainConfig.from_tables(stages)
    try:
        snrs = [float(s) for s in args.snr.split(",") if s.strip()]
    except ValueError as exc:
        raise ValueError(f"--snr must be comma-separated numbers, got {args.snr!r}") from exc
    dataset = args.dataset or doc.get("config", {}).get("train", {}).get("dataset", "builtin")
    crop = doc.get("config", {}).get("train", {}).get("crop", 32)
    tiles, _ = fixed_tiles(open_dataset(dataset, "test"), crop, args.tiles)
    res = evaluate(model, phy, stages, snrs, tiles, seed=args.seed)
    out = {
        "checkpoint": str(args.checkpoint),
        "fingerprint": doc["fingerprint"],
        "bandwidth_ratio": doc["model"]["bandwidth_ratio"],
        "channel": name,
        "dataset": f"{dataset} (test split)",
        "tiles": len(tiles),
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
            f"channel {name}, {len(tiles)} held-out tiles"
        )
        print(f"{'SNR dB':>7} {'PSNR dB':>8} {'SSIM':>6} {'SNR est':>8}")
        for r in out["results"]:
            print(
                f"{r['snr_db']:>7g} {r['psnr_db']:>8.2f} {r['ssim']:>6.3f} {r['snr_est_db']:>8.2f}"
            )
    sys.stdout.flush()
    return 0


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
