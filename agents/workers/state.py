"""The fan-outs of a session as a fold over its events (resume, ``musec workers``,
``musec apply`` all read them through ``FanoutState``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import assert_never

from ..core import events as evt


@dataclass
class FanoutState:
    """The fan-outs of a session, folded from its events.

    Attributes:
        workspace: the session's workspace.
        spawned: every worker spawned, by name, in order.
        finished: the ``worker_finished`` of each worker that finished, by name.
        integration: the latest integration, if any.
        pending: the workers of the fan-out not yet integrated (one a stop cut off).
        pending_finished: the names of those that finished.
    """

    workspace: str = ""
    spawned: dict[str, evt.WorkerSpawned] = field(default_factory=dict)
    finished: dict[str, evt.WorkerFinished] = field(default_factory=dict)
    integration: evt.Integration | None = None
    pending: list[evt.WorkerSpawned] = field(default_factory=list)
    pending_finished: set[str] = field(default_factory=set)

    def unfinished(self) -> list[evt.WorkerSpawned]:
        """The workers spawned that have no ``worker_finished``: running in a live fan-out,
        else cut off by a stop that could not record their end (a crash)."""
        return [ev for name, ev in self.spawned.items() if name not in self.finished]

    def apply(self, event: evt.AnyEvent) -> None:
        """Fold one event."""
        match event:
            case evt.ModelRequest() | evt.ModelResponse() | evt.ToolStarted() | evt.ToolFinished():
                pass  # the most frequent types first: each class pattern tried is an isinstance (issue 19)
            case evt.SessionStarted():
                self.workspace = event.workspace
            case evt.WorkerSpawned():
                self.spawned[event.worker] = event
                self.pending.append(event)
            case evt.WorkerFinished():
                self.finished[event.worker] = event
                self.pending_finished.add(event.worker)
            case evt.Integration():
                self.integration = event
                self.pending, self.pending_finished = [], set()
            case (evt.ModelSwitched() | evt.ToolResultsCleared()
                  | evt.SessionResumed() | evt.LogRepaired() | evt.TurnEnded() | evt.SessionEnded() | evt.UserMessage() | evt.AgentMessage() | evt.ModelRetry() | evt.RateLimited() | evt.ApprovalRequested()
                  | evt.ApprovalResolved() | evt.ApprovalModeChanged() | evt.FileEditStarted() | evt.FileEdited() | evt.ToolInterrupted()
                  | evt.AgentSpawned() | evt.AgentFailed() | evt.IntegrationApplied() | evt.TestRun() | evt.RepoMap() | evt.Review() | evt.BaselineSnapshot() | evt.KernelEvaluated()
                  | evt.PlanStarted() | evt.PlanProposed() | evt.PlanApproved() | evt.GrillRound()
                  | evt.NetConnection() | evt.InstructionsAdded() | evt.SkillLoaded() | evt.HookContext() | evt.HookRan()
                  | evt.PromptBlocked() | evt.McpServerStarted() | evt.McpServerRestarting() | evt.McpServerFailed()
                  | evt.GoalSet() | evt.GoalChecked() | evt.GoalUpdated()
                  | evt.CompactionStarted() | evt.CompactionFinished() | evt.ContextCut()):
                pass
            case _:
                assert_never(event)
