"""``hil radio``: owns one radio backend; PULLs TX samples, PUSHes RX samples, PUBlishes telemetry.

Binds its three endpoints (loopback by default). TX messages are handed to
the backend (CYCLIC-flagged ones as a cyclic buffer); RX blocks are sent with
their device sample counter as the sample offset and OVERFLOW/DROP flags
when samples were lost. When the transmitter ends its stream (EOS) and
everything queued has been on the air, the radio keeps receiving for
``--linger`` seconds of samples, then ends the RX stream with EOS and exits
(unless ``--serve``).

Backpressure: with the simulated radio, a slow receiver slows the simulation
(sends block). A real radio cannot wait: when the receiver's queue is full
the block is dropped, counted, and the next message carries DROP and a jump
in the sample offset. The TX side accepts new bursts only while less than
``--max-tx-backlog`` seconds are queued, so memory stays bounded.
"""

from __future__ import annotations

import argparse
import time

import zmq

from ..radio import BlockFlag, RadioConfig, RadioError, load_profile, open_radio
from ..radio.ad9363 import same_rate
from ..radio.config import ConfigError
from ..radio.control import MAX_REQUEST_BYTES, ControlError, parse_request, settings
from ..transport import (
    CYCLIC,
    DROP,
    EOS,
    OVERFLOW,
    SampleReceiver,
    SampleSender,
    make_socket,
    send_json,
)
from .common import StopFlag, add_curve_args, curve_server, setup_logging


def wire_flags(block_flags: int) -> int:
    """A radio block's ``BlockFlag``s -> the wire's flags (OVERFLOW, DROP)."""
    unknown = int(block_flags) & ~int(BlockFlag.OVERFLOW | BlockFlag.LOST)
    if unknown:
        raise ValueError(f"unknown radio block flags 0x{unknown:x}")
    out = OVERFLOW if block_flags & BlockFlag.OVERFLOW else 0
    return out | (DROP if block_flags & BlockFlag.LOST else 0)


INTAKE_S = 0.05  # s of TX intake work per loop turn at most


def serve_control(sock: zmq.Socket, radio, log) -> bool:
    """Answer every request waiting on the control socket. True when a setting changed.

    Each is checked (``parse_request``, then the radio's own configuration check) before the
    radio sees it; a refused one changes nothing and its answer says why.
    """
    changed = False
    while True:
        try:
            raw = sock.recv(zmq.NOBLOCK)
        except zmq.Again:
            return changed
        except zmq.ZMQError as exc:  # an oversized message (MAXMSGSIZE) drops the peer
            log.warning("control: %s", exc)
            return changed
        try:
            want = parse_request(raw)
            if want is not None:
                radio.update(**want)
                changed = True
                log.info("control: set %s", want)
            reply = {"ok": True, "settings": settings(radio.cfg)}
        except (ControlError, ConfigError, RadioError) as exc:
            log.warning("control: refused: %s", exc)
            reply = {"ok": False, "error": str(exc), "settings": settings(radio.cfg)}
        send_json(sock, reply)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hil radio", description=__doc__)
    p.add_argument("--profile", help="TOML profile with a [radio] table (default: sim, clean)")
    p.add_argument("--backend", choices=["sim", "pluto"], help="override radio.backend")
    p.add_argument("--uri", help="override radio.uri (Pluto), e.g. ip:192.168.2.1")
    p.add_argument(
        "--snr", type=float, help="sim only: set the path gain for this Es/N0 (dB) during frames"
    )
    p.add_argument("--tx-gain", type=float, help="override radio.tx_gain_db (-89.75..0 dB)")
    p.add_argument("--tx", required=True, help="endpoint to bind for TX samples (PULL)")
    p.add_argument("--rx", required=True, help="endpoint to bind for RX samples (PUSH)")
    p.add_argument("--telemetry", help="endpoint to bind for telemetry (PUB)")
    p.add_argument(
        "--settings",
        help="endpoint to bind for settings changes while streaming (REP, JSON: RX/TX gain, LO; "
        "see hil.radio.control; hil dashboard --control EP); without it nothing can change them",
    )
    p.add_argument(
        "--raw-out",
        help="also bind this endpoint for the RX stream as bare complex64 (one ZMQ frame per "
        "block, no header): what GNU Radio's ZMQ PULL/SUB Source blocks read",
    )
    p.add_argument(
        "--raw-out-kind",
        choices=["push", "pub"],
        default="push",
        help="--raw-out socket: push (for zeromq.pull_source) or pub (zeromq.sub_source); "
        "never blocks the radio: blocks a full or absent reader cannot take are counted",
    )
    p.add_argument(
        "--raw-out-wait",
        type=float,
        default=0.0,
        help="push: wait up to this many seconds for a reader to connect before the radio starts "
        "(a flowgraph started first then misses nothing)",
    )
    p.add_argument(
        "--truth", help="sim: endpoint to connect for per-burst ground truth (PUSH, JSON)"
    )
    p.add_argument("--allow-remote", action="store_true", help="permit non-loopback binds")
    p.add_argument(
        "--linger", type=float, default=0.05, help="seconds of RX after the last TX sample"
    )
    p.add_argument("--max-tx-backlog", type=float, default=2.0, help="seconds of TX queued at most")
    p.add_argument(
        "--max-seconds", type=float, default=None, help="stop after this much device time"
    )
    p.add_argument("--serve", action="store_true", help="keep running after the transmitter ends")
    p.add_argument("-v", "--verbose", action="store_true")
    add_curve_args(p)
    return p


