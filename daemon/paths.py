"""The daemon's directories (DESIGN §2) and its one-per-home lock.

Liveness is the OS lock on ``state/musecd.lock`` plus the socket handshake, never a PID
file: the lock file holds the pid only to name the other daemon in an error.
"""

from __future__ import annotations

import fcntl
import os

from . import protocol as p
from .errors import DaemonAlreadyRunning


class Paths:
    """The daemon's directories under one root (DESIGN §2); ``ensure`` makes them 0700.

    Args:
        env: the environment to read ``MUSEC_HOME``/XDG variables from (default: this process's).
    """

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.state = p.state_home(env)
        self.config = p.config_home(env)
        self.socket = p.socket_path(env)
        self.sessions = self.state / "sessions"
        self.blobs = self.state / "blobs"
        self.logs = self.state / "logs"
        self.kernels = self.state / "kernels"  # a kernel campaign's CSV and plot, per session
        self.lock = self.state / "musecd.lock"

    def ensure(self) -> None:
        """Make the state and config directories 0700 (``protocol.private_dir``: a fresh
        ``MUSEC_HOME`` is made 0700 too; a looser existing one of these is tightened). The
        process umask is left alone: files the agents create in a workspace get the
        person's usual modes; musec's own files are created 0600 explicitly."""
        for d in (self.state, self.config, self.sessions, self.blobs, self.logs, self.kernels, self.socket.parent):
            p.private_dir(d)


def acquire_lock(paths: Paths) -> int:
    """Take the one-daemon-per-home lock; return its fd (held for the process's life).

    Raises:
        DaemonAlreadyRunning: another daemon holds it.
    """
    fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        other = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise DaemonAlreadyRunning(
            f"a musec daemon (pid {other}) is already running for {paths.state.parent}; "
            "stop it with `musec daemon stop` or use another MUSEC_HOME"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd
