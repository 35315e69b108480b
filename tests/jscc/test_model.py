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
    assert set(JsccConfig().to_dict()) == {
        "bandwidth_ratio",
        "hidden",
        "snr_adaptive",
        "use_symbol_gain",
    }
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


@pytest.mark.parametrize("noise", [0.02, 0.1, 0.3])
def test_ssim_matches_scikit_image(noise, gen):
    """Our SSIM against scikit-image's structural_similarity with the paper's settings
    (Gaussian window sigma 1.5, population covariance, data range 1)."""
    from skimage.metrics import structural_similarity

    x = torch.rand(2, 3, 40, 48, generator=gen, dtype=torch.float64)
    x = torch.nn.functional.avg_pool2d(x, 3, 1, 1)  # some structure
    y = (x + noise * torch.randn(x.shape, generator=gen, dtype=torch.float64)).clamp(0, 1)
    ours = ssim(x, y)
    for i in range(2):
        ref = structural_similarity(
            x[i].numpy(), y[i].numpy(), channel_axis=0, gaussian_weights=True, sigma=1.5,
            use_sample_covariance=False, data_range=1.0,
        )  # fmt: skip
        assert abs(float(ours[i]) - ref) < 1e-6, (float(ours[i]), ref)


def test_ms_ssim_and_colour_shift(gen):
    from hil.jscc.metrics import colour_shift, ms_ssim

    x = torch.nn.functional.avg_pool2d(torch.rand(2, 3, 192, 200, generator=gen), 5, 1, 2)
    y = (x + 0.05 * torch.randn(x.shape, generator=gen)).clamp(0, 1)
    m = ms_ssim(x, y)
    assert m.shape == (2,) and torch.all((0 < m) & (m < 1))
    assert torch.allclose(ms_ssim(x, x), torch.ones(2), atol=1e-5)
    assert torch.all(ms_ssim(x, (x + 0.2 * torch.randn(x.shape, generator=gen)).clamp(0, 1)) < m)
    with pytest.raises(ValueError, match="at least 161"):
        ms_ssim(x[..., :32, :32], y[..., :32, :32])
    shifted = x.clone()
    shifted[:, 1] -= 10 / 255  # green down 10 levels
    shifted[:, 2] += 4 / 255
    torch.testing.assert_close(
        colour_shift(shifted, x), torch.tensor([[0.0, -10.0, 4.0]] * 2), atol=1e-3, rtol=0
    )


@pytest.mark.parametrize("arch", ["bdjscc", "resgdn"])
def test_inference_runs_channels_last_and_gives_the_training_paths_values(arch):
    """Without gradients the trunks take their input in channels-last order (oneDNN's
    faster float32 convolutions on CPUs); the values are the training path's, to float32
    rounding, and the images come back in the default order."""
    torch.manual_seed(0)
    m = JsccModel(JsccConfig(arch=arch, hidden=16, res_blocks=1)).eval()
    seen = []
    first = next(
        mod
        for mod in m.decoder.modules()
        if isinstance(mod, torch.nn.Conv2d | torch.nn.ConvTranspose2d)
    )
    first.register_forward_pre_hook(
        lambda _mod, args: seen.append(args[0].is_contiguous(memory_format=torch.channels_last))
    )
    x = torch.rand(4, 3, 32, 32)
    snr = torch.full((4,), 10.0)
    s_train = m.encoder(x)
    gain = torch.ones(4, s_train.shape[1])
    y_train = m.decode_received(s_train, snr, (3, 32, 32), gain)
    with torch.inference_mode():
        s_inf = m.encoder(x)
        y_inf = m.decode_received(s_inf, snr, (3, 32, 32), gain)
    assert seen == [False, True]
    torch.testing.assert_close(s_inf, s_train.detach(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(y_inf, y_train.detach(), rtol=1e-4, atol=1e-5)
    assert y_inf.is_contiguous() and s_inf.is_contiguous()
