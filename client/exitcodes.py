"""Every exit code of ``musec``, decided in this one table (DESIGN §3, contract).

    0  finished                       3  needs approval in a non-interactive run
    1  goal unmet, or an error the    4  budget, turn or time limit reached
       agent or a check reported      5  provider or daemon unreachable
    2  usage error                  130  interrupted
                                    129, 143  SIGHUP, SIGTERM (128 + the signal)

Three kinds of condition map to them: how a session ended (``ExitReason``), why the
daemon refused a request (``ErrorCode``), and what the client itself found
(``Condition``). A test checks that each table covers its whole set.
"""

from __future__ import annotations

import enum

from musec.daemon import protocol as p


class Exit(enum.IntEnum):
    """The process exit codes."""

    OK = 0
    GOAL_UNMET = 1
    USAGE = 2
    NEEDS_APPROVAL = 3
    LIMIT = 4
    UNREACHABLE = 5
    HANGUP = 129  # SIGHUP: the terminal closed
    INTERRUPTED = 130
    TERMINATED = 143  # SIGTERM


FOR_REASON: dict[p.ExitReason, Exit] = {
    "finished": Exit.OK,
    "goal_unmet": Exit.GOAL_UNMET,
    "error": Exit.GOAL_UNMET,
    "paused": Exit.GOAL_UNMET,  # the log could not be written: an error, reported
    "needs_approval": Exit.NEEDS_APPROVAL,
    "max_turns": Exit.LIMIT,
    "budget": Exit.LIMIT,
    "max_wall": Exit.LIMIT,
    "provider_unreachable": Exit.UNREACHABLE,
    "interrupted": Exit.INTERRUPTED,
    # A session that is not live and logged no end: the daemon that ran it stopped.
    "not_live": Exit.UNREACHABLE,
}

FOR_ERROR: dict[p.ErrorCode, Exit] = {
    "bad_request": Exit.USAGE,
    "session_not_found": Exit.USAGE,  # an id that names no session is a bad argument
    "trust_required": Exit.USAGE,
    "session_locked": Exit.USAGE,  # in use elsewhere: the request cannot be done as asked
    "log_corrupt": Exit.GOAL_UNMET,
    "internal": Exit.GOAL_UNMET,
    "already_resolved": Exit.GOAL_UNMET,
    "check_failed": Exit.GOAL_UNMET,  # e.g. applying an integration whose tests failed
    "daemon_error": Exit.GOAL_UNMET,
    "daemon_already_running": Exit.GOAL_UNMET,
    "permission_denied": Exit.UNREACHABLE,
    "bad_frame": Exit.UNREACHABLE,  # the daemon cannot understand this client
    "no_hello": Exit.UNREACHABLE,
    "protocol_mismatch": Exit.UNREACHABLE,
    "too_large": Exit.GOAL_UNMET,  # a reply no frame could carry; the daemon goes on
    "disk_full": Exit.GOAL_UNMET,  # the state folder's disk is full: free space, then again
    "still_followed": Exit.OK,  # the session was left open for the other terminal following it
}


class Condition(enum.Enum):
    """What the client finds by itself."""

    USAGE = "usage"  # bad arguments, a file that is not there
    MESSAGE_TOO_LARGE = "message_too_large"  # a task over the frame limit
    NOTHING_TO_RESUME = "nothing_to_resume"
    DAEMON_NOT_RUNNING = "daemon_not_running"  # also `musec daemon status` with none
    DAEMON_START_FAILED = "daemon_start_failed"
    DAEMON_LOST = "daemon_lost"
    PROTOCOL_MISMATCH = "protocol_mismatch"
    LOG_DAMAGED = "log_damaged"  # `musec log` stopped at a damaged line
    VERIFY_FAILED = "verify_failed"  # `musec log verify`: chain broken or torn tail
    REPLAY_MISMATCH = "replay_mismatch"
    CHECKS_FAILED = "checks_failed"  # `musec doctor`, the demo's tests
    INTERRUPTED = "interrupted"  # Ctrl-C
    INTERNAL = "internal"  # a fault of the client itself, reported in one line
    SETUP_FAILED = "setup_failed"  # an install the client ran failed (Harbor's venv)
    COMPACT_FAILED = "compact_failed"  # `musec compact`: the summarising call failed


FOR_CONDITION: dict[Condition, Exit] = {
    Condition.USAGE: Exit.USAGE,
    Condition.MESSAGE_TOO_LARGE: Exit.USAGE,
    Condition.NOTHING_TO_RESUME: Exit.USAGE,
    Condition.DAEMON_NOT_RUNNING: Exit.UNREACHABLE,
    Condition.DAEMON_START_FAILED: Exit.UNREACHABLE,
    Condition.DAEMON_LOST: Exit.UNREACHABLE,
    Condition.PROTOCOL_MISMATCH: Exit.UNREACHABLE,
    Condition.LOG_DAMAGED: Exit.GOAL_UNMET,
    Condition.VERIFY_FAILED: Exit.GOAL_UNMET,
    Condition.REPLAY_MISMATCH: Exit.GOAL_UNMET,
    Condition.CHECKS_FAILED: Exit.GOAL_UNMET,
    Condition.INTERRUPTED: Exit.INTERRUPTED,
    Condition.INTERNAL: Exit.GOAL_UNMET,
    Condition.SETUP_FAILED: Exit.GOAL_UNMET,
    Condition.COMPACT_FAILED: Exit.GOAL_UNMET,
}


def for_reason(exit_reason: str) -> Exit:
    """The exit code for a session's ``exit_reason`` (one this client does not know counts
    as an error reported)."""
    return FOR_REASON.get(exit_reason, Exit.GOAL_UNMET)  # type: ignore[call-overload]


def for_error(code: str) -> Exit:
    """The exit code for a daemon ``Error``'s ``code``."""
    return FOR_ERROR.get(code, Exit.GOAL_UNMET)  # type: ignore[call-overload]


def for_condition(condition: Condition) -> Exit:
    """The exit code for a condition the client found."""
    return FOR_CONDITION[condition]


OK = Exit.OK


def for_signal(signum: int) -> Exit:
    """The exit code of a client stopped by SIGHUP or SIGTERM (128 + the signal, as a shell
    reports a process the signal killed)."""
    return Exit.HANGUP if signum == 1 else Exit.TERMINATED
