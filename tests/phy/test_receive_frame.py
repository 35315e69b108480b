"""One receive call from the frame's first sample: nobody slices off the short training field."""

import pytest
import torch

from hil.phy import FrameBuilder, OfdmConfig, OfdmReceiver


def test_receive_frame_takes_the_frame_from_its_first_sample():
    cfg = OfdmConfig()
    g = torch.Generator().manual_seed(3)
    s = torch.randn(2, 96, dtype=torch.complex64, generator=g)
    x = FrameBuilder(cfg).build(s)
    assert x.shape[-1] == cfg.frame_len(96)
    rx = OfdmReceiver(cfg)
    r = rx.receive_frame(x, 96)
    assert torch.allclose(r.symbols, s, atol=1e-4)  # noiseless: the symbols come back
    r2 = rx(x[:, cfg.sts_len :], 96)  # the stream receiver's entry point, from the LTS
    assert torch.equal(r.symbols, r2.symbols)
    with pytest.raises(ValueError, match="complex"):
        rx.receive_frame(x.real, 96)
    with pytest.raises(ValueError, match="samples from the LTS start"):
        rx.receive_frame(x[:, : cfg.frame_len(96) - 1], 96)


def test_an_empty_payload_is_a_clear_error():
    import numpy as np

    from hil.phy import Header

    with pytest.raises(ValueError, match="at least one payload symbol"):
        FrameBuilder().build_numpy(np.zeros(0, np.complex64), Header(1, 1, bytes(8), 0, (3, 8, 8)))
