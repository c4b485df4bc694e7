"""Errors of the daemon, named by condition. Each carries a one-line message for a person."""

from __future__ import annotations

import errno
from pathlib import Path


class DaemonError(Exception):
    """Base of every error the daemon raises on purpose."""

    code = "daemon_error"


class ClientGone(Exception):
    """The client closed its connection while the daemon was answering it (``musec log ID |
    head`` closes its pipe early, a terminal is closed): a normal end, never logged as a
    failure. Not a ``DaemonError``: there is no one left to answer."""


class DaemonAlreadyRunning(DaemonError):
    code = "daemon_already_running"


class SessionLocked(DaemonError):
    """Another process holds the session's log lock."""

    code = "session_locked"


class LogCorrupt(DaemonError):
    """A session log is damaged before its last line."""

    code = "log_corrupt"


class SessionNotFound(DaemonError):
    code = "session_not_found"


class CheckFailed(DaemonError):
    """A check the request depends on did not pass (an integration with conflicts or
    failing tests cannot be applied): exit 1, as a failed check, not a usage error."""

    code = "check_failed"


class BadRequest(DaemonError):
    code = "bad_request"


class DiskFull(DaemonError):
    """The daemon could not write its state folder: the disk (or the person's quota) is
    full. Nothing half-written is left behind (fresh-user s8 J4)."""

    code = "disk_full"


FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def disk_full(exc: OSError, state: Path) -> DiskFull | None:
    """The one-line error for ``exc`` when it says the disk is full, else ``None``."""
    if exc.errno not in FULL_ERRNOS:
        return None
    return DiskFull(f"the disk of musec's state folder {state} is full ({exc.strerror or exc}); nothing was "
                    "done. Free space there (`musec gc --older-than 30d` removes old sessions), then try again")
