import struct

import numpy as np
import pytest
import zmq

from hil.transport import (
    CYCLIC,
    EOS,
    OVERFLOW,
    SampleHeader,
    SampleReceiver,
    SampleSender,
    WireError,
    check_bind,
    decode,
    decode_raw,
    encode,
    free_tcp_endpoint,
    free_tcp_endpoints,
    is_loopback,
    make_socket,
    recv_json,
    send_json,
)
from hil.transport.wire import EOB, HEADER_SIZE, KNOWN_FLAGS, MAX_SAMPLES, SOB


def _x(n=100, seed=0):
    r = np.random.default_rng(seed)
    return (r.normal(size=n) + 1j * r.normal(size=n)).astype(np.complex64)


def test_serialize_deserialize_identity():
    x = _x()
    h = SampleHeader(
        stream_id=3,
        seq=42,
        sample_offset=123456789,
        sample_rate_hz=4e6,
        center_freq_hz=2.4e9,
        flags=OVERFLOW | CYCLIC,
    )
    frames = encode(h, x)
    assert len(frames[0]) == HEADER_SIZE == 48
    m = decode([bytes(f) for f in frames])
    assert m.header == SampleHeader(3, 42, 123456789, 4e6, 2.4e9, OVERFLOW | CYCLIC, 100)
    np.testing.assert_array_equal(m.samples, x)
    assert m.samples.dtype == np.complex64
    assert m.header.flag_names() == ["cyclic", "overflow"] or set(m.header.flag_names()) == {
        "cyclic",
        "overflow",
    }


def test_payload_is_zero_copy():
    x = _x(1000)
    frames = encode(SampleHeader(), x)
    assert np.shares_memory(np.frombuffer(frames[1], np.complex64), x)


def test_wire_layout_is_little_endian_interleaved_float32():
    x = np.array([1 + 2j, -3.5 + 0.25j], np.complex64)
    frames = encode(SampleHeader(seq=1), x)
    assert bytes(frames[1]) == struct.pack("<4f", 1, 2, -3.5, 0.25)
    assert bytes(frames[0][:4]) == b"HILS"


def _good():
    return [bytes(f) for f in encode(SampleHeader(seq=1, sample_rate_hz=1e6), _x(10))]


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda f: [b"XXXX" + f[0][4:], f[1]], "magic"),
        (lambda f: [f[0][:4] + b"\x09" + f[0][5:], f[1]], "version"),
        (lambda f: [f[0][:20], f[1]], "header is"),
        (lambda f: [f[0], f[1][:-3]], "payload is"),
        (lambda f: [f[0]], "expected 2 frames"),
        (lambda f: [f[0], f[1], b""], "expected 2 frames"),
        (lambda f: [f[0][:5] + b"\x80" + f[0][6:], f[1]], "unknown flag"),
        (lambda f: [f[0][:40] + struct.pack("<I", MAX_SAMPLES + 1) + f[0][44:], f[1]], "absurd"),
        (lambda f: [f[0], np.full(10, np.nan, np.complex64).tobytes()], "non-finite"),
        (lambda f: [f[0][:24] + struct.pack("<d", float("nan")) + f[0][32:], f[1]], "sample rate"),
    ],
)
def test_malformed_messages_raise_wire_error(mutate, match):
    with pytest.raises(WireError, match=match):
        decode(mutate(_good()))


def test_raw_mode():
    x = _x(64)
    np.testing.assert_array_equal(decode_raw(x.tobytes()), x)
    with pytest.raises(WireError, match="whole number"):
        decode_raw(x.tobytes()[:-3])


def test_encode_refuses_wrong_dtype():
    with pytest.raises(WireError, match="complex64"):
        encode(SampleHeader(), np.zeros(4, np.complex128))


@pytest.mark.parametrize(
    ("ep", "ok"),
    [
        ("tcp://127.0.0.1:5555", True),
        ("tcp://localhost:1", True),
        ("tcp://[::1]:5", True),
        ("ipc:///tmp/x", True),
        ("tcp://0.0.0.0:5555", False),
        ("tcp://192.168.2.10:5555", False),
        ("tcp://*:5555", False),
    ],
)
def test_loopback_policy(ep, ok):
    assert is_loopback(ep) == ok
    if ok:
        check_bind(ep)
    else:
        with pytest.raises(ValueError, match="refusing to bind"):
            check_bind(ep)
        check_bind(ep, allow_remote=True)


@pytest.fixture
def pair():
    ctx = zmq.Context()
    ep = free_tcp_endpoint()
    pull = make_socket(ctx, zmq.PULL, ep, bind=True)
    push = make_socket(ctx, zmq.PUSH, ep, bind=False)
    yield push, pull
    push.close(0)
    pull.close(0)
    ctx.term()


