"""Differentiable complex channel models (torch).

Each stage is an ``nn.Module`` with static configuration in its constructor and
per-call values as ``forward`` arguments, returning a :class:`ChannelOutput`
(output plus realised parameters). :class:`ChannelChain` composes them from a
config.
"""

from .awgn import AWGN
from .base import REGISTRY, ChannelModule, ChannelOutput, register
from .chain import ChainConfig, ChannelChain, StageSpec, load_chain
from .fading import BlockFading
from .hardware import DCOffset, IQImbalance, PowerAmplifier, Quantizer
from .multipath import TappedDelayLine
from .offsets import CarrierFrequencyOffset, PhaseNoise, TimingOffset
from .profiles import PROFILES, check_sample_rate, profile

__all__ = [
    "AWGN",
    "PROFILES",
    "REGISTRY",
    "BlockFading",
    "CarrierFrequencyOffset",
    "ChainConfig",
    "ChannelChain",
    "ChannelModule",
    "ChannelOutput",
    "DCOffset",
    "IQImbalance",
    "PhaseNoise",
    "PowerAmplifier",
    "Quantizer",
    "StageSpec",
    "TappedDelayLine",
    "TimingOffset",
    "check_sample_rate",
    "load_chain",
    "profile",
    "register",
]
