#!/usr/bin/env python3
"""Training throughput: images/s of one training step (encoder, channel + PHY or surrogate,
decoder, backward, Adam) for the architectures and settings that matter on a CPU.

    python scripts/bench_train.py [--threads 1] [--steps 8] [--compile]

Every row is measured in the same run and printed with its ratio to the reference row
(the first shipped model: bdjscc, hidden 32, batch 64, through the PHY). Measure with
nothing else running: the figures move with load.
"""

from __future__ import annotations

import argparse
import time

import torch

from hil.channel import ChannelChain, profile
from hil.jscc.model import JsccConfig, JsccModel, native_bfloat16
from hil.jscc.pipeline import JsccLink
from hil.phy import OfdmConfig

RESGDN = JsccConfig(arch="resgdn", hidden=48, res_blocks=2, use_symbol_gain=True)


def measure(cfg: JsccConfig, batch: int, steps: int, *, surrogate=False, channels_last=False,
            compile_model=False, phy_off=False, precision="float32") -> float:  # fmt: skip
    torch.manual_seed(0)
    m = JsccModel(cfg).set_precision(precision)
    link = JsccLink(
        m, OfdmConfig(), ChannelChain.from_tables(profile("multipath_cfo", OfdmConfig().sample_rate_hz)),
        through_phy=not phy_off,
    )  # fmt: skip
    if channels_last:
        m.to(memory_format=torch.channels_last)
    if compile_model:
        m.encoder = torch.compile(m.encoder)
        m.decoder = torch.compile(m.decoder)
    opt = torch.optim.Adam(m.parameters(), 1e-3)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(batch, 3, 32, 32, generator=g)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    snr = torch.rand(batch, generator=g) * 20

    def step():
        r = link(x, snr, g, surrogate)
        loss = ((r.x_hat - x) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(2):  # warm-up (and compilation)
        step()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    return batch * steps / (time.perf_counter() - t)


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--steps", type=int, default=8, help="timed steps per row")
    p.add_argument(
        "--compile", action="store_true", help="also time torch.compile (about a minute to compile)"
    )
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    m_ref = JsccModel(JsccConfig())
    m_new = JsccModel(RESGDN)
    rows = [
        ("bdjscc h32, batch 64, PHY (reference: the first shipped model)", JsccConfig(), 64, {}),
        ("resgdn h48 rb2, batch 64, PHY (the shipped model)", RESGDN, 64, {}),
        ("resgdn, batch 32, PHY", RESGDN, 32, {}),
        ("resgdn, batch 128, PHY", RESGDN, 128, {}),
        ("resgdn, batch 64, channels_last", RESGDN, 64, {"channels_last": True}),
        ("resgdn, batch 64, surrogate", RESGDN, 64, {"surrogate": True}),
        ("resgdn, batch 64, PHY, bfloat16 autocast", RESGDN, 64, {"precision": "bfloat16"}),
        (
            "resgdn, batch 64, surrogate, bfloat16 autocast",
            RESGDN,
            64,
            {"surrogate": True, "precision": "bfloat16"},
        ),
        ("resgdn, batch 64, no PHY (bare symbols + AWGN)", RESGDN, 64, {"phy_off": True}),
    ]
    if a.compile:
        rows.append(("resgdn, batch 64, torch.compile", RESGDN, 64, {"compile_model": True}))
    print(
        f"torch {torch.__version__}, {a.threads} thread(s), native bfloat16: "
        f"{native_bfloat16()}; parameters: bdjscc h32 "
        f"{m_ref.n_parameters():,}, resgdn h48 rb2 {m_new.n_parameters():,}\n"
    )
    print("| configuration | images/s | vs reference |")
    print("| --- | --- | --- |")
    ref = None
    for name, cfg, batch, kw in rows:
        ips = measure(cfg, batch, a.steps, **kw)
        ref = ref or ips
        print(f"| {name} | {ips:.0f} | {ips / ref:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
