"""Whole photographs through the simulated PHY: encoded at full resolution or as tiles, and what
lost frames cost.

    python scripts/whole_images.py                      # both tables, the corpus's whole split
    python scripts/whole_images.py --only modes --snr 0,10,20
    python scripts/whole_images.py --only loss --loss 0,1,5,10,20 --loss-snr 10

Each photograph of the held-out whole split (``hil corpus``; 16 photographs, 768 pixels on the
long side) goes the way ``hil tx`` sends it: encoded, its symbols cut into frames of
``MAX_PAYLOAD`` symbols, each frame through the PHY (``FrameBuilder``), the channel profile and
the PHY receiver with estimated CFO, channel and SNR (``OfdmReceiver``), then reassembled and
decoded as ``hil rx`` does (``JsccDecoder``'s concealment: a lost frame's symbols are zeros with
zero symbol gain). PSNR is measured on the photograph at its own size.

- ``modes``: full resolution (one image, one latent) against tiles of 32x32 and 64x64 (the
  photograph padded to whole tiles, each tile encoded alone): ``tiles32`` as ``hil tx`` sends
  them (symbols interleaved across tiles, ``hil.jscc.images.interleave``), ``-plain`` tile
  after tile: PSNR per SNR and channel profile.
- ``loss``: PSNR against the fraction of frames lost (each frame lost with that probability,
  the same draws for every mode), at ``--loss-snr``.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

from hil.apps.common import shipped_checkpoint
from hil.apps.tx import MAX_PAYLOAD
from hil.channel import ChannelChain, profile
from hil.jscc.checkpoint import load_checkpoint
from hil.jscc.data import open_dataset
from hil.jscc.images import deinterleave, from_tiles, interleave, pad, to_tiles
from hil.jscc.metrics import psnr
from hil.phy import FrameBuilder, OfdmReceiver

MODES = ("full", "tiles32", "tiles32-plain", "tiles64")


class Air:
    """Frames of MAX_PAYLOAD symbols through PHY transmit, a channel profile, PHY receive."""

    def __init__(self, phy, chan: str):
        self.fb = FrameBuilder(phy)
        self.rx = OfdmReceiver(phy)
        self.chain = ChannelChain.from_tables(list(profile(chan, phy.sample_rate_hz)))

    def send(self, s: np.ndarray, snr_db: float, g: torch.Generator):
        """symbols [k] complex64 -> (received [k] complex64, symbol gain [k] float32, frames)."""
        chunks = [s[i : i + MAX_PAYLOAD] for i in range(0, len(s), MAX_PAYLOAD)]
        ys = []
        with torch.inference_mode():
            for n in sorted(
                {len(c) for c in chunks}
            ):  # the full frames in one batch, then the last
                idx = [i for i, c in enumerate(chunks) if len(c) == n]
                sym = torch.from_numpy(np.stack([chunks[i] for i in idx]))
                y = self.chain(self.fb.build(sym), torch.full((len(idx),), snr_db), generator=g).y
                r = self.rx.receive_frame(y, n)
                for j, i in enumerate(idx):
                    ys.append((i, r.symbols[j].numpy(), r.symbol_gain[j].numpy()))
        ys.sort(key=lambda t: t[0])
        return (
            np.concatenate([y for _, y, _ in ys]),
            np.concatenate([gg for _, _, gg in ys]),
            len(chunks),
        )


def run(model, air: Air, x: torch.Tensor, mode: str, snr: float, lost_p: float, seed: int):
    """One photograph [3, H, W] float32 -> (PSNR dB, frames, frames lost)."""
    g = torch.Generator().manual_seed(seed)
    with torch.inference_mode():
        if mode == "full":
            xin = pad(x)[None]
        else:
            xin = to_tiles(x, int(mode.removeprefix("tiles").removesuffix("-plain")))
        s = model.encoder(xin).numpy()  # [n, k] each tile (or the image) at unit power
        n, k = s.shape
        mixed = mode.startswith("tiles") and not mode.endswith("-plain")
        y, gain, frames = air.send(interleave(s) if mixed else s.reshape(-1), snr, g)
        lost = np.random.default_rng(seed).random(frames) < lost_p
        for f in np.flatnonzero(lost):
            y[f * MAX_PAYLOAD : (f + 1) * MAX_PAYLOAD] = 0
            gain[f * MAX_PAYLOAD : (f + 1) * MAX_PAYLOAD] = 0
        if mixed:
            y, gain = deinterleave(y, n), deinterleave(gain, n)
        snr_est = torch.full((n,), float(snr))
        xh = model.decoder(
            torch.from_numpy(np.ascontiguousarray(y)).reshape(n, k),
            snr_est,
            tuple(xin.shape[1:]),
            torch.from_numpy(np.ascontiguousarray(gain)).reshape(n, k),
        ).clamp(0, 1)
        h, w = x.shape[1:]
        img = xh[0, :, :h, :w] if mode == "full" else from_tiles(xh, (h, w))
    return float(psnr(img[None], x[None])), frames, int(lost.sum())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", default=None, help="default: the shipped k/n = 1/6 model")
    p.add_argument("--dataset", default="corpus", help="data set whose 'whole' split is sent")
    p.add_argument("--split", default="whole")
    p.add_argument("--channel", default="awgn,multipath_cfo")
    p.add_argument("--snr", default="0,5,10,15,20")
    p.add_argument("--loss", default="0,1,5,10,20", help="percent of frames lost")
    p.add_argument("--loss-snr", type=float, default=10.0)
    p.add_argument("--limit", type=int, default=None, help="the first N photographs only")
    p.add_argument("--only", choices=["modes", "loss"])
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    model, phy, doc, _ = load_checkpoint(a.checkpoint or shipped_checkpoint())
    model.eval()
    data = open_dataset(a.dataset, a.split)
    imgs = [im.float() / 255.0 for im in data.images[: a.limit]]
    sizes = sorted({f"{im.shape[2]}x{im.shape[1]}" for im in imgs})
    chans = a.channel.split(",")
    print(
        f"{len(imgs)} photographs of {data.name}/{a.split} ({', '.join(sizes)}), k/n "
        f"{model.cfg.bandwidth_ratio}, checkpoint {doc['fingerprint']}, {MAX_PAYLOAD} symbols "
        "per frame, PHY with estimated CFO/channel/SNR",
        file=sys.stderr,
    )
    t0 = time.monotonic()
    if a.only in (None, "modes"):
        snrs = [float(v) for v in a.snr.split(",")]
        print("\n### Full resolution vs tiles, PSNR (dB), mean over the photographs\n")
        print("| channel | mode | " + " | ".join(f"{s:g} dB" for s in snrs) + " |")
        print("| --- | --- | " + " | ".join("---" for _ in snrs) + " |")
        for chan in chans:
            air = Air(phy, chan)
            for mode in MODES:
                row = []
                for snr in snrs:
                    v = [
                        run(model, air, x, mode, snr, 0.0, 1000 + i)[0] for i, x in enumerate(imgs)
                    ]
                    row.append(f"{np.mean(v):.2f}")
                print(f"| {chan} | {mode} | " + " | ".join(row) + " |", flush=True)
    if a.only in (None, "loss"):
        losses = [float(v) for v in a.loss.split(",")]
        print(
            f"\n### Frames lost, PSNR (dB) at {a.loss_snr:g} dB SNR, mean over the photographs "
            "(each frame lost with the given probability; frames actually lost in brackets)\n"
        )
        print("| channel | mode | " + " | ".join(f"{v:g} %" for v in losses) + " |")
        print("| --- | --- | " + " | ".join("---" for _ in losses) + " |")
        for chan in chans:
            air = Air(phy, chan)
            for mode in MODES:
                row = []
                for lp in losses:
                    r = [
                        run(model, air, x, mode, a.loss_snr, lp / 100, 2000 + i)
                        for i, x in enumerate(imgs)
                    ]
                    got = sum(t[2] for t in r)
                    row.append(f"{np.mean([t[0] for t in r]):.2f} ({got}/{sum(t[1] for t in r)})")
                print(f"| {chan} | {mode} | " + " | ".join(row) + " |", flush=True)
    print(f"\n({time.monotonic() - t0:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
