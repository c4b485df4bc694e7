"""A real daemon process against bad frames: each gets an error frame, none kills the daemon."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from musec.daemon import protocol as p

HELLO = p.Hello(protocol_version=p.PROTOCOL_VERSION, version="test", role="client", pid=os.getpid())


class Daemon:
    def __init__(self, home: Path, proc: subprocess.Popen[bytes]) -> None:
        self.home = home
        self.proc = proc
        self.socket = p.socket_path({"MUSEC_HOME": str(home)})


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MUSEC_", "LISTEN_", "XDG_")) and not k.endswith(("_KEY", "_TOKEN", "_SECRET"))}
    env["MUSEC_HOME"] = str(home)
    return env


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    home = Path(tempfile.mkdtemp(prefix="mf", dir="/tmp"))  # socket paths must stay under 108 bytes
    proc = subprocess.Popen([sys.executable, "-m", "musec.daemon"], env=_env(home),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    d = Daemon(home, proc)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.communicate()
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.connect(str(d.socket))
                break
            except (FileNotFoundError, ConnectionRefusedError):
                assert time.monotonic() < deadline, "the daemon did not start listening"
        yield d
    finally:
        try:
            with Client(d) as c:
                c.hello()
                c.send(p.Shutdown(id=999))
                c.recv_until_close()
        except OSError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        _, stderr = proc.communicate()
        log_file = home / "state" / "logs" / "musecd.log"
        daemon_log = log_file.read_text() if log_file.exists() else ""
        shutil.rmtree(home, ignore_errors=True)
    # Shutdown stopped it cleanly, and no bad frame reached the connection supervisor.
    assert proc.returncode == 0, stderr.decode(errors="replace")
    assert "connection_failed" not in daemon_log, daemon_log


class Client:
    """A raw socket speaking frames by hand, so it can also speak them badly."""

    def __init__(self, d: Daemon) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(20)  # a deadline on every read, not a sleep
        self.sock.connect(str(d.socket))
        self.frames = p.FrameBuffer()
        self.ready: list[bytes] = []

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def send(self, msg: object) -> None:
        self.sock.sendall(p.encode(msg))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self) -> p.DaemonMsg | None:
        """The next frame, or None at the end of the stream."""
        while not self.ready:
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            if not data:
                return None
            self.ready += self.frames.feed(data)
        return p.decode_daemon(self.ready.pop(0))

    def recv_until_close(self) -> list[p.DaemonMsg]:
        out = []
        while (msg := self.recv()) is not None:
            out.append(msg)
        return out

    def hello(self) -> p.Hello:
        self.send(HELLO)
        reply = self.recv()
        assert isinstance(reply, p.Hello) and reply.role == "daemon", reply
        assert reply.protocol_version == p.PROTOCOL_VERSION
        return reply

    def status(self, request_id: int) -> p.StatusReply:
        self.send(p.Status(id=request_id))
        reply = self.recv()
        assert isinstance(reply, p.StatusReply) and reply.id == request_id, reply
        return reply


def test_hello_and_status(daemon: Daemon) -> None:
    with Client(daemon) as c:
        hello = c.hello()
        assert hello.pid == daemon.proc.pid
        reply = c.status(1)
        assert reply.pid == daemon.proc.pid and reply.socket == str(daemon.socket)


def test_socket_directory_and_file_are_private(daemon: Daemon) -> None:
    assert stat.S_IMODE(daemon.socket.parent.stat().st_mode) == 0o700
    assert stat.S_ISSOCK(daemon.socket.stat().st_mode)
    assert stat.S_IMODE(daemon.socket.stat().st_mode) == 0o600


@pytest.mark.parametrize("length", [p.MAX_FRAME_BYTES + 1, 2**32 - 1])
@pytest.mark.parametrize("greeted", [False, True])
def test_an_oversized_length_gets_an_error_and_a_close(daemon: Daemon, length: int, greeted: bool) -> None:
    with Client(daemon) as c:
        if greeted:
            c.hello()
        c.send_raw(struct.pack(">I", length) + b"\x00" * 100)
        msgs = c.recv_until_close()
        assert len(msgs) == 1 and isinstance(msgs[0], p.Error), msgs
        assert msgs[0].code == "bad_frame" and "over" in msgs[0].message


@pytest.mark.parametrize(("body", "code"), [
    (b"\xc1", "bad_frame"),
    (b"\x00garbage", "bad_frame"),
    (b"", "bad_frame"),
    # readable messages that break the schema: bad requests, answered with their id if readable
    (msgspec.msgpack.encode({"type": "no_such_request", "id": 5}), "bad_request"),
    (msgspec.msgpack.encode({"type": "status", "id": "five"}), "bad_request"),
    (msgspec.msgpack.encode({"type": "ok", "id": 5}), "bad_request"),  # a daemon message sent to the daemon
    (b"\x91" * 50_000, "bad_frame"),
])
def test_garbage_after_hello_gets_an_error_and_the_connection_goes_on(daemon: Daemon, body: bytes, code: str) -> None:
    with Client(daemon) as c:
        c.hello()
        # the bad frame and a good request in one write: both are answered, in order
        c.send_raw(struct.pack(">I", len(body)) + body + p.encode(p.Status(id=7)))
        err = c.recv()
        assert isinstance(err, p.Error) and err.code == code, err
        reply = c.recv()
        assert isinstance(reply, p.StatusReply) and reply.id == 7
        c.status(8)


def test_a_request_before_hello_is_refused(daemon: Daemon) -> None:
    with Client(daemon) as c:
        c.send(p.Status(id=3))
        msgs = c.recv_until_close()
        assert len(msgs) == 1 and isinstance(msgs[0], p.Error) and msgs[0].code == "no_hello", msgs


def test_garbage_before_hello_then_hello_works(daemon: Daemon) -> None:
    with Client(daemon) as c:
        c.send_raw(struct.pack(">I", 1) + b"\xc1")
        err = c.recv()
        assert isinstance(err, p.Error) and err.code == "bad_frame", err
        c.hello()
        c.status(2)


def test_a_wrong_protocol_version_is_a_mismatch(daemon: Daemon) -> None:
    with Client(daemon) as c:
        c.send(p.Hello(protocol_version=p.PROTOCOL_VERSION + 1, version="9.9", role="client"))
        msgs = c.recv_until_close()
        assert [type(m) for m in msgs] == [p.Hello, p.Error], msgs
        assert msgs[0].role == "daemon" and msgs[0].protocol_version == p.PROTOCOL_VERSION
        assert msgs[1].code == "protocol_mismatch" and str(p.PROTOCOL_VERSION) in msgs[1].message


def test_errors_carry_the_request_id(daemon: Daemon) -> None:
    with Client(daemon) as c:
        c.hello()
        c.send(p.ReadLog(id=41, session_id="no-such-session"))
        err = c.recv()
        assert isinstance(err, p.Error) and err.id == 41 and err.code == "session_not_found", err
        c.send(p.ApprovalAnswer(id=42, session_id="x", call_id="c", decision="maybe"))
        err = c.recv()
        assert isinstance(err, p.Error) and err.id == 42 and err.code == "bad_request", err


def test_a_client_that_vanishes_mid_frame(daemon: Daemon) -> None:
    with Client(daemon) as c:
        c.hello()
        c.send_raw(p.encode(p.Status(id=1))[:5])
    with Client(daemon) as c:
        c.send_raw(b"\x00\x00")


def test_the_daemon_survived_everything(daemon: Daemon) -> None:
    assert daemon.proc.poll() is None
    with Client(daemon) as c:
        c.hello()
        assert c.status(100).pid == daemon.proc.pid
        c.send(p.ListSessions(id=101))
        reply = c.recv()
        assert isinstance(reply, p.Sessions) and reply.id == 101
