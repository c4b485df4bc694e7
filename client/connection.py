"""The client's connection to the daemon: blocking socket, framing, start on demand, and
a daemon of another version replaced when nobody is using it (mypy's dmypy does the same).

Only the standard library and ``musec.daemon.protocol`` are imported here (the client's
start time is measured).

Why over 500 lines: one import for every command that talks to the daemon (framing, the
request/reply match that keeps a followed session's messages for ``recv``, the start on
demand, the replacement of another version); split, each command would import more.
"""

from __future__ import annotations

import errno
import itertools
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, assert_never

from musec.daemon import protocol as p

from .errors import (
    DaemonBusy,
    DaemonLost,
    DaemonNotRunning,
    DaemonStartFailed,
    MessageTooLarge,
    ProtocolMismatch,
    RequestFailed,
)
from .output import counted, err
from .version import __version__

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0


class Connection:
    """One connection to the daemon, after the ``Hello`` exchange.

    ``request`` sends a message and returns its reply (``protocol.REPLY``); ``recv``
    returns the next message of any kind. ``daemon`` is the daemon's ``Hello``;
    ``peer_pid`` the daemon's pid as the kernel reports it.
    """

    def __init__(self, sock: socket.socket, daemon_hello: p.Hello, peer_pid: int) -> None:
        self.sock = sock
        self.daemon = daemon_hello
        self.peer_pid = peer_pid
        self._frames = p.FrameBuffer()
        self._joiner = p.EventJoiner()
        self._ready: list[p.DaemonMsg] = []
        self._ids = itertools.count(1)
        self.last_reply: Any = None

    @property
    def compatible(self) -> bool:
        """Whether the daemon speaks this client's protocol."""
        return self.daemon.protocol_version == p.PROTOCOL_VERSION

    def next_id(self) -> int:
        return next(self._ids)

    def send(self, msg: p.ClientMsg) -> None:
        """Send one message.

        Raises:
            MessageTooLarge: it is over the frame limit (a huge task or message).
            DaemonLost: the daemon is gone.
        """
        try:
            frame = p.encode(msg)
        except p.FrameError:
            size = len(getattr(msg, "task", "") or getattr(msg, "text", "") or "")
            what = f"the task ({size} bytes)" if size else "the request"
            raise MessageTooLarge(
                f"{what} is over the {p.MAX_FRAME_BYTES // (1024 * 1024)} MiB a message to the daemon may carry; "
                "save it to a file in the workspace and give a short task that points to it") from None
        try:
            self.sock.sendall(frame)
        except OSError as exc:
            raise self._lost("lost the connection to the daemon") from exc

    def _feed(self, data: bytes) -> None:
        try:
            for body in self._frames.feed(data):
                msg = self._joiner.take(p.decode_daemon(body))
                if msg is not None:
                    self._ready.append(msg)
        except p.FrameError as exc:
            raise ProtocolMismatch(
                f"the daemon (pid {self.peer_pid}, still running) sent what this client cannot read ({exc}); "
                "it may be another version of musec: `musec daemon status` shows it, `musec daemon stop` "
                "stops it") from None

    def recv(self, timeout_s: float | None = None) -> p.DaemonMsg:
        """The next daemon message.

        Raises:
            DaemonLost: the daemon went away.
            TimeoutError: nothing came in ``timeout_s``.
            ProtocolMismatch: the daemon sent something this client cannot decode.
        """
        self.sock.settimeout(timeout_s)
        while not self._ready:
            try:
                data = self.sock.recv(1 << 16)
            except TimeoutError:
                raise
            except OSError as exc:
                raise self._lost("lost the connection to the daemon") from exc
            if not data:
                raise self._lost("the daemon closed the connection")
            self._feed(data)
        return self._ready.pop(0)

    def _lost(self, what: str) -> DaemonLost:
        """``DaemonLost`` saying whether the daemon process is still there (a connection
        can be closed by a daemon that goes on serving; it must not be reported stopped)."""
        alive = daemon_alive(self.peer_pid)
        if alive:
            what += (f", but the daemon (pid {self.peer_pid}) is still running; its log says why: "
                     f"{p.state_home() / 'logs' / 'musecd.log'}")
        return DaemonLost(what, daemon_alive=alive)

    def stream(self, msg: Any, timeout_s: float | None = 30.0) -> Iterator[p.Event]:
        """Send ``msg`` (``ReadLog``) and yield the ``Event`` frames of its reply, in order;
        the reply's last message (``protocol.REPLY``) is then in ``self.last_reply``.

        Raises:
            RequestFailed, ProtocolMismatch, DaemonBusy, DaemonLost: as ``request``;
                ``ProtocolMismatch`` also when fewer events came than the reply counts.
        """
        expected = p.REPLY[type(msg)]
        self.send(msg)
        count = 0
        with self._holding() as held:
            while True:
                try:
                    reply = self.recv(timeout_s)
                except TimeoutError:
                    raise DaemonBusy(f"the daemon sent nothing for {timeout_s:g} s of {type(msg).__name__}; it may "
                                     "still be working on it: try again, or see `musec daemon status`") from None
                if getattr(reply, "id", None) not in (msg.id, 0):
                    if isinstance(reply, _STREAM):
                        held.append(reply)  # a followed session's message: kept for ``recv``
                    continue  # another request's reply
                if isinstance(reply, p.Error):
                    raise RequestFailed(reply.code, reply.message)
                if isinstance(reply, p.Event):
                    count += 1
                    yield reply
                    continue
                if not isinstance(reply, expected):
                    raise ProtocolMismatch(f"the daemon answered {type(msg).__name__} with {type(reply).__name__}; it may be "
                                           "another version: `musec daemon status`")
                if getattr(reply, "events", count) != count:
                    raise ProtocolMismatch(f"the daemon said it sent {reply.events} events but {count} came; "
                                           "try again, or see `musec daemon status`")
                self.last_reply = reply
                return

    @contextmanager
    def _holding(self) -> Iterator[list[p.DaemonMsg]]:
        """Session-stream messages that come while a request waits, put back for ``recv``."""
        held: list[p.DaemonMsg] = []
        try:
            yield held
        finally:
            self._ready[0:0] = held

    def has_ready(self) -> bool:
        """Whether messages already read wait for ``recv`` (the socket may be quiet)."""
        return bool(self._ready)

    def take_ready(self) -> list[p.DaemonMsg]:
        """What the daemon has sent so far (``pending``), taken off the queue, not waited for."""
        self.pending()
        taken, self._ready = self._ready, []
        return taken

    def pending(self) -> list[p.DaemonMsg]:
        """Read what the daemon has sent so far without blocking; the messages stay queued
        for ``recv`` and are also returned (to look for, say, an approval resolved)."""
        self.sock.settimeout(0)
        try:
            while True:
                data = self.sock.recv(1 << 16)
                if not data:
                    raise self._lost("the daemon closed the connection")
                self._feed(data)
        except (BlockingIOError, TimeoutError):
            pass
        except OSError as exc:
            raise self._lost("lost the connection to the daemon") from exc
        finally:
            self.sock.settimeout(None)
        return list(self._ready)

    def request(self, msg: Any, timeout_s: float | None = 30.0,
                on_wait: Callable[[float], None] | None = None) -> Any:
        """Send ``msg`` and wait for its reply, of the type ``protocol.REPLY`` names.

        Messages of a session stream this connection follows are skipped.

        Args:
            msg: the request.
            timeout_s: how long to wait for the reply in all (``None``: for ever).
            on_wait: called about once a second while no reply has come, with the
                seconds waited so far (to show progress on a long request).

        Raises:
            RequestFailed: the daemon answered with an ``Error``.
            ProtocolMismatch: the reply is not of the expected type.
            DaemonBusy: no reply in ``timeout_s`` (a ``TimeoutError`` too).
            DaemonLost: as ``recv``.
        """
        expected = p.REPLY[type(msg)]
        self.send(msg)
        with self._holding() as held:
            return self._reply(msg, expected, timeout_s, on_wait, held)

    def _reply(self, msg: Any, expected: type, timeout_s: float | None, on_wait: Callable[[float], None] | None,
               held: list[p.DaemonMsg]) -> Any:
        started = time.monotonic()
        while True:
            waited = time.monotonic() - started
            left = None if timeout_s is None else timeout_s - waited
            step = left if on_wait is None else min(1.0, left) if left is not None else 1.0
            try:
                if left is not None and left <= 0:
                    raise TimeoutError
                reply = self.recv(step)
            except TimeoutError:
                waited = time.monotonic() - started
                if timeout_s is None or waited < timeout_s:
                    if on_wait is not None:
                        on_wait(waited)
                    continue
                raise DaemonBusy(
                    f"the daemon did not answer {type(msg).__name__} in {timeout_s:g} s; it may still be working "
                    "on it: try again, or see `musec daemon status`") from None
            match reply:
                case p.Error():
                    if reply.id in (msg.id, 0):
                        raise RequestFailed(reply.code, reply.message)
                case p.Event() | p.EventPart() | p.Delta() | p.Busy() | p.Idle() | p.SessionEnded() | p.Resync() | p.SessionStarted():
                    held.append(reply)  # a session stream's, not this reply: kept for ``recv``
                case p.Hello():
                    raise ProtocolMismatch("the daemon sent a second Hello; restart it with `musec daemon stop`")
                case (p.Ok() | p.Sessions() | p.LogLines() | p.VerifyResult() | p.ReplayResult() | p.Models()
                      | p.CostReport() | p.Agents() | p.Workers() | p.Applied() | p.Collected() | p.StatusReply()
                      | p.WorkspaceReport() | p.GoalReply() | p.PlanReport() | p.Compacted()):
                    if reply.id != msg.id:
                        continue
                    if not isinstance(reply, expected):
                        raise ProtocolMismatch(
                            f"the daemon answered {type(msg).__name__} with {type(reply).__name__}, not "
                            f"{expected.__name__}; it may be another version: `musec daemon status`")
                    return reply
                case _:
                    assert_never(reply)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


