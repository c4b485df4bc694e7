"""Exit codes of ``musec run`` (DESIGN §3, contract), mapped in this one place."""

from __future__ import annotations

OK = 0
GOAL_UNMET = 1
USAGE = 2
NEEDS_APPROVAL = 3
LIMIT = 4
UNREACHABLE = 5
INTERRUPTED = 130

_BY_REASON = {
    "finished": OK,
    "goal_unmet": GOAL_UNMET,
    "error": GOAL_UNMET,
    "needs_approval": NEEDS_APPROVAL,
    "max_turns": LIMIT,
    "budget": LIMIT,
    "provider_unreachable": UNREACHABLE,
    "interrupted": INTERRUPTED,
}


def for_reason(exit_reason: str) -> int:
    """The exit code for a session's ``exit_reason`` (unknown reasons count as errors)."""
    return _BY_REASON.get(exit_reason, GOAL_UNMET)
