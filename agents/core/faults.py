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

A slow disk (``MUSEC_FSYNC_GATE=<folder>``, issue 19): every fsync of a session's log first
writes one byte to the FIFO ``<folder>/waiting`` and then waits for one byte from the FIFO
``<folder>/go``, so a test holds each fsync as long as it likes and sees what the daemon
does meanwhile (serves other clients; starts no side effect the held event announces).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

POINTS = ("after_tool_started", "during_tool", "before_tool_finished", "mid_model_stream", "mid_edit", "mid_append")
GOAL_POINTS = ("goal_check", "goal_verdict")
COMPACTION_POINTS = ("mid_compaction", "mid_compaction_append")
CRASH_EXIT_STATUS = 137
ENV_VAR = "MUSEC_CRASH_AT"
FSYNC_GATE_VAR = "MUSEC_FSYNC_GATE"


class Faults:
    """The crash point armed in this process, if any.

    Args:
        point: the armed point (one of ``POINTS``), or ``None`` for none.
        exit: how to die; ``os._exit`` (tests may pass a function that raises instead).
        fsync_gate: called (in the fsync's thread) before each fsync of a session's log;
            a test's slow disk. ``None``: no wait.
    """

    def __init__(self, point: str | None = None, exit: Callable[[int], object] = os._exit,
                 fsync_gate: Callable[[], object] | None = None) -> None:
        self.point = point or None
        self._exit = exit
        self._fsync_gate = fsync_gate

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Faults:
        """The faults ``env`` arms (``MUSEC_CRASH_AT``, ``MUSEC_FSYNC_GATE``); none when unset."""
        gate = env.get(FSYNC_GATE_VAR)
        return cls(env.get(ENV_VAR) or None, fsync_gate=FifoGate(gate) if gate else None)

    def before_fsync(self) -> None:
        """Wait as a slow disk would, when a test asked for it (``fsync_gate``)."""
        if self._fsync_gate is not None:
            self._fsync_gate()

    def armed(self, point: str) -> bool:
        """Whether the process should crash at ``point``."""
        return self.point == point

    def crash_at(self, point: str) -> None:
        """Exit the process immediately if ``point`` is armed."""
        if self.point == point:
            self._exit(CRASH_EXIT_STATUS)


class FifoGate:
    """``MUSEC_FSYNC_GATE``'s wait: say ``waiting`` (one byte), then wait for one byte of ``go``.

    Args:
        folder: holds the FIFOs ``waiting`` and ``go`` (the test makes them).
    """

    def __init__(self, folder: str) -> None:
        # Read-write opens of a FIFO never wait for the other end.
        self._waiting = os.open(os.path.join(folder, "waiting"), os.O_RDWR | os.O_CLOEXEC)
        self._go = os.open(os.path.join(folder, "go"), os.O_RDWR | os.O_CLOEXEC)

    def __call__(self) -> None:
        os.write(self._waiting, b".")
        os.read(self._go, 1)


#: No crash point armed: the default of everything that takes a ``Faults``.
NO_FAULTS = Faults()
