"""Received frames for decoder tests: FrameEvents as the receive path hands them on."""

import numpy as np

from hil.phy import FrameEvent
from hil.phy.header import Header


def received(header: Header, symbols, snr_db: float = 10.0) -> FrameEvent:
    """A frame whose header passed its CRC, carrying ``symbols`` (complex64) at unit gain."""
    sym = np.asarray(symbols, np.complex64)
    return FrameEvent(
        "ok", 0, 0.0, 0.0, 1.0, 1.0, header=header, symbols=sym,
        symbol_gain=np.ones(len(sym), np.float32), snr_db=snr_db,
    )  # fmt: skip


def random_frame(rng: np.random.Generator, schemes, count_max: int, sizes=None) -> FrameEvent:
    """A frame of nonsense that passed its CRC: a random scheme of ``schemes``, chunk count
    (1 for the digital one-frame schemes 1..32, else up to ``count_max``), index, shape,
    item, seq (0..39: some collide on (item, first seq)) and payload (a length from ``sizes``,
    else 1..4999) of noise."""
    scheme = int(rng.choice(schemes))
    count = 1 if 1 <= scheme <= 32 else int(rng.integers(1, count_max + 1))
    n = int(rng.choice(sizes)) if sizes is not None else int(rng.integers(1, 5000))
    h = Header(
        seq=int(rng.integers(0, 40)),
        item_id=int(rng.integers(0, 3)),
        fingerprint=b"\0" * 8,
        payload_len=n,
        shape=(3, int(rng.integers(4, 100)), int(rng.integers(4, 100))),
        chunk_index=int(rng.integers(0, count)),
        chunk_count=count,
        scheme=scheme,
    )
    sym = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    return received(h, sym, float(rng.uniform(0, 20)))
