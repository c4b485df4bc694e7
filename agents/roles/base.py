"""The common part of a background role: inbox, supervision with backoff, state.

A role lives as long as its session, in the session's task group, with a small bounded
inbox fed with every event the session records (``notify``). It writes its own events
through a ``Recorder`` (the session, in the daemon) and shares what it learns through the
blackboard; it never sees the session itself (DESIGN §6, §7).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import structlog

from ..recorder import Recorder

log = structlog.get_logger("musec.roles")

INBOX_EVENTS = 256
MAX_BACKOFF_S = 30.0
MAX_RESTARTS = 4
"""A role that fails this many times more is not started again (no crash loop)."""


class BackgroundAgent:
    """One background role of a session.

    Args:
        recorder: where the role's events go.
        blackboard: the session's blackboard (``agents.blackboard.Blackboard``), or None.
        workspace: the session's workspace.

    Attributes:
        state: a short phrase for ``musec agents`` (``watching``, ``testing``...).
        ready: set once the role has taken its baseline or map (nothing of the main agent waits
            for it; tests and ``musec agents`` do).
    """

    role = ""
    first_backoff_s = 1.0  # the pause before the first restart; it doubles up to MAX_BACKOFF_S

    def __init__(self, recorder: Recorder, blackboard: Any, workspace: Path) -> None:
        self.recorder = recorder
        self.blackboard = blackboard
        self.workspace = workspace
        self.agent_id = self.role
        self.state = "starting"
        self.last_activity_at = time.time()
        self.overflowed = False
        self.ready = anyio.Event()
        self._send, self._inbox = anyio.create_memory_object_stream[dict[str, Any]](INBOX_EVENTS)

    def notify(self, event: dict[str, Any]) -> None:
        """Offer an event; never blocks. A full inbox is noted and the agent rescans."""
        if event.get("agent") == self.agent_id:
            return
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            self.overflowed = True
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    def record(self, type: str, **fields: Any) -> dict[str, Any]:
        """Record an event as this role (see ``Recorder.record``)."""
        self.last_activity_at = time.time()
        return self.recorder.record(type, agent=self.agent_id, **fields)

    async def supervise(self) -> None:
        """Run the role; on a failure start it again after a growing pause, at most
        ``MAX_RESTARTS`` times. The first failure is reported (one ``agent_failed``
        event, which the person sees); later ones go to the daemon's log only, and the
        role stops for good once the restarts are spent (its state says why)."""
        backoff = self.first_backoff_s
        for attempt in range(MAX_RESTARTS + 1):
            try:
                await self.run()
                return
            except Exception as exc:  # supervision at the edge: the session goes on
                log.exception("background_agent_failed", session_id=self.recorder.id, agent=self.agent_id)
                self.ready.set()  # nobody waits on a failed agent
                error = f"{type(exc).__name__}: {exc}"[:500]
                if attempt == MAX_RESTARTS:
                    self.state = f"failed {attempt + 1} times, stopped: {error}"[:200]
                    return
                self.state = f"restarting after {attempt + 1} failure(s)"
                if attempt == 0:
                    try:
                        self.record("agent_failed", role=self.role, error=error, retry_in_s=backoff)
                    except (OSError, ValueError):  # the log cannot take it: stop, quietly
                        return
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)

    async def prepare(self) -> None:
        """What must happen before the main agent's first turn (quick: a copy, never a test
        run); most roles need nothing."""

    async def run(self) -> None:  # pragma: no cover - every role overrides it
        """The role's work, until the session ends (its task is cancelled)."""
        raise NotImplementedError

    async def answer(self, question: str) -> str:
        """The role's answer to an ``ask_agent`` question."""
        return f"{self.agent_id} does not answer questions"

    def restore(self, event: dict[str, Any]) -> None:
        """Fold one event of a log being resumed (the role picks up where it was)."""

    def close(self) -> None:
        """Close the inbox (the session has ended; nothing more is offered)."""
        self._send.close()
        self._inbox.close()


def is_workspace_edit(event: dict[str, Any]) -> bool:
    """An edit in the session's workspace (not in a fan-out worker's worktree)."""
    return event.get("type") == "file_edited" and not str(event.get("agent", "main")).startswith("worker:")
