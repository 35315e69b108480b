"""The radio process maps the radio layer's block flags to the wire's."""

import pytest

from hil.apps.radio import wire_flags
from hil.radio import BlockFlag
from hil.transport import DROP, OVERFLOW


def test_block_flags_map_to_wire_flags():
    assert wire_flags(0) == 0
    assert wire_flags(BlockFlag.OVERFLOW) == OVERFLOW
    assert wire_flags(BlockFlag.LOST) == DROP
    assert wire_flags(BlockFlag.OVERFLOW | BlockFlag.LOST) == OVERFLOW | DROP


def test_an_unknown_block_flag_is_an_error_not_dropped():
    with pytest.raises(ValueError, match="0x4"):
        wire_flags(0x4)
