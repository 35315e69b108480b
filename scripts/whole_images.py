"""Whole photographs through the simulated PHY: encoded at full resolution or as tiles, and what
lost frames cost.

    python scripts/whole_images.py                      # both tables, the corpus's whole split
    python scripts/whole_images.py --only modes --snr 0,10,20
    python scripts/whole_images.py --only loss --loss 0,1,5,10,20 --loss-snr 10
    python scripts/whole_images.py --only digital --plot docs/whole_vs_digital.png
    python scripts/whole_images.py --only modes --channel multipath_cfo --fading per-photo [--order 255]

Each photograph of the held-out whole split (``hil corpus``; 16 photographs, 768 pixels on the
long side) goes the way ``hil tx`` sends it: encoded, its symbols cut into frames of
``MAX_PAYLOAD`` symbols, each frame through the PHY (``FrameBuilder``), the channel profile and
the PHY receiver with estimated CFO, channel and SNR (``OfdmReceiver``), then reassembled and
decoded as ``hil rx`` does (``JsccDecoder``'s concealment: a lost frame's symbols are zeros with
zero symbol gain). PSNR is measured on the photograph at its own size.

- ``modes``: full resolution (one image, one latent) against tiles of 32x32 and 64x64 (the
  photograph padded to whole tiles, each tile encoded alone): ``tiles32`` symbols interleaved
  across all the tiles (``hil.jscc.images.interleave``, scheme 254, ``hil tx --whole-mode
  interleaved``), ``-seg`` interleaved within segments of at most 8 frames (scheme 253,
  ``hil.jscc.images.Segments``, what ``hil tx`` sends by default), ``-plain`` tile after tile:
  PSNR per SNR and channel profile (``--modes`` picks some).
- ``--fading per-photo``: one channel draw for all of a photograph's frames (a static bench
  channel) instead of one per frame; ``--order 255``: the tiles' air order before scheme 254
  (no rotation across subcarriers), to measure what it cost.
- ``loss``: PSNR against the fraction of frames lost (each frame lost with that probability,
  the same draws for every mode), at ``--loss-snr``.
- ``digital``: JSCC (``tiles32``) against the separation baseline for whole photographs
  (``hil.baseline.whole``: one bitstream per photograph, the best of JPEG/WebP/AVIF/HEIF
  within the MCS's budget, 5G LDPC codewords standing alone across frames, a truncated
  bitstream where codewords are lost), the same payload symbols per photograph, on
  ``--digital-channel`` (AWGN and the two-Pluto profile); then both against frames lost at
  ``--loss-snr``. Bitstreams and results are cached under ``--cache`` (the first run fits
  every photograph at every MCS: tens of minutes).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from hil.apps.common import shipped_checkpoint
from hil.apps.tx import MAX_PAYLOAD
from hil.channel import ChannelChain, profile
from hil.jscc.checkpoint import load_checkpoint
from hil.jscc.data import open_dataset
from hil.jscc.images import (
    Segments,
    deinterleave,
    from_tiles,
    interleave,
    pad,
    to_tiles,
    whole_symbols,
)
from hil.jscc.metrics import psnr
from hil.phy import FrameBuilder, OfdmReceiver

MODES = ("full", "tiles32", "tiles32-seg", "tiles32-plain", "tiles64")


class Air:
    """Frames of MAX_PAYLOAD symbols through PHY transmit, a channel profile, PHY receive (the
    payload equalised with the estimate the header refines, as ``hil rx`` does)."""

    def __init__(self, phy, chan: str, per_photo: bool = False, rotate: bool = True):
        self.fb = FrameBuilder(phy)
        self.rx = OfdmReceiver(phy)
        self.chain = ChannelChain.from_tables(list(profile(chan, phy.sample_rate_hz)))
        self.per_photo = per_photo  # one channel draw for all of a photograph's frames
        self.rotate = rotate  # the tiles' order: scheme 254's rotation (False: 255's)

    @classmethod
    def from_args(cls, phy, chan: str, a) -> Air:
        """The air of the command line's ``--fading`` and ``--order``."""
        return cls(phy, chan, a.fading == "per-photo", a.order == "254")

    def send(self, s: np.ndarray, snr_db: float, g: torch.Generator):
        """symbols [k] complex64 -> (received [k] complex64, symbol gain [k] float32, frames)."""
        chunks = [s[i : i + MAX_PAYLOAD] for i in range(0, len(s), MAX_PAYLOAD)]
        ys = self.send_frames(chunks, snr_db, g)
        return (
            np.concatenate([y for y, _ in ys]),
            np.concatenate([gg for _, gg in ys]),
            len(chunks),
        )

    def send_frames(self, chunks: list[np.ndarray], snr_db: float, g: torch.Generator):
        """Frames' symbols, each [n] complex64 -> per frame (received [n] complex64, symbol
        gain [n] float32)."""
        if self.per_photo:
            return self._send_static(chunks, snr_db, g)
        ys = []
        with torch.inference_mode():
            for n in sorted(
                {len(c) for c in chunks}
            ):  # the full frames in one batch, then the last
                idx = [i for i, c in enumerate(chunks) if len(c) == n]
                sym = torch.from_numpy(np.stack([chunks[i] for i in idx]))
                # the header known to the receiver, as for a header that passed its CRC
                hdr = torch.ones(len(idx), self.fb.cfg.header_symbols, self.fb.cfg.n_data)
                snrs = torch.full((len(idx),), snr_db)
                y = self.chain(self.fb.build(sym, hdr), snrs, generator=g).y
                r = self.rx.receive_frame(y, n, hdr)
                for j, i in enumerate(idx):
                    ys.append((i, r.symbols[j].numpy(), r.symbol_gain[j].numpy()))
        ys.sort(key=lambda t: t[0])
        return [(y, gg) for _, y, gg in ys]

    def _send_static(self, chunks: list[np.ndarray], snr_db: float, g: torch.Generator):
        """``send_frames`` with one channel draw for all the frames: they go through the
        channel back to back as one stream (a bench's channel holds still over the tenth of
        a second a photograph takes; per frame, each frame gets a draw of its own)."""
        c = self.fb.cfg
        hdr = torch.ones(1, c.header_symbols, c.n_data)
        with torch.inference_mode():
            xs = [self.fb.build(torch.from_numpy(ch)[None], hdr)[0] for ch in chunks]
            y = self.chain(torch.cat(xs)[None], torch.tensor([snr_db]), generator=g).y[0]
            starts = np.cumsum([0] + [len(x) for x in xs])
            out = [None] * len(chunks)
            for n in sorted({len(ch) for ch in chunks}):  # frames of one length in a batch
                idx = [i for i, ch in enumerate(chunks) if len(ch) == n]
                seg = torch.stack([y[starts[i] : starts[i + 1]] for i in idx])
                r = self.rx.receive_frame(seg, n, hdr.expand(len(idx), -1, -1))
                for j, i in enumerate(idx):
                    out[i] = (r.symbols[j].numpy(), r.symbol_gain[j].numpy())
        return out


