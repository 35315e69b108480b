#!/usr/bin/env python3
"""JSCC figures: shipped-model tables, grad modes, SNR-adaptive vs specialists,
PHY-trained vs AWGN-trained. Trains what it needs into runs/experiments/.

Usage:
    python scripts/jscc_experiments.py shipped                 # tables of the shipped checkpoints
    python scripts/jscc_experiments.py grad-modes [--steps 1500]
    python scripts/jscc_experiments.py specialists [--steps 3000]
    python scripts/jscc_experiments.py phy-vs-awgn [--steps 3000]
    python scripts/jscc_experiments.py surrogate [--steps 1500]
    python scripts/jscc_experiments.py precision [--steps 1500]
    python scripts/jscc_experiments.py all

Each prints a Markdown table; results also go to runs/experiments/<name>.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

import torch

from hil.jscc.checkpoint import load_checkpoint
from hil.jscc.data import fixed_tiles, open_dataset
from hil.jscc.model import JsccModel, native_bfloat16
from hil.jscc.train import ExperimentConfig, evaluate, train

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = {
    "1/6": ROOT / "hil/assets/checkpoints/jscc_k6",
    "1/12": ROOT / "hil/assets/checkpoints/jscc_k12",
}
BASE_CONFIG = ROOT / "scripts/train_configs/bdjscc_builtin_k6.toml"  # the first shipped model
RUNS = ROOT / "runs/experiments"
SNRS = [0.0, 5.0, 10.0, 15.0, 20.0]


def _tiles():
    return fixed_tiles(open_dataset("builtin", "test"), 32, 512)[0]


def _profile(name):
    """A named channel at the default PHY's rate (the rate every experiment here runs at)."""
    from hil.channel import profile
    from hil.phy import OfdmConfig

    return profile(name, OfdmConfig().sample_rate_hz)


def _cfg(**train_over) -> ExperimentConfig:
    d = ExperimentConfig.load(BASE_CONFIG).to_dict()
    chan = train_over.pop("channel", None)
    snr = train_over.pop("snr_db", None)
    if chan is not None:
        d["channel"]["stages"] = chan
    if snr is not None:
        d["channel"]["snr_db"] = snr
    d["train"].update(train_over)
    return ExperimentConfig.from_dict(d)


def _train(name, cfg, force=False):
    stem = RUNS / name
    if stem.with_suffix(".json").exists() and not force:
        doc = json.loads(stem.with_suffix(".json").read_text())
        if doc.get("step") == cfg.train.steps and doc.get("config") == cfg.to_dict():
            print(f"[reuse] {stem} (same config, {doc['step']} steps)", flush=True)
            return load_checkpoint(stem)[0], doc
    t = time.time()
    print(
        f"[train] {name}: {cfg.train.steps} steps, grad_mode={cfg.train.grad_mode}, "
        f"snr {cfg.snr_db}, through_phy={cfg.train.through_phy}",
        flush=True,
    )
    doc = train(cfg, stem, progress=True)
    print(f"[train] {name}: {time.time() - t:.0f} s", flush=True)
    return load_checkpoint(stem)[0], doc


def _save(name, obj):
    RUNS.mkdir(parents=True, exist_ok=True)
    (RUNS / f"{name}.json").write_text(json.dumps(obj, indent=2))


