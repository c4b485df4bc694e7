"""The client's connection to the daemon: blocking socket, framing, start on demand.

Only the standard library and ``musec.daemon.protocol`` are imported here (the client's
start time is measured).
"""

from __future__ import annotations

import errno
import itertools
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from musec.daemon import protocol as p

from .errors import DaemonLost, DaemonNotRunning, DaemonStartFailed, ProtocolMismatch, RequestFailed

START_TIMEOUT_S = 20.0
_SECRET_MARKERS = ("_KEY", "_TOKEN", "_SECRET", "PASSWORD")


class Connection:
    """One connection to the daemon, after the ``Hello`` exchange.

    ``request`` sends a message and returns the first reply that carries its id and is
    not an event stream message; ``recv`` returns the next message of any kind.
    """

    def __init__(self, sock: socket.socket, daemon_hello: p.Hello) -> None:
        self.sock = sock
        self.daemon = daemon_hello
        self._frames = p.FrameBuffer()
        self._ready: list[Any] = []
        self._ids = itertools.count(1)

    def next_id(self) -> int:
        return next(self._ids)

    def send(self, msg: Any) -> None:
        try:
            self.sock.sendall(p.encode(msg))
        except OSError as exc:
            raise DaemonLost("lost the connection to the daemon; check `musec daemon status`") from exc

    def recv(self, timeout_s: float | None = None) -> Any:
        """The next daemon message. Raises ``DaemonLost`` if the daemon goes, ``TimeoutError``."""
        self.sock.settimeout(timeout_s)
        while not self._ready:
            try:
                data = self.sock.recv(1 << 16)
            except TimeoutError:
                raise
            except OSError as exc:
                raise DaemonLost("lost the connection to the daemon") from exc
            if not data:
                raise DaemonLost("the daemon closed the connection")
            for body in self._frames.feed(data):
                self._ready.append(p.decode_daemon(body))
        return self._ready.pop(0)

    def pending(self) -> list[Any]:
        """Read what the daemon has sent so far without blocking; the messages stay queued
        for ``recv`` and are also returned (to look for, say, an approval resolved)."""
        self.sock.settimeout(0)
        try:
            while True:
                data = self.sock.recv(1 << 16)
                if not data:
                    raise DaemonLost("the daemon closed the connection")
                for body in self._frames.feed(data):
                    self._ready.append(p.decode_daemon(body))
        except (BlockingIOError, TimeoutError):
            pass
        except OSError as exc:
            raise DaemonLost("lost the connection to the daemon") from exc
        finally:
            self.sock.settimeout(None)
        return list(self._ready)

    def request(self, msg: Any, timeout_s: float | None = 30.0) -> Any:
        """Send ``msg`` and wait for its direct reply. Raises ``RequestFailed`` on ``Error``."""
        self.send(msg)
        while True:
            reply = self.recv(timeout_s)
            if getattr(reply, "id", None) not in (msg.id, 0) or isinstance(reply, (p.Event, p.Delta)):
                continue
            if isinstance(reply, p.Error):
                raise RequestFailed(reply.code, reply.message)
            return reply

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _handshake(sock: socket.socket, timeout_s: float) -> p.Hello:
    sock.settimeout(timeout_s)
    sock.sendall(p.encode(p.Hello(protocol_version=p.PROTOCOL_VERSION, version=p.__version__, role="client", pid=os.getpid())))
    frames = p.FrameBuffer()
    while True:
        data = sock.recv(1 << 16)
        if not data:
            raise DaemonLost("the daemon closed the connection during the handshake")
        bodies = frames.feed(data)
        if bodies:
            msg = p.decode_daemon(bodies[0])
            if isinstance(msg, p.Error):
                raise RequestFailed(msg.code, msg.message)
            if not isinstance(msg, p.Hello):
                raise ProtocolMismatch("the daemon did not answer Hello; restart it with `musec daemon stop`")
            if msg.protocol_version != p.PROTOCOL_VERSION:
                raise ProtocolMismatch(
                    f"the daemon speaks protocol {msg.protocol_version} (version {msg.version}), this client "
                    f"{p.PROTOCOL_VERSION}; restart it with `musec daemon stop`"
                )
            return msg


def try_connect(path: Path | None = None, timeout_s: float = 5.0) -> Connection | None:
    """Connect and greet; ``None`` when no daemon listens there."""
    path = path or p.socket_path()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTDIR):
            return None
        raise DaemonNotRunning(f"cannot reach the daemon at {path}: {exc.strerror}") from exc
    try:
        hello = _handshake(sock, timeout_s)
    except (OSError, TimeoutError) as exc:
        sock.close()
        if isinstance(exc, TimeoutError):
            raise DaemonNotRunning(f"the daemon at {path} does not answer; check `musec daemon status`") from exc
        return None
    except BaseException:
        sock.close()
        raise
    return Connection(sock, hello)


def daemon_env() -> dict[str, str]:
    """The environment a daemon started by the client gets: credentials removed, and
    MUSEC_HOME/MUSEC_SOCKET made absolute (the daemon runs in ``/``)."""
    env = {k: v for k, v in os.environ.items() if not any(m in k.upper() for m in _SECRET_MARKERS)}
    for name in ("MUSEC_HOME", "MUSEC_SOCKET"):
        if env.get(name):
            env[name] = os.path.abspath(env[name])
    return env


def spawn_daemon() -> subprocess.Popen[bytes]:
    """Start ``musec daemon run`` detached (its own session, no terminal)."""
    logs = p.state_home() / "logs"
    try:
        logs.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        where = os.environ.get("MUSEC_HOME") or str(p.state_home())
        raise DaemonStartFailed(f"cannot use {where} for musec's state ({exc.strerror}); set MUSEC_HOME to a writable directory") from None
    with open(os.open(logs / "musecd.stderr", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600), "ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "musec.daemon"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            start_new_session=True, env=daemon_env(), close_fds=True, cwd="/",
        )


def connect(start: bool = True, timeout_s: float = START_TIMEOUT_S) -> Connection:
    """Connect to the daemon, starting it when none runs and ``start`` is true.

    Raises:
        DaemonNotRunning: no daemon and ``start`` is false.
        DaemonStartFailed: it was started but did not answer ``Hello`` in time.
    """
    conn = try_connect()
    if conn is not None:
        return conn
    if not start:
        raise DaemonNotRunning("the musec daemon is not running; start it with `musec daemon start`")
    proc = spawn_daemon()
    deadline = time.monotonic() + timeout_s
    delay = 0.01
    while time.monotonic() < deadline:
        conn = try_connect()
        if conn is not None:
            return conn
        if proc.poll() not in (None, 0, 1):
            break
        time.sleep(delay)
        delay = min(delay * 1.5, 0.2)
    tail = _stderr_tail()
    raise DaemonStartFailed(f"the daemon did not start{': ' + tail if tail else ''}; see {p.state_home() / 'logs'}")


def _stderr_tail() -> str:
    try:
        lines = (p.state_home() / "logs" / "musecd.stderr").read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""
