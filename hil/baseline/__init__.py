"""Separate source and channel coding (JPEG/WebP + 5G NR LDPC + QAM) on the JSCC's frames.

``source``: Pillow codecs fitted to a byte budget; ``digital``: the MCS table,
header scheme ids and the LDPC/QAM codec (Sionna); ``evaluate``: curves for
fixed and adaptive MCS and the capacity bound beside the JSCC.
"""

from .digital import MCS_TABLE, DigitalCodec, Mcs, mcs_by_key, parse_scheme, scheme_id
from .source import CODECS, best_fit

__all__ = [
    "CODECS",
    "MCS_TABLE",
    "DigitalCodec",
    "Mcs",
    "best_fit",
    "mcs_by_key",
    "parse_scheme",
    "scheme_id",
]
