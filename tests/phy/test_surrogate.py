"""The training surrogate against the real receive path it stands in for."""

import pytest
import torch

from hil.channel import ChannelChain, profile
from hil.jscc.model import JsccConfig, JsccModel
from hil.jscc.pipeline import JsccLink
from hil.phy import FrameBuilder, OfdmConfig, OfdmReceiver
from hil.phy.surrogate import ReceiverSurrogate

B, K = 1000, 512  # 512 000 symbols per point


def _stats(r, s):
    lg = torch.log10(r.symbol_gain)
    return {
        "mse": float(((r.symbols - s).abs() ** 2).mean()),
        "snr_est": float(r.snr_db.mean()),
        "lg_mean": float(lg.mean()),
        "lg_sd": float(lg.std()),
    }


@pytest.mark.parametrize("header_known", [True, False])
@pytest.mark.parametrize("prof", ["awgn", "multipath_cfo"])
@pytest.mark.parametrize("snr", [0.0, 10.0, 20.0])
def test_surrogate_statistics_match_the_phy_receiver(prof, snr, header_known):
    """Equalised-symbol error, SNR estimate and per-symbol gain distribution of the surrogate
    against frames built, sent through the sample-level chain and received by OfdmReceiver,
    with the header's symbols known to both (as in training and for every header that passed
    its CRC) and with the long training field alone.
    Tolerances: error power within 8 % (10 % at 0 dB, where the receiver's CFO estimate
    noise, which the surrogate leaves out, adds its part), SNR estimate within 0.25 dB,
    log10 gain mean within 0.03 and spread within 5 %."""
    cfg = OfdmConfig()
    st = profile(prof, cfg.sample_rate_hz)
    g = torch.Generator().manual_seed(7)
    s = torch.randn(B, K, dtype=torch.complex64, generator=g)
    sn = torch.full((B,), snr)
    with torch.no_grad():
        hdr = torch.ones(B, cfg.header_symbols, cfg.n_data) if header_known else None
        y = ChannelChain.from_tables(st)(FrameBuilder(cfg).build(s, hdr), sn, generator=g).y
        real = _stats(OfdmReceiver(cfg).receive_frame(y, K, hdr), s)
        sur = _stats(ReceiverSurrogate(cfg, st, header_known=header_known)(s, sn, g), s)
    tol = 0.10 if snr == 0 else 0.08
    assert abs(sur["mse"] / real["mse"] - 1) < tol, (real, sur)
    assert abs(sur["snr_est"] - real["snr_est"]) < 0.25, (real, sur)
    assert abs(sur["lg_mean"] - real["lg_mean"]) < 0.03, (real, sur)
    assert abs(sur["lg_sd"] / real["lg_sd"] - 1) < 0.05, (real, sur)


def test_surrogate_refuses_stages_it_does_not_model():
    with pytest.raises(ValueError, match="models only"):
        ReceiverSurrogate(OfdmConfig(), profile("two_pluto", OfdmConfig().sample_rate_hz))


def test_encoder_trains_through_the_surrogate(gen):
    m = JsccModel(JsccConfig(arch="resgdn", hidden=8, use_symbol_gain=True))
    link = JsccLink(
        m,
        OfdmConfig(),
        ChannelChain.from_tables(profile("multipath_cfo", OfdmConfig().sample_rate_hz)),
    )
    x = torch.rand(4, 3, 16, 16, generator=gen)
    r = link(x, torch.full((4,), 10.0), gen, surrogate=True)
    assert r.rx.symbols.shape == r.symbols.shape and r.rx.symbols.dtype == torch.complex64
    ((r.x_hat - x) ** 2).mean().backward()
    grads = [p.grad for p in m.encoder.parameters()]
    assert all(gr is not None for gr in grads) and any(float(gr.abs().sum()) > 0 for gr in grads)
