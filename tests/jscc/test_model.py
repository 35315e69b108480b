import pytest
import torch

from hil.jscc.metrics import psnr, ssim
from hil.jscc.model import JsccConfig, JsccModel, power_normalize


@pytest.mark.parametrize("arch", ["bdjscc", "resgdn"])
@pytest.mark.parametrize(("ratio", "c"), [("1/6", 16), ("1/12", 8), ("1/24", 4)])
@pytest.mark.parametrize("hw", [(32, 32), (16, 48), (64, 32)])
def test_shapes_and_dtypes(arch, ratio, c, hw, gen):
    cfg = JsccConfig(bandwidth_ratio=ratio, hidden=8, arch=arch, use_symbol_gain=arch == "resgdn")
    m = JsccModel(cfg)
    x = torch.rand(2, 3, *hw, generator=gen)
    s = m.encoder(x)
    k = cfg.n_symbols((3, *hw))
    assert cfg.latent_channels == c
    assert s.dtype == torch.complex64 and s.shape == (2, k)
    assert abs(k / (3 * hw[0] * hw[1]) - eval(ratio)) < 1e-12
    gain = torch.rand(2, k, generator=gen) * 10 if cfg.use_symbol_gain else None
    y = m.decoder(s, torch.tensor([3.0, 12.0]), (3, *hw), gain)
    assert y.shape == x.shape and y.dtype == torch.float32
    assert 0 <= y.min() and y.max() <= 1


def test_power_constraint_exact(gen):
    m = JsccModel(JsccConfig(hidden=8))
    s = m.encoder(torch.rand(5, 3, 32, 32, generator=gen) * 3)
    p = (s.abs() ** 2).mean(1)
    torch.testing.assert_close(p, torch.ones(5), atol=1e-6, rtol=0)
    z = torch.randn(3, 100, dtype=torch.complex128, generator=gen) * torch.tensor(
        [[0.1], [1.0], [50.0]]
    )
    torch.testing.assert_close(
        (power_normalize(z).abs() ** 2).mean(1), torch.ones(3, dtype=torch.float64)
    )


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"bandwidth_ratio": "1/7"}, "even integer"),
        ({"bandwidth_ratio": "one sixth"}, "fraction"),
        ({"hidden": 2}, "hidden"),
    ],
)
def test_config_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        JsccConfig(**kw)


def test_image_shape_errors():
    with pytest.raises(ValueError, match="divisible by 4"):
        JsccConfig().n_symbols((3, 30, 32))


def test_symbol_gain_input(gen):
    m = JsccModel(JsccConfig(hidden=8, use_symbol_gain=True))
    s = m.encoder(torch.rand(2, 3, 16, 16, generator=gen))
    g = torch.rand(2, s.shape[1], generator=gen) * 100
    assert m.decoder(s, torch.zeros(2), (3, 16, 16), g).shape == (2, 3, 16, 16)
    with pytest.raises(ValueError, match="symbol_gain"):
        m.decoder(s, torch.zeros(2), (3, 16, 16))


def test_metrics_known_values(gen):
    x = torch.rand(2, 3, 32, 32, generator=gen)
    assert torch.all(psnr(x, x) >= 99)
    torch.testing.assert_close(psnr(x, (x + 0.1)), torch.full((2,), 20.0), atol=1e-4, rtol=0)
    torch.testing.assert_close(ssim(x, x), torch.ones(2))
    noisy = (x + 0.2 * torch.randn(x.shape, generator=gen)).clamp(0, 1)
    assert torch.all(ssim(x, noisy) < 0.9)
    assert torch.all(ssim(x, 1 - x) < ssim(x, noisy))


def test_bdjscc_config_reads_as_before_resgdn_existed():
    """The first shipped checkpoints' fingerprints cover the config dict: a bdjscc config must
    serialise without the fields resgdn added, and a resgdn config with them."""
    assert set(JsccConfig().to_dict()) == {"bandwidth_ratio", "hidden", "snr_adaptive", "use_symbol_gain"}
    d = JsccConfig(arch="resgdn", res_blocks=3).to_dict()
    assert d["arch"] == "resgdn" and d["res_blocks"] == 3
    assert JsccConfig.from_dict(d) == JsccConfig(arch="resgdn", res_blocks=3)
    with pytest.raises(ValueError, match="arch must be one of"):
        JsccConfig(arch="vit")


def test_gdn_and_inverse_gdn(gen):
    from hil.jscc.model import GDN

    x = torch.randn(2, 4, 3, 3, generator=gen)
    g, ig = GDN(4), GDN(4, inverse=True)
    # at initialisation beta = 1 + 1e-6, gamma = 0.1 I: y = x / sqrt(beta + 0.1 x^2)
    torch.testing.assert_close(g(x), x / torch.sqrt(1 + 1e-6 + 0.1 * x**2))
    torch.testing.assert_close(ig(x), x * torch.sqrt(1 + 1e-6 + 0.1 * x**2))
    g.gamma_p.data = -g.gamma_p.data  # parameters squared: the sign cannot make gamma negative
    torch.testing.assert_close(g(x), x / torch.sqrt(1 + 1e-6 + 0.1 * x**2))
