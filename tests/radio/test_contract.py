"""One contract, every backend: sim, the Pluto backend on a fake pyadi device, and a real Pluto."""

import itertools

import numpy as np
import pytest

from hil.phy import FrameBuilder, FrameReceiver, Header, to_full_scale
from hil.radio import RadioConfig, RadioError, SimConfig
from hil.radio.pluto import PlutoRadio
from hil.radio.sim import SimRadio
from hil.twin import PlutoTwin
from tests import needs

from .fake_pluto import FakePluto

FB = FrameBuilder()
SIM = SimConfig(channel="awgn", path_gain_db=0.0, noise_dbfs=-45.0, seed=3)


def _frame(seq=1):
    rng = np.random.default_rng(seq)
    s = ((rng.normal(size=96) + 1j * rng.normal(size=96)) / np.sqrt(2)).astype(np.complex64)
    h = Header(seq=seq, item_id=seq, fingerprint=b"contract", payload_len=96, shape=(3, 8, 8))
    x, _ = to_full_scale(FB.build_numpy(s, h), rms_dbfs=-12.0)
    return x, h


@pytest.fixture(
    params=["sim", "pluto-fake", "pluto-twin", pytest.param("pluto-hw", marks=pytest.mark.hardware)]
)
def make_radio(request):
    made, twins = [], []

    def factory(**kw):
        base = dict(
            rx_buffer_size=8192,
            tx_buffer_size=8192,
            rx_gain_mode="manual",
            rx_gain_db=40.0,
            tx_gain_db=-10.0,
        )
        if request.param in ("pluto-twin", "pluto-hw"):
            # real time: samples keep coming while the test builds frames or waits for the TX
            # thread; 16 kernel buffers (33 ms at 4 MSps) hold them, as a streaming app would read
            base["kernel_buffers"] = 16
        base.update(kw)
        if request.param == "sim":
            r = SimRadio(RadioConfig(backend="sim", sim=SIM, **base))
        elif request.param == "pluto-fake":
            fake = FakePluto(SIM)
            r = PlutoRadio(RadioConfig(backend="pluto", uri="ip:fake", **base), device=fake)
            r.fake = fake
        elif (
            request.param == "pluto-twin"
        ):  # pyadi-iio and libiio, unmodified, over TCP to the twin
            needs.module("adi", "pip install -e '.[pluto]'")
            twin = PlutoTwin(RadioConfig(sim=SIM), port=0, paced=True).start()
            twins.append(twin)
            r = PlutoRadio(RadioConfig(backend="pluto", uri=twin.uri, **base))
        else:
            uri = request.config.getoption("--pluto-uri")  # the hardware mark skips without one
            r = PlutoRadio(RadioConfig(backend="pluto", uri=uri, loopback=1, **base))
        made.append(r)
        return r

    yield factory
    for r in made:
        r.close()
    for t in twins:
        t.close()


FR = FrameReceiver(FB.cfg)  # built once: its first use must not delay a real-time reader


def _receive(radio, blocks):
    """Read the blocks first, then decode: a real-time radio loses samples that are read late."""
    got = [radio.rx() for _ in range(blocks)]
    fr = FrameReceiver(FB.cfg, receiver=FR.rx)
    events, counters = [], []
    for b in got:
        assert b.samples.dtype == np.complex64 and b.samples.ndim == 1
        counters.append((b.counter, len(b.samples)))
        events += fr.push(b.samples)
    return events, counters


def _skip_buffered(radio):
    """Read past what the kernel buffers held before the last TX change (real-time radios)."""
    for _ in range(radio.cfg.kernel_buffers):
        radio.rx()


def test_rx_blocks_are_contiguous_complex64(make_radio):
    r = make_radio()
    _, counters = _receive(r, 5)
    for (c0, n0), (c1, _) in itertools.pairwise(counters):
        assert c1 == c0 + n0
    assert all(n == 8192 for _, n in counters)


def test_non_cyclic_tx_comes_back_once(make_radio):
    x, h = _frame(7)
    r = make_radio()
    r.tx(x)
    assert r.wait_tx()  # the Pluto backend hands buffers to the driver from a thread
    events, _ = _receive(r, 8 + r.cfg.kernel_buffers)  # a real-time radio delivers it that late
    ok = [e for e in events if e.status == "ok"]
    assert [e.header for e in ok] == [h]


def test_cyclic_tx_repeats_until_close(make_radio):
    x, h = _frame(9)
    r = make_radio()
    gap = np.zeros(3000, np.complex64)
    r.tx(np.concatenate([x, gap]), cyclic=True)
    assert r.tx_active
    _skip_buffered(r)
    events, _ = _receive(r, 6)
    ok = [e for e in events if e.status == "ok"]
    assert len(ok) >= 5 and all(e.header == h for e in ok)
    r.close()
    assert not r.tx_active


def test_cyclic_buffer_can_be_replaced(make_radio):
    x1, _ = _frame(1)
    x2, h2 = _frame(2)
    r = make_radio()
    r.tx(np.concatenate([x1, np.zeros(3000, np.complex64)]), cyclic=True)
    r.tx(np.concatenate([x2, np.zeros(3000, np.complex64)]), cyclic=True)
    _skip_buffered(r)
    events, _ = _receive(r, 6)
    assert {e.header.seq for e in events[-3:] if e.status == "ok"} == {h2.seq}


def test_gain_write_outside_manual_mode_raises(make_radio):
    r = make_radio(rx_gain_mode="slow_attack")
    with pytest.raises(RadioError, match="manual"):
        r.set_rx_gain(10.0)


def test_tx_validates_samples(make_radio):
    r = make_radio()
    with pytest.raises(ValueError, match="full scale"):
        r.tx(np.full(100, 2.0 + 0j, np.complex64))
    with pytest.raises(ValueError, match="NaN"):
        r.tx(np.full(100, np.nan, np.complex64))
    with pytest.raises(ValueError, match="1-D complex"):
        r.tx(np.zeros(100, np.float32))


def test_close_leaves_transmitter_silent(make_radio):
    r = make_radio()
    x, _ = _frame(3)
    r.tx(x, cyclic=True)
    r.close()
    assert not r.tx_active
    if hasattr(r, "fake"):
        assert not r.fake.transmitting and r.fake.destroyed_tx >= 1


def test_wait_tx_on_a_closed_radio_is_an_error(make_radio):
    r = make_radio()
    r.tx(_frame(3)[0])
    assert r.wait_tx(10.0)
    r.close()
    with pytest.raises(RadioError, match="closed radio"):
        r.wait_tx(0.1)
