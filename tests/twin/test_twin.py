"""The Pluto twin, driven by the unmodified client stack: libiio's tools, pyadi-iio, and raw sockets
for what a well-behaved client never sends."""

import errno
import socket
import subprocess
import time

import numpy as np
import pytest

from hil.radio import RadioConfig, SimConfig
from hil.twin import PlutoTwin
from tests import needs

CLEAN = SimConfig(channel="awgn", noise_dbfs=-60.0, path_gain_db=0.0, seed=1)
needs_tools = needs.tools(
    "iio_info", "iio_attr", "iio_readdev", "iio_writedev", install="apt-get install libiio-utils"
)


@pytest.fixture
def twin():
    with PlutoTwin(RadioConfig(sim=CLEAN), port=0) as t:
        yield t


def _run(*args, timeout=20, **kw):
    return subprocess.run([str(a) for a in args], capture_output=True, timeout=timeout, **kw)


# ------------------------------------------------------------------------ libiio's tools
@needs_tools
def test_iio_info_lists_the_plutos_devices(twin):
    errors_before = twin.stats["errors"]
    r = _run("iio_info", "-u", twin.uri)
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr
    for dev in ("ad9361-phy", "xadc", "cf-ad9361-dds-core-lpc", "cf-ad9361-lpc"):
        assert dev in out
    assert out.count("(buffer capable)") == 2
    assert "hw_model: Analog Devices PlutoSDR Rev.C (Z7010-AD9363A)" in out
    assert "hardwaregain value: 40.000000 dB" in out  # the driver's format
    assert "voltage0:  (input, index: 0, format: le:S12/16>>0)" in out
    # GETTRIG answers -ENOENT for each of the four devices (a Pluto has no triggers), and
    # nothing else iio_info asked for was refused
    assert out.count("No trigger on this device") == 4
    assert twin.stats["errors"] - errors_before == 4


@needs_tools
def test_iio_attr_reads_and_writes_the_lo(twin):
    lo = ("-c", "ad9361-phy", "altvoltage0", "frequency")
    assert _run("iio_attr", "-u", twin.uri, *lo).stdout.strip() == b"2400000000"
    assert _run("iio_attr", "-u", twin.uri, "-o", *lo, "915000000").returncode == 0
    assert _run("iio_attr", "-u", twin.uri, *lo).stdout.strip() == b"915000000"
    assert twin.engine.cfg.lo_hz == 915e6  # the engine follows
    bad = _run("iio_attr", "-u", twin.uri, "-o", *lo, "10")  # below the AD9363's 325 MHz
    assert bad.returncode != 0 and b"Invalid argument (22)" in bad.stdout + bad.stderr
    assert _run("iio_attr", "-u", twin.uri, *lo).stdout.strip() == b"915000000"


@needs_tools
def test_iio_readdev_reads_12_bit_samples(twin):
    r = _run("iio_readdev", "-u", twin.uri, "-b", "4096", "-s", "40960", "cf-ad9361-lpc")
    assert r.returncode == 0, r.stderr
    iq = np.frombuffer(r.stdout, "<i2").reshape(-1, 2)
    assert iq.shape == (40960, 2)
    assert iq.min() >= -2048 and iq.max() <= 2047
    # after the stale kernel buffers: the noise floor, -60 dBFS at the reference gain of 40 dB
    z = iq[-8192:, 0] + 1j * iq[-8192:, 1]
    rms_dbfs = 20 * np.log10(np.sqrt(np.mean(np.abs(z) ** 2)) / 2048)
    assert -63 < rms_dbfs < -57


def _tone(n=1024, period=64, amp=8000):
    w = np.exp(2j * np.pi * np.arange(n) / period) * amp
    iq = np.empty((n, 2), "<i2")
    iq[:, 0], iq[:, 1] = np.round(w.real), np.round(w.imag)
    return iq


