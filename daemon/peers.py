"""Who may talk to the daemon: the same user, and never a process of a session's own tools.

A sandboxed command sees the filesystem read-only, and a read-only bind does not stop a
``connect()`` on a Unix socket: without this check a ``bash`` call could start an
unsandboxed session (``musec run --sandbox off --approval auto``) or answer its own
session's approvals (fresh-user trial s5, F13). So a connection is refused when its peer

- runs in another PID namespace than the daemon's (every bubblewrap sandbox musec starts
  unshares it: ``--unshare-pid``), or
- descends from the daemon (a tool, a hook, an MCP server or a test run it started, in
  the sandbox or not: a process that double-forks inside bubblewrap is still reaped by
  the sandbox's own init, a child of the daemon's).

The peer is named by the kernel (``SO_PEERCRED`` on Linux, ``LOCAL_PEERPID`` on macOS),
not by anything the peer says. A peer whose PID the daemon cannot see (0: it lives in a
namespace outside the daemon's, e.g. a client on the host of a containerised daemon) is
not a process of the daemon's sandboxes, so it is served. On macOS the Seatbelt profile
already denies the sandbox's network, Unix sockets included; the ancestry walk there uses
``ps`` (one call per connection).
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys

__all__ = ["peer_pid", "refused_peer"]

#: macOS ``<sys/un.h>``: ``getsockopt(fd, SOL_LOCAL, LOCAL_PEERPID)``.
_SOL_LOCAL, _LOCAL_PEERPID = 0, 2
#: Ancestors walked at most (a loop in a racing /proc would otherwise never end).
_MAX_DEPTH = 128


def peer_pid(sock: socket.socket) -> int | None:
    """The PID of the process at the other end of a connected Unix socket, as the daemon's
    PID namespace sees it; ``0`` when that process is outside it; ``None`` when the
    platform cannot tell."""
    if hasattr(socket, "SO_PEERCRED"):
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", creds)[0]
    if sys.platform == "darwin":  # pragma: no cover - macOS
        try:
            return struct.unpack("i", sock.getsockopt(_SOL_LOCAL, _LOCAL_PEERPID, 4))[0]
        except OSError:
            return None
    return None  # pragma: no cover


def _parent(pid: int) -> int | None:
    """The parent of ``pid`` (``None``: gone, or not readable)."""
    if sys.platform.startswith("linux"):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            return None
        # "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses; it ends at the last ")"
        fields = stat[stat.rfind(b")") + 2:].split()
        return int(fields[1]) if len(fields) > 1 else None
    try:  # pragma: no cover - macOS
        out = subprocess.run(["ps", "-o", "ppid=", "-p", str(pid)], capture_output=True, text=True, timeout=5).stdout
        return int(out.strip()) if out.strip() else None
    except (OSError, ValueError, subprocess.SubprocessError):  # pragma: no cover
        return None


def _pid_namespace(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def refused_peer(pid: int | None, daemon_pid: int | None = None) -> str | None:
    """Why the peer ``pid`` may not use the daemon, in words; ``None`` when it may.

    Args:
        pid: the peer's PID (``peer_pid``); ``None``/``0`` are served (nothing to check).
        daemon_pid: the PID whose descendants are refused (default: this process, the
            daemon); the namespace compared is always this process's.

    Returns:
        ``"it runs in a sandbox"`` or ``"it was started by a musec session"``, or ``None``.
    """
    if not pid:
        return None
    me = os.getpid() if daemon_pid is None else daemon_pid
    own_ns = _pid_namespace("self")
    if own_ns is not None:
        theirs = _pid_namespace(pid)
        if theirs is not None and theirs != own_ns:
            return "it runs in a sandbox"
    current: int | None = pid
    for _ in range(_MAX_DEPTH):
        current = _parent(current) if current else None
        if not current or current == 1:
            return None
        if current == me:
            return "it was started by a musec session"
    return None
