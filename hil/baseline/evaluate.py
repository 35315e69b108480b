"""JSCC against separate source and channel coding on the same frames, and the capacity bound.

Every scheme sends the same held-out tiles in the same OFDM frame (preamble,
header, pilots, numerology) with the same number of payload symbols as the
JSCC model uses per image, through the same channel chain at the same SNR,
and is received by the same ``OfdmReceiver`` (estimated CFO, channel, SNR):

- JSCC: the checkpoint (``hil.jscc.train.evaluate``);
- each fixed MCS: the codecs of ``source.CODECS`` (JPEG, WebP, AVIF, HEIF) fitted to the
  MCS's byte budget (the best-scoring per image), 5G LDPC, QAM; a CRC failure shows
  mid-grey; an image that does not fit even at the lowest quality is never sent and shows grey;
- adaptive MCS: a genie picks, per SNR, the MCS with the best mean PSNR;
- the bound: per image, the best of those codecs whose size fits
  k * log2(1 + SNR) bits (the AWGN capacity of the k payload symbols at the
  nominal SNR, an upper bound for the fading channels too), delivered intact.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

from ..channel import ChannelChain
from ..jscc.metrics import psnr, ssim
from ..phy import FrameBuilder, OfdmConfig, OfdmReceiver
from .digital import MCS_TABLE, DigitalCodec
from .source import best_fit, decode

GREY = 0.5


def _score(recon: list[np.ndarray], tiles: torch.Tensor) -> tuple[float, float]:
    x = torch.from_numpy(np.stack(recon)).float()
    return float(psnr(x, tiles).mean()), float(ssim(x, tiles).mean())


@torch.inference_mode()
def digital_curves(
    tiles: torch.Tensor,
    phy: OfdmConfig,
    stages: list[dict],
    snrs: list[float],
    n_symbols: int,
    mcs_indices: list[int] | None = None,
    seed: int = 1234,
    progress=None,
) -> dict[str, dict]:
    """Every MCS in ``mcs_indices`` (default: all) over the PHY and channel, batched.

    Args:
        tiles: [N, 3, H, W] float32 in [0, 1] on the CPU, the images sent.
        n_symbols: payload symbols per image (the JSCC's, for a fair comparison).

    Returns:
        {MCS key: {"by_snr": {snr: {psnr_db, ssim, delivered}}, "sent": fraction that fit,
        "bytes": the source budget, "name": ...}}
    """
    fb, rxr = FrameBuilder(phy), OfdmReceiver(phy)
    chain = ChannelChain.from_tables(list(stages))
    imgs = tiles.numpy()
    shape = tuple(imgs.shape[1:])
    grey = np.full(shape, GREY, np.float32)
    out = {}
    for mi in mcs_indices if mcs_indices is not None else range(len(MCS_TABLE)):
        mcs = MCS_TABLE[mi]
        codec = DigitalCodec(mcs, n_symbols)
        fits = [best_fit(img, codec.capacity) for img in imgs]
        sent = [i for i, f in enumerate(fits) if f is not None]
        x = codec.encode([fits[i][1] for i in sent]) if sent else None
        by_snr = {}
        for snr in snrs:
            recon = [grey] * len(imgs)
            ok = 0
            if sent:
                g = torch.Generator().manual_seed(seed)
                # the header known, as the JSCC's evaluation and the stream receiver have it
                hdr = torch.ones(len(sent), phy.header_symbols, phy.n_data)
                y = chain(fb.build(x, hdr), torch.full((len(sent),), float(snr)), generator=g).y
                r = rxr.receive_frame(y, n_symbols, hdr)
                payloads = codec.decode(r.symbols, 1.0 / r.symbol_gain.clamp_min(1e-6))
                for j, i in enumerate(sent):
                    img = decode(payloads[j], shape) if payloads[j] is not None else None
                    if img is not None:
                        recon[i], ok = img, ok + 1
            p, s = _score(recon, tiles)
            by_snr[float(snr)] = {"psnr_db": p, "ssim": s, "delivered": ok / len(imgs)}
            if progress:
                progress(f"{mcs.name} @ {snr:g} dB: {p:.2f} dB, {ok}/{len(imgs)} intact")
        out[mcs.key] = {
            "name": mcs.name,
            "bytes": codec.capacity,
            "sent": len(sent) / len(imgs),
            "by_snr": by_snr,
        }
    return out


def bound_curve(tiles: torch.Tensor, n_symbols: int, snrs: list[float]) -> dict[float, dict]:
    """Best of the codecs in ``source.CODECS`` (JPEG, WebP, AVIF, HEIF) within k * log2(1 + SNR)
    bits, delivered intact (tiles: [N, 3, H, W] float32 in [0, 1] on the CPU)."""
    imgs = tiles.numpy()
    shape = tuple(imgs.shape[1:])
    out = {}
    for snr in snrs:
        budget = int(n_symbols * math.log2(1 + 10 ** (snr / 10)) // 8)
        recon = []
        for img in imgs:
            f = best_fit(img, budget)
            dec = decode(f[1], shape) if f is not None else None
            recon.append(dec if dec is not None else np.full(shape, GREY, np.float32))
        p, s = _score(recon, tiles)
        out[float(snr)] = {"psnr_db": p, "ssim": s, "bytes": budget}
    return out


def adaptive(digital: dict[str, dict], snrs: list[float]) -> dict[float, dict]:
    """Genie MCS selection: per SNR, the fixed MCS with the best mean PSNR."""
    out = {}
    for snr in snrs:
        key = max(digital, key=lambda k: digital[k]["by_snr"][float(snr)]["psnr_db"])
        out[float(snr)] = {**digital[key]["by_snr"][float(snr)], "mcs": digital[key]["name"]}
    return out


def cliff_snr(curve: dict, threshold: float = 0.9) -> float | None:
    """Lowest SNR from which the MCS delivers >= threshold of the images it sends, at every
    higher SNR of the grid (below it, it has fallen off its cliff); None if never."""
    snrs = sorted(curve["by_snr"])
    sent = curve["sent"]
    if sent == 0:
        return None
    good = [curve["by_snr"][s]["delivered"] >= threshold * sent for s in snrs]
    for i, s in enumerate(snrs):
        if all(good[i:]):
            return s
    return None


def max_drop_per_db(curve: dict[float, dict]) -> float:
    """Largest PSNR fall per dB of SNR between neighbouring grid points (going down in SNR)."""
    s = sorted(curve)
    drops = [
        (curve[b]["psnr_db"] - curve[a]["psnr_db"]) / (b - a) for a, b in itertools.pairwise(s)
    ]
    return max(drops, default=0.0)


def compare(
    model,
    phy: OfdmConfig,
    channels: dict[str, list[dict]],
    snrs: list[float],
    tiles: torch.Tensor,
    seed: int = 1234,
    mcs_indices: list[int] | None = None,
    progress=None,
) -> dict:
    """Every scheme on every channel: the document ``hil eval --baseline`` prints and plots.

    tiles: [N, 3, H, W] float32 in [0, 1] on the CPU (moved to the model's device for JSCC).
    """
    from ..jscc.train import evaluate

    with torch.no_grad():
        n_symbols = int(model.encoder(tiles[:1].to(next(model.parameters()).device)).shape[1])
    bound = bound_curve(tiles, n_symbols, snrs)
    doc = {
        "n_symbols": n_symbols,
        "tiles": len(tiles),
        "snrs": list(map(float, snrs)),
        "channels": {},
    }
    for name, stages in channels.items():
        if progress:
            progress(f"channel {name}: JSCC")
        jscc = evaluate(model, phy, stages, snrs, tiles, seed=seed)
        digital = digital_curves(tiles, phy, stages, snrs, n_symbols, mcs_indices, seed, progress)
        adapt = adaptive(digital, snrs)
        doc["channels"][name] = {
            "jscc": jscc,
            "digital": digital,
            "adaptive": adapt,
            "bound": bound,
            "jscc_minus_best_digital_db": {
                s: jscc[s]["psnr_db"] - adapt[s]["psnr_db"] for s in map(float, snrs)
            },
            "cliff_snr_db": {k: cliff_snr(v) for k, v in digital.items()},
            "jscc_max_drop_db_per_db": max_drop_per_db(jscc),
        }
    return doc


def plot(doc: dict, path: str, label: str = "JSCC") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chans = list(doc["channels"])
    fig, axes = plt.subplots(1, len(chans), figsize=(6.2 * len(chans), 4.6), dpi=120, squeeze=False)
    cmap = plt.get_cmap("viridis")
    for ax, name in zip(axes[0], chans, strict=True):
        c = doc["channels"][name]
        x = doc["snrs"]
        keys = list(c["digital"])
        for i, k in enumerate(keys):
            ax.plot(
                x,
                [c["digital"][k]["by_snr"][s]["psnr_db"] for s in x],
                "-",
                lw=1,
                color=cmap(i / max(len(keys) - 1, 1)),
                label=c["digital"][k]["name"],
            )
        ax.plot(
            x, [c["adaptive"][s]["psnr_db"] for s in x], "k--", lw=1.5, label="adaptive MCS (genie)"
        )
        ax.plot(
            x,
            [c["bound"][s]["psnr_db"] for s in x],
            "k:",
            lw=1.5,
            label="bound: best image codec at capacity",
        )
        ax.plot(x, [c["jscc"][s]["psnr_db"] for s in x], "r-o", lw=2.5, ms=3, label=label)
        ax.set_title(f"{name}: {doc['tiles']} tiles, {doc['n_symbols']} symbols per image")
        ax.set_xlabel("SNR (dB)")
        ax.set_ylabel("PSNR (dB)")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