def shipped(args):
    """The shipped checkpoints (or ``--checkpoint`` stems) on the corpus's held-out tiles (and,
    for comparison with the first shipped model's figures, the builtin test tiles)."""
    chosen = getattr(args, "checkpoint", None)
    models = {Path(c).name: Path(c) for c in chosen} if chosen else SHIPPED
    sets = {
        "corpus": fixed_tiles(open_dataset("corpus", "test"), 32, 512)[0],
        "builtin": _tiles(),
    }
    out = {}
    print(
        "\n## Shipped checkpoints: PSNR (dB) / SSIM on 512 held-out 32x32 tiles, full "
        "simulated path with estimated channel; colour shift: mean absolute per-channel "
        "shift in 8-bit levels, at 10 dB\n"
    )
    print(
        "| k/n | test tiles | channel | "
        + " | ".join(f"{s:g} dB" for s in SNRS)
        + " | colour shift |"
    )
    print("| --- | --- | --- | " + " | ".join("---" for _ in SNRS) + " | --- |")
    for ratio, stem in models.items():
        if not stem.with_suffix(".json").exists():
            print(f"| {ratio} | (checkpoint {stem.name} missing) |")
            continue
        model, phy, doc, _ = load_checkpoint(stem)
        for tname, tiles in sets.items():
            for ch in ("awgn", "multipath_cfo"):
                res = evaluate(model, phy, _profile(ch), SNRS, tiles)
                out[f"{ratio}/{tname}/{ch}"] = res
                print(
                    f"| {ratio} | {tname} | {ch} | "
                    + " | ".join(f"{res[s]['psnr_db']:.2f} / {res[s]['ssim']:.3f}" for s in SNRS)
                    + f" | {res[10.0]['colour_shift_abs']:.2f} |",
                    flush=True,
                )
        print(
            f"\n{stem.name}: {model.n_parameters()} parameters, fingerprint {doc['fingerprint']}, {doc['step']} steps, "
            f"{doc['train_images']} images in {doc['train_seconds']:.0f} s "
            f"({doc['images_per_second']:.0f} images/s, {doc['device']}, torch {doc['torch']})\n"
        )
    if not chosen:  # the saved results are the shipped models'
        _save("shipped", out)


def grad_modes(args):
    tiles = _tiles()
    rows = {}
    for mode in ("complex", "real", "detach"):
        cfg = _cfg(grad_mode=mode, steps=args.steps, eval_every=args.steps)
        model, _ = _train(f"grad_{mode}_{args.steps}", cfg)
        with torch.random.fork_rng():
            torch.manual_seed(cfg.train.seed)
            init = JsccModel(cfg.model).state_dict()
        sd = model.state_dict()
        enc_change = max(
            float((sd[k] - init[k]).abs().max()) for k in init if k.startswith("encoder.")
        )
        res = evaluate(model, cfg.phy, cfg.channel, [0.0, 10.0, 20.0], tiles)
        rows[mode] = {"eval": res, "encoder_max_abs_change": enc_change}
    print(
        f"\n## Grad modes, same budget ({args.steps} steps x 64 images), channel multipath_cfo, "
        "PSNR (dB) on 512 held-out tiles\n"
    )
    print("| grad mode | 0 dB | 10 dB | 20 dB | max abs change of any encoder weight |")
    print("| --- | --- | --- | --- | --- |")
    for mode, r in rows.items():
        e = r["eval"]
        print(
            f"| {mode} | {e[0.0]['psnr_db']:.2f} | {e[10.0]['psnr_db']:.2f} | {e[20.0]['psnr_db']:.2f} | "
            f"{r['encoder_max_abs_change']:.3g} |"
        )
    _save("grad_modes", rows)


def _adaptive(steps):
    """The SNR-adaptive model (0-20 dB) at the given budget: the shipped config, retrained if needed."""
    cfg = _cfg(steps=steps, eval_every=steps)
    return _train(f"adaptive_{steps}", cfg)[0], cfg


def specialists(args):
    tiles = _tiles()
    model, cfg = _adaptive(args.steps)
    ad = evaluate(model, cfg.phy, _profile("multipath_cfo"), [0.0, 10.0, 20.0], tiles)
    rows = {}
    for s in (0.0, 10.0, 20.0):
        cfg = _cfg(snr_db=[s, s], steps=args.steps, eval_every=args.steps)
        m, _ = _train(f"specialist_{s:g}dB_{args.steps}", cfg)
        rows[s] = evaluate(m, cfg.phy, cfg.channel, [s], tiles)[s]
    print(
        f"\n## One SNR-adaptive model (trained on 0-20 dB) vs specialists trained at one SNR, same budget "
        f"({args.steps} steps x 64 images each), multipath_cfo, PSNR (dB) on 512 held-out tiles\n"
    )
    print("| SNR | adaptive | specialist | adaptive - specialist |")
    print("| --- | --- | --- | --- |")
    for s, r in rows.items():
        print(
            f"| {s:g} dB | {ad[s]['psnr_db']:.2f} | {r['psnr_db']:.2f} | {ad[s]['psnr_db'] - r['psnr_db']:+.2f} |"
        )
    _save("specialists", {"adaptive": ad, "specialists": rows})


