import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from hil.cli import main
from hil.jscc.data import fixed_tiles, open_dataset
from hil.jscc.model import JsccModel
from hil.jscc.train import ExperimentConfig, evaluate, train


def _weights(stem):
    return {k: v for k, v in load_file(f"{stem}.safetensors").items() if k.startswith("model.")}


def _init(cfg):
    with torch.random.fork_rng():
        torch.manual_seed(cfg.train.seed)
        return JsccModel(cfg.model)


def _learns(tiny_cfg, out, **train_over) -> dict:
    """60 steps of the tiny config (with ``train_over``) raise its PSNR at 10 dB by more
    than 2 dB over the seeded initial model; returns the checkpoint's JSON document."""
    d = tiny_cfg.to_dict()
    d["train"].update(steps=60, eval_every=60, batch_size=16, lr=3e-3, **train_over)
    cfg = ExperimentConfig.from_dict(d)
    tiles, _ = fixed_tiles(open_dataset("builtin", "test"), 16, 16)
    before = evaluate(_init(cfg), cfg.phy, cfg.channel, [10.0], tiles)[10.0]["psnr_db"]
    doc = train(cfg, out, progress=False)
    after = doc["history"][-1]["eval"]["10.0"]["psnr_db"]
    assert after > before + 2.0, (before, after)
    return doc


def test_short_training_improves_psnr(tiny_cfg, tmp_path):
    _learns(tiny_cfg, tmp_path / "m")


def test_seeded_runs_are_reproducible(tiny_cfg, tmp_path):
    train(tiny_cfg, tmp_path / "a", progress=False)
    train(tiny_cfg, tmp_path / "b", progress=False)
    wa, wb = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_resume_equals_uninterrupted(tiny_cfg, tmp_path):
    train(tiny_cfg, tmp_path / "full", progress=False)
    train(tiny_cfg, tmp_path / "part", progress=False, until=2)
    assert json.loads((tmp_path / "part.json").read_text())["step"] == 2
    train(tiny_cfg, tmp_path / "part", resume=tmp_path / "part", progress=False)
    wa, wb = _weights(tmp_path / "full"), _weights(tmp_path / "part")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_detach_mode_never_trains_the_encoder(tiny_cfg, tmp_path):
    d = tiny_cfg.to_dict()
    d["train"]["grad_mode"] = "detach"
    cfg = ExperimentConfig.from_dict(d)
    init = _init(cfg).state_dict()
    train(cfg, tmp_path / "m", progress=False)
    w = _weights(tmp_path / "m")
    enc = [k for k in init if k.startswith("encoder.")]
    dec = [k for k in init if k.startswith("decoder.")]
    assert all(torch.equal(w["model." + k], init[k]) for k in enc)
    assert any(not torch.equal(w["model." + k], init[k]) for k in dec)


def test_real_and_complex_modes_train_the_encoder(tiny_cfg, tmp_path):
    for mode in ("real", "complex"):
        d = tiny_cfg.to_dict()
        d["train"]["grad_mode"] = mode
        cfg = ExperimentConfig.from_dict(d)
        init = _init(cfg).state_dict()
        train(cfg, tmp_path / mode, progress=False)
        w = _weights(tmp_path / mode)
        assert any(
            not torch.equal(w["model." + k], init[k]) for k in init if k.startswith("encoder.")
        )


