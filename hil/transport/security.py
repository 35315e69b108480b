"""ZeroMQ CURVE authentication and encryption for endpoints that leave the machine.

A bench LAN is not a trusted network. Any socket that binds a non-loopback
address must either use CURVE (every peer authenticated by its public key,
all traffic encrypted) or be explicitly forced open.

- ``hil keys NAME --dir DIR`` writes ``DIR/NAME.key`` (public, share it) and
  ``DIR/NAME.key_secret`` (keep it) in ZeroMQ's certificate format.
- A server (the side that binds) loads its own secret certificate and a folder
  of client public certificates; only those clients get in.
- A client (the side that connects) loads its own secret certificate and the
  server's public one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator


class SecurityError(ValueError):
    pass


def generate_keypair(directory: str | os.PathLike, name: str) -> tuple[Path, Path]:
    """Write NAME.key and NAME.key_secret under directory (secret file mode 0600)."""
    if not name or any(c in name for c in "/\\ ") or name.startswith("."):
        raise SecurityError(f"key name {name!r} must be a plain file name")
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    if (d / f"{name}.key_secret").exists():
        raise SecurityError(
            f"{d / (name + '.key_secret')} exists; refusing to overwrite a secret key"
        )
    public, secret = zmq.auth.create_certificates(str(d), name)
    os.chmod(secret, 0o600)
    return Path(public), Path(secret)


@dataclass(frozen=True)
class CurveServer:
    """Bind side: own secret certificate + folder of authorised client public certificates."""

    secret_file: str
    clients_dir: str


@dataclass(frozen=True)
class CurveClient:
    """Connect side: own secret certificate + the server's public certificate."""

    secret_file: str
    server_public_file: str


def _load(path: str, secret: bool):
    try:
        pub, sec = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as exc:
        raise SecurityError(f"cannot load certificate {path}: {exc}") from exc
    if secret and sec is None:
        raise SecurityError(f"{path} holds no secret key (use the .key_secret file)")
    return pub, sec


_AUTHENTICATORS: dict[int, ThreadAuthenticator] = {}


def apply_server(ctx: zmq.Context, sock: zmq.Socket, cfg: CurveServer) -> None:
    """Make ``sock`` (before bind) a CURVE server that only admits the listed clients."""
    if not Path(cfg.clients_dir).is_dir():
        raise SecurityError(f"authorised client keys folder {cfg.clients_dir} does not exist")
    auth = _AUTHENTICATORS.get(id(ctx))
    if auth is None:
        auth = ThreadAuthenticator(ctx)
        auth.start()
        _AUTHENTICATORS[id(ctx)] = auth
    auth.configure_curve(domain="*", location=str(cfg.clients_dir))
    pub, sec = _load(cfg.secret_file, secret=True)
    sock.curve_secretkey = sec
    sock.curve_publickey = pub
    sock.curve_server = True


def apply_client(sock: zmq.Socket, cfg: CurveClient) -> None:
    """Make ``sock`` (before connect) a CURVE client of the given server."""
    pub, sec = _load(cfg.secret_file, secret=True)
    server_pub, _ = _load(cfg.server_public_file, secret=False)
    sock.curve_secretkey = sec
    sock.curve_publickey = pub
    sock.curve_serverkey = server_pub


def stop_authenticators() -> None:
    for auth in _AUTHENTICATORS.values():
        auth.stop()
    _AUTHENTICATORS.clear()