def test_receiver_counts_and_drops_malformed_then_keeps_going(pair):
    push, pull = pair
    rx = SampleReceiver(pull)
    tx = SampleSender(push, sample_rate_hz=1e6)
    tx.send(_x(10))
    push.send_multipart([b"garbage", b"1234567"])
    push.send_multipart([b"only one frame"])
    good = _good()
    push.send_multipart([good[0], np.full(10, np.inf, np.complex64).tobytes()])
    tx.send(_x(20, 1))
    tx.end()
    got = []
    while True:
        m = rx.recv(timeout_s=2)
        assert m is not None
        got.append(m)
        if m.header.flags & EOS:
            break
    assert [m.header.n_samples for m in got] == [10, 20, 0]
    assert rx.stats.malformed == 3
    assert rx.stats.seq_gaps == 0 and rx.stats.samples == 30


def test_receiver_notices_sequence_and_sample_gaps(pair):
    push, pull = pair
    rx = SampleReceiver(pull)
    tx = SampleSender(push)
    tx.send(_x(10))
    tx.seq += 2  # two messages lost
    tx.send(_x(10), offset=50)
    rx.recv(timeout_s=2)
    rx.recv(timeout_s=2)
    assert rx.stats.seq_gaps == 2 and rx.stats.sample_gaps == 40


def test_json_control_messages(pair):
    push, pull = pair
    send_json(push, {"type": "sent", "seq": 1})
    push.send(b"{not json")
    push.send(b"[1, 2]")
    assert recv_json(pull, 2) == {"type": "sent", "seq": 1}
    assert recv_json(pull, 2) is None
    assert recv_json(pull, 2) is None


def test_finite_check_exact():
    from hil.transport.wire import all_finite

    x = _x(1000)
    assert all_finite(x)
    big = np.full(10, 1e30 + 1e30j, np.complex64)  # squares overflow, values are finite
    assert all_finite(big)
    for bad in (np.nan, np.inf, -np.inf):
        y = x.copy()
        y[500] = complex(0, bad)
        assert not all_finite(y)


def _flip(b: bytes, i: int, x: int) -> bytes:
    return b[:i] + bytes([b[i] ^ x]) + b[i + 1 :]


@pytest.mark.parametrize("i", range(4))
@pytest.mark.parametrize("x", [0x01, 0x20, 0x80, 0xFF])
def test_any_one_byte_of_the_magic_changed_is_refused(i, x):
    f = _good()
    with pytest.raises(WireError, match="magic"):
        decode([_flip(f[0], i, x), f[1]])


@pytest.mark.parametrize(
    ("offset", "match"),
    [(4, "version"), (40, "payload is|absurd"), (41, "payload is|absurd"), (43, "absurd")],
)
@pytest.mark.parametrize("x", [0x01, 0x80])
def test_one_byte_changed_in_a_checked_field_is_refused(offset, match, x):
    """Version (byte 4) and the sample count (bytes 40-43): any change is caught."""
    f = _good()
    with pytest.raises(WireError, match=match):
        decode([_flip(f[0], offset, x), f[1]])


@pytest.mark.parametrize("bit", [0x80])
def test_unknown_flag_bits_are_refused(bit):
    f = _good()
    with pytest.raises(WireError, match="unknown flag"):
        decode([f[0][:5] + bytes([f[0][5] | bit]) + f[0][6:], f[1]])


def test_message_built_valid_is_accepted_and_round_trips():
    """The oracle the other direction: every valid combination of fields is accepted and comes
    back identical (flags: every subset of the known bits)."""
    rng = np.random.default_rng(5)
    for flags in range(KNOWN_FLAGS + 1):
        if flags & ~KNOWN_FLAGS:
            continue
        h = SampleHeader(
            stream_id=int(rng.integers(0, 65536)), seq=int(rng.integers(0, 2**63)),
            sample_offset=int(rng.integers(0, 2**63)), sample_rate_hz=float(rng.uniform(0, 6e7)),
            center_freq_hz=float(rng.uniform(-6e9, 6e9)), flags=flags,
        )  # fmt: skip
        x = _x(int(rng.integers(0, 50)))
        m = decode([bytes(b) for b in encode(h, x)])
        assert m.header.flags == flags and m.header.seq == h.seq
        assert m.header.stream_id == h.stream_id and m.header.sample_offset == h.sample_offset
        assert (
            m.header.sample_rate_hz == h.sample_rate_hz
            and m.header.center_freq_hz == h.center_freq_hz
        )
        np.testing.assert_array_equal(m.samples, x)


# --- exact layout, limits and messages (mutation testing, docs/mutation.md)


def test_header_bytes_are_exactly_the_documented_layout():
    h = SampleHeader(7, 2**40 + 3, 2**50 + 5, 4e6, 2.4e9, OVERFLOW | CYCLIC)
    head = bytes(encode(h, _x(3))[0])
    expect = (
        b"HILS" + bytes([1, OVERFLOW | CYCLIC]) + struct.pack("<H", 7)
        + struct.pack("<QQdd", 2**40 + 3, 2**50 + 5, 4e6, 2.4e9)
        + struct.pack("<I", 3) + b"\0\0\0\0"
    )  # fmt: skip
    assert head == expect


