import pytest

from hil.radio import ConfigError, RadioConfig, SimConfig, load_profile


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"lo_hz": 5.8e9}, r"outside 325 MHz-3800 MHz.*AD9364"),
        ({"lo_hz": 100e6, "ad9364_mode": True}, None),
        ({"lo_hz": 6.5e9, "ad9364_mode": True}, "outside 70 MHz-6000 MHz"),
        ({"sample_rate_hz": 1e6}, "decimating FIR"),
        ({"sample_rate_hz": 1e6, "fir_enable": True}, None),
        ({"sample_rate_hz": 100e3, "fir_enable": True}, "outside 0.521"),
        ({"sample_rate_hz": 70e6}, "61.44"),
        ({"rx_rf_bandwidth_hz": 60e6, "sample_rate_hz": 61e6}, "rx_rf_bandwidth_hz"),
        ({"tx_rf_bandwidth_hz": 20e6}, "wider than the sample rate"),
        ({"rx_gain_db": 80}, r"rx_gain_db=80 outside -3..71"),
        ({"tx_gain_db": 3}, "attenuation"),
        ({"tx_gain_db": -10.1}, "0.25 dB"),
        ({"rx_gain_mode": "auto"}, "rx_gain_mode"),
        ({"backend": "pluto"}, "uri is required"),
        ({"backend": "hackrf"}, "backend"),
    ],
)
def test_radio_config_validation(kw, match):
    if match is None:
        RadioConfig(**kw)
        return
    with pytest.raises(ConfigError, match=match):
        RadioConfig(**kw)


def test_unknown_keys_are_named():
    with pytest.raises(ConfigError, match=r"unknown \[radio\] key\(s\) \['lo_mhz'\]"):
        RadioConfig.from_dict({"lo_mhz": 2400})
    with pytest.raises(ConfigError, match=r"unknown \[radio.sim\] key\(s\) \['snr'\]"):
        RadioConfig.from_dict({"sim": {"snr": 3}})


def test_sim_config_refuses_awgn_stage():
    with pytest.raises(ConfigError, match="thermal noise"):
        SimConfig(channel=[{"kind": "awgn"}])
    assert SimConfig(channel="multipath_cfo").stages(4e6)[-1]["kind"] == "cfo"


def test_shipped_profiles_load():
    from pathlib import Path

    files = sorted(Path(__file__).resolve().parents[2].joinpath("firmware_configs").glob("*.toml"))
    assert len(files) >= 7
    for f in files:
        p = load_profile(f)
        assert p["radio"].backend in ("sim", "pluto")


def test_profile_errors_name_the_file(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("[radio]\nlo_hz = 10e9\n")
    with pytest.raises(ConfigError, match=r"bad.toml: radio.lo_hz"):
        load_profile(p)