_STREAM = (p.Event, p.EventPart, p.Delta, p.Busy, p.Idle, p.SessionEnded, p.Resync, p.SessionStarted)  # a followed session's


def daemon_alive(pid: int, wait_s: float = 2.0) -> bool:
    """Whether the daemon of process ``pid`` still runs, after a connection to it ended.

    A daemon that answers a new connection's ``Hello`` with this pid runs. One that does
    not is stopping or stopped: its process is given ``wait_s`` to be gone (the kernel
    closes a killed process's sockets a moment before the process is reaped); a process
    still there after that is a daemon that runs but does not answer, never "stopped".
    """
    if not _process_exists(pid):
        return False
    try:
        other = try_connect(timeout_s=3)
    except DaemonNotRunning:
        other = None
    if other is not None:
        same = other.peer_pid == pid or other.daemon.pid == pid
        other.close()
        if same:
            return True
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not _process_exists(pid):
            return False
        time.sleep(0.02)
    return True


def _process_exists(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie has)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return True  # no /proc (macOS): kill(0) said it is there


def _peer(sock: socket.socket) -> tuple[int, int] | None:
    """(pid, uid) of the process at the other end of a Unix socket, where the OS says."""
    if hasattr(socket, "SO_PEERCRED"):
        pid, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        return pid, uid
    if hasattr(os, "getpeereid"):  # pragma: no cover - macOS/BSD: no pid
        return 0, os.getpeereid(sock.fileno())[0]  # type: ignore[attr-defined]
    return None  # pragma: no cover


