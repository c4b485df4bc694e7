"""The fan-outs of a session as a fold over its events (resume, ``musec workers``,
``musec apply`` all read them through ``FanoutState``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import assert_never

from ..core.events import (
    AgentFailed,
    AgentMessage,
    AgentSpawned,
    AnyEvent,
    ApprovalModeChanged,
    ApprovalRequested,
    ApprovalResolved,
    BaselineSnapshot,
    CompactionFinished,
    CompactionStarted,
    ContextCut,
    FileEdited,
    FileEditStarted,
    GoalChecked,
    GoalSet,
    GoalUpdated,
    GrillRound,
    HookContext,
    HookRan,
    InstructionsAdded,
    Integration,
    IntegrationApplied,
    KernelEvaluated,
    LogRepaired,
    McpServerFailed,
    McpServerRestarting,
    McpServerStarted,
    ModelRequest,
    ModelResponse,
    ModelRetry,
    ModelSwitched,
    NetConnection,
    PlanApproved,
    PlanProposed,
    PlanStarted,
    PromptBlocked,
    RateLimited,
    RepoMap,
    Review,
    SessionEnded,
    SessionResumed,
    SessionStarted,
    SkillLoaded,
    TestRun,
    ToolFinished,
    ToolInterrupted,
    ToolResultsCleared,
    ToolStarted,
    TurnEnded,
    UserMessage,
    WorkerFinished,
    WorkerSpawned,
)


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
    spawned: dict[str, WorkerSpawned] = field(default_factory=dict)
    finished: dict[str, WorkerFinished] = field(default_factory=dict)
    integration: Integration | None = None
    pending: list[WorkerSpawned] = field(default_factory=list)
    pending_finished: set[str] = field(default_factory=set)

    def apply(self, event: AnyEvent) -> None:
        """Fold one event."""
        match event:
            case SessionStarted():
                self.workspace = event.workspace
            case WorkerSpawned():
                self.spawned[event.worker] = event
                self.pending.append(event)
            case WorkerFinished():
                self.finished[event.worker] = event
                self.pending_finished.add(event.worker)
            case Integration():
                self.integration = event
                self.pending, self.pending_finished = [], set()
            case (ModelSwitched() | ToolResultsCleared()
                  | SessionResumed() | LogRepaired() | TurnEnded() | SessionEnded() | UserMessage() | AgentMessage()
                  | ModelRequest() | ModelResponse() | ModelRetry() | RateLimited() | ApprovalRequested()
                  | ApprovalResolved() | ApprovalModeChanged() | ToolStarted() | FileEditStarted() | FileEdited() | ToolFinished() | ToolInterrupted()
                  | AgentSpawned() | AgentFailed() | IntegrationApplied() | TestRun() | RepoMap() | Review() | BaselineSnapshot() | KernelEvaluated()
                  | PlanStarted() | PlanProposed() | PlanApproved() | GrillRound()
                  | NetConnection() | InstructionsAdded() | SkillLoaded() | HookContext() | HookRan()
                  | PromptBlocked() | McpServerStarted() | McpServerRestarting() | McpServerFailed()
                  | GoalSet() | GoalChecked() | GoalUpdated()
                  | CompactionStarted() | CompactionFinished() | ContextCut()):
                pass
            case _:
                assert_never(event)
