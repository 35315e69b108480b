"""Changing a radio's settings while it streams: what may change and how a request is checked.

A request is one small JSON object, ``{"set": {"tx_gain_db": -20.0, "lo_hz": 2.41e9}}`` or
``{"get": true}``, sent to ``hil radio --settings EP`` (a REP socket) by the dashboard (started
with ``--control EP``) or by a script. The answer is ``{"ok": true, "settings": {...}}`` with the
settings in force, or ``{"ok": false, "error": "..."}`` with nothing changed.

Two checks, both before anything reaches a radio: ``parse_request`` here (the shape, the names,
finite numbers within the AD9363's absolute ranges), which the dashboard runs too so a bad value
never leaves the page's server; then the radio's own configuration check
(``RadioConfig.replace``: the LO range of its firmware mode, the TX attenuation step, the gain
mode). Torch-free, like the radio process.
"""

from __future__ import annotations

import json
import math

from .ad9363 import LO_MAX_AD9364_HZ, LO_MIN_AD9364_HZ, RX_GAIN_DB, TX_GAIN_DB

MAX_REQUEST_BYTES = 4096
# what may change while streaming, with the widest range any Pluto accepts (the radio's own
# configuration narrows it: the LO range without AD9364 mode, the 0.25 dB TX step)
SETTABLE: dict[str, tuple[float, float]] = {
    "rx_gain_db": RX_GAIN_DB,
    "tx_gain_db": TX_GAIN_DB,
    "lo_hz": (LO_MIN_AD9364_HZ, LO_MAX_AD9364_HZ),
}


class ControlError(ValueError):
    """A control request that is refused; the message says why, and nothing was changed."""


def parse_request(raw: bytes | str | dict) -> dict[str, float] | None:
    """The settings a request asks for (``None`` for ``{"get": true}``), or ControlError."""
    if isinstance(raw, (bytes, str)):
        if len(raw) > MAX_REQUEST_BYTES:
            raise ControlError(f"request of {len(raw)} bytes: at most {MAX_REQUEST_BYTES}")
        try:
            raw = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ControlError(f"not JSON: {exc}") from None
    if not isinstance(raw, dict) or len(raw) != 1 or not ({"set", "get"} & set(raw)):
        raise ControlError('expected {"set": {name: value, ...}} or {"get": true}')
    if "get" in raw:
        if raw["get"] is not True:
            raise ControlError('expected {"get": true}')
        return None
    changes = raw["set"]
    if not isinstance(changes, dict) or not changes:
        raise ControlError('"set" needs an object with at least one setting')
    unknown = sorted(set(changes) - set(SETTABLE))
    if unknown:
        raise ControlError(f"cannot set {unknown} while streaming; settable: {sorted(SETTABLE)}")
    out = {}
    for name, v in changes.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ControlError(f"{name}={v!r}: expected a finite number")
        lo, hi = SETTABLE[name]
        if not lo <= v <= hi:
            raise ControlError(f"{name}={v:g} is outside {lo:g}..{hi:g}")
        out[name] = float(v)
    return out


def settings(cfg) -> dict[str, float | str]:
    """The settable values in force (and the gain mode, which decides whether RX gain is ours)."""
    return {
        **{name: float(getattr(cfg, name)) for name in SETTABLE},
        "rx_gain_mode": cfg.rx_gain_mode,
    }