def _handshake(sock: socket.socket, timeout_s: float) -> p.Hello:
    sock.settimeout(timeout_s)
    sock.sendall(p.encode(p.Hello(protocol_version=p.PROTOCOL_VERSION, version=__version__, role="client", pid=os.getpid())))
    frames = p.FrameBuffer()
    while True:
        data = sock.recv(1 << 16)
        if not data:
            raise DaemonLost("the daemon closed the connection during the handshake")
        bodies = frames.feed(data)
        if bodies:
            try:
                msg = p.decode_daemon(bodies[0])
            except p.FrameError as exc:
                raise ProtocolMismatch(f"the daemon's greeting cannot be read ({exc}); stop it with `musec daemon stop`") from None
            if isinstance(msg, p.Error):
                raise RequestFailed(msg.code, msg.message)
            if not isinstance(msg, p.Hello):
                raise ProtocolMismatch("the daemon did not answer Hello; stop it with `musec daemon stop`")
            return msg


def try_connect(path: Path | None = None, timeout_s: float = 5.0) -> Connection | None:
    """Connect and greet; ``None`` when no daemon listens there. The daemon may speak
    another protocol (``Connection.compatible``).

    Raises:
        DaemonNotRunning: the socket cannot be used (path too long, another user's, no answer).
    """
    path = path or p.socket_path()
    problem = p.socket_path_problem(path)
    if problem:
        raise DaemonNotRunning(problem)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTDIR):
            return None
        raise DaemonNotRunning(f"cannot reach the daemon at {path}: {exc.strerror or exc}") from exc
    peer = _peer(sock)
    if peer is not None and peer[1] != os.getuid():
        sock.close()
        raise DaemonNotRunning(f"the socket {path} belongs to another user's process; set MUSEC_SOCKET or MUSEC_HOME")
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
    return Connection(sock, hello, peer[0] if peer and peer[0] else hello.pid)


