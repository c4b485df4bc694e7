"""The common part of a background role: inbox, supervision with backoff, state.

A role lives as long as its session, in the session's task group. Every event the
session records is offered to it (``notify``), and every event of a log being resumed too
(``restore``); both go through one fold, ``BackgroundAgent.fold``, which calls the role's
hooks for the events roles care about (edits in the workspace, the person's messages, the
role's own test runs and spawn). A role that works in its own time gets the workspace's
edits in a small bounded inbox. It writes its own events through a ``Recorder`` (the
session, in the daemon) and shares what it learns through the blackboard; it never sees
the session itself (DESIGN §6, §7).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, assert_never

import anyio
import msgspec
import structlog

from ..core import events as evt
from ..core.words import counted
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
        # The workspace's edits (``FileEdited``), and whatever a role posts to itself.
        self._send, self._inbox = anyio.create_memory_object_stream[Any](INBOX_EVENTS)

    def notify(self, event: evt.AnyEvent) -> None:
        """Offer an event the session just recorded; never blocks."""
        self.fold(event, live=True)

    def restore(self, event: evt.AnyEvent) -> None:
        """Fold one event of a log being resumed (the role picks up where it was)."""
        self.fold(event, live=False)

    def fold(self, event: evt.AnyEvent, *, live: bool) -> None:
        """The background roles' view of the log: call the role's hook for each event a
        role cares about (``live``: just recorded; else read back on resume)."""
        match event:
            case evt.ModelRequest() | evt.ModelResponse() | evt.ToolStarted() | evt.ToolFinished():
                pass  # the most frequent types first: each class pattern tried is an isinstance (issue 19)
            case evt.FileEdited():
                if not event.agent.startswith("worker:"):  # the workspace, not a worktree
                    self.on_workspace_edit(event, live=live)
            case evt.UserMessage():
                if event.agent == "main":
                    self.on_person_message(event, live=live)
            case evt.TestRun():
                if event.agent == self.agent_id:
                    self.on_own_test_run(event, live=live)
            case evt.AgentSpawned():
                if event.agent == self.agent_id:
                    self.on_own_spawn(event, live=live)
            case evt.BaselineSnapshot():
                if event.agent == self.agent_id:
                    self.on_own_baseline_snapshot(event, live=live)
            case (evt.ModelSwitched() | evt.ToolResultsCleared()
                  | evt.SessionStarted() | evt.SessionResumed() | evt.LogRepaired() | evt.TurnEnded() | evt.SessionEnded() | evt.AgentMessage() | evt.ModelRetry() | evt.RateLimited() | evt.ApprovalRequested()
                  | evt.ApprovalResolved() | evt.ApprovalModeChanged() | evt.FileEditStarted() | evt.ToolInterrupted() | evt.AgentFailed()
                  | evt.WorkerSpawned() | evt.WorkerFinished() | evt.Integration() | evt.IntegrationApplied() | evt.RepoMap() | evt.Review() | evt.KernelEvaluated()
                  | evt.PlanStarted() | evt.PlanProposed() | evt.PlanApproved() | evt.GrillRound()
                  | evt.NetConnection() | evt.InstructionsAdded() | evt.SkillLoaded() | evt.HookContext() | evt.HookRan()
                  | evt.PromptBlocked() | evt.McpServerStarted() | evt.McpServerRestarting() | evt.McpServerFailed()
                  | evt.GoalSet() | evt.GoalChecked() | evt.GoalUpdated()
                  | evt.CompactionStarted() | evt.CompactionFinished() | evt.ContextCut()):
                pass
            case _:
                assert_never(event)

    def on_workspace_edit(self, event: evt.FileEdited, *, live: bool) -> None:
        """A file of the session's workspace changed. Live, the edit goes to the inbox
        (never blocks); a full inbox is noted and the role rescans."""
        if not live or event.agent == self.agent_id:
            return
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            self.overflowed = True
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    def on_person_message(self, event: evt.UserMessage, *, live: bool) -> None:
        """The person sent the main agent a message (a turn begins)."""

    def on_own_test_run(self, event: evt.TestRun, *, live: bool) -> None:
        """This role's own test run."""

    def on_own_spawn(self, event: evt.AgentSpawned, *, live: bool) -> None:
        """This role's own ``agent_spawned`` (a scout with a model)."""

    def on_own_baseline_snapshot(self, event: evt.BaselineSnapshot, *, live: bool) -> None:
        """This role's own copy of the workspace for a baseline (the verifier)."""

    def record(self, event: evt.AnyEvent) -> evt.AnyEvent:
        """Record an event as this role (see ``Recorder.record``)."""
        self.last_activity_at = time.time()
        return self.recorder.record(msgspec.structs.replace(event, agent=self.agent_id))

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
                self.state = f"restarting after {counted(attempt + 1, 'failure')}"
                if attempt == 0:
                    try:
                        self.record(evt.AgentFailed(role=self.role, error=error, retry_in_s=backoff))
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

    def close(self) -> None:
        """Close the inbox (the session has ended; nothing more is offered)."""
        self._send.close()
        self._inbox.close()
