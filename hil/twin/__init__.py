"""The Pluto twin: a simulated ADALM-PLUTO behind the libiio network protocol.

``PlutoTwin`` serves the IIO context of a Pluto (``hil.twin.model``) over TCP
so that unmodified clients (pyadi-iio on libiio, ``iio_info``, ``iio_attr``,
``iio_readdev``, ``iio_writedev``, GNU Radio's PlutoSDR blocks, IIO
Oscilloscope) talk to it at ``ip:127.0.0.1:PORT`` as to a Pluto; behind it
runs the simulated device (``hil.twin.device.TwinDevice``: attributes, buffers, device
time) and under it the sim backend's engine (``hil.radio.sim.SimEngine``).
"""

from .device import TwinDevice
from .model import IioError, PlutoState, build_pluto, context_xml
from .server import DEFAULT_PORT, PlutoTwin

__all__ = [
    "DEFAULT_PORT",
    "IioError",
    "PlutoState",
    "PlutoTwin",
    "TwinDevice",
    "build_pluto",
    "context_xml",
]