def sim_path_gain_for_snr(cfg: RadioConfig, snr_db: float) -> float:
    """Path gain giving Es/N0 = snr_db for frames at tx_rms_dbfs (see hil.radio.sim)."""
    return snr_db - cfg.tx_rms_dbfs - cfg.tx_gain_db + cfg.sim.noise_dbfs


def resolve_config(a) -> tuple[RadioConfig, str]:
    if a.profile:
        prof = load_profile(a.profile)
        cfg, name = prof["radio"], prof["name"]
    else:
        cfg, name = RadioConfig(), "default-sim"
    over = {}
    if a.backend:
        over["backend"] = a.backend
    if a.uri:
        over["uri"] = a.uri
    if a.tx_gain is not None:
        over["tx_gain_db"] = a.tx_gain
    if over:
        cfg = cfg.replace(**over)
    if a.snr is not None:
        if cfg.backend != "sim":
            raise ConfigError(
                "--snr only applies to the sim backend; on a Pluto use tx_gain_db / an attenuator"
            )
        from dataclasses import replace

        cfg = cfg.replace(sim=replace(cfg.sim, path_gain_db=sim_path_gain_for_snr(cfg, a.snr)))
    return cfg, name


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    log = setup_logging("radio", a.verbose)
    stop = StopFlag()
    cfg, name = resolve_config(a)
    ctx = zmq.Context()  # this process's own; terminated (flushing the queues) before returning
    tx_sock = make_socket(
        ctx, zmq.PULL, a.tx, bind=True, allow_remote=a.allow_remote, curve=curve_server(a)
    )
    rx_sock = make_socket(
        ctx, zmq.PUSH, a.rx, bind=True, allow_remote=a.allow_remote, curve=curve_server(a)
    )
    tel = (
        make_socket(
            ctx, zmq.PUB, a.telemetry, bind=True, allow_remote=a.allow_remote, curve=curve_server(a)
        )
        if a.telemetry
        else None
    )
    truth = make_socket(ctx, zmq.PUSH, a.truth, bind=False) if a.truth else None
    control = None
    if a.settings:
        control = make_socket(
            ctx, zmq.REP, a.settings, bind=True, allow_remote=a.allow_remote, curve=curve_server(a)
        )
        control.setsockopt(zmq.MAXMSGSIZE, MAX_REQUEST_BYTES)
    raw_out = None
    if a.raw_out:
        kind = zmq.PUSH if a.raw_out_kind == "push" else zmq.PUB
        raw_sock = make_socket(ctx, kind, a.raw_out, bind=True, allow_remote=a.allow_remote)
        raw_out = SampleSender(raw_sock, raw=True)
        log.info("raw complex64 RX stream (%s) at %s", a.raw_out_kind, a.raw_out)
        if a.raw_out_wait > 0 and a.raw_out_kind == "push":
            if raw_sock.poll(int(a.raw_out_wait * 1000), zmq.POLLOUT):
                log.info("raw-out reader connected")
            else:
                log.warning("no raw-out reader after %.1f s: starting anyway", a.raw_out_wait)
    raw_dropped = 0
    tx_in = SampleReceiver(tx_sock, name="radio<-tx")
    try:
        radio = open_radio(cfg)
    except (RadioError, ConfigError) as exc:
        log.error("%s", exc)
        return 3
    log.info(
        "profile %s: backend %s, LO %.3f MHz, %.3f MSps, rx gain %s %.1f dB, tx gain %.2f dB",
        name,
        cfg.backend,
        cfg.lo_hz / 1e6,
        cfg.sample_rate_hz / 1e6,
        cfg.rx_gain_mode,
        cfg.rx_gain_db,
        cfg.tx_gain_db,
    )
    out = SampleSender(
        rx_sock, stream_id=2, sample_rate_hz=cfg.sample_rate_hz, center_freq_hz=cfg.lo_hz
    )
    is_sim = cfg.backend == "sim"
    if truth is not None:  # what a recorder needs in its metadata: the profile and the settings
        send_json(truth, {"type": "radio_config", "profile": name, "config": cfg.to_dict()})
    tx_done = False
    linger_s = a.linger
    if cfg.backend == "pluto":  # samples handed to the driver still sit in its kernel buffers:
        # TX (4, pyadi's default), then RX (kernel_buffers) before a read returns them; a
        # reader that fell behind reads the full kernel buffers before the overflow gap, so
        # it can be up to twice that late
        linger_s = max(
            linger_s,
            (4 * cfg.tx_buffer_size + 2 * cfg.kernel_buffers * cfg.rx_buffer_size)
            / cfg.sample_rate_hz
            + 0.1,
        )
    linger_left = int(linger_s * cfg.sample_rate_hz)
    # accept TX while the backend can queue it without blocking (a blocked loop starves RX)
    max_backlog_s = min(
        a.max_tx_backlog, getattr(radio, "tx_capacity", float("inf")) / 2 / cfg.sample_rate_hz
    )
    dropped_blocks = 0
    pending_flags = 0
    device_samples = 0
    last_tel = 0.0
    rc = 0

    def publish(blocked: bool = False) -> None:
        nonlocal last_tel
        if tel is None or time.monotonic() - last_tel <= 0.2:
            return
        last_tel = time.monotonic()
        send_json(
            tel,
            {
                "type": "radio",
                "device_samples": device_samples,
                "tx_active": radio.tx_active,
                "tx_backlog": getattr(radio, "tx_backlog", 0),
                "dropped_blocks": dropped_blocks,
                "rx_blocked": blocked,
                "rx_gain_db": getattr(radio, "rx_gain_db", cfg.rx_gain_db),
                "rx_gain_mode": cfg.rx_gain_mode,
                "tx_gain_db": cfg.tx_gain_db,
                "backend": cfg.backend + (f" {cfg.uri}" if cfg.uri else ""),
                "lo_hz": cfg.lo_hz,
                "sample_rate_hz": cfg.sample_rate_hz,
                "overflows": getattr(radio, "overflows", 0),
                **(radio.poll_hw_status() or {}),
                "tx_messages": tx_in.stats.messages,
                "tx_malformed": tx_in.stats.malformed,
                "raw_out_dropped": raw_dropped,
            },
            topic=b"radio",
        )

    def service(blocked: bool = False) -> None:
        """Settings requests answered, then telemetry (at once after a change)."""
        nonlocal cfg, last_tel
        if control is not None and serve_control(control, radio, log):
            cfg = radio.cfg
            out.fc = cfg.lo_hz  # the RX stream's headers carry the LO in force
            last_tel = 0.0
        publish(blocked)

    try:
        while not stop:
            # TX: take bursts while the queue is short (bounded memory, backpressure on tx)
            # and for at most INTAKE_S of work, so RX, telemetry and settings requests are
            # served between bursts (a sim's channel costs milliseconds per burst)
            backlog_s = getattr(radio, "tx_backlog", 0) / cfg.sample_rate_hz
            intake_end = time.monotonic() + INTAKE_S
            while backlog_s < max_backlog_s and time.monotonic() < intake_end:
                msg = tx_in.recv(timeout_s=0)
                if msg is None:
                    break
                if msg.header.flags & EOS:
                    tx_done = True
                    log.info(
                        "transmitter finished (%d messages, %d malformed dropped)",
                        tx_in.stats.messages,
                        tx_in.stats.malformed,
                    )
                    break
                rate = msg.header.sample_rate_hz
                if rate and not same_rate(rate, cfg.sample_rate_hz):
                    raise RadioError(
                        f"TX samples at {rate / 1e6:g} MSps, the radio runs at "
                        f"{cfg.sample_rate_hz / 1e6:g} MSps: the profile's sample_rate_hz must be "
                        "the checkpoint PHY's rate"
                    )
                radio.tx(msg.samples, cyclic=bool(msg.header.flags & CYCLIC))
                gt = getattr(radio, "last_truth", None)
                if truth is not None and gt is not None and msg.header.n_samples:
                    send_json(truth, {"type": "truth", "msg_seq": msg.header.seq, **gt})
                backlog_s = getattr(radio, "tx_backlog", 0) / cfg.sample_rate_hz
            # RX
            blk = radio.rx()
            device_samples = blk.counter + len(blk.samples)
            flags = wire_flags(blk.flags) | pending_flags
            if raw_out is not None and len(blk.samples):
                # a raw reader has no offsets to notice a gap with: it never waits for the radio,
                # and what it could not take is counted (telemetry raw_out_dropped)
                if not raw_out.send(blk.samples, timeout_s=0):
                    raw_dropped += 1
            if is_sim:
                while not out.send(blk.samples, flags=flags, offset=blk.counter, timeout_s=0.5):
                    service(blocked=True)  # the receiver is slow: the simulation waits for it
                    if stop:
                        break
                pending_flags = 0
            elif out.send(blk.samples, flags=flags, offset=blk.counter, timeout_s=0):
                pending_flags = 0
            else:
                dropped_blocks += 1
                pending_flags |= DROP
                log.warning(
                    "receiver too slow: dropped an RX block of %d samples", len(blk.samples)
                )
            service()
            if a.max_seconds is not None and device_samples >= a.max_seconds * cfg.sample_rate_hz:
                log.info("max-seconds reached")
                break
            if (
                tx_done
                and not a.serve
                and getattr(radio, "tx_backlog", 0) == 0
                and not radio.tx_active
            ):
                linger_left -= len(blk.samples)
                if linger_left <= 0:
                    break
    except RadioError as exc:
        log.error("radio failed: %s", exc)
        rc = 4
    finally:
        try:
            radio.close()  # leaves the transmitter silent
        except Exception as exc:
            log.error("closing the radio: %s", exc)
            rc = rc or 4
        out.end(timeout_s=5.0)
        for s in (tx_sock, rx_sock, tel, truth, control, raw_out.sock if raw_out else None):
            if s is not None:
                s.close(linger=2000)
        from ..transport.security import stop_authenticators

        stop_authenticators()
        ctx.term()  # blocks until queued messages are out; exiting with zero-copy sends pending can crash
    log.info(
        "radio done: %.3f s of device time, %d RX blocks dropped%s",
        device_samples / cfg.sample_rate_hz,
        dropped_blocks,
        f", {raw_dropped} raw-out blocks not taken" if raw_out is not None else "",
    )
    return rc or (130 if stop.signal else 0)
