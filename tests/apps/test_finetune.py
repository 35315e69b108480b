"""hil finetune: frames of a recording paired with what was sent, the decoder fine-tuned with
the encoder as deployed, provenance recorded, other models' and PHYs' recordings refused."""

import hashlib
import json
import logging

import pytest
import torch

from hil.apps import finetune, rx
from hil.apps.finetune import RecordingRefused, received_frames
from hil.jscc.checkpoint import load_checkpoint, read_meta, save_checkpoint
from hil.jscc.model import JsccConfig, JsccModel
from hil.phy import OfdmConfig

from .trio import run_trio

LOG = logging.getLogger("test")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny untrained model (its decoder has everything to learn) and a recorded link of it."""
    d = tmp_path_factory.mktemp("ft")
    torch.manual_seed(0)
    model = JsccModel(JsccConfig(hidden=8))
    ckpt = d / "tiny"
    save_checkpoint(ckpt, model, OfdmConfig(), {"note": "test model"})
    use = ("--checkpoint", str(ckpt))
    rc, s = run_trio(d, count=20, tx_extra=use, rx_extra=(*use, "--record", str(d / "rec")))
    assert rc == {"radio": 0, "rx": 0, "tx": 0} and s["counts"]["decoded"] == 20
    return d, ckpt


def test_frames_pair_exactly_with_the_manifest(tiny):
    d, ckpt = tiny
    frames, prov = received_frames(d / "rec", read_meta(ckpt), LOG)
    assert sorted(f["seq"] for f in frames) == list(range(20))
    assert all(f["item_id"] == f["seq"] for f in frames)  # tx sends item i as seq i
    assert prov["manifest_frames"] == 20 and prov["disagree"] == 0 and prov["frames"] == 20
    assert prov["references"] == {"dataset": "builtin", "crop": 32, "count": 20}
    data = (d / "rec.sigmf-data").read_bytes()
    assert prov["sha512_data"] == hashlib.sha512(data).hexdigest()
    assert prov["sha512_meta"] == hashlib.sha512((d / "rec.sigmf-meta").read_bytes()).hexdigest()


def test_finetuning_improves_validation_psnr_and_keeps_the_encoder(tiny, capsys):
    d, ckpt = tiny
    out = d / "tuned"
    argv = ["--recording", str(d / "rec"), "--checkpoint", str(ckpt), "--out", str(out)]
    assert finetune.main([*argv, "--epochs", "25", "--batch", "4", "--lr", "3e-3", "--quiet"]) == 0
    doc = read_meta(out)
    ft = doc["finetune"]
    assert ft["val_psnr_db"][ft["best_epoch"]] > ft["val_psnr_db"][0] + 0.5
    assert (ft["train_frames"], ft["val_frames"]) == (16, 4)  # items 0, 5, 10, 15 validate
    assert (
        ft["recordings"][0]["sha512_data"]
        and ft["base_fingerprint"] == read_meta(ckpt)["fingerprint"]
    )
    assert doc["transmitter_fingerprint"] == read_meta(ckpt)["fingerprint"] != doc["fingerprint"]
    base, _, _, _ = load_checkpoint(ckpt)
    tuned, _, _, _ = load_checkpoint(out)
    for (k, a), b in zip(
        base.encoder.state_dict().items(), tuned.encoder.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), k
    assert any(
        not torch.equal(a, b)
        for a, b in zip(
            base.decoder.state_dict().values(), tuned.decoder.state_dict().values(), strict=True
        )
    )
    # the fine-tuned decoder accepts what the deployed transmitter sent
    summary = d / "s.json"
    code = rx.main(
        [
            "--recording",
            str(d / "rec"),
            "--checkpoint",
            str(out),
            "--count",
            "20",
            "--summary",
            str(summary),
        ]
    )
    c = json.loads(summary.read_text())["counts"]
    assert code == 0 and c["refused"] == 0 and c["decoded"] == 20


def test_another_models_recording_is_refused(tiny):
    d, _ = tiny
    from hil.apps.common import shipped_checkpoint

    with pytest.raises(RecordingRefused, match="recorded with model"):
        received_frames(d / "rec", read_meta(shipped_checkpoint()), LOG)


def test_another_phys_recording_is_refused(tiny, tmp_path):
    d, ckpt = tiny
    meta = json.loads((d / "rec.sigmf-meta").read_text())
    meta["global"]["hil:phy"]["cp_len"] = 32
    (tmp_path / "rec.sigmf-meta").write_text(json.dumps(meta))
    (tmp_path / "rec.sigmf-data").write_bytes((d / "rec.sigmf-data").read_bytes())
    with pytest.raises(RecordingRefused, match="another PHY"):
        received_frames(tmp_path / "rec", read_meta(ckpt), LOG)
