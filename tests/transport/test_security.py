"""CURVE authentication: authorised clients get in, others do not; remote binds need auth or force."""

import numpy as np
import pytest
import zmq

from hil.transport import (
    EndpointError,
    SampleReceiver,
    SampleSender,
    free_tcp_endpoint,
    make_socket,
)
from hil.transport.security import (
    CurveClient,
    CurveServer,
    SecurityError,
    generate_keypair,
    stop_authenticators,
)


@pytest.fixture
def keys(tmp_path):
    srv_pub, srv_sec = generate_keypair(tmp_path / "server", "radio")
    _ok_pub, ok_sec = generate_keypair(tmp_path / "clients", "bench")
    _, bad_sec = generate_keypair(tmp_path / "strangers", "mallory")
    return {
        "srv_sec": str(srv_sec),
        "srv_pub": str(srv_pub),
        "ok_sec": str(ok_sec),
        "bad_sec": str(bad_sec),
        "clients": str(tmp_path / "clients"),
    }


def _exchange(keys, client_secret):
    ctx = zmq.Context()
    try:
        ep = free_tcp_endpoint()
        pull = make_socket(
            ctx, zmq.PULL, ep, bind=True, curve=CurveServer(keys["srv_sec"], keys["clients"])
        )
        push = make_socket(
            ctx, zmq.PUSH, ep, bind=False, curve=CurveClient(client_secret, keys["srv_pub"])
        )
        SampleSender(push).send(np.ones(8, np.complex64), timeout_s=2)
        msg = SampleReceiver(pull).recv(timeout_s=2)
        push.close(0)
        pull.close(0)
        return msg
    finally:
        stop_authenticators()
        ctx.term()


def test_authorised_client_gets_through(keys):
    msg = _exchange(keys, keys["ok_sec"])
    assert msg is not None and msg.header.n_samples == 8


def test_unauthorised_client_is_rejected(keys):
    assert _exchange(keys, keys["bad_sec"]) is None


def test_remote_bind_needs_auth_or_force(keys):
    ctx = zmq.Context()
    try:
        with pytest.raises(EndpointError, match="not authenticated"):
            make_socket(ctx, zmq.PULL, "tcp://0.0.0.0:0", bind=True)
    finally:
        ctx.term()


def test_keygen_refuses_to_overwrite_secret(tmp_path):
    generate_keypair(tmp_path, "a")
    with pytest.raises(SecurityError, match="refusing to overwrite"):
        generate_keypair(tmp_path, "a")
    assert (tmp_path / "a.key_secret").stat().st_mode & 0o777 == 0o600
