"""Crash points for restart-safety tests (``MUSEC_CRASH_AT=<point>``).

A ``Faults`` object is made once, at the daemon's entry point, from its environment, and
handed to what has crash points (the event log, the agent loop, the tools through their
``ToolContext``); nothing reads the environment on its own. When a point is armed, the
process exits at once (``os._exit``, no cleanup, as a ``kill -9`` would) when it reaches
it. Points:

- ``after_tool_started``: the ``tool_started`` event is on disk, the tool has not begun.
- ``during_tool``: the tool is running: a command has printed its first output (its
  process is killed with the daemon).
- ``before_tool_finished``: the tool is done, its ``tool_finished`` not yet written.
- ``mid_model_stream``: the first piece of a model answer has streamed.
- ``mid_edit``: an edit's new content is written to its temp file, not yet renamed.
- ``mid_append``: half of a ``tool_finished`` line is written to the log.

Points of a goal (``GOAL_POINTS``, ``agents/goal``), reached only while a goal is judged:

- ``goal_check``: the goal's check command has run, its ``goal_checked`` not yet written.
- ``goal_verdict``: the evaluator has answered (logged), its ``goal_checked`` not yet written.

Compaction's points (``COMPACTION_POINTS``, reached only by a session that compacts):

- ``mid_compaction``: ``compaction_started`` is on disk, the summarising call not yet made.
- ``mid_compaction_append``: half of a ``compaction_finished`` line is written to the log.

Disarmed (``NO_FAULTS``, the default everywhere), each check is one comparison.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

POINTS = ("after_tool_started", "during_tool", "before_tool_finished", "mid_model_stream", "mid_edit", "mid_append")
GOAL_POINTS = ("goal_check", "goal_verdict")
COMPACTION_POINTS = ("mid_compaction", "mid_compaction_append")
CRASH_EXIT_STATUS = 137
ENV_VAR = "MUSEC_CRASH_AT"


class Faults:
    """The crash point armed in this process, if any.

    Args:
        point: the armed point (one of ``POINTS``), or ``None`` for none.
        exit: how to die; ``os._exit`` (tests may pass a function that raises instead).
    """

    def __init__(self, point: str | None = None, exit: Callable[[int], object] = os._exit) -> None:
        self.point = point or None
        self._exit = exit

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Faults:
        """The faults ``env`` arms (``MUSEC_CRASH_AT``); none when it is unset."""
        return cls(env.get(ENV_VAR) or None)

    def armed(self, point: str) -> bool:
        """Whether the process should crash at ``point``."""
        return self.point == point

    def crash_at(self, point: str) -> None:
        """Exit the process immediately if ``point`` is armed."""
        if self.point == point:
            self._exit(CRASH_EXIT_STATUS)


#: No crash point armed: the default of everything that takes a ``Faults``.
NO_FAULTS = Faults()
