"""A goal's settings, and the ``/goal`` command's arguments (issue 14).

``/goal CONDITION [--check "CMD"] [--budget-usd X] [--max-turns N] [--max-wall D]`` sets a
goal; ``/goal`` shows its status; ``/goal pause|resume|clear`` act on it. The condition is
everything before the first option, kept verbatim (apart from the spaces around it and one
pair of quotes around the whole); only the options are split like a shell would.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass
from typing import Literal

__all__ = ["ACTIONS", "GoalCommand", "GoalSpec", "GoalUsageError", "parse_duration", "parse_goal_command"]

ACTIONS = ("pause", "resume", "clear", "status")
Action = Literal["set", "pause", "resume", "clear", "status"]
_OPTIONS = ("--check", "--budget-usd", "--max-turns", "--max-wall")
_OPTION_AT = re.compile(r"(?:^|\s)(" + "|".join(re.escape(o) for o in _OPTIONS) + r")(?=\s|=|$)")
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*")
USAGE = '/goal CONDITION [--check "CMD"] [--budget-usd X] [--max-turns N] [--max-wall D], or /goal [pause|resume|clear]'


class GoalUsageError(ValueError):
    """The ``/goal`` arguments (or ``--goal`` options) cannot be used; the message says how."""


@dataclass(frozen=True)
class GoalSpec:
    """A goal as the person set it.

    Attributes:
        condition: what must hold, verbatim.
        check: a shell command run in the sandbox after each turn; exit 0 passes ("": none).
        budget_usd: dollars the goal may spend, every agent's model calls counted (0: no cap).
        max_turns: the working agent's model turns the goal may take (0: no cap).
        max_wall_s: seconds of work the goal may take (0: no cap).
    """

    condition: str
    check: str = ""
    budget_usd: float = 0.0
    max_turns: int = 0
    max_wall_s: float = 0.0


@dataclass(frozen=True)
class GoalCommand:
    """A parsed ``/goal``: ``action``, and for ``set`` the goal."""

    action: Action
    spec: GoalSpec | None = None


def parse_duration(text: str, option: str = "--max-wall") -> float:
    """``90s``, ``15m``, ``24h``, ``1d`` or seconds -> seconds.

    Raises:
        GoalUsageError: not a positive duration.
    """
    m = _DURATION.fullmatch(text or "")
    if not m or float(m.group(1)) <= 0:
        raise GoalUsageError(f"{option} {text!r}: write a positive duration such as 90s, 15m, 24h or 1d")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1].strip()
    return text


def parse_goal_command(text: str) -> GoalCommand:
    """Parse what follows ``/goal``.

    Raises:
        GoalUsageError: an unknown option, a bad value, or options without a condition.
    """
    text = text.strip()
    if not text or text == "status":
        return GoalCommand("status")
    if text in ACTIONS:
        return GoalCommand(text)  # type: ignore[arg-type]
    found = _OPTION_AT.search(text)
    condition = _unquote(text[: found.start()] if found else text)
    if not condition:
        raise GoalUsageError(f"give the goal's condition first: {USAGE}")
    values: dict[str, str] = {}
    if found:
        try:
            words = shlex.split(text[found.start():])
        except ValueError as exc:
            raise GoalUsageError(f"the options after the condition do not parse ({exc}); quote the command: --check \"pytest -q\"") from None
        i = 0
        while i < len(words):
            name, eq, value = words[i].partition("=")
            if name not in _OPTIONS:
                raise GoalUsageError(f"unknown option {words[i]!r}; {USAGE}")
            if not eq:
                if i + 1 >= len(words):
                    raise GoalUsageError(f"{name} needs a value; {USAGE}")
                i += 1
                value = words[i]
            values[name] = value
            i += 1
    return GoalCommand("set", make_spec(condition, check=values.get("--check", ""), budget_usd=values.get("--budget-usd"),
                                        max_turns=values.get("--max-turns"), max_wall=values.get("--max-wall")))


def make_spec(condition: str, *, check: str = "", budget_usd: str | float | None = None,
              max_turns: str | int | None = None, max_wall: str | float | None = None) -> GoalSpec:
    """A checked ``GoalSpec``; numbers may be given as text (``/goal``) or numbers (``--goal``).

    Raises:
        GoalUsageError: an empty condition or check, or a limit that is not a positive number.
    """
    if not condition.strip():
        raise GoalUsageError(f"the goal's condition is empty; {USAGE}")
    if check is not None and check != "" and not check.strip():
        raise GoalUsageError("--check is empty; give the command that passes when the goal is met")
    budget = 0.0
    if budget_usd is not None:
        try:
            budget = float(budget_usd)
        except ValueError:
            budget = -1.0
        if not math.isfinite(budget) or budget <= 0:
            raise GoalUsageError(f"--budget-usd {budget_usd!r}: give a number of dollars more than 0")
    turns = 0
    if max_turns is not None:
        try:
            turns = int(max_turns)
        except ValueError:
            turns = 0
        if turns < 1:
            raise GoalUsageError(f"--max-turns {max_turns!r}: give a whole number of at least 1")
    wall = 0.0
    if max_wall is not None:
        wall = parse_duration(max_wall) if isinstance(max_wall, str) else float(max_wall)
        if not math.isfinite(wall) or wall <= 0:
            raise GoalUsageError(f"--max-wall {max_wall!r}: write a positive duration such as 90s, 15m, 24h or 1d")
    return GoalSpec(condition.strip(), check.strip(), budget, turns, wall)
