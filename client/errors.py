"""Errors of the client, named by condition; each message is one line saying what to do.

An error's exit code comes from the table in ``exitcodes``, by its condition.
"""

from __future__ import annotations

from .exitcodes import Condition, Exit, for_condition, for_error


class ClientError(Exception):
    """Base of the client's errors; ``main`` prints the message and exits with ``exit_code``."""

    condition = Condition.USAGE

    @property
    def exit_code(self) -> Exit:
        return for_condition(self.condition)


class UsageError(ClientError):
    """Bad arguments or input."""

    condition = Condition.USAGE


class SetupFailed(ClientError):
    """Something the client installs for a command (Harbor's venv) could not be installed."""

    condition = Condition.SETUP_FAILED


class MessageTooLarge(ClientError):
    """A request (a task, a message) is over the wire's frame limit."""

    condition = Condition.MESSAGE_TOO_LARGE


class NothingToResume(ClientError):
    condition = Condition.NOTHING_TO_RESUME


class DaemonNotRunning(ClientError):
    condition = Condition.DAEMON_NOT_RUNNING


class DaemonStartFailed(ClientError):
    condition = Condition.DAEMON_START_FAILED


class ProtocolMismatch(ClientError):
    """The daemon speaks another protocol version, or sent what this client cannot read."""

    condition = Condition.PROTOCOL_MISMATCH


class DaemonLost(ClientError):
    """The connection to the daemon ended in the middle of a request.

    ``daemon_alive``: the daemon process was still there when it ended (it closed this
    connection only); the message then says so, never that the daemon stopped.
    """

    condition = Condition.DAEMON_LOST

    def __init__(self, message: str, *, daemon_alive: bool = False) -> None:
        super().__init__(message)
        self.daemon_alive = daemon_alive


class DaemonBusy(ClientError, TimeoutError):
    """The daemon did not answer a request in time (it is still working on it, or stuck)."""

    condition = Condition.DAEMON_LOST


class RequestFailed(ClientError):
    """The daemon answered a request with an ``Error`` frame; its code decides the exit."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code

    @property
    def exit_code(self) -> Exit:
        return for_error(self.code)
