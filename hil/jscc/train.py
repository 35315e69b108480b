"""Training through the full differentiable path, evaluation, and the training config.

``hil train --config <toml>``: CPU by default, CUDA when present, and
DistributedDataParallel when started by ``torchrun`` (WORLD_SIZE > 1) without
code changes: each rank draws its own crops and channels, gradients are
averaged, rank 0 evaluates and writes checkpoints.
"""

from __future__ import annotations

import math
import os
import sys
import time
import tomllib
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from ..channel import ChainConfig, ChannelChain, check_sample_rate, profile
from ..phy import OfdmConfig
from .checkpoint import load_checkpoint, save_checkpoint
from .data import CropSampler, fixed_tiles, open_dataset
from .metrics import colour_shift, psnr, ssim
from .model import JsccConfig, JsccModel
from .pipeline import GRAD_MODES, JsccLink


@dataclass(frozen=True)
class TrainConfig:
    """Training settings (``[train]`` in the TOML)."""

    dataset: str = "builtin"
    crop: int = 32
    batch_size: int = 64
    steps: int = 2000
    lr: float = 1e-3
    lr_final: float = 1e-4  # cosine decay to this
    seed: int = 0
    eval_every: int = 500
    eval_tiles: int = 256
    eval_snr_db: tuple[float, ...] = (0.0, 10.0, 20.0)
    grad_mode: str = "complex"
    equalizer: str = "mmse"
    through_phy: bool = (
        True  # False: channel on the bare symbols, decoder told the true SNR (the naive baseline)
    )
    threads: int = 0  # torch CPU threads; 0 = torch's default
    # steps 1..surrogate_until train through the per-subcarrier channel surrogate
    # (hil.phy.surrogate); the rest through the full PHY (0: always the PHY)
    surrogate_until: int = 0
    # what the networks compute in during training steps (``JsccModel.set_precision``):
    # bfloat16 autocast is 1.4x the images/s on a CPU with native bfloat16 (python
    # scripts/bench_train.py); evaluations and the saved weights stay float32
    precision: str = "float32"

    def __post_init__(self):
        if self.grad_mode not in GRAD_MODES:
            raise ValueError(f"train.grad_mode must be one of {GRAD_MODES}, got {self.grad_mode!r}")
        if self.crop % 4 or self.crop < 8:
            raise ValueError(f"train.crop must be a multiple of 4 and >= 8, got {self.crop}")
        if self.surrogate_until < 0:
            raise ValueError(f"train.surrogate_until must be >= 0, got {self.surrogate_until}")
        if self.precision not in ("float32", "bfloat16"):
            raise ValueError(
                f"train.precision must be 'float32' or 'bfloat16', got {self.precision!r}"
            )
        for k in ("batch_size", "steps", "eval_every", "eval_tiles"):
            if getattr(self, k) < 1:
                raise ValueError(f"train.{k} must be >= 1, got {getattr(self, k)}")
        if not 0 < self.lr_final <= self.lr:
            raise ValueError("train.lr_final must be in (0, lr]")


