"""OFDM PHY: numerology, frames, header coding, streaming synchronisation and the
differentiable receive path (one implementation for training and the receiver)."""

from .frame import MAX_PAYLOAD, FrameBuilder, clip_amplitude, to_full_scale
from .header import Header, HeaderError, decode_header_llr, encode_header_bits, header_symbols
from .numerology import OfdmConfig
from .receive import ChannelEstimate, OfdmReceiver, RxResult
from .stream import FrameEvent, FrameReceiver, ReceiverStats
from .sync import Detection, StreamSync

__all__ = [
    "MAX_PAYLOAD",
    "ChannelEstimate",
    "Detection",
    "FrameBuilder",
    "FrameEvent",
    "FrameReceiver",
    "Header",
    "HeaderError",
    "OfdmConfig",
    "OfdmReceiver",
    "ReceiverStats",
    "RxResult",
    "StreamSync",
    "clip_amplitude",
    "decode_header_llr",
    "encode_header_bits",
    "header_symbols",
    "to_full_scale",
]