def run(model, air: Air, x: torch.Tensor, mode: str, snr: float, lost_p: float, seed: int):
    """One photograph [3, H, W] float32 -> (PSNR dB, frames, frames lost)."""
    g = torch.Generator().manual_seed(seed)
    with torch.inference_mode():
        if mode == "full":
            xin = pad(x)[None]
        else:
            size = mode.removeprefix("tiles").removesuffix("-plain").removesuffix("-seg")
            xin = to_tiles(x, int(size))
        s = model.encoder(xin).numpy()  # [n, k] each tile (or the image) at unit power
        n, k = s.shape
        mixed = mode.startswith("tiles") and not mode.endswith(("-plain", "-seg"))
        lay = Segments.of(n, k, MAX_PAYLOAD) if mode.endswith("-seg") else None
        if lay is not None:  # scheme 253: each segment interleaved alone, one after another
            flat = np.concatenate(
                [lay.air(i, s[r.start : r.stop]) for i, r in enumerate(lay.tiles)]
            )
        else:
            flat = interleave(s, air.rotate) if mixed else s.reshape(-1)
        y, gain, frames = air.send(flat, snr, g)
        lost = np.random.default_rng(seed).random(frames) < lost_p
        for f in np.flatnonzero(lost):
            y[f * MAX_PAYLOAD : (f + 1) * MAX_PAYLOAD] = 0
            gain[f * MAX_PAYLOAD : (f + 1) * MAX_PAYLOAD] = 0
        if mixed:
            y, gain = deinterleave(y, n, air.rotate), deinterleave(gain, n, air.rotate)
        elif lay is not None:  # as hil rx puts each segment together (a lost frame: gain 0)
            got = {
                c: (
                    y[c * MAX_PAYLOAD : (c + 1) * MAX_PAYLOAD],
                    gain[c * MAX_PAYLOAD : (c + 1) * MAX_PAYLOAD],
                )
                for c in range(frames)
            }
            parts = [lay.join(i, got) for i in range(len(lay.tiles))]
            y, gain = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
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