@dataclass(frozen=True)
class ExperimentConfig:
    model: JsccConfig = field(default_factory=JsccConfig)
    phy: OfdmConfig = field(default_factory=OfdmConfig)
    channel: tuple[dict, ...] = field(
        default_factory=lambda: tuple(profile("multipath_cfo", OfdmConfig().sample_rate_hz))
    )
    snr_db: tuple[float, float] = (0.0, 20.0)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self):
        ChainConfig.from_tables(list(self.channel))  # validate now
        check_sample_rate(list(self.channel), self.phy.sample_rate_hz, "[channel]")
        lo, hi = self.snr_db
        if not -10 <= lo <= hi <= 40:
            raise ValueError(
                f"channel.snr_db must be [lo, hi] within -10..40 dB, got {self.snr_db}"
            )

    def to_dict(self) -> dict:
        return {
            "model": self.model.to_dict(),
            "phy": self.phy.to_dict(),
            "channel": {"stages": [dict(t) for t in self.channel], "snr_db": list(self.snr_db)},
            "train": {
                k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self.train).items()
            },
        }

    @classmethod
    def from_dict(cls, d: dict) -> ExperimentConfig:
        unknown = set(d) - {"model", "phy", "channel", "train"}
        if unknown:
            raise ValueError(
                f"unknown config section(s) {sorted(unknown)}; allowed: channel, model, phy, train"
            )
        ch = dict(d.get("channel", {}))
        bad = set(ch) - {"profile", "stages", "snr_db"}
        if bad:
            raise ValueError(
                f"unknown [channel] key(s) {sorted(bad)}; allowed: profile, snr_db, stages"
            )
        if "profile" in ch and "stages" in ch:
            raise ValueError("[channel] takes either 'profile' or 'stages', not both")
        phy = OfdmConfig.from_dict(d.get("phy", {}))
        fs = phy.sample_rate_hz
        stages = (
            profile(ch["profile"], fs)
            if "profile" in ch
            else ch.get("stages", profile("multipath_cfo", fs))
        )
        tr = dict(d.get("train", {}))
        allowed = set(TrainConfig.__dataclass_fields__)
        bad = set(tr) - allowed
        if bad:
            raise ValueError(f"unknown [train] key(s) {sorted(bad)}; allowed: {sorted(allowed)}")
        if "eval_snr_db" in tr:
            tr["eval_snr_db"] = tuple(tr["eval_snr_db"])
        return cls(
            model=JsccConfig.from_dict(d.get("model", {})),
            phy=phy,
            channel=tuple(dict(t) for t in stages),
            snr_db=tuple(ch.get("snr_db", (0.0, 20.0))),
            train=TrainConfig(**tr),
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> ExperimentConfig:
        try:
            with open(path, "rb") as fh:
                doc = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ValueError(f"cannot read config {path}: {exc}") from exc
        return cls.from_dict(doc)


# ------------------------------------------------------------------------ helpers
def pick_device() -> torch.device:
    if torch.cuda.is_available():
        rank = int(os.environ.get("LOCAL_RANK", 0))
        return torch.device("cuda", rank)
    return torch.device("cpu")


def _dist():
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return None
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return dist


@torch.inference_mode()
def evaluate(
    model: JsccModel,
    phy: OfdmConfig,
    channel: list[dict] | tuple[dict, ...],
    snrs: list[float] | tuple[float, ...],
    tiles: torch.Tensor,
    *,
    seed: int = 1234,
    batch: int = 128,
    equalizer: str = "mmse",
) -> dict[float, dict[str, float]]:
    """Mean PSNR/SSIM, colour shift (8-bit levels, per channel R, G, B, and its mean absolute
    value) and the mean SNR estimate per SNR on held-out tiles, through the full path.

    tiles: [N, 3, H, W] float32 in [0, 1], any device (moved to the model's, ``batch`` at a
    time).
    """
    device = next(model.parameters()).device
    link = JsccLink(model, phy, ChannelChain.from_tables(list(channel)), equalizer=equalizer).to(
        device
    )
    model.eval()
    out = {}
    for snr in snrs:
        g = torch.Generator(device=device).manual_seed(seed)
        ps, ss, est, cs = [], [], [], []
        for i in range(0, len(tiles), batch):
            x = tiles[i : i + batch].to(device)
            r = link(x, torch.full((len(x),), float(snr), device=device), g)
            xh = r.x_hat.clamp(0, 1)
            ps.append(psnr(xh, x))
            ss.append(ssim(xh, x))
            est.append(r.snr_db)
            cs.append(colour_shift(xh, x))
        shift = torch.cat(cs)
        out[float(snr)] = {
            "psnr_db": float(torch.cat(ps).mean()),
            "ssim": float(torch.cat(ss).mean()),
            "snr_est_db": float(torch.cat(est).mean()),
            "colour_shift_rgb": [round(float(v), 3) for v in shift.mean(0)],
            "colour_shift_abs": float(shift.abs().mean()),
        }
    return out


def _lr(cfg: TrainConfig, step: int) -> float:
    t = min(step / max(cfg.steps, 1), 1.0)
    return cfg.lr_final + 0.5 * (cfg.lr - cfg.lr_final) * (1 + math.cos(math.pi * t))


def _opt_tensors(opt: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    out = {}
    for i, st in opt.state_dict()["state"].items():
        for k, v in st.items():
            out[f"opt.{i}.{k}"] = v if torch.is_tensor(v) else torch.tensor(v)
    return out


def _load_opt(opt: torch.optim.Optimizer, extra: dict[str, torch.Tensor]) -> None:
    sd = opt.state_dict()
    state: dict[int, dict[str, Any]] = {}
    for name, v in extra.items():
        if name.startswith("opt."):
            _, i, k = name.split(".", 2)
            state.setdefault(int(i), {})[k] = v
    sd["state"] = state
    opt.load_state_dict(sd)


class _Progress:
    """tqdm when it is a terminal, plain lines otherwise."""

    def __init__(self, total: int, start: int, enabled: bool):
        self.enabled = enabled
        self.bar = None
        self.last = time.time()
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=start, unit="step", dynamic_ncols=True)

    def update(self, step: int, total: int, loss: float, p: float, ips: float) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{loss:.4f}", psnr=f"{p:.2f}", img_s=f"{ips:.0f}")
        elif time.time() - self.last > 10 or step == total:
            self.last = time.time()
            print(
                f"step {step}/{total} loss {loss:.4f} psnr {p:.2f} dB {ips:.0f} img/s",
                file=sys.stderr,
                flush=True,
            )

    def close(self):
        if self.bar is not None:
            self.bar.close()


def train(
    cfg: ExperimentConfig,
    out: str | os.PathLike,
    resume: str | os.PathLike | None = None,
    progress: bool = True,
    until: int | None = None,
    init: str | os.PathLike | None = None,
) -> dict:
    """Train and write checkpoints to ``out`` (a checkpoint stem). Returns the final JSON document.

    ``until`` stops this run after that step (with a checkpoint), to be continued
    later with ``resume``; the schedule still runs to ``train.steps``. ``init`` starts from
    another checkpoint's weights (same model configuration and PHY) at step 0, with a fresh
    optimizer and this config's schedule and channel: fine-tuning a trained model, e.g. on a
    channel it was not trained for; its provenance records the checkpoint's fingerprint.
    """
    if init is not None and resume is not None:
        raise ValueError("give resume (continue a run) or init (start from weights), not both")
    tc = cfg.train
    dist = _dist()
    rank = dist.get_rank() if dist else 0
    world = dist.get_world_size() if dist else 1
    device = pick_device()
    if tc.threads:
        torch.set_num_threads(tc.threads)

    with torch.random.fork_rng(devices=[]):  # seeded init without touching the caller's RNG
        torch.manual_seed(tc.seed)
        model = JsccModel(cfg.model)
    history: list[dict] = []
    start = 0
    prior_seconds, prior_images = 0.0, 0  # what earlier runs of a resumed training spent
    data_gen = torch.Generator().manual_seed(tc.seed * 1000 + rank)
    chan_gen = torch.Generator(device=device).manual_seed(tc.seed * 1000 + 500 + rank)
    opt = torch.optim.Adam(model.parameters(), lr=tc.lr)
    if resume is not None:
        model, _, doc, extra = load_checkpoint(resume, expect_phy=cfg.phy)
        if model.cfg != cfg.model:
            raise ValueError(
                f"cannot resume: checkpoint model {model.cfg} differs from config {cfg.model}"
            )
        opt = torch.optim.Adam(model.parameters(), lr=tc.lr)
        _load_opt(opt, extra)
        history = list(doc.get("history", []))
        start = int(doc.get("step", 0))
        prior_seconds = float(doc.get("train_seconds", 0.0))
        prior_images = int(doc.get("train_images", 0))
        if f"rng.data.{rank}" in extra:
            data_gen.set_state(extra[f"rng.data.{rank}"])
        if f"rng.chan.{rank}" in extra and device.type == "cpu":
            chan_gen.set_state(extra[f"rng.chan.{rank}"])
    init_meta = doc.get("init") if resume is not None else None
    if init is not None:
        start_model, _, init_doc, _ = load_checkpoint(init, expect_phy=cfg.phy)
        if start_model.cfg != cfg.model:
            raise ValueError(
                f"cannot start from {init}: its model {start_model.cfg} differs from the "
                f"config's {cfg.model}"
            )
        model.load_state_dict(start_model.state_dict())
        init_meta = {"checkpoint": str(init), "fingerprint": init_doc["fingerprint"]}
    model.to(device).train()
    model.set_precision(tc.precision)
    link = JsccLink(
        model,
        cfg.phy,
        ChannelChain.from_tables(list(cfg.channel)),
        tc.grad_mode,
        tc.equalizer,
        tc.through_phy,
    ).to(device)
    train_net: nn.Module = link
    if dist:
        from torch.nn.parallel import DistributedDataParallel as DDP

        train_net = DDP(link, device_ids=[device.index] if device.type == "cuda" else None)

    train_set = open_dataset(tc.dataset, "train")
    test_set = open_dataset(tc.dataset, "test")
    sampler = CropSampler(train_set, tc.crop, data_gen)
    tiles, _ = fixed_tiles(test_set, tc.crop, tc.eval_tiles)
    lo, hi = cfg.snr_db

    def meta(step: int, run_seconds: float, run_images: int) -> dict:
        seconds, images = prior_seconds + run_seconds, prior_images + run_images
        return {
            "config": cfg.to_dict(),
            "dataset": {
                "train": train_set.describe(),
                "test": test_set.describe(),
                "test_tiles": len(tiles),
            },
            "history": history,
            "step": step,
            "train_seconds": seconds,  # wall time of all runs, resumed ones included
            "train_images": images,  # images seen by all runs
            "images_per_second": run_images / max(run_seconds, 1e-9),  # this run's
            "device": str(device),
            "init": init_meta,  # the weights the run started from, when not its own
            "world_size": world,
            "torch": torch.__version__,
        }

    bar = _Progress(tc.steps, start, progress and rank == 0)
    t0 = time.time()
    seen = 0
    loss_avg = None
    last = tc.steps if until is None else min(until, tc.steps)
    for step in range(start + 1, last + 1):
        for gparam in opt.param_groups:
            gparam["lr"] = _lr(tc, step)
        x = sampler(tc.batch_size).to(device)
        snr = lo + (hi - lo) * torch.rand(tc.batch_size, generator=data_gen).to(device)
        r = train_net(x, snr, chan_gen, step <= tc.surrogate_until)
        loss = ((r.x_hat - x) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        seen += tc.batch_size * world
        lv = float(loss.detach())
        loss_avg = lv if loss_avg is None else 0.98 * loss_avg + 0.02 * lv
        bar.update(
            step,
            tc.steps,
            loss_avg,
            10 * math.log10(1 / max(loss_avg, 1e-10)),
            seen / (time.time() - t0),
        )
        if rank == 0 and (step % tc.eval_every == 0 or step == last):
            ev = evaluate(
                model.set_precision("float32"),
                cfg.phy,
                cfg.channel,
                tc.eval_snr_db,
                tiles,
                equalizer=tc.equalizer,
            )
            model.train().set_precision(tc.precision)
            history.append(
                {"step": step, "train_loss": loss_avg, "eval": {str(k): v for k, v in ev.items()}}
            )
            extra = _opt_tensors(opt)
            extra[f"rng.data.{rank}"] = data_gen.get_state()
            if device.type == "cpu":
                extra[f"rng.chan.{rank}"] = chan_gen.get_state()
            save_checkpoint(out, model, cfg.phy, meta(step, time.time() - t0, seen), extra)
    bar.close()
    if dist:
        dist.barrier()
        dist.destroy_process_group()
    from .checkpoint import read_meta

    return read_meta(out) if rank == 0 else {}
