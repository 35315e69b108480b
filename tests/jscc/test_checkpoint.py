import json
import pickle
from pathlib import Path

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


# --- exact recipe, layout and messages (mutation testing, docs/mutation.md)

FORMAT = "hil-jscc-checkpoint/1"


def _recipe(model_cfg, phy_cfg, state):
    """The fingerprint as the module docstring states it, computed independently."""
    import hashlib

    h = hashlib.sha256(
        json.dumps(
            {"model": model_cfg.to_dict(), "phy": phy_cfg.to_dict()}, sort_keys=True
        ).encode()
    )
    for name in sorted(state):
        t = state[name]
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        data = t.float() if t.dtype == torch.bfloat16 else t
        h.update(data.contiguous().numpy().tobytes())
    return h.digest()[:8]


def test_shipped_checkpoints_still_verify():
    """The checkpoints shipped with the link were fingerprinted when they were trained: loading
    recomputes the fingerprint, so any change to the recipe refuses them."""
    from hil.jscc.checkpoint import model_fingerprint

    stem = Path(__file__).resolve().parents[2] / "hil/assets/checkpoints/jscc_k6"
    m, phy, doc, extra = load_checkpoint(stem)
    assert doc["fingerprint"] == "d9aa37534dcd47ad" and extra == {}
    assert model_fingerprint(m, phy) == bytes.fromhex("d9aa37534dcd47ad")


def test_fingerprint_is_the_documented_recipe():
    from hil.jscc.checkpoint import fingerprint

    cfg, phy = JsccConfig(hidden=8), OfdmConfig()
    state = {
        "b.weight": torch.arange(6, dtype=torch.float32).reshape(2, 3),
        "a.count": torch.tensor([3], dtype=torch.int64),
        "c.double": torch.tensor([0.1, -2.5], dtype=torch.float64),
        "d.half": torch.tensor([1.5, -0.25], dtype=torch.bfloat16),
    }
    fp = fingerprint(cfg, phy, state)
    assert len(fp) == 8 and fp == _recipe(cfg, phy, state)
    # bfloat16 hashed through float32 (numpy has no bfloat16), nothing else converted
    other = dict(state, **{"c.double": state["c.double"].float()})
    assert fingerprint(cfg, phy, other) != fp


@pytest.mark.parametrize("name", ["m", "m.json", "m.safetensors"])
def test_stem_of(tmp_path, name):
    from hil.jscc.checkpoint import stem_of

    assert stem_of(tmp_path / name) == tmp_path / "m"
    assert stem_of("a/m.v2") == Path("a/m.v2")


def test_saved_files_layout_exactly(tmp_path):
    from safetensors import safe_open

    with torch.random.fork_rng():
        torch.manual_seed(0)
        m = JsccModel(JsccConfig(hidden=8))
    extra = {"opt.step": torch.tensor([7]), "rng.cpu": torch.arange(4, dtype=torch.uint8)}
    out = save_checkpoint(
        tmp_path / "a" / "b" / "m", m, OfdmConfig(), {"zeta": 1, "alpha": 2}, extra
    )
    assert out == tmp_path / "a" / "b" / "m.json" and out.is_file()
    assert sorted(p.name for p in out.parent.iterdir()) == ["m.json", "m.safetensors"]
    text = out.read_text()
    doc = json.loads(text)
    assert text == json.dumps(doc, indent=2) + "\n"
    assert list(doc) == ["format", "fingerprint", "model", "phy", "zeta", "alpha"]
    fp = _recipe(m.cfg, OfdmConfig(), m.state_dict()).hex()
    assert doc["format"] == FORMAT and doc["fingerprint"] == fp
    with safe_open(str(out.with_suffix(".safetensors")), "pt") as fh:
        assert fh.metadata() == {"format": FORMAT, "fingerprint": fp}
        names = set(fh.keys())
    assert names == {"model." + k for k in m.state_dict()} | set(extra)
    m2, _, _, extra2 = load_checkpoint(out, device="meta")
    assert sorted(extra2) == sorted(extra)
    assert all(torch.equal(extra2[k], extra[k]) for k in extra)
    assert next(m2.parameters()).device.type == "meta" and not m2.training
    with pytest.raises(ValueError) as e:
        save_checkpoint(tmp_path / "x", m, OfdmConfig(), {}, {"model.bad": torch.zeros(1)})
    assert str(e.value) == "extra tensor name 'model.bad' collides with the model prefix"


