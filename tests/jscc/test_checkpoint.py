import json
import pickle

import pytest
import torch

from hil.jscc.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from hil.jscc.model import JsccConfig, JsccModel
from hil.phy import OfdmConfig


@pytest.fixture
def ckpt(tmp_path):
    with torch.random.fork_rng():
        torch.manual_seed(0)
        m = JsccModel(JsccConfig(hidden=8))
    save_checkpoint(tmp_path / "m", m, OfdmConfig(), {"history": []})
    return tmp_path / "m", m


def test_round_trip_identical_outputs(ckpt, gen):
    stem, m = ckpt
    m2, phy, doc, _ = load_checkpoint(stem.with_suffix(".json"))
    assert phy == OfdmConfig() and doc["model"]["hidden"] == 8
    x = torch.rand(2, 3, 16, 16, generator=gen)
    m.eval()
    with torch.inference_mode():
        s1, s2 = m.encoder(x), m2.encoder(x)
        assert torch.equal(s1, s2)
        assert torch.equal(
            m.decoder(s1, torch.zeros(2), (3, 16, 16)), m2.decoder(s2, torch.zeros(2), (3, 16, 16))
        )


def test_fingerprint_mismatch_refused(ckpt):
    stem, _ = ckpt
    doc = json.loads(stem.with_suffix(".json").read_text())
    doc["fingerprint"] = "00" * 8
    stem.with_suffix(".json").write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match="fingerprint mismatch"):
        load_checkpoint(stem)


def test_config_that_does_not_match_weights_refused(ckpt):
    stem, _ = ckpt
    doc = json.loads(stem.with_suffix(".json").read_text())
    doc["model"]["hidden"] = 16
    stem.with_suffix(".json").write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match=r"tensor .* is"):
        load_checkpoint(stem)
    doc["model"]["snr_adaptive"] = False
    doc["model"]["hidden"] = 8
    stem.with_suffix(".json").write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match="do not match the model config"):
        load_checkpoint(stem)


def test_wrong_phy_refused(ckpt):
    stem, _ = ckpt
    with pytest.raises(CheckpointError, match="trained for PHY"):
        load_checkpoint(stem, expect_phy=OfdmConfig(cp_len=32))


def test_pickle_refused_never_unpickled(ckpt, tmp_path):
    stem, m = ckpt
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    stem.with_suffix(".safetensors").write_bytes(pickle.dumps(Evil()))
    with pytest.raises(CheckpointError, match="pickle"):
        load_checkpoint(stem)
    torch.save(m.state_dict(), stem.with_suffix(".safetensors"))
    with pytest.raises(CheckpointError, match="pickle"):
        load_checkpoint(stem)
    assert not marker.exists()


def test_truncated_and_corrupt_refused(ckpt):
    stem, _ = ckpt
    w = stem.with_suffix(".safetensors")
    data = w.read_bytes()
    w.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"truncated|corrupt"):
        load_checkpoint(stem)
    w.write_bytes(data[:5])
    with pytest.raises(CheckpointError, match="truncated"):
        load_checkpoint(stem)
    w.write_bytes(data)
    stem.with_suffix(".json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(stem)


def test_missing_files(tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "nothing")


def test_weights_tampered_under_an_intact_json_refused(ckpt):
    """One weight changed by the smallest float step, JSON left as it was: the fingerprint,
    recomputed from config and weights on load, no longer matches."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    stem, _ = ckpt
    w = stem.with_suffix(".safetensors")
    tensors = load_file(str(w))
    with safe_open(str(w), "pt") as fh:
        meta = fh.metadata()
    name = next(k for k in tensors if k.startswith("model.") and tensors[k].is_floating_point())
    t = tensors[name].clone()
    t.view(-1)[0] = torch.nextafter(t.view(-1)[0], torch.tensor(float("inf")))
    tensors[name] = t
    save_file(tensors, str(w), metadata=meta)
    with pytest.raises(CheckpointError, match="fingerprint mismatch"):
        load_checkpoint(stem)