def test_cli_train_and_eval(tmp_path, capsys):
    cfgp = tmp_path / "c.toml"
    cfgp.write_text(
        '[model]\nhidden = 8\n[channel]\nprofile = "awgn"\n'
        "[train]\ncrop = 16\nbatch_size = 4\nsteps = 2\neval_every = 2\neval_tiles = 8\nthreads = 1\n"
    )
    assert main(["train", "--config", str(cfgp), "--out", str(tmp_path / "m"), "--quiet"]) == 0
    capsys.readouterr()
    assert (
        main(
            [
                "eval",
                "--checkpoint",
                str(tmp_path / "m"),
                "--snr",
                "0,10",
                "--tiles",
                "8",
                "--json",
                "--plot",
                str(tmp_path / "p.png"),
            ]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert [r["snr_db"] for r in doc["results"]] == [0.0, 10.0]
    assert all(0 < r["psnr_db"] < 60 and 0 <= r["ssim"] <= 1 for r in doc["results"])
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_cli_config_errors_are_clear(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[train]\nstepz = 3\n")
    assert main(["train", "--config", str(bad), "--out", str(tmp_path / "m")]) == 2
    assert "unknown [train] key(s) ['stepz']" in capsys.readouterr().err


def test_torchrun_ddp_two_processes(tmp_path):
    """DistributedDataParallel over gloo on the CPU, started by torchrun, no code changes."""
    cfgp = tmp_path / "c.toml"
    cfgp.write_text(
        '[model]\nhidden = 8\n[channel]\nprofile = "awgn"\n'
        "[train]\ncrop = 16\nbatch_size = 4\nsteps = 2\neval_every = 2\neval_tiles = 8\nthreads = 1\n"
    )
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            "-m",
            "hil.cli",
            "train",
            "--config",
            str(cfgp),
            "--out",
            str(tmp_path / "m"),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["world_size"] == 2 and doc["train_images"] == 2 * 2 * 4


def test_surrogate_steps_then_phy_improve_psnr_and_record_time(tiny_cfg, tmp_path):
    """Most steps through the surrogate, the last through the PHY: training still improves the
    model as the PHY measures it, and resuming accumulates images and wall time."""
    d = tiny_cfg.to_dict()
    d["train"].update(steps=60, eval_every=60, batch_size=16, lr=3e-3, surrogate_until=50)
    cfg = ExperimentConfig.from_dict(d)
    tiles, _ = fixed_tiles(open_dataset("builtin", "test"), 16, 16)
    before = evaluate(_init(cfg), cfg.phy, cfg.channel, [10.0], tiles)[10.0]["psnr_db"]
    train(cfg, tmp_path / "m", progress=False, until=30)
    part = json.loads((tmp_path / "m.json").read_text())
    doc = train(cfg, tmp_path / "m", resume=tmp_path / "m", progress=False)
    after = doc["history"][-1]["eval"]["10.0"]["psnr_db"]
    assert after > before + 2.0, (before, after)
    assert part["train_images"] == 30 * 16 and doc["train_images"] == 60 * 16
    assert doc["train_seconds"] > part["train_seconds"]


def test_bfloat16_training_improves_psnr_and_keeps_float32_weights(tiny_cfg, tmp_path):
    """train.precision = bfloat16: autocast in the steps; the model still learns (scored in
    float32), the weights saved are float32 and the config records the choice."""
    doc = _learns(tiny_cfg, tmp_path / "m", precision="bfloat16")
    w = _weights(tmp_path / "m")
    assert w and all(v.dtype == torch.float32 for v in w.values())
    assert doc["config"]["train"]["precision"] == "bfloat16"
    # a float32 run of the same config and seed differs: the steps did run in bfloat16
    d = doc["config"]
    d["train"]["precision"] = "float32"
    train(ExperimentConfig.from_dict(d), tmp_path / "f", progress=False)
    wf = _weights(tmp_path / "f")
    assert any(not torch.equal(w[k], wf[k]) for k in w)
    d["train"]["precision"] = "float16"
    with pytest.raises(ValueError, match=r"train\.precision"):
        ExperimentConfig.from_dict(d)


def test_init_starts_from_another_checkpoints_weights(tiny_cfg, tmp_path):
    """init: the weights of a trained checkpoint at step 0 with this config's schedule and
    channel (fine-tuning); provenance kept across a resume; refused with resume or for
    another model."""
    train(tiny_cfg, tmp_path / "a", progress=False)
    d = tiny_cfg.to_dict()
    d["train"]["lr"] = d["train"]["lr_final"] = 1e-12  # steps that barely move the weights
    d["channel"]["stages"] = [{"kind": "awgn"}]  # another channel
    cfg = ExperimentConfig.from_dict(d)
    doc = train(cfg, tmp_path / "b", progress=False, init=tmp_path / "a", until=2)
    a_doc = json.loads((tmp_path / "a.json").read_text())
    assert doc["step"] == 2 and doc["init"]["fingerprint"] == a_doc["fingerprint"]
    wa, wb = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert all(torch.allclose(wa[k], wb[k], atol=1e-6) for k in wa)
    fresh = _init(cfg).state_dict()
    assert any(not torch.allclose(wb["model." + k], v, atol=1e-3) for k, v in fresh.items())
    doc = train(cfg, tmp_path / "b", progress=False, resume=tmp_path / "b")
    assert doc["step"] == cfg.train.steps and doc["init"]["fingerprint"] == a_doc["fingerprint"]
    with pytest.raises(ValueError, match="not both"):
        train(cfg, tmp_path / "c", progress=False, init=tmp_path / "a", resume=tmp_path / "b")
    d["model"]["hidden"] = 12
    with pytest.raises(ValueError, match="cannot start from"):
        train(ExperimentConfig.from_dict(d), tmp_path / "c", progress=False, init=tmp_path / "a")
