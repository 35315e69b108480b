"""The radio interface every backend implements.

Samples cross it as numpy complex64 at full scale 1.0 in both directions;
each backend owns the scaling to and from its device units.
"""

from __future__ import annotations

import abc
import enum
from dataclasses import dataclass

import numpy as np

from .config import RadioConfig


class RadioError(RuntimeError):
    """A radio that cannot do what was asked, with the reason and the fix."""


class BlockFlag(enum.IntFlag):
    """What a backend says about one RX block. The radio's own flags: the radio process maps
    them to the wire's (``hil.transport``), so the radio layer never imports the transport."""

    OVERFLOW = 0x1  # the device overran: samples were lost in the hardware or the kernel buffers
    LOST = 0x2  # samples are missing before this block (the counter jumps); with OVERFLOW or alone


@dataclass
class RxBlock:
    """What one ``rx()`` returns.

    Attributes:
        samples: [n] complex64, full scale 1.0.
        counter: device sample index of samples[0]; lost samples advance it,
            so a jump larger than the previous block's length is a gap.
        flags: ``BlockFlag``s for this block (0: nothing to say).
        lost: samples known or estimated lost just before this block.
    """

    samples: np.ndarray
    counter: int
    flags: int = 0
    lost: int = 0


class Radio(abc.ABC):
    """configure -> tx / rx -> close. ``close()`` leaves the transmitter silent."""

    cfg: RadioConfig

    @abc.abstractmethod
    def configure(self, cfg: RadioConfig) -> None: ...

    @abc.abstractmethod
    def tx(self, samples: np.ndarray, cyclic: bool = False) -> None:
        """Queue samples ([n] complex, |x| <= 1) for transmission; ``cyclic`` repeats them until
        the next ``tx`` or ``close``."""

    @abc.abstractmethod
    def rx(self, n: int | None = None) -> RxBlock:
        """Receive the next block (n samples, default the configured buffer size)."""

    @abc.abstractmethod
    def close(self) -> None: ...

    @property
    @abc.abstractmethod
    def tx_active(self) -> bool:
        """True while anything is being radiated (a cyclic buffer or queued samples)."""

    def set_rx_gain(self, gain_db: float) -> None:
        raise NotImplementedError

    def poll_hw_status(self) -> dict[str, int] | None:
        """Events the device itself flagged (``hw_overflows``, ``underflows``), counted so far;
        None where the backend cannot know (the sim's TX is a timeline: it never runs dry)."""
        return None

    def update(self, **changes: float) -> RadioConfig:
        """Change settings while streaming (``hil.radio.control.SETTABLE``: RX and TX gain, LO).

        The new configuration is checked whole first (ConfigError, nothing changed); RX gain is
        refused while an AGC sets it (RadioError). Returns the configuration now in force.
        """
        from .config import ConfigError
        from .control import SETTABLE

        unknown = sorted(set(changes) - set(SETTABLE))
        if unknown:
            raise ConfigError(
                f"cannot change {unknown} while streaming; settable: {sorted(SETTABLE)}"
            )
        new = self.cfg.replace(**changes)
        if "rx_gain_db" in changes and new.rx_gain_mode != "manual":
            raise RadioError(
                f"rx gain is set by the AGC in gain mode {new.rx_gain_mode!r}; "
                "use a profile with rx_gain_mode = 'manual'"
            )
        self._retune(new, set(changes))
        self.cfg = new
        return new

    def _retune(self, new: RadioConfig, changed: set[str]) -> None:
        """Apply the already-checked settings ``changed`` of ``new`` to the device."""
        raise RadioError(f"{type(self).__name__} cannot change settings while streaming")

    @abc.abstractmethod
    def wait_tx(self, timeout_s: float = 5.0) -> bool:
        """Wait until every sample queued with ``tx`` has been handed to the device (what is left
        sits in its buffers and goes out in device time). False when ``timeout_s`` ran out first;
        RadioError on a closed radio or a failed transmitter."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def check_tx_samples(samples: np.ndarray) -> np.ndarray:
    """Validate TX samples: 1-D complex, finite, within full scale (tiny excess clipped)."""
    x = np.asarray(samples)
    if x.ndim != 1 or not np.iscomplexobj(x):
        raise ValueError(f"tx samples must be 1-D complex, got {x.dtype} {x.shape}")
    x = x.astype(np.complex64, copy=False)
    if len(x) and not np.isfinite(x.view(np.float32)).all():
        raise ValueError("tx samples contain NaN/inf")
    peak = float(np.abs(x).max()) if len(x) else 0.0
    if peak > 1.0 + 1e-3:
        raise ValueError(
            f"tx samples exceed full scale (peak {peak:.3f} > 1.0); scale them with hil.phy.to_full_scale"
        )
    return x