def jscc_symbols(model, x: torch.Tensor) -> int:
    """Payload symbols the JSCC spends on a photograph sent as 32x32 tiles (hil tx's default):
    the digital baseline gets the same."""
    return whole_symbols(model.cfg, tuple(x.shape[1:]), "tiles")


class Digital:
    """The separation baseline on whole photographs (``hil.baseline.whole``), every MCS.

    Each photograph's bitstream (the best of JPEG/WebP/AVIF/HEIF within each MCS's budget; a
    768-pixel AVIF takes seconds per quality tried) is cached under ``cache`` by the
    photograph's content id and the budgets."""

    def __init__(self, imgs: list[torch.Tensor], n_symbols: list[int], cache: Path):
        from hil.baseline import MCS_TABLE
        from hil.baseline.whole import WholeCodec

        self.codecs = [WholeCodec(mi) for mi in range(len(MCS_TABLE))]
        self.imgs, self.n = imgs, n_symbols
        cache.mkdir(parents=True, exist_ok=True)
        self.fits = []  # [image][MCS] -> (codec index, bitstream) or None
        for i, x in enumerate(imgs):
            budgets = [c.capacity(n_symbols[i]) for c in self.codecs]
            self.fits.append(self._fit(x, budgets, cache, i))
        h = hashlib.sha256()
        for fits in self.fits:
            for f in fits:
                h.update(b"-" if f is None else bytes([f[0]]) + f[1])
        self.key = h.hexdigest()[:16]
        self.results_file = cache / "results.json"
        self.results = (
            json.loads(self.results_file.read_text()) if self.results_file.exists() else {}
        )

    def _fit(self, x: torch.Tensor, budgets: list[int], cache: Path, i: int):
        from hil.baseline.source import best_fits
        from hil.jscc.images import content_id

        px = (x * 255 + 0.5).clamp(0, 255).to(torch.uint8)
        f = cache / f"{content_id(px)[:24]}-{'-'.join(map(str, budgets))}.json"
        if f.exists():
            doc = json.loads(f.read_text())
            return [None if e is None else (e[0], bytes.fromhex(e[1])) for e in doc["fits"]]
        t0 = time.monotonic()
        fits = best_fits(x.numpy(), budgets)
        doc = {
            "budgets": budgets,
            "fits": [None if e is None else [e[0], e[1].hex()] for e in fits],
        }
        f.write_text(json.dumps(doc))
        print(
            f"  photograph {i}: bitstreams fitted in {time.monotonic() - t0:.0f} s",
            file=sys.stderr,
            flush=True,
        )
        return fits

    def received(self, air: Air, mi: int, snr: float) -> list[list | None]:
        """Every photograph at one MCS and SNR -> per photograph the codewords each of its
        frames decoded (None: not sent, its bitstream did not fit)."""
        wc = self.codecs[mi]
        sent, rx = [], []
        for i in range(len(self.imgs)):
            if self.fits[i][mi] is None:
                continue
            frames = wc.encode(self.fits[i][mi][1], self.n[i])
            g = torch.Generator().manual_seed(1000 + i)  # the JSCC rows' draws
            rx.extend(air.send_frames(frames, snr, g))
            sent.append((i, len(frames)))
        blocks = wc.decode_frames(rx) if rx else []
        out: list[list | None] = [None] * len(self.imgs)
        at = 0
        for i, count in sent:
            out[i] = blocks[at : at + count]
            at += count
        return out

    def scores(self, air: Air, chan: str, mi: int, snr: float) -> tuple[float, int, int]:
        """(mean PSNR dB, photographs intact, photographs sent) at one MCS and SNR, cached in
        ``results.json`` beside the bitstreams (keyed by the photographs' bitstreams)."""
        key = f"{chan}|{snr:g}|{mi}|{self.key}"
        if key not in self.results:
            frames = self.received(air, mi, snr)
            r = [self.score(i, frames[i]) for i in range(len(self.imgs))]
            sent = sum(f is not None for f in frames)
            self.results[key] = (float(np.mean([t[0] for t in r])), sum(t[1] for t in r), sent)
            self.results_file.write_text(json.dumps(self.results))
        return tuple(self.results[key])

    def score(self, i: int, frames: list | None, lost: np.ndarray | None = None):
        """(PSNR dB, intact) of photograph i from its frames' codewords, frames ``lost``
        dropped."""
        from hil.baseline.source import psnr_np
        from hil.baseline.whole import GREY, assemble, decode_image

        x = self.imgs[i].numpy()
        if frames is None:
            return psnr_np(np.full(x.shape, GREY, np.float32), x), False
        kept = [b for f, fr in enumerate(frames) if lost is None or not lost[f] for b in fr]
        img, intact = decode_image(assemble(kept), x.shape)
        return psnr_np(img, x), intact


