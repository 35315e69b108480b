"""Shipped profiles are found by name, by path, and by the firmware_configs/ path of the docs."""

import pytest

from hil.radio.config import ConfigError, load_profile, resolve_profile, shipped_profiles


def test_a_shipped_profile_by_name_or_path():
    names = shipped_profiles()
    assert {"sim_two_pluto", "sim_clean", "twin_two_pluto", "pluto_two_cabled"} <= set(names)
    p = resolve_profile("sim_two_pluto")
    assert p.name == "sim_two_pluto.toml" and p.is_file()
    assert resolve_profile("firmware_configs/sim_two_pluto.toml").read_bytes() == p.read_bytes()
    assert resolve_profile(p) == p
    assert load_profile("sim_clean")["radio"].backend == "sim"


def test_an_unknown_profile_names_the_shipped_ones(tmp_path):
    with pytest.raises(ConfigError, match="sim_two_pluto"):
        resolve_profile("sim_two_plutoo")
    with pytest.raises(ConfigError, match="no profile"):
        resolve_profile(tmp_path / "elsewhere" / "sim_two_pluto.toml")  # a path is never guessed
