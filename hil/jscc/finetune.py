"""Fine-tuning the decoder on received frames (the transmitter's encoder stays as deployed).

The frames come from the air (a recording, cut by the receiver): equalised symbols, the
receiver's per-symbol gain and SNR estimate, and the image that was sent. Only the decoder
learns; the encoder's weights are frozen and checked unchanged at the end, so a fine-tuned
checkpoint still decodes what the deployed transmitter sends (``transmitter_fingerprint``).

    train, val = frames.split(val_every=5)
    hist = finetune_decoder(model, train, val, epochs=20)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .metrics import psnr


@dataclass
class FrameSet:
    """Received frames paired with what was sent.

    symbols: [N, k] complex64 equalised payload symbols.
    gain: [N, k] float32 post-equalisation SNR per symbol (linear).
    snr_db: [N] float32 the receiver's SNR estimate per frame.
    target: [N, 3, H, W] float32 in [0, 1], the image each frame carried.
    seq: [N] int64 the frames' sequence numbers.
    item: [N] int64 the item (image) each frame carried: the split is by item, so validation
        images are never trained on (a repeated image would otherwise be learnt, not decoded).
    """

    symbols: torch.Tensor
    gain: torch.Tensor
    snr_db: torch.Tensor
    target: torch.Tensor
    seq: torch.Tensor
    item: torch.Tensor

    def __post_init__(self):
        n = len(self.seq)
        for name in ("symbols", "gain", "snr_db", "target", "item"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"FrameSet.{name} has {len(getattr(self, name))} rows, seq {n}")
        if n and self.symbols.shape != self.gain.shape:
            raise ValueError(
                f"symbols {tuple(self.symbols.shape)} vs gain {tuple(self.gain.shape)}"
            )

    def __len__(self) -> int:
        return len(self.seq)

    def subset(self, mask: torch.Tensor) -> FrameSet:
        """mask: [N] bool -> the frames where it is True."""
        return FrameSet(
            self.symbols[mask],
            self.gain[mask],
            self.snr_db[mask],
            self.target[mask],
            self.seq[mask],
            self.item[mask],
        )

    def split(self, val_every: int = 5) -> tuple[FrameSet, FrameSet]:
        """(train, validation): the frames of every ``val_every``-th item validate."""
        if val_every < 2:
            raise ValueError(f"val_every must be >= 2, got {val_every}")
        val = is_validation_item(self.item, val_every)
        return self.subset(~val), self.subset(val)


def is_validation_item(item: torch.Tensor, val_every: int) -> torch.Tensor:
    """item: [N] int64 -> [N] bool, True for the items kept out of training."""
    return (item % val_every) == 0


@torch.no_grad()
def decoder_psnr(model, fs: FrameSet, batch: int = 256) -> float:
    """Mean PSNR (dB) of the decoder's images of ``fs`` against what was sent."""
    if not len(fs):
        raise ValueError("no frames to score")
    model.eval()
    shape = tuple(fs.target.shape[1:])
    out = []
    for i in range(0, len(fs), batch):
        sl = slice(i, i + batch)
        xh = model.decode_received(fs.symbols[sl], fs.snr_db[sl], shape, fs.gain[sl]).clamp(0, 1)
        out.append(psnr(xh, fs.target[sl]))
    return float(torch.cat(out).mean())


def finetune_decoder(
    model,
    train: FrameSet,
    val: FrameSet,
    *,
    epochs: int = 20,
    batch: int = 64,
    lr: float = 1e-4,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Train the decoder of ``model`` on ``train`` (MSE), keeping the weights that score best on
    ``val``; the encoder does not change. Returns the history: PSNR on ``val`` before and after
    each epoch, the best epoch (0: the model as it came), seconds and frames."""
    if not len(train) or not len(val):
        raise ValueError(f"need train and validation frames, got {len(train)} and {len(val)}")
    enc_before = {k: v.clone() for k, v in model.encoder.state_dict().items()}
    for p in model.encoder.parameters():
        p.requires_grad_(False)
    opt = torch.optim.Adam(model.decoder.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    shape = tuple(train.target.shape[1:])
    best = decoder_psnr(model, val)
    hist = {"val_psnr_db": [best], "train_loss": [], "best_epoch": 0}
    best_state = {k: v.clone() for k, v in model.decoder.state_dict().items()}
    t0 = time.time()
    for ep in range(1, epochs + 1):
        model.train()
        order = torch.randperm(len(train), generator=g)
        tot, n = 0.0, 0
        for i in range(0, len(train), batch):
            idx = order[i : i + batch]
            xh = model.decode_received(
                train.symbols[idx], train.snr_db[idx], shape, train.gain[idx]
            )
            loss = ((xh - train.target[idx]) ** 2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot += float(loss.detach()) * len(idx)
            n += len(idx)
        v = decoder_psnr(model, val)
        hist["val_psnr_db"].append(v)
        hist["train_loss"].append(tot / n)
        if v > best:
            best, hist["best_epoch"] = v, ep
            best_state = {k: t.clone() for k, t in model.decoder.state_dict().items()}
        if progress is not None:
            train_db = 10 * math.log10(1 / max(tot / n, 1e-10))
            progress(
                f"epoch {ep}/{epochs}: train {train_db:.2f} dB, validation {v:.2f} dB "
                f"(best {best:.2f} dB at epoch {hist['best_epoch']})"
            )
    model.decoder.load_state_dict(best_state)
    for k, v in model.encoder.state_dict().items():
        if not torch.equal(v, enc_before[k]):
            raise RuntimeError(f"the encoder changed during fine-tuning ({k})")
    hist.update(seconds=time.time() - t0, train_frames=len(train), val_frames=len(val))
    return hist


def transmitter_fingerprint(doc: dict) -> bytes:
    """The fingerprint frames carry for a checkpoint's encoder: its own, or for a fine-tuned
    checkpoint (decoder changed, encoder as deployed) the one it was fine-tuned from."""
    return bytes.fromhex(doc.get("transmitter_fingerprint", doc["fingerprint"]))