def phy_vs_awgn(args):
    tiles = _tiles()
    model, pcfg = _adaptive(args.steps)
    phy = pcfg.phy
    cfg = _cfg(channel=_profile("awgn"), through_phy=False, steps=args.steps, eval_every=args.steps)
    naive, _ = _train(f"awgn_only_{args.steps}", cfg)
    test = _profile("multipath_cfo")
    a = evaluate(model, phy, test, SNRS, tiles)
    b = evaluate(naive, phy, test, SNRS, tiles)
    print(
        f"\n## Trained through the PHY with estimated CSI on multipath_cfo vs trained on AWGN only "
        f"(bare symbols, true SNR), same budget ({args.steps} steps), both tested through the PHY on "
        "multipath_cfo, PSNR (dB) on 512 held-out tiles\n"
    )
    print("| model | " + " | ".join(f"{s:g} dB" for s in SNRS) + " |")
    print("| --- | " + " | ".join("---" for _ in SNRS) + " |")
    print(
        "| through PHY + multipath_cfo | "
        + " | ".join(f"{a[s]['psnr_db']:.2f}" for s in SNRS)
        + " |"
    )
    print("| AWGN only | " + " | ".join(f"{b[s]['psnr_db']:.2f}" for s in SNRS) + " |")
    _save("phy_vs_awgn", {"phy_trained": a, "awgn_only": b})


SURROGATE_CONFIG = ROOT / "scripts/train_configs/shipped_k6.toml"


def _small_resgdn(steps: int) -> dict:
    """The shipped config with a small model (hidden 24, one residual block), one thread and
    one evaluation at the end: the setting of the surrogate and precision experiments."""
    d = ExperimentConfig.load(SURROGATE_CONFIG).to_dict()
    d["model"].update(hidden=24, res_blocks=1)
    d["train"].update(steps=steps, eval_every=steps, eval_tiles=256, threads=1)
    return d


def _training_table(rows, diff_name: str) -> dict:
    """Print two training runs side by side: rows [(name, evaluate() result, checkpoint JSON)]
    as PSNR per SNR and images/s, then the second minus the first per SNR (``diff_name``),
    which it returns ({SNR: dB})."""
    print("| training | " + " | ".join(f"{s:g} dB" for s in SNRS) + " | img/s |")
    print("| --- | " + " | ".join("---" for _ in SNRS) + " | --- |")
    for name, r, doc in rows:
        print(
            f"| {name} | "
            + " | ".join(f"{r[s]['psnr_db']:.2f}" for s in SNRS)
            + f" | {doc['images_per_second']:.0f} |"
        )
    (_, first, _), (_, second, _) = rows
    diff = {s: second[s]["psnr_db"] - first[s]["psnr_db"] for s in SNRS}
    print(f"| {diff_name} | " + " | ".join(f"{diff[s]:+.2f}" for s in SNRS) + " | |")
    return diff