def test_export_drops_the_training_state_and_keeps_the_fingerprint(ckpt, tmp_path):
    from hil.jscc.checkpoint import export_checkpoint, read_meta

    stem, m = ckpt
    save_checkpoint(stem, m, OfdmConfig(), {"history": [1], "step": 4}, {"opt.x": torch.ones(2)})
    out = export_checkpoint(stem.with_suffix(".json"), tmp_path / "out" / "e")
    doc, src = read_meta(out), read_meta(stem)
    assert doc == {**src, "exported_from": "m"}
    _, _, _, extra = load_checkpoint(out)
    assert extra == {}
    # the same rate asked for explicitly is the same PHY: the same fingerprint, no source named
    again = export_checkpoint(stem, tmp_path / "out" / "f", sample_rate_hz=4e6)
    assert read_meta(again) == {**src, "exported_from": "m"}
    # another rate: another PHY, another fingerprint, the source named
    other = read_meta(export_checkpoint(stem, tmp_path / "out" / "g", sample_rate_hz=10e6))
    assert other["phy"] == {**src["phy"], "sample_rate_hz": 10e6}
    assert other["fingerprint"] != src["fingerprint"]
    assert other["retargeted_from"] == {"fingerprint": src["fingerprint"], "sample_rate_hz": 4e6}


def _err(fn, *a, **k) -> str:
    with pytest.raises(CheckpointError) as e:
        fn(*a, **k)
    return str(e.value)


def test_document_errors_are_exact(ckpt):
    stem, _ = ckpt
    j = stem.with_suffix(".json")
    good = json.loads(j.read_text())
    j.write_text("[1, 2]")
    assert _err(load_checkpoint, stem) == f"{j}: format None, expected '{FORMAT}'"
    j.write_text(json.dumps({**good, "format": "other/2"}))
    assert _err(load_checkpoint, stem) == f"{j}: format 'other/2', expected '{FORMAT}'"
    for key in ("fingerprint", "model", "phy"):
        j.write_text(json.dumps({k: v for k, v in good.items() if k != key}))
        assert _err(load_checkpoint, stem) == f"{j}: missing '{key}'"
    j.write_text(json.dumps({**good, "model": {**good["model"], "no_such_field": 1}}))
    msg = _err(load_checkpoint, stem)
    assert msg.startswith(f"{stem}.json: bad configuration: ") and "no_such_field" in msg
    j.write_text(json.dumps(good))
    msg = _err(load_checkpoint, stem, expect_phy=OfdmConfig(cp_len=32))
    assert msg.endswith("its decoder would see symbols it was not trained on")
    assert msg.startswith(f"{stem}: trained for PHY {OfdmConfig().to_dict()}")
    j.write_text(json.dumps({**good, "fingerprint": "00" * 8}))
    assert _err(load_checkpoint, stem).endswith("the files do not belong together or were modified")
    j.write_text(json.dumps(good))
    w = stem.with_suffix(".safetensors")
    w.unlink()
    assert _err(load_checkpoint, stem) == f"checkpoint weights {w} not found"


def test_weights_file_errors_are_exact(ckpt):
    from safetensors.torch import load_file, save_file

    stem, _ = ckpt
    w = stem.with_suffix(".safetensors")
    data = w.read_bytes()
    pickled = (
        f"{w} looks like a pickle / torch.save file; refusing to load it (pickle can run code). "
    )
    pickled += "Checkpoints here are <stem>.safetensors + <stem>.json"
    for head in (b"\x80\x04", b"PK\x03\x04"):
        w.write_bytes(head + data[len(head) :])
        assert _err(load_checkpoint, stem) == pickled
    w.write_bytes(b"\x00" * 7)
    assert _err(load_checkpoint, stem) == f"{w} is truncated (7 bytes)"
    n = int.from_bytes(data[:8], "little")
    for size in (8 + n - 1, 8):  # the header itself cut short by one byte, or entirely
        w.write_bytes(data[:size])
        assert _err(load_checkpoint, stem) == (
            f"{w} is truncated or corrupt: its header claims {n} bytes, the file has {size}"
        )
    w.write_bytes(b"\xff" * 8 + data[8:])  # a length beyond 2**63 is still unsigned
    assert _err(load_checkpoint, stem) == (
        f"{w} is truncated or corrupt: its header claims {2**64 - 1} bytes, the file has {len(data)}"
    )
    # a header with nothing after it is complete: the next check speaks
    w.write_bytes(data)
    tensors = load_file(str(w))
    names = sorted(k for k in tensors if k.startswith("model."))
    save_file({}, str(w))
    assert int.from_bytes(w.read_bytes()[:8], "little") == w.stat().st_size - 8
    want = sorted(k[len("model.") :] for k in names)
    assert _err(load_checkpoint, stem) == (
        f"{w}: weights do not match the model config (missing {want[:5]}, unexpected [])"
    )
    bogus = {f"model.zz{i}": torch.zeros(1) for i in range(7)}
    save_file({**tensors, **bogus}, str(w))
    assert _err(load_checkpoint, stem) == (
        f"{w}: weights do not match the model config "
        f"(missing [], unexpected {sorted(k[6:] for k in bogus)[:5]})"
    )


