"""Errors of the client, named by condition; each message is one line saying what to do."""

from __future__ import annotations

from . import exitcodes


class ClientError(Exception):
    exit_code = exitcodes.GOAL_UNMET


class UsageError(ClientError):
    exit_code = exitcodes.USAGE


class DaemonNotRunning(ClientError):
    exit_code = exitcodes.UNREACHABLE


class DaemonStartFailed(ClientError):
    exit_code = exitcodes.UNREACHABLE


class ProtocolMismatch(ClientError):
    exit_code = exitcodes.UNREACHABLE


class DaemonLost(ClientError):
    """The daemon went away in the middle of a request."""

    exit_code = exitcodes.UNREACHABLE


class RequestFailed(ClientError):
    """The daemon answered a request with an ``Error`` frame; a request the daemon found
    wrong or a session it does not know is a usage error (exit 2)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.exit_code = exitcodes.USAGE if code in ("bad_request", "session_not_found") else exitcodes.GOAL_UNMET
