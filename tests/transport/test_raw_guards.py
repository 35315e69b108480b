"""Guards on the raw paths: wrong dtypes and shapes are errors, never misread or flattened."""

import numpy as np
import pytest
import zmq

from hil.transport import SampleSender
from hil.transport.wire import all_finite


def test_all_finite_refuses_what_it_cannot_read():
    assert all_finite(np.zeros(4, np.complex64))
    assert not all_finite(np.array([1, np.nan], np.complex64))
    with pytest.raises(TypeError, match="complex64"):
        all_finite(np.array([np.nan], np.complex128))  # a view as float32 would misread it


def test_a_raw_sender_refuses_a_2d_block():
    ctx = zmq.Context()
    s = ctx.socket(zmq.PUSH)
    try:
        with pytest.raises(ValueError, match="1-D"):
            SampleSender(s, raw=True).send(np.zeros((2, 4), np.complex64), timeout_s=0)
    finally:
        s.close(0)
        ctx.term()