def daemon_env() -> dict[str, str]:
    """The environment a daemon started by the client gets: secrets removed
    (``protocol.is_secret_name``), and MUSEC_HOME/MUSEC_SOCKET made absolute (the daemon
    runs in ``/``)."""
    env = {k: v for k, v in os.environ.items() if not p.is_secret_name(k)}
    for name in ("MUSEC_HOME", "MUSEC_SOCKET"):
        if env.get(name):
            env[name] = os.path.abspath(env[name])
    return env


def spawn_daemon() -> subprocess.Popen[bytes]:
    """Start ``python -m musec.daemon`` detached (its own session, no terminal)."""
    logs = p.state_home() / "logs"
    try:
        p.private_dir(logs)  # a fresh MUSEC_HOME is made 0700, as the daemon makes it
    except OSError as exc:
        where = os.environ.get("MUSEC_HOME") or str(p.state_home())
        raise DaemonStartFailed(f"cannot use {where} for musec's state ({exc.strerror}); set MUSEC_HOME to a writable directory") from None
    with open(os.open(logs / "musecd.stderr", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600), "ab") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "musec.daemon"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
            start_new_session=True, env=daemon_env(), close_fds=True, cwd="/",
        )


def stop_daemon(conn: Connection, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Stop the daemon behind ``conn`` and wait until it no longer answers: ``Shutdown``
    when it speaks this protocol, else SIGTERM to its pid (it ends its sessions cleanly
    either way)."""
    if conn.compatible:
        try:
            conn.request(p.Shutdown(id=conn.next_id()))
            conn.sock.settimeout(timeout_s)
            while conn.sock.recv(65536):
                pass
        except (DaemonLost, OSError):
            pass
    elif conn.peer_pid > 0:
        try:
            os.kill(conn.peer_pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    conn.close()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        other = try_connect(timeout_s=1)
        if other is None:
            return
        other.close()
        time.sleep(0.05)


def _describe(conn: Connection) -> str:
    return f"musec {conn.daemon.version} (pid {conn.peer_pid}, protocol {conn.daemon.protocol_version})"


def _other_version(conn: Connection) -> Connection | None:
    """Handle a daemon of another version: restart it when it hosts no session (and return
    ``None``); say what to do when it does. Returns the connection to go on with.

    Raises:
        ProtocolMismatch: it speaks another protocol and may have live sessions.
    """
    if conn.daemon.sessions == 0:
        err(f"musec: restarting the daemon: it was {_describe(conn)}, this is musec {__version__}")
        stop_daemon(conn)
        return None
    live = (counted(conn.daemon.sessions, "live session") if conn.daemon.sessions > 0
            else "sessions that may be live")
    todo = ("when they end, run `musec daemon stop` and the next command starts this version "
            "(or stop it now: its sessions can go on with `musec run --resume ID`)")
    if not conn.compatible:
        conn.close()
        raise ProtocolMismatch(f"the daemon is {_describe(conn)} and has {live}; this client is musec {__version__} "
                               f"(protocol {p.PROTOCOL_VERSION}) and cannot use it: {todo}")
    err(f"musec: the daemon is {_describe(conn)} with {live}, this is musec {__version__}; kept for now: {todo}")
    return conn


def connect(start: bool = True, timeout_s: float = START_TIMEOUT_S) -> Connection:
    """Connect to the daemon, starting it when none runs and ``start`` is true, and
    replacing one of another version that hosts no session.

    Raises:
        DaemonNotRunning: no daemon and ``start`` is false, or the socket cannot be used.
        DaemonStartFailed: it was started but did not answer ``Hello`` in time.
        ProtocolMismatch: a daemon of another protocol hosts sessions.
    """
    conn = try_connect()
    if conn is not None and (conn.daemon.version != __version__ or not conn.compatible):
        conn = _other_version(conn)
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
        code = proc.poll()
        if code == 1:
            # Another daemon held the lock: one stopping (a restart) or one another client
            # started at the same moment. Start again; the lock decides which one serves.
            proc = spawn_daemon()
        elif code is not None:
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