def test_export_refuses_a_copy_whose_fingerprint_changed(ckpt, tmp_path, monkeypatch):
    import hil.jscc.checkpoint as ck

    stem, _ = ckpt
    real = ck.save_checkpoint

    def broken_save(*a, **k):  # a save that (wrongly) writes another fingerprint
        out = real(*a, **k)
        doc = json.loads(out.read_text())
        out.write_text(json.dumps({**doc, "fingerprint": "ff" * 8}))
        return out

    monkeypatch.setattr(ck, "save_checkpoint", broken_save)
    assert _err(ck.export_checkpoint, stem, tmp_path / "e") == (
        "export changed the fingerprint; refusing"
    )


@pytest.mark.parametrize(
    ("channel", "want"),
    [
        ({"snr_db": [0.0, 20.0]}, (0.0, 20.0)),
        ({"snr_db": [15, -5]}, (-5.0, 15.0)),
        ({"snr_db": 10.0}, None),  # one SNR: nothing to clamp to
        ({"snr_db": [3.0, 3.0]}, None),
        ({"snr_db": ["a", 1]}, None),
        ({}, None),
    ],
)
def test_the_training_snr_range_comes_from_the_document(tmp_path, channel, want):
    m = JsccModel(JsccConfig(hidden=8))
    save_checkpoint(tmp_path / "m", m, OfdmConfig(), {"config": {"channel": channel}})
    assert load_checkpoint(tmp_path / "m")[0].trained_snr_db == want


def test_decode_received_keeps_the_decoders_inputs_in_the_training_range(gen):
    """Above the range, the SNR estimate is held at its top and each symbol's gain at most
    10^(top / 10); inside it nothing changes; without a range, nothing does."""
    m = JsccModel(JsccConfig(hidden=8, use_symbol_gain=True, snr_adaptive=True)).eval()
    shape = (3, 16, 16)
    k = m.cfg.n_symbols(shape)
    s = torch.randn(2, k, dtype=torch.complex64, generator=gen)
    gain = torch.tensor([[1e4] * k, [30.0] * k])
    with torch.inference_mode():
        # the gain matters to this decoder: a clamp that did nothing would not pass below
        assert not torch.equal(
            m.decoder(s, torch.zeros(2), shape, gain), m.decoder(s, torch.zeros(2), shape, gain / 2)
        )
        assert torch.equal(
            m.decode_received(s, torch.tensor([40.0, 5.0]), shape, gain),
            m.decoder(s, torch.tensor([40.0, 5.0]), shape, gain),
        )
        m.trained_snr_db = (0.0, 20.0)
        got = m.decode_received(s, torch.tensor([40.0, 5.0]), shape, gain)
        want = m.decoder(
            s, torch.tensor([20.0, 5.0]), shape, torch.tensor([[100.0] * k, [30.0] * k])
        )
        assert torch.equal(got, want)
        low = m.decode_received(s, torch.tensor([-9.0, 5.0]), shape, gain.clamp(max=100))
        assert torch.equal(low, m.decoder(s, torch.tensor([0.0, 5.0]), shape, gain.clamp(max=100)))
    assert load_checkpoint(Path(__file__).resolve().parents[2] / "hil/assets/checkpoints/jscc_k6")[
        0
    ].trained_snr_db == (0.0, 20.0)
