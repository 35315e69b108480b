"""Settings changed while streaming (hil.radio.control, Radio.update, hil radio --settings):
every request checked before a radio sees it, a refused one changes nothing, an accepted one
changes what the radio does."""

import json
import logging

import numpy as np
import pytest
import zmq

from hil.apps.radio import serve_control
from hil.radio import RadioConfig, RadioError, SimConfig
from hil.radio.config import ConfigError
from hil.radio.control import MAX_REQUEST_BYTES, ControlError, parse_request, settings
from hil.radio.pluto import PlutoRadio
from hil.radio.sim import SimRadio

from .fake_pluto import FakePluto


# ------------------------------------------------------------------ the request
def test_good_requests_parse_to_their_settings():
    assert parse_request(b'{"set": {"tx_gain_db": -20, "lo_hz": 2.41e9}}') == {
        "tx_gain_db": -20.0,
        "lo_hz": 2.41e9,
    }
    assert parse_request({"set": {"rx_gain_db": 71}}) == {"rx_gain_db": 71.0}
    assert parse_request('{"get": true}') is None


@pytest.mark.parametrize(
    "raw, why",
    [
        (b"not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "expected"),
        (b'{"set": {"tx_gain_db": -1}, "get": true}', "expected"),
        (b'{"reset": true}', "expected"),
        (b'{"get": 1}', "get"),
        (b'{"set": {}}', "at least one"),
        (b'{"set": [1]}', "at least one"),
        (b'{"set": {"sample_rate_hz": 1e6}}', "cannot set"),
        (b'{"set": {"tx_gain_db": "-10"}}', "finite number"),
        (b'{"set": {"tx_gain_db": true}}', "finite number"),
        (b'{"set": {"tx_gain_db": NaN}}', "finite number"),
        (b'{"set": {"lo_hz": Infinity}}', "finite number"),
        (b'{"set": {"tx_gain_db": 3}}', "outside -89.75..0"),
        (b'{"set": {"rx_gain_db": -4}}', "outside -3..71"),
        (b'{"set": {"lo_hz": 1e10}}', "outside"),
        (b'{"set": {"lo_hz": ' + b"1" * MAX_REQUEST_BYTES + b"}}", "at most"),
    ],
)
def test_bad_requests_are_refused_with_the_reason(raw, why):
    with pytest.raises(ControlError, match=why):
        parse_request(raw)


# ------------------------------------------------------------------ the sim
def _sim(**kw):
    d = dict(backend="sim", rx_buffer_size=8192, sim=SimConfig(noise_dbfs=-80.0))
    d.update(kw)
    return SimRadio(RadioConfig(**d))


def _burst_power_db(r: SimRadio) -> float:
    r.tx(np.full(4000, 0.25 + 0j, np.complex64))
    x = np.concatenate([r.rx().samples for _ in range(3)])
    on = np.abs(x) > 10 * np.median(np.abs(x))
    return 10 * np.log10(np.mean(np.abs(x[on]) ** 2))


def test_sim_tx_gain_change_scales_what_is_received():
    r = _sim(tx_gain_db=-10.0)
    before = _burst_power_db(r)
    assert r.update(tx_gain_db=-16.0).tx_gain_db == -16.0
    after = _burst_power_db(r)
    assert after - before == pytest.approx(-6.0, abs=0.2)


def test_sim_rx_gain_and_lo_change():
    r = _sim(lo_hz=2.4e9, sim=SimConfig(noise_dbfs=-80.0, ppm=10.0))
    r.update(rx_gain_db=46.0)
    assert r.rx_gain_db == 46.0
    r.update(lo_hz=1.2e9)
    assert r.engine.cfo_hz == pytest.approx(12e3)  # 10 ppm of the new LO
    r.tx(np.full(2000, 0.1 + 0j, np.complex64))
    assert r.last_truth["cfo_hz"] == pytest.approx(12e3)


def test_refused_changes_leave_everything_as_it_was():
    r = _sim(tx_gain_db=-10.0)
    for bad, exc in (
        ({"tx_gain_db": -10.1}, ConfigError),  # not a 0.25 dB step
        ({"lo_hz": 100e6}, ConfigError),  # below 325 MHz without AD9364 mode
        ({"sample_rate_hz": 2e6}, ConfigError),  # not settable while streaming
        ({"tx_gain_db": -20.0, "lo_hz": 1e10}, ConfigError),  # checked whole: neither applied
    ):
        with pytest.raises(exc):
            r.update(**bad)
        assert r.cfg.tx_gain_db == -10.0 and r.cfg.lo_hz == 2.4e9
    agc = _sim(rx_gain_mode="slow_attack")
    with pytest.raises(RadioError, match="AGC"):
        agc.update(rx_gain_db=30.0)


# ------------------------------------------------------------------ the Pluto backend
def test_pluto_update_writes_the_driver_attributes():
    fake = FakePluto()
    r = PlutoRadio(
        RadioConfig(backend="pluto", uri="ip:fake", rx_buffer_size=4096, tx_buffer_size=4096),
        device=fake,
    )
    r.update(tx_gain_db=-30.5, rx_gain_db=20.0, lo_hz=915e6)
    assert (fake.rx_lo, fake.tx_lo) == (915_000_000, 915_000_000)
    assert fake.tx_hardwaregain_chan0 == -30.5 and fake.rx_hardwaregain_chan0 == 20.0
    assert r.cfg.lo_hz == 915e6
    with pytest.raises(ConfigError):
        r.update(tx_gain_db=1.0)
    assert fake.tx_hardwaregain_chan0 == -30.5
    r.close()


# ------------------------------------------------------------------ the radio process's socket
def test_serve_control_answers_each_request():
    ctx = zmq.Context()
    rep, req = ctx.socket(zmq.REP), ctx.socket(zmq.REQ)
    rep.bind("inproc://settings")
    req.connect("inproc://settings")
    r = _sim(tx_gain_db=-10.0)
    log = logging.getLogger("test")
    try:

        def ask(body):
            req.send(body if isinstance(body, bytes) else json.dumps(body).encode())
            assert rep.poll(5000)
            changed = serve_control(rep, r, log)
            assert req.poll(5000)
            return changed, json.loads(req.recv())

        assert not serve_control(rep, r, log)  # nothing waiting: returns at once
        changed, a = ask({"get": True})
        assert not changed and a == {"ok": True, "settings": settings(r.cfg)}
        changed, a = ask({"set": {"tx_gain_db": -20.0}})
        assert changed and a["ok"] and a["settings"]["tx_gain_db"] == -20.0
        assert r.cfg.tx_gain_db == -20.0
        changed, a = ask({"set": {"tx_gain_db": -20.1}})
        assert not changed and not a["ok"] and "0.25" in a["error"]
        changed, a = ask(b"\x00garbage")
        assert not changed and not a["ok"] and "JSON" in a["error"]
        assert r.cfg.tx_gain_db == -20.0
    finally:
        rep.close(0)
        req.close(0)
        ctx.term()
