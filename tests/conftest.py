import numpy as np
import pytest
import torch


def pytest_addoption(parser):
    parser.addoption(
        "--pluto-uri", default=None, help="URI of a real ADALM-PLUTO (ip:..., usb:...)"
    )


def pytest_collection_modifyitems(config, items):
    if config.getoption("--pluto-uri"):
        return
    skip = pytest.mark.skip(reason="hardware test: pass --pluto-uri to run it on a real Pluto")
    for item in items:
        if "hardware" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def gen() -> torch.Generator:
    """A seeded torch generator; library code never seeds globally."""
    return torch.Generator().manual_seed(1234)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