def digital_tables(model, phy, imgs, a, chans) -> None:
    """JSCC (tiles32) against the best MCS of the separation baseline, same symbols per
    photograph; then both against frames lost, at the MCS best at ``--loss-snr``."""
    from hil.baseline import MCS_TABLE

    snrs = [float(v) for v in a.snr.split(",")]
    losses = [float(v) for v in a.loss.split(",")]
    dig = Digital(imgs, [jscc_symbols(model, x) for x in imgs], Path(a.cache))
    shown: dict = {"snr": {}, "loss": {}}  # for --plot
    print(
        "\n### Whole photographs: JSCC (32x32 tiles) against the separation baseline, PSNR (dB)\n"
    )
    print(
        "Same payload symbols per photograph. Digital: each MCS, its bitstream the best of "
        "JPEG/WebP/AVIF/HEIF in the budget, intact/sent in brackets; MCSs "
        "are tried from the best at the SNR before upward until the PSNR falls (-: not run); best: "
        "the genie's MCS per SNR.\n"
    )
    print("| channel | scheme | " + " | ".join(f"{s:g} dB" for s in snrs) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in snrs) + " |")
    for chan in chans:
        air = Air.from_args(phy, chan, a)
        jscc = [
            float(
                np.mean(
                    [
                        run(model, air, x, "tiles32", snr, 0.0, 1000 + i)[0]
                        for i, x in enumerate(imgs)
                    ]
                )
            )
            for snr in snrs
        ]
        cells = {mi: ["-"] * len(snrs) for mi in range(len(MCS_TABLE))}
        best = []
        start = 0
        for j, snr in enumerate(snrs):
            tried = []
            for mi in range(start, len(MCS_TABLE)):  # upward while the PSNR still rises
                p, ok, sent = dig.scores(air, chan, mi, snr)
                cells[mi][j] = f"{p:.2f} ({ok}/{sent})"
                tried.append((p, mi))
                print(
                    f"  {chan} {snr:g} dB {MCS_TABLE[mi].name}: {p:.2f} dB, {ok} intact",
                    file=sys.stderr,
                    flush=True,
                )
                if len(tried) > 1 and p < tried[-2][0]:
                    break
            # ties (every MCS failed: all grey) go to the most robust MCS, so that the next
            # SNR's search starts low enough to find the one that works
            best.append(max(tried, key=lambda t: (t[0], -t[1])))
            start = best[-1][1]
        shown["snr"][chan] = (jscc, [p for p, _ in best])
        print(f"| {chan} | JSCC tiles32 | " + " | ".join(f"{v:.2f}" for v in jscc) + " |")
        for mi, row in cells.items():
            print(f"| {chan} | {MCS_TABLE[mi].name} | " + " | ".join(row) + " |")
        print(
            f"| {chan} | best digital | "
            + " | ".join(f"{p:.2f} ({MCS_TABLE[mi].name})" for p, mi in best)
            + " |"
        )
        print(
            f"| {chan} | JSCC - best | "
            + " | ".join(f"{v - p:+.2f}" for v, (p, _) in zip(jscc, best, strict=True))
            + " |",
            flush=True,
        )
    print(
        f"\n### Whole photographs, frames lost at {a.loss_snr:g} dB SNR: JSCC against the "
        "separation baseline, PSNR (dB)\n"
    )
    print(
        "Each frame lost with the given probability, the same draws for both; digital at "
        "the MCS best at this SNR with no loss, intact photographs in brackets.\n"
    )
    print("| channel | scheme | " + " | ".join(f"{v:g} %" for v in losses) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in losses) + " |")
    for chan in chans:
        air = Air.from_args(phy, chan, a)
        jscc = [
            float(
                np.mean(
                    [
                        run(model, air, x, "tiles32", a.loss_snr, lp / 100, 2000 + i)[0]
                        for i, x in enumerate(imgs)
                    ]
                )
            )
            for lp in losses
        ]
        found = []
        for mi in range(len(MCS_TABLE)):
            found.append((dig.scores(air, chan, mi, a.loss_snr)[0], mi))
            if len(found) > 1 and found[-1][0] < found[-2][0]:
                break
        _, mi = max(found, key=lambda t: (t[0], -t[1]))
        frames = dig.received(air, mi, a.loss_snr)
        row, values = [], []
        for lp in losses:
            r = []
            for i, fr in enumerate(frames):
                count = len(fr) if fr is not None else 1
                lost = np.random.default_rng(2000 + i).random(count) < lp / 100  # JSCC's draws
                r.append(dig.score(i, fr, lost))
            values.append(float(np.mean([t[0] for t in r])))
            row.append(f"{values[-1]:.2f} ({sum(t[1] for t in r)})")
        print(f"| {chan} | JSCC tiles32 | " + " | ".join(f"{v:.2f}" for v in jscc) + " |")
        print(f"| {chan} | {MCS_TABLE[mi].name} | " + " | ".join(row) + " |", flush=True)
        shown["loss"][chan] = (jscc, values, MCS_TABLE[mi].name)
    if a.plot:
        plot_digital(shown, snrs, losses, a.loss_snr, a.plot)


