"""Radio backends behind one interface: ``sim`` (simulated Pluto) and ``pluto`` (pyadi-iio)."""

from .base import BlockFlag, Radio, RadioError, RxBlock
from .config import ConfigError, RadioConfig, SimConfig, load_profile


def open_radio(cfg: RadioConfig) -> Radio:
    """The backend the config names."""
    if cfg.backend == "sim":
        from .sim import SimRadio

        return SimRadio(cfg)
    from .pluto import PlutoRadio

    return PlutoRadio(cfg)


__all__ = [
    "BlockFlag",
    "ConfigError",
    "Radio",
    "RadioConfig",
    "RadioError",
    "RxBlock",
    "SimConfig",
    "load_profile",
    "open_radio",
]
