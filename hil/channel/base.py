"""Shared pieces of the channel modules: the output record and the registry."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor, nn

from .functional import check_complex

__all__ = ["REGISTRY", "ChannelModule", "ChannelOutput", "register"]


@dataclass
class ChannelOutput:
    """What a channel did.

    Attributes:
        y: [B, N] complex64/complex128 output samples, the dtype of the input.
        record: realised parameters (gains, noise variance, offsets), tensors of
            shape [B] or [B, ...], so receivers and tests can check against truth.
    """

    y: Tensor
    record: dict[str, Any] = field(default_factory=dict)


REGISTRY: dict[str, type[ChannelModule]] = {}


def register(name: str):
    """Class decorator: make a module constructible from a config table ``kind = name``."""

    def deco(cls):
        if name in REGISTRY:
            raise ValueError(f"channel kind {name!r} registered twice")
        cls.kind = name
        REGISTRY[name] = cls
        return cls

    return deco


class ChannelModule(nn.Module):
    """Base class: static configuration in ``__init__``, per-call values in ``forward``.

    ``forward(x, *, generator=None, **values) -> ChannelOutput``. Values not
    given are drawn from the distribution fixed at construction.
    """

    kind: str = "?"

    @classmethod
    def from_config(cls, table: dict[str, Any]) -> ChannelModule:
        """Build from a config table, naming any unknown key and the allowed ones."""
        params = inspect.signature(cls.__init__).parameters
        allowed = sorted(p for p in params if p != "self")
        unknown = sorted(set(table) - set(allowed))
        if unknown:
            raise ValueError(
                f"channel stage {cls.kind!r}: unknown key(s) {unknown}; allowed keys: {allowed}"
            )
        try:
            return cls(**table)
        except TypeError as exc:
            raise ValueError(f"channel stage {cls.kind!r}: {exc}") from exc

    @staticmethod
    def _check(x: Tensor) -> None:
        check_complex(x)

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.config().items())

    def config(self) -> dict[str, Any]:
        """The constructor arguments, as a config table (round-trips through from_config)."""
        params = inspect.signature(type(self).__init__).parameters
        return {k: getattr(self, k) for k in params if k != "self"}