def plot_digital(shown: dict, snrs, losses, loss_snr: float, path: str) -> None:
    """Two panels: PSNR against SNR (JSCC, the genie's best MCS) and against frames lost."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for k, (chan, (jscc, best)) in enumerate(shown["snr"].items()):
        c = f"C{k}"
        ax1.plot(snrs, jscc, "o-", color=c, label=f"JSCC, {chan}")
        ax1.plot(snrs, best, "s--", color=c, label=f"best digital, {chan}")
    ax1.set(xlabel="SNR (dB)", ylabel="PSNR (dB)", title="whole photographs, same symbols")
    for k, (chan, (jscc, dig, mcs)) in enumerate(shown["loss"].items()):
        c = f"C{k}"
        ax2.plot(losses, jscc, "o-", color=c, label=f"JSCC, {chan}")
        ax2.plot(losses, dig, "s--", color=c, label=f"{mcs}, {chan}")
    ax2.set(
        xlabel="frames lost (%)", ylabel="PSNR (dB)", title=f"frames lost at {loss_snr:g} dB SNR"
    )
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot written to {path}", file=sys.stderr)


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
    p.add_argument("--only", choices=["modes", "loss", "digital"])
    p.add_argument(
        "--modes", default=",".join(MODES), help="modes and loss: which of " + ", ".join(MODES)
    )
    p.add_argument(
        "--digital-channel", default="awgn,two_pluto", help="channels of the digital tables"
    )
    p.add_argument(
        "--cache", default="runs/cache/whole_digital", help="the digital bitstreams' cache"
    )
    p.add_argument("--plot", help="digital: write PSNR vs SNR and vs frames lost to this PNG")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--fading",
        choices=["per-frame", "per-photo"],
        default="per-frame",
        help="a channel draw for each frame (default), or one for all of a photograph's frames "
        "(a static bench channel)",
    )
    p.add_argument(
        "--order",
        choices=["254", "255"],
        default="254",
        help="tiles32's interleaver: scheme 254's (rotated across subcarriers, hil tx "
        "--whole-mode interleaved; scheme 253's segments use it too) or 255's (the order before)",
    )
    a = p.parse_args(argv)
    if unknown := set(a.modes.split(",")) - set(MODES):
        p.error(f"--modes: unknown {', '.join(sorted(unknown))}; known: {', '.join(MODES)}")
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
            air = Air.from_args(phy, chan, a)
            for mode in a.modes.split(","):
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
            air = Air.from_args(phy, chan, a)
            for mode in a.modes.split(","):
                row = []
                for lp in losses:
                    r = [
                        run(model, air, x, mode, a.loss_snr, lp / 100, 2000 + i)
                        for i, x in enumerate(imgs)
                    ]
                    got = sum(t[2] for t in r)
                    row.append(f"{np.mean([t[0] for t in r]):.2f} ({got}/{sum(t[1] for t in r)})")
                print(f"| {chan} | {mode} | " + " | ".join(row) + " |", flush=True)
    if a.only in (None, "digital"):
        digital_tables(model, phy, imgs, a, a.digital_channel.split(","))
    print(f"\n({time.monotonic() - t0:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