@needs_tools
@pytest.mark.parametrize("loopback", [1, 0])
def test_iio_writedev_cyclic_waveform_comes_back_in_iio_readdev(twin, loopback):
    assert (
        _run("iio_attr", "-u", twin.uri, "-D", "ad9361-phy", "loopback", loopback).returncode == 0
    )
    iq = _tone()
    w = subprocess.Popen(
        ["iio_writedev", "-u", twin.uri, "-c", "-b", "1024", "cf-ad9361-dds-core-lpc"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        w.stdin.write(iq.tobytes())
        w.stdin.close()
        deadline = time.monotonic() + 10
        while twin.engine.cyclic is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert twin.engine.cyclic is not None, "the cyclic buffer never arrived"
        # past the 4 stale kernel buffers a fresh RX buffer starts with
        r = _run("iio_readdev", "-u", twin.uri, "-b", "8192", "-s", "49152", "cf-ad9361-lpc")
        got = np.frombuffer(r.stdout, "<i2").reshape(-1, 2)[-4096:].astype(float)
        z = got[:, 0] + 1j * got[:, 1]
        ref = (iq[:, 0] + 1j * iq[:, 1]).astype(complex)
        if loopback == 1:  # digital loopback: the DAC's 12 bits, exactly, repeating
            codes = (iq.astype(np.int32) >> 4).astype(float)
            ref12 = codes[:, 0] + 1j * codes[:, 1]
            k = int(
                np.argmin([np.abs(z[:64] - np.roll(ref12, -s)[:64]).sum() for s in range(1024)])
            )
            assert np.array_equal(z, np.tile(np.roll(ref12, -k), 4))
        else:  # over the simulated air: the tone, scaled, with noise
            seg = z[:1024]
            c = abs(
                np.vdot(
                    seg,
                    np.roll(
                        ref,
                        -int(
                            np.argmax(
                                np.abs(np.fft.ifft(np.fft.fft(seg) * np.conj(np.fft.fft(ref))))
                            )
                        ),
                    ),
                )
            )
            assert c / (np.linalg.norm(seg) * np.linalg.norm(ref)) > 0.95
    finally:
        w.terminate()
        w.wait(10)
    deadline = time.monotonic() + 5
    while twin.engine.cyclic is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert twin.engine.cyclic is None  # the writer went away: the transmitter stopped


# ------------------------------------------------------------------------ pyadi-iio
@pytest.fixture
def adi():
    return needs.module("adi", "pip install -e '.[pluto]'")


def test_pyadi_sets_and_reads_every_property_the_backend_uses(twin, adi):
    sdr = adi.Pluto(uri=twin.uri)
    sdr.sample_rate = 1_000_000  # below 2.083 MSps: pyadi loads a FIR and enables it first
    assert sdr.sample_rate == 1_000_000
    assert sdr._get_iio_attr("out", "voltage_filter_fir_en", False) == 1
    assert sdr._get_iio_dev_attr_str("filter_fir_config") == "FIR Rx: 128,4 Tx: 128,4"
    sdr.sample_rate = 4_000_000
    assert sdr.sample_rate == 4_000_000 and twin.engine.cfg.sample_rate_hz == 4e6
    sdr.rx_lo, sdr.tx_lo = 915_000_000, 920_000_000
    assert (sdr.rx_lo, sdr.tx_lo) == (915_000_000, 920_000_000)
    assert twin.engine.lo_offset_hz == 5e6  # TX 5 MHz away: outside a 4 MSps receiver
    sdr.tx_lo = 915_000_000
    sdr.rx_rf_bandwidth, sdr.tx_rf_bandwidth = 3_000_000, 3_500_000
    assert (sdr.rx_rf_bandwidth, sdr.tx_rf_bandwidth) == (3_000_000, 3_500_000)
    sdr.gain_control_mode_chan0 = "manual"
    sdr.rx_hardwaregain_chan0 = 25
    assert sdr.rx_hardwaregain_chan0 == 25 and twin.engine.gain_db == 25
    sdr.gain_control_mode_chan0 = "slow_attack"
    sdr.rx_hardwaregain_chan0 = 60  # pyadi does not even write it outside manual mode
    assert twin.engine.gain_db == 25
    # written directly, as iio_attr would: accepted and ignored, like the driver
    sdr._set_iio_attr("voltage0", "hardwaregain", False, "60")
    assert twin.state.rx_gain == 25
    sdr.gain_control_mode_chan0 = "manual"
    sdr.tx_hardwaregain_chan0 = -20.3
    assert sdr.tx_hardwaregain_chan0 == -20.25  # 0.25 dB steps
    sdr.loopback = 1
    assert sdr.loopback == 1 and twin.engine.loopback == 1
    sdr.loopback = 0
    sdr.rx_buffer_size = 2000
    x = sdr.rx()
    assert x.dtype == np.complex128 and x.shape == (2000,)
    assert np.abs(x.real).max() <= 2048 and np.abs(x.imag).max() <= 2048
    sdr.tx(np.full(512, 1000 + 1000j))  # non-cyclic
    sdr.tx(np.full(512, 1000 + 1000j))
    sdr.tx_destroy_buffer()
    sdr.tx_cyclic_buffer = True
    sdr.tx(np.full(256, 2000 + 0j))
    assert twin.engine.cyclic is not None
    sdr.tx_destroy_buffer()
    time.sleep(0.1)
    assert twin.engine.cyclic is None
    sdr.rx_destroy_buffer()
    assert twin.stats["tx_samples"] == 1280


def test_pyadi_sees_the_drivers_errors(twin, adi):
    sdr = adi.Pluto(uri=twin.uri)
    for prop, value in (
        ("rx_lo", 10),
        ("rx_rf_bandwidth", 60_000_000),
        ("tx_hardwaregain_chan0", 5.0),
    ):
        with pytest.raises(OSError) as exc:
            setattr(sdr, prop, value)
        assert exc.value.errno == errno.EINVAL
    with pytest.raises(OSError):
        sdr._set_iio_attr("voltage0", "gain_control_mode", False, "turbo")
    with pytest.raises(OSError):  # below 2.083 MSps without the FIR
        sdr._set_iio_attr("voltage0", "sampling_frequency", False, 1_000_000)
    assert sdr.rx_lo == 2_400_000_000


def test_ensm_sleep_silences_the_radio(twin, adi):
    sdr = adi.Pluto(uri=twin.uri)
    sdr.loopback = 1
    sdr._set_iio_dev_attr_str("ensm_mode", "sleep")
    sdr.rx_buffer_size = 4096
    for _ in range(4):
        sdr.rx()  # stale buffers
    sdr.tx_cyclic_buffer = True
    sdr.tx(np.full(1024, 4000 + 0j))
    assert not np.any(sdr.rx())
    sdr._set_iio_dev_attr_str("ensm_mode", "fdd")
    sdr.tx_destroy_buffer()
    sdr.tx(np.full(1024, 4000 + 0j))
    assert np.abs(sdr.rx()).max() == 250  # 4000 >> 4 through the digital loopback
    sdr.tx_destroy_buffer()
    sdr.rx_destroy_buffer()


# ------------------------------------------------------------------------ bad input
class Raw:
    """A bare protocol client."""

    def __init__(self, uri):
        host, port = uri.removeprefix("ip:").rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=5)
        self.f = self.s.makefile("rb")

    def cmd(self, line: bytes) -> int:
        self.s.sendall(line + b"\r\n")
        return int(self.f.readline())

    def close(self):
        self.f.close()
        self.s.close()


def test_malformed_requests_get_the_servers_error_codes(twin):
    c = Raw(twin.uri)
    E = errno
    assert c.cmd(b"FROBNICATE") == -E.EINVAL
    assert c.cmd(b"BINARY") == -E.EINVAL  # libiio 1.x probe: stay on the text protocol
    assert c.cmd(b"ZPRINT") == -E.EINVAL
    assert c.cmd(b"READ iio:device9 frequency") == -E.ENODEV
    assert c.cmd(b"READ ad9361-phy INPUT voltage7 hardwaregain") == -E.ENXIO
    assert c.cmd(b"READ ad9361-phy INPUT voltage0 nonsense") == -E.ENOENT
    assert c.cmd(b"READ ad9361-phy INPUT") == -E.EINVAL
    assert c.cmd(b"OPEN iio:device3 1024 0003") == -E.EINVAL  # mask: 8 hex digits per word
    assert c.cmd(b"OPEN iio:device3 1024 0000000g") == -E.EINVAL
    assert c.cmd(b"OPEN iio:device3 1024 00000004") == -E.EINVAL  # no such scan channel
    assert c.cmd(b"OPEN iio:device3 1024 00000000") == -E.EINVAL
    assert c.cmd(b"OPEN iio:device3 0 00000003") == -E.EINVAL
    assert c.cmd(b"OPEN iio:device3 99999999999999 00000003") == -E.ENOMEM
    assert c.cmd(b"OPEN iio:device3 -5 00000003") == -E.EINVAL
    assert c.cmd(b"OPEN iio:device3 1024 00000003 CYCLIC") == -E.EINVAL  # RX is never cyclic
    assert c.cmd(b"OPEN ad9361-phy 1024 00000003") == -E.EINVAL  # no buffer on the phy
    assert c.cmd(b"READBUF iio:device3 4096") == -E.EBADF  # not opened
    assert c.cmd(b"CLOSE iio:device3") == -E.ENXIO
    assert c.cmd(b"OPEN iio:device3 1024 00000003") == 0
    c2 = Raw(twin.uri)
    assert c2.cmd(b"OPEN iio:device3 1024 00000003") == -E.EBUSY
    assert c2.cmd(b"READBUF iio:device3 4096") == -E.EBADF  # another connection's buffer
    c2.close()
    assert c.cmd(b"READBUF iio:device3 4097") == -E.EINVAL  # not whole samples
    assert c.cmd(b"READBUF iio:device3 8192") == -E.EINVAL  # more than the buffer
    assert c.cmd(b"WRITEBUF iio:device3 4096") == -E.EINVAL  # an input device
    assert c.cmd(b"SET iio:device3 BUFFERS_COUNT 0") == -E.EINVAL
    assert c.cmd(b"GETTRIG iio:device3") == -E.ENOENT
    assert c.cmd(b"CLOSE iio:device3") == 0
    c.s.sendall(b"WRITE ad9361-phy tx_path_rates 5\r\n1234\0")  # read-only attribute
    assert int(c.f.readline()) == -E.EACCES
    assert c.cmd(b"TIMEOUT 2500") == 0  # still in step after the refused write's payload
    c.s.sendall(b"version\r\n")  # keywords in lower case too
    assert c.f.readline() == b"0.24.v0.24  \n"
    c.close()


def test_broken_clients_never_wedge_the_twin(twin):
    rng = np.random.default_rng(0)
    for _ in range(200):  # random garbage lines, some binary, some huge
        c = Raw(twin.uri)
        n = int(rng.integers(1, 6000))
        c.s.sendall(bytes(rng.integers(0, 256, n, dtype=np.uint8)) + b"\n")
        c.close()
    c = Raw(twin.uri)  # a line past 4 KiB closes that connection only
    c.s.sendall(b"A" * 10000 + b"\r\n")
    assert int(c.f.readline()) == -errno.EINVAL
    assert c.f.readline() == b""
    c.close()
    c = Raw(twin.uri)  # an absurd attribute write: refused, connection dropped
    c.s.sendall(b"WRITE ad9361-phy filter_fir_config 99999999999\r\n")
    assert int(c.f.readline()) == -errno.EINVAL
    c.close()
    c = Raw(twin.uri)  # gone in the middle of a WRITEBUF
    assert c.cmd(b"OPEN iio:device2 4096 00000003 CYCLIC") == 0
    c.s.sendall(b"WRITEBUF iio:device2 16384\r\n")
    assert int(c.f.readline()) == 0
    c.s.sendall(b"\0" * 1000)
    c.close()
    c = Raw(twin.uri)  # gone in the middle of a READBUF
    assert c.cmd(b"OPEN iio:device3 100000 00000003") == 0
    c.s.sendall(b"READBUF iio:device3 400000\r\n")
    c.close()
    time.sleep(0.3)
    assert twin.buffers == {}  # both buffers released
    c = Raw(twin.uri)  # and the next client is served as usual
    c.s.sendall(b"VERSION\r\n")
    assert c.f.readline() == b"0.24.v0.24  \n"
    c.s.sendall(b"PRINT\r\n")
    n = int(c.f.readline())
    assert c.f.read(n).endswith(b"</context>") and c.f.readline() == b"\n"
    c.close()


# ------------------------------------------------------------------------ the whole link
@pytest.mark.slow
def test_link_through_the_twin_meets_the_sim_links_threshold(tmp_path, adi):
    """tx -> radio process (pyadi-iio, libiio) -> twin -> channel -> twin -> libiio -> rx.

    The same items, model and channel as the sim link test (tests/apps), paced in real time
    as a Pluto runs; the same PSNR threshold (25.5 dB). The twin, the radio and the receiver
    all run at 4 MSps on this machine's cores: when they fall behind, the twin overflows as a
    Pluto would. Those frames must be reported lost (the stream flags the overflow), never
    mis-decoded and never lost silently. How many frames real time costs on a given machine is
    a benchmark's figure (scripts/bench_twin_link.py), not this test's.
    """
    import json
    import sys

    from hil.apps.twin import start_process

    prof = "firmware_configs/twin_two_pluto.toml"
    log = open(tmp_path / "twin.log", "w")
    twin, uri = start_process(prof, paced=True, log=log)
    try:
        r = subprocess.run(
            [
                *(sys.executable, "-m", "hil.cli", "link", "--radio", "pluto", "--profile", prof),
                *("--uri", uri, "--count", "48", "--pace", "--gap", "40000"),
                *("--out", str(tmp_path / "report"), "--json"),
            ],
            capture_output=True,
            timeout=300,
        )
    finally:
        twin.terminate()
        twin.wait(20)
        log.close()
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    s = json.loads(r.stdout)
    c = s["counts"]
    assert c["sent"] == 48 and c["balanced"] and c["refused"] == 0 and c["duplicates"] == 0
    assert c["unexpected"] == 0 and c["header_failed"] == 0
    st = s["stream"]
    if c["decoded"] < 48:  # lost to a late read: the radio said so
        assert st["overflow_flags"] + st["drop_flags"] > 0 and st["sample_gaps"] > 0, (c, st)
    assert c["decoded"] >= 12, c  # a working chain under load, not a dead one
    assert s["psnr_db_mean"] >= 25.5
    assert 10 < s["snr_est_db_mean"] < 18
    assert abs(s["cfo_hz_mean"] - 24e3) < 3.5e3


def test_hil_twin_command_serves_and_refuses_remote_binds():
    import sys

    r = _run(
        sys.executable, "-m", "hil.cli", "twin", "--port", "0", "--max-seconds", "0.5", timeout=60
    )
    assert r.returncode == 0 and b"Pluto twin at ip:127.0.0.1:" in r.stdout
    r = _run(
        sys.executable, "-m", "hil.cli", "twin", "--host", "0.0.0.0", "--port", "0", timeout=60
    )
    assert r.returncode == 2 and b"refusing to bind" in r.stderr


def test_attribute_writes_mid_stream(twin, adi):
    """Control-connection writes while the RX buffer streams on its own connection."""
    import threading

    sdr = adi.Pluto(uri=twin.uri)
    sdr.gain_control_mode_chan0 = "manual"
    sdr.rx_buffer_size = 8192
    got, stop = [], threading.Event()

    def reader():
        while not stop.is_set():
            got.append(float(np.sqrt(np.mean(np.abs(sdr.rx()) ** 2))))

    t = threading.Thread(target=reader)
    t.start()
    try:
        time.sleep(0.3)
        ctl = adi.Pluto(uri=twin.uri)  # a second client, as iio_attr would be
        ctl.rx_hardwaregain_chan0 = 10
        n_before = len(got)
        time.sleep(0.3)
        ctl.rx_hardwaregain_chan0 = 70
        ctl.rx_lo = 1_000_000_000
        time.sleep(0.3)
    finally:
        stop.set()
        t.join(10)
    sdr.rx_destroy_buffer()
    assert len(got) > n_before > 4  # the stream never stopped
    assert twin.engine.gain_db == 70 and twin.engine.cfg.lo_hz == 1e9
    # the noise floor followed: -60 dBFS at the reference 40 dB, so -30 dBFS at 70 dB
    assert abs(20 * np.log10(got[-1] / 2048) - -30.0) < 1.5


@needs_tools
def test_dds_tone_is_radiated_until_a_tx_buffer_takes_the_dac(twin):
    u = twin.uri
    assert _run("iio_attr", "-u", u, "-D", "ad9361-phy", "loopback", "1").returncode == 0
    for ch in ("altvoltage0", "altvoltage2"):  # TX1_I_F1 and TX1_Q_F1: one complex tone
        for attr, value in (("frequency", "500000"), ("scale", "0.25"), ("raw", "1")):
            r = _run("iio_attr", "-u", u, "-o", "-c", "cf-ad9361-dds-core-lpc", ch, attr, value)
            assert r.returncode == 0, r.stdout + r.stderr
    r = _run("iio_readdev", "-u", u, "-b", "8192", "-s", "49152", "cf-ad9361-lpc")
    iq = np.frombuffer(r.stdout, "<i2").reshape(-1, 2)[-8192:].astype(float)
    z = iq[:, 0] + 1j * iq[:, 1]
    spec = np.abs(np.fft.fft(z))
    f = np.fft.fftfreq(len(z), 1 / twin.state.sample_rate)[np.argmax(spec)]
    assert abs(f - 500e3) < 1e3  # +500 kHz: I = sin(wt + 90 deg), Q = sin(wt)
    assert abs(np.sqrt(np.mean(np.abs(z) ** 2)) - 0.25 * 2048) < 10  # scale 0.25 of full scale
    sdr = needs.module("adi", "pip install -e '.[pluto]'").Pluto(uri=u)
    sdr.tx_cyclic_buffer = True
    sdr.tx(np.zeros(1024, complex))  # pyadi turns the DDS off and the DMA takes the DAC
    assert twin.engine.tone is None
    sdr.tx_destroy_buffer()


def test_pluto_backend_counts_what_the_cores_status_registers_flag(adi):
    """PlutoRadio reads and clears the HDL's sticky overflow/underflow bits over the network
    (direct_reg_access): a late RX read sets the ADC core's bit in the (paced) twin, a set DAC
    bit is counted, and each is cleared once counted."""
    from hil.radio.ad9363 import ADC_STATUS_OVF, DAC_STATUS_UNF
    from hil.radio.pluto import PlutoRadio

    with PlutoTwin(RadioConfig(sim=CLEAN), port=0, paced=True) as twin:
        cfg = RadioConfig(backend="pluto", uri=twin.uri, rx_buffer_size=8192, tx_buffer_size=8192)
        with PlutoRadio(cfg) as r:
            assert r.poll_hw_status() == {"hw_overflows": 0, "underflows": 0}
            r.rx()
            time.sleep(0.3)  # far more than four kernel buffers of 8192 at 4 MSps: samples lost
            r.rx()
            assert twin.state.core_status["adc"] & ADC_STATUS_OVF
            twin.state.core_status["dac"] |= DAC_STATUS_UNF
            assert r.poll_hw_status() == {"hw_overflows": 1, "underflows": 1}
            assert twin.state.core_status == {"adc": 0, "dac": 0}  # cleared by the write-1
            assert r.poll_hw_status() == {"hw_overflows": 1, "underflows": 1}  # nothing new
