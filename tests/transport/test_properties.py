"""Property-based tests of the parsers that face the outside: the wire format and the frame header.

The arbitrary-input properties of both parsers run 10 000 examples each, the
round-trip properties 2 000; anything but the parser's own error type
escaping is a bug.
"""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from hil.phy import Header, HeaderError, OfdmConfig
from hil.phy.header import HEADER_LEN, decode_header_llr
from hil.transport import SampleHeader, WireError, decode, decode_raw, encode
from hil.transport.wire import HEADER_SIZE, KNOWN_FLAGS

N = 10_000
CFG = OfdmConfig()
FAST = settings(max_examples=N, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SOME = settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

u16 = st.integers(0, 2**16 - 1)
u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)
finite = st.floats(allow_nan=False, allow_infinity=False, width=32)


@FAST
@given(st.lists(st.binary(max_size=200), min_size=0, max_size=4))
def test_decode_arbitrary_frames_raises_only_wire_error(frames):
    try:
        m = decode(frames)
    except WireError:
        return
    assert len(frames[0]) == HEADER_SIZE and len(frames[1]) == 8 * m.header.n_samples


@FAST
@given(st.binary(min_size=HEADER_SIZE, max_size=HEADER_SIZE), st.binary(max_size=256))
def test_decode_mutated_headers_raises_only_wire_error(head, body):
    try:
        decode([b"HILS\x01" + head[5:], body])
    except WireError:
        pass


@SOME
@given(
    u16,
    u64,
    u64,
    st.floats(0, 1e10),
    st.floats(-1e10, 1e10),
    st.integers(0, KNOWN_FLAGS),
    arrays(np.float32, st.integers(0, 64).map(lambda n: 2 * n), elements=finite),
)
def test_encode_decode_identity(sid, seq, off, rate, fc, flags, iq):
    flags &= KNOWN_FLAGS
    x = iq.view(np.complex64)
    h = SampleHeader(sid, seq, off, rate, fc, flags)
    m = decode([bytes(f) for f in encode(h, x)])
    assert m.header == SampleHeader(sid, seq, off, rate, fc, flags, len(x))
    np.testing.assert_array_equal(m.samples, x)


@SOME
@given(st.binary(max_size=100))
def test_raw_frames_raise_only_wire_error(b):
    try:
        s = decode_raw(b)
    except WireError:
        return
    assert len(s) * 8 == len(b)


@FAST
@given(st.binary(min_size=0, max_size=64))
def test_header_unpack_arbitrary_bytes(b):
    try:
        Header.unpack(b)
    except HeaderError:
        pass


@SOME
@given(st.binary(min_size=HEADER_LEN, max_size=HEADER_LEN))
def test_header_unpack_right_length_bytes(b):
    try:
        h = Header.unpack(b)
    except HeaderError:
        return
    assert h.pack() == b  # anything accepted re-packs to the same bytes


@SOME
@given(u32, u32, st.binary(min_size=8, max_size=8), u32, st.integers(0, 255), u16, u16, st.data())
def test_header_pack_unpack_identity(seq, item, fp, plen, c, hh, ww, data):
    cc = data.draw(st.integers(1, 2**16 - 1))
    ci = data.draw(st.integers(0, cc - 1))
    scheme = data.draw(st.integers(0, 255))
    h = Header(
        seq=seq,
        item_id=item,
        fingerprint=fp,
        payload_len=plen,
        shape=(c, hh, ww),
        chunk_index=ci,
        chunk_count=cc,
        scheme=scheme,
    )
    assert Header.unpack(h.pack()) == h


@settings(max_examples=300, deadline=None)
@given(arrays(np.float64, 576, elements=st.floats(allow_nan=True, allow_infinity=True)))
def test_header_llr_decoder_raises_only_header_error(llr):
    try:
        decode_header_llr(llr, CFG)
    except HeaderError:
        pass


def test_fuzz_command_finds_no_crash():
    """The fuzz command (README figure: 1e6 inputs) on a short run."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts/fuzz_parsers.py"
    r = subprocess.run(
        [sys.executable, str(script), "--n", "20000", "--seed", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 crashes" in r.stdout