def surrogate(args):
    """A small resgdn model trained through the full PHY vs the same model trained through the
    per-subcarrier surrogate for 90 % of the steps and the PHY for the last 10 %, same seed and
    budget, both tested through the full PHY on held-out corpus tiles."""
    d = _small_resgdn(args.steps)
    phy_cfg = ExperimentConfig.from_dict(copy.deepcopy(d))
    d["train"]["surrogate_until"] = int(0.9 * args.steps)
    sur_cfg = ExperimentConfig.from_dict(d)
    t0 = time.time()
    m_phy, doc_phy = _train("surrogate_phy", phy_cfg)
    t1 = time.time()
    m_sur, doc_sur = _train("surrogate_sur", sur_cfg)
    tiles = fixed_tiles(open_dataset(phy_cfg.train.dataset, "test"), 32, 512)[0]
    chan = list(phy_cfg.channel)
    a = evaluate(m_phy, phy_cfg.phy, chan, SNRS, tiles)
    b = evaluate(m_sur, sur_cfg.phy, chan, SNRS, tiles)
    print(
        f"\n## Surrogate vs PHY training, same budget ({args.steps} steps x "
        f"{phy_cfg.train.batch_size}), resgdn hidden 24, {phy_cfg.train.dataset}, tested through "
        "the PHY on multipath_cfo, PSNR (dB) on 512 held-out tiles\n"
    )
    diff = _training_table(
        [("through the PHY", a, doc_phy), ("surrogate, PHY for the last 10 %", b, doc_sur)],
        "surrogate - PHY",
    )
    print(
        f"\nworst surrogate - PHY difference: {min(diff.values()):+.2f} dB (goal: no loss "
        f"beyond -0.3 dB); wall time {t1 - t0:.0f} s vs {time.time() - t1:.0f} s (both when trained "
        "in this run; a reused checkpoint takes ~0 s)"
    )
    _save("surrogate", {"phy": a, "surrogate": b, "diff_db": diff})


def precision(args):
    """The surrogate experiment's small resgdn model trained through the PHY in float32 and in
    bfloat16 autocast (``train.precision``), same seed and budget, both tested in float32
    through the PHY on held-out corpus tiles: what the faster training costs."""
    d = _small_resgdn(args.steps)
    runs = {}
    for prec in ("float32", "bfloat16"):
        d["train"]["precision"] = prec
        cfg = ExperimentConfig.from_dict(copy.deepcopy(d))
        t0 = time.time()
        model, doc = _train(f"precision_{prec}", cfg)
        runs[prec] = (model, doc, time.time() - t0)
    tiles = fixed_tiles(open_dataset(cfg.train.dataset, "test"), 32, 512)[0]
    chan = list(cfg.channel)
    res = {p: evaluate(m.set_precision("float32"), cfg.phy, chan, SNRS, tiles)
           for p, (m, _, _) in runs.items()}  # fmt: skip
    print(
        f"\n## Training in float32 vs bfloat16 autocast, same budget ({args.steps} steps x "
        f"{cfg.train.batch_size}, seed {cfg.train.seed}), resgdn hidden 24, {cfg.train.dataset}, "
        "tested in float32 through the PHY on multipath_cfo, PSNR (dB) on 512 held-out tiles\n"
    )
    diff = _training_table(
        [(p, res[p], doc) for p, (_, doc, _) in runs.items()], "bfloat16 - float32"
    )
    speed = runs["bfloat16"][1]["images_per_second"] / runs["float32"][1]["images_per_second"]
    print(
        f"\nbfloat16 trains at {speed:.2f}x the images/s of float32 (native bfloat16 on this "
        f"CPU: {native_bfloat16()}); wall time {runs['float32'][2]:.0f} s vs "
        f"{runs['bfloat16'][2]:.0f} s (a reused checkpoint takes ~0 s)"
    )
    _save("precision", {"float32": res["float32"], "bfloat16": res["bfloat16"], "diff_db": diff})


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "what",
        choices=[
            "shipped",
            "grad-modes",
            "specialists",
            "phy-vs-awgn",
            "surrogate",
            "precision",
            "all",
        ],
    )
    p.add_argument("--steps", type=int, default=None, help="training budget per model")
    p.add_argument(
        "--checkpoint",
        action="append",
        help="shipped: score these checkpoint stems (repeatable) instead of the shipped ones, e.g. "
        "an earlier shipped model taken out of git history",
    )
    a = p.parse_args(argv)
    torch.set_num_threads(max(torch.get_num_threads(), 1))
    jobs = {
        "shipped": (shipped, None),
        "grad-modes": (grad_modes, 1500),
        "specialists": (specialists, 3000),
        "phy-vs-awgn": (phy_vs_awgn, 3000),
        "surrogate": (surrogate, 1500),
        "precision": (precision, 1500),
    }
    for name, (fn, default) in jobs.items():
        if a.what in (name, "all"):
            args = copy.copy(a)
            args.steps = a.steps or default
            fn(args)


if __name__ == "__main__":
    main()
