"""Checkpoints: weights in safetensors beside a JSON document. Never pickle.

``<stem>.safetensors`` holds the tensors (model weights, and for resuming the
optimiser state and RNG states); ``<stem>.json`` holds the format tag, the
model, PHY, channel and training configuration, the data set, the training
history and the fingerprint. A model is rebuilt from its JSON config, never
from weight shapes, and the weights must then match that model exactly.

The fingerprint (8 bytes, hex in JSON, carried in every frame header) is the
start of SHA-256 over the canonical JSON of the model and PHY configuration
and every model tensor (name, dtype, shape, bytes) in name order. A receiver
refuses a payload whose fingerprint is not its decoder's.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..phy.numerology import OfdmConfig
from .model import JsccConfig, JsccModel

FORMAT = "hil-jscc-checkpoint/1"
MODEL_PREFIX = "model."


class CheckpointError(ValueError):
    """A checkpoint that cannot be used, with the reason."""


def stem_of(path: str | os.PathLike) -> Path:
    p = Path(path)
    if p.suffix in (".json", ".safetensors"):
        return p.with_suffix("")
    return p


def fingerprint(
    model_cfg: JsccConfig, phy_cfg: OfdmConfig, state: dict[str, torch.Tensor]
) -> bytes:
    """The 8-byte fingerprint of a model configuration, PHY and weights.

    state: name -> tensor of any shape [...] and dtype (the model's float32 weights and
    buffers; bfloat16 is hashed through its float32 values), any device.
    """
    h = hashlib.sha256()
    h.update(
        json.dumps(
            {"model": model_cfg.to_dict(), "phy": phy_cfg.to_dict()}, sort_keys=True
        ).encode()
    )
    for name in sorted(state):
        t = state[name].detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.float().numpy().tobytes())
    return h.digest()[:8]


def model_fingerprint(model: JsccModel, phy_cfg: OfdmConfig) -> bytes:
    return fingerprint(model.cfg, phy_cfg, model.state_dict())


def save_checkpoint(
    path: str | os.PathLike,
    model: JsccModel,
    phy_cfg: OfdmConfig,
    meta: dict[str, Any],
    extra: dict[str, torch.Tensor] | None = None,
) -> Path:
    """Write <stem>.safetensors and <stem>.json; returns the JSON path.

    ``meta`` carries channel/training config, data set and history (JSON-serialisable).
    ``extra`` tensors (optimiser state, RNG states: any shape [...], any dtype safetensors
    stores, e.g. float32 moments, uint8 RNG states, int64 steps) are stored under their own
    names, moved to the CPU.
    """
    stem = stem_of(path)
    stem.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
    tensors = {MODEL_PREFIX + k: v for k, v in state.items()}
    for k, v in (extra or {}).items():
        if k.startswith(MODEL_PREFIX):
            raise ValueError(f"extra tensor name {k!r} collides with the model prefix")
        tensors[k] = v.detach().to("cpu").contiguous()
    fp = fingerprint(model.cfg, phy_cfg, state)
    doc = {
        "format": FORMAT,
        "fingerprint": fp.hex(),
        "model": model.cfg.to_dict(),
        "phy": phy_cfg.to_dict(),
        **meta,
    }
    tmp_w = stem.with_suffix(".safetensors.tmp")
    tmp_j = stem.with_suffix(".json.tmp")
    save_file(tensors, str(tmp_w), metadata={"format": FORMAT, "fingerprint": fp.hex()})
    tmp_j.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
    os.replace(tmp_w, stem.with_suffix(".safetensors"))
    os.replace(tmp_j, stem.with_suffix(".json"))
    return stem.with_suffix(".json")


def _refuse_pickle(p: Path) -> None:
    with open(p, "rb") as fh:
        head = fh.read(8)
    if head[:1] == b"\x80" or head[:4] == b"PK\x03\x04":
        raise CheckpointError(
            f"{p} looks like a pickle / torch.save file; refusing to load it (pickle can run code). "
            "Checkpoints here are <stem>.safetensors + <stem>.json"
        )
    if len(head) < 8:
        raise CheckpointError(f"{p} is truncated ({len(head)} bytes)")
    (n,) = struct.unpack("<Q", head)
    if n > p.stat().st_size - 8:
        raise CheckpointError(
            f"{p} is truncated or corrupt: its header claims {n} bytes, the file has {p.stat().st_size}"
        )


def read_meta(path: str | os.PathLike) -> dict:
    stem = stem_of(path)
    j = stem.with_suffix(".json")
    if not j.is_file():
        raise CheckpointError(f"checkpoint document {j} not found")
    try:
        doc = json.loads(j.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{j} is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CheckpointError(
            f"{j}: format {doc.get('format') if isinstance(doc, dict) else None!r}, expected {FORMAT!r}"
        )
    for key in ("fingerprint", "model", "phy"):
        if key not in doc:
            raise CheckpointError(f"{j}: missing {key!r}")
    return doc


def load_checkpoint(
    path: str | os.PathLike,
    expect_phy: OfdmConfig | None = None,
    device: str | torch.device = "cpu",
) -> tuple[JsccModel, OfdmConfig, dict, dict[str, torch.Tensor]]:
    """Rebuild the model from the JSON config, load and verify its weights.

    Returns (model in eval mode, the checkpoint's PHY config, the JSON document,
    the extra tensors: name -> CPU tensor [...] of the dtype it was saved with, e.g. float32,
    uint8, int64). Raises CheckpointError on anything wrong: missing or
    corrupt files, pickle files, weights that do not match the config, a
    fingerprint mismatch, or a PHY configuration other than ``expect_phy``.
    """
    stem = stem_of(path)
    doc = read_meta(stem)
    try:
        mcfg = JsccConfig.from_dict(doc["model"])
        pcfg = OfdmConfig.from_dict(doc["phy"])
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{stem}.json: bad configuration: {exc}") from exc
    if expect_phy is not None and pcfg != expect_phy:
        raise CheckpointError(
            f"{stem}: trained for PHY {pcfg.to_dict()}, but the PHY in use is {expect_phy.to_dict()}; "
            "its decoder would see symbols it was not trained on"
        )
    w = stem.with_suffix(".safetensors")
    if not w.is_file():
        raise CheckpointError(f"checkpoint weights {w} not found")
    _refuse_pickle(w)
    try:
        tensors = load_file(str(w))
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"{w} is corrupt: {exc}") from exc
    state = {k[len(MODEL_PREFIX) :]: v for k, v in tensors.items() if k.startswith(MODEL_PREFIX)}
    extra = {k: v for k, v in tensors.items() if not k.startswith(MODEL_PREFIX)}
    model = JsccModel(mcfg)
    want = model.state_dict()
    missing, unexpected = sorted(set(want) - set(state)), sorted(set(state) - set(want))
    if missing or unexpected:
        raise CheckpointError(
            f"{w}: weights do not match the model config (missing {missing[:5]}, unexpected {unexpected[:5]})"
        )
    for k, v in state.items():
        if v.shape != want[k].shape or v.dtype != want[k].dtype:
            raise CheckpointError(
                f"{w}: tensor {k} is {tuple(v.shape)} {v.dtype}, the config builds {tuple(want[k].shape)} {want[k].dtype}"
            )
    fp = fingerprint(mcfg, pcfg, state).hex()
    if fp != doc["fingerprint"]:
        raise CheckpointError(
            f"{stem}: fingerprint mismatch (document says {doc['fingerprint']}, weights and config give {fp}); "
            "the files do not belong together or were modified"
        )
    model.load_state_dict(state)
    model.trained_snr_db = _trained_snr(doc)
    return model.to(device).eval(), pcfg, doc, extra


def _trained_snr(doc: dict) -> tuple[float, float] | None:
    """The training configuration's SNR range, (lo, hi) dB, or None where it has none (a
    fixed SNR, or an older document)."""
    snr = ((doc.get("config") or {}).get("channel") or {}).get("snr_db")
    if (
        isinstance(snr, (list, tuple))
        and len(snr) == 2
        and all(isinstance(v, (int, float)) for v in snr)
    ):
        lo, hi = float(min(snr)), float(max(snr))
        return (lo, hi) if lo < hi else None
    return None


def export_checkpoint(
    src: str | os.PathLike, dst: str | os.PathLike, sample_rate_hz: float | None = None
) -> Path:
    """Copy a checkpoint without its optimiser and RNG state (what ships with the link).

    sample_rate_hz: None, or the copy's PHY at another sample rate (a radio that runs at
    20 MSps): the same weights and numerology, so the same symbols; the PHY config is the
    one source of the rate, so the copy is another model to the link (its own
    fingerprint), and its document says where it came from (``retargeted_from``). The
    model was trained at the source's rate: what a channel does per sample (multipath in
    samples, CFO and phase noise per symbol) scales with the rate."""
    model, phy, doc, _ = load_checkpoint(src)
    meta = {k: v for k, v in doc.items() if k not in ("format", "fingerprint", "model", "phy")}
    meta["exported_from"] = str(stem_of(src).name)
    same_phy = sample_rate_hz is None or float(sample_rate_hz) == phy.sample_rate_hz
    if not same_phy:
        meta["retargeted_from"] = {
            "fingerprint": doc["fingerprint"],
            "sample_rate_hz": phy.sample_rate_hz,
        }
        phy = OfdmConfig.from_dict({**phy.to_dict(), "sample_rate_hz": float(sample_rate_hz)})
    out = save_checkpoint(dst, model, phy, meta)
    if same_phy and read_meta(out)["fingerprint"] != doc["fingerprint"]:
        raise CheckpointError("export changed the fingerprint; refusing")
    return out
