"""Compose channel stages from a config (a TOML table or a list of dicts)."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from .base import REGISTRY, ChannelModule, ChannelOutput

__all__ = ["ChainConfig", "ChannelChain", "StageSpec", "load_chain"]


@dataclass(frozen=True)
class StageSpec:
    """One stage: its registered ``kind``, a unique ``name`` and its constructor arguments."""

    kind: str
    name: str
    params: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self):
        if self.kind not in REGISTRY:
            raise ValueError(f"unknown channel kind {self.kind!r}; known kinds: {sorted(REGISTRY)}")


@dataclass(frozen=True)
class ChainConfig:
    """An ordered list of stages, validated on construction.

    Built from a list of tables, each with ``kind`` and that kind's constructor
    arguments, and optionally ``name`` (defaults to the kind, suffixed on repeats).
    """

    stages: tuple[StageSpec, ...]

    def __post_init__(self):
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise ValueError(f"channel stage names must be unique, got {names}")
        for s in self.stages:  # validate parameters now, not at first use
            REGISTRY[s.kind].from_config(dict(s.params))

    @classmethod
    def from_tables(cls, tables: Sequence[Mapping[str, Any]]) -> ChainConfig:
        stages, seen = [], {}
        for i, t in enumerate(tables):
            if "kind" not in t:
                raise ValueError(
                    f"channel stage #{i} has no 'kind'; known kinds: {sorted(REGISTRY)}"
                )
            t = dict(t)
            kind = t.pop("kind")
            name = t.pop("name", None)
            if name is None:
                seen[kind] = seen.get(kind, 0) + 1
                name = kind if seen[kind] == 1 else f"{kind}{seen[kind]}"
            params = tuple(
                sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in t.items())
            )
            stages.append(StageSpec(kind, name, params))
        return cls(tuple(stages))

    def to_tables(self) -> list[dict[str, Any]]:
        out = []
        for s in self.stages:
            d = {"kind": s.kind, "name": s.name}
            d.update({k: list(v) if isinstance(v, tuple) else v for k, v in s.params})
            out.append(d)
        return out


class ChannelChain(nn.Module):
    """Applies stages in order; returns the output and each stage's record by name.

    Per-call values go to stages by name in ``values`` (``{"cfo": {"cfo_hz": 1e3}}``);
    ``snr_db`` goes to every AWGN stage.
    """

    def __init__(self, config: ChainConfig):
        super().__init__()
        self.config = config
        self.stages = nn.ModuleDict(
            {s.name: REGISTRY[s.kind].from_config(dict(s.params)) for s in config.stages}
        )

    @classmethod
    def from_tables(cls, tables: Sequence[Mapping[str, Any]]) -> ChannelChain:
        return cls(ChainConfig.from_tables(tables))

    def forward(
        self,
        x: Tensor,
        snr_db: float | Tensor | None = None,
        *,
        generator: torch.Generator | None = None,
        values: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> ChannelOutput:
        """x: [B, N] complex64/complex128; snr_db: scalar or [B] real, for every AWGN stage.

        Returns y [B, N] of x's dtype (no stage changes the length) and ``record`` keyed by
        stage name, each that stage's own record.
        """
        values = dict(values or {})
        unknown = set(values) - set(self.stages)
        if unknown:
            raise ValueError(
                f"values for unknown stage(s) {sorted(unknown)}; stages: {list(self.stages)}"
            )
        records = {}
        for name, stage in self.stages.items():
            kw = dict(values.get(name, {}))
            if stage.kind == "awgn" and snr_db is not None:
                kw.setdefault("snr_db", snr_db)
            out = stage(x, generator=generator, **kw)
            x = out.y
            records[name] = out.record
        return ChannelOutput(x, records)

    def stage(self, name: str) -> ChannelModule:
        return self.stages[name]


def load_chain(path: str | Path, table: str = "channel") -> ChannelChain:
    """Read ``[[channel]]`` tables (or ``[[<table>]]``) from a TOML file."""
    with open(path, "rb") as fh:
        doc = tomllib.load(fh)
    if table not in doc:
        raise ValueError(f"{path}: no [[{table}]] tables; found keys {sorted(doc)}")
    return ChannelChain.from_tables(doc[table])
