"""The networks' arithmetic precision (``JsccModel.set_precision``): bfloat16 inference close
to float32, float32 untouched, parameters and fingerprints unchanged, the choice resolved."""

import pytest
import torch

from hil.apps.common import shipped_checkpoint
from hil.jscc.checkpoint import load_checkpoint, model_fingerprint
from hil.jscc.metrics import psnr
from hil.jscc.model import PRECISIONS, JsccConfig, JsccModel, resolve_precision
from hil.phy import OfdmConfig


@pytest.fixture(scope="module")
def shipped():
    model, _, doc, _ = load_checkpoint(shipped_checkpoint())
    return model.eval(), doc


def _run(model, x, snr):
    with torch.inference_mode():
        s = model.encoder(x)
        gain = torch.full(s.shape, 30.0)
        return s, model.decode_received(s, snr, tuple(x.shape[1:]), gain)


def test_bfloat16_inference_is_close_to_float32(shipped, gen):
    model, _ = shipped
    x = torch.rand(16, 3, 32, 48, generator=gen)
    snr = torch.linspace(0, 20, 16)
    s32, y32 = _run(model.set_precision("float32"), x, snr)
    try:
        s16, y16 = _run(model.set_precision("bfloat16"), x, snr)
    finally:
        model.set_precision("float32")
    assert model.precision == torch.float32 and model.precision_name == "float32"
    assert s16.dtype == torch.complex64 and y16.dtype == torch.float32
    torch.testing.assert_close((s16.abs() ** 2).mean(1), torch.ones(16), atol=1e-5, rtol=0)
    # it did compute in bfloat16 (not silently in float32) ...
    assert not torch.equal(s16, s32) and not torch.equal(y16, y32)
    # ... with an error far below the channel's: the symbols within -35 dB of their unit
    # power (the model is trained for 0-20 dB), the image within 45 dB of float32's
    assert float((s16 - s32).abs().pow(2).mean()) < 10 ** (-35 / 10)
    assert float(psnr(y16, y32).min()) > 45.0


def test_float32_is_unchanged_and_parameters_stay_float32(gen):
    torch.manual_seed(0)
    a = JsccModel(JsccConfig(arch="resgdn", hidden=8, use_symbol_gain=True))
    b = JsccModel(a.cfg)
    b.load_state_dict(a.state_dict())
    b.set_precision("bfloat16")
    x = torch.rand(2, 3, 16, 16, generator=gen)
    with torch.inference_mode():
        b.encoder(x)  # a bfloat16 pass leaves no trace
    b.set_precision(torch.float32)
    with torch.inference_mode():
        assert torch.equal(a.encoder(x), b.encoder(x))
    assert all(p.dtype == torch.float32 for p in b.parameters())
    assert model_fingerprint(b, OfdmConfig()) == model_fingerprint(a, OfdmConfig())


@pytest.mark.parametrize("arch", ["bdjscc", "resgdn"])
def test_bfloat16_trains(arch, gen):
    """Autocast keeps the graph: the loss reaches the encoder's first layer, in float32."""
    torch.manual_seed(0)
    m = JsccModel(JsccConfig(arch=arch, hidden=8, use_symbol_gain=arch == "resgdn"))
    m.set_precision("bfloat16")
    x = torch.rand(4, 3, 16, 16, generator=gen)
    s = m.encoder(x)
    y = m.decoder(s, torch.full((4,), 10.0), (3, 16, 16), torch.full(s.shape, 10.0))
    ((y - x) ** 2).mean().backward()
    w = m.encoder.net[0].weight.grad
    assert w is not None and w.dtype == torch.float32
    assert torch.isfinite(w).all() and w.abs().sum() > 0


def test_resolve_precision(monkeypatch):
    assert resolve_precision("float32") == torch.float32
    assert resolve_precision("bfloat16") == torch.bfloat16
    with pytest.raises(ValueError, match="precision must be one of"):
        resolve_precision("float16")
    with pytest.raises(ValueError, match="precision must be"):
        JsccModel(JsccConfig(hidden=8)).set_precision(torch.float16)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    assert resolve_precision("auto") == torch.float32
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)
    assert resolve_precision("auto") == torch.bfloat16


def test_command_lines_offer_the_model_precisions():
    from hil.apps import link, rx, tx

    for mod in (tx, rx, link):
        (action,) = [a for a in mod.build_parser()._actions if a.dest == "precision"]
        assert tuple(action.choices) == PRECISIONS and action.default == "auto"