def test_strided_samples_are_sent_contiguous():
    x = _x(20)
    view = x[::2]
    frames = encode(SampleHeader(), view)
    assert bytes(frames[1]) == np.ascontiguousarray(view).tobytes()
    np.testing.assert_array_equal(decode([bytes(f) for f in frames]).samples, view)


def test_sample_count_limit_is_inclusive():
    """MAX_SAMPLES samples is the largest message, on both ends (zero pages, no copy)."""
    x = np.zeros(MAX_SAMPLES + 1, np.complex64)
    frames = encode(SampleHeader(), x[:MAX_SAMPLES])
    assert frames[1].nbytes == 8 * MAX_SAMPLES
    m = decode(frames, check_finite=False)
    assert m.header.n_samples == MAX_SAMPLES and len(m.samples) == MAX_SAMPLES
    assert len(decode_raw(x[:MAX_SAMPLES], check_finite=False)) == MAX_SAMPLES
    with pytest.raises(WireError) as e:
        encode(SampleHeader(), x)
    assert str(e.value) == f"{MAX_SAMPLES + 1} samples exceed the {MAX_SAMPLES} per message limit"
    with pytest.raises(WireError) as e:
        decode_raw(x, check_finite=False)
    assert str(e.value) == f"absurd raw frame size {8 * MAX_SAMPLES + 8}"


def test_unknown_flag_message_names_the_unknown_bits():
    with pytest.raises(WireError) as e:
        encode(SampleHeader(flags=0x80 | SOB | EOB), _x(2))
    assert str(e.value) == "unknown flag bits 0x80"
    f = _good()
    with pytest.raises(WireError) as e:
        decode([f[0][:5] + bytes([0x80 | SOB | EOB]) + f[0][6:], f[1]])
    assert str(e.value) == "unknown flag bits 0x80"


def test_payload_length_message():
    f = _good()
    with pytest.raises(WireError) as e:
        decode([f[0], f[1][:-8]])
    assert str(e.value) == "payload is 72 bytes, header says 10 samples (80 bytes)"


@pytest.mark.parametrize(
    ("rate", "fc"),
    [(-1.0, 2.4e9), (float("inf"), 2.4e9), (1e6, float("inf")), (1e6, float("nan"))],
)
def test_negative_or_non_finite_rate_and_frequency_are_refused(rate, fc):
    f = _good()
    head = f[0][:24] + struct.pack("<dd", rate, fc) + f[0][40:]
    with pytest.raises(WireError) as e:
        decode([head, f[1]])
    assert str(e.value) == f"bad sample rate {rate} or centre frequency {fc}"


def test_non_finite_samples_are_refused_by_default_on_both_paths():
    x = _x(10)
    x[4] = complex(np.nan, 0)
    head = bytes(encode(SampleHeader(), _x(10))[0])
    for call in (lambda **k: decode([head, x.tobytes()], **k), lambda **k: decode_raw(x, **k)):
        with pytest.raises(WireError) as e:
            call()
        assert str(e.value) == "non-finite (NaN/inf) samples"
    assert np.isnan(decode([head, x.tobytes()], check_finite=False).samples[4])
    assert np.isnan(decode_raw(x, check_finite=False)[4])


def test_finite_check_is_silent_on_overflow_and_signalling_nan():
    """No RuntimeWarning from the fast path: squares that overflow (finite samples) and a
    signalling NaN from the wire (raises 'invalid' in the dot product)."""
    import warnings

    from hil.transport.wire import all_finite

    snan = np.frombuffer(np.full(8, 0x7FA00000, "<u4").tobytes(), np.complex64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert all_finite(np.full(10, 3e38 + 3e38j, np.complex64))
        assert not all_finite(snan)
        with pytest.raises(WireError, match="non-finite"):
            decode_raw(snan)


def test_zmq_frames_decode_like_bytes():
    h = SampleHeader(seq=9, sample_rate_hz=1e6)
    x = _x(6)
    frames = [zmq.Frame(bytes(f)) for f in encode(h, x)]
    m = decode(frames)
    assert m.header == SampleHeader(0, 9, 0, 1e6, 0.0, 0, 6)
    np.testing.assert_array_equal(m.samples, x)
    np.testing.assert_array_equal(decode_raw(zmq.Frame(x.tobytes())), x)


def test_free_tcp_endpoints_are_distinct_and_bindable():
    eps = free_tcp_endpoints(16)
    assert len(set(eps)) == 16 and all(e.startswith("tcp://127.0.0.1:") for e in eps)
    ctx = zmq.Context()
    socks = [make_socket(ctx, zmq.PULL, e, bind=True) for e in eps]  # all at once: none taken
    for s in socks:
        s.close(0)
    ctx.term()
