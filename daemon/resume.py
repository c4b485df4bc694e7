"""Reopening a session from its log: resume after a crash or an end, and replay.

The log is the single source of truth (DESIGN §5): the agent's history is rebuilt by
folding every logged event, exactly as the live run built it. A ``tool_started`` with no
answer becomes ``tool_interrupted`` (never re-run silently); a model call without its
response is simply made again; calls that never started are run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, assert_never

from musec.agents.core.events import (
    AgentFailed,
    AgentMessage,
    AgentSpawned,
    AnyEvent,
    ApprovalRequested,
    ApprovalResolved,
    BaselineSnapshot,
    FileEdited,
    Integration,
    IntegrationApplied,
    KernelEvaluated,
    LogRepaired,
    ModelRequest,
    ModelResponse,
    ModelRetry,
    RateLimited,
    RepoMap,
    Review,
    SessionEnded,
    SessionResumed,
    SessionStarted,
    TestRun,
    ToolFinished,
    ToolInterrupted,
    ToolStarted,
    TurnEnded,
    UserMessage,
    WorkerFinished,
    WorkerSpawned,
)
from musec.agents.workers.state import FanoutState

from . import protocol as p
from .errors import BadRequest, LogCorrupt
from .eventlog import EventLog, iter_events, read_events
from .session import Session

if TYPE_CHECKING:
    from .agent_setup import AgentDeps
    from .index import SessionIndex


@dataclass
class ResumeState:
    """What resuming needs from a log, gathered in one pass (``apply`` per event).

    Attributes:
        events: how many events were folded.
        open_calls: ``tool_started`` events with no ``tool_finished``/``tool_interrupted``.
        in_turn: the log stops inside a turn (a user message not followed by ``turn_ended``).
        fanout: the session's fan-outs (one cut off by the stop is gone on with).
    """

    events: int = 0
    open_calls: dict[str, ToolStarted] = field(default_factory=dict)
    in_turn: bool = False
    fanout: FanoutState = field(default_factory=FanoutState)

    def apply(self, event: AnyEvent) -> None:
        """Fold one event."""
        self.events += 1
        self.fanout.apply(event)
        match event:
            case ToolStarted():
                self.open_calls[event.call_id] = event
            case ToolFinished() | ToolInterrupted():
                self.open_calls.pop(event.call_id, None)
            case UserMessage():
                self.in_turn = True
            case TurnEnded():
                self.in_turn = False
            case (SessionStarted() | SessionResumed() | LogRepaired() | SessionEnded() | AgentMessage() | ModelRequest()
                  | ModelResponse() | ModelRetry() | RateLimited() | ApprovalRequested() | ApprovalResolved()
                  | FileEdited() | AgentSpawned() | AgentFailed() | WorkerSpawned() | WorkerFinished() | Integration()
                  | IntegrationApplied() | TestRun() | RepoMap() | Review() | BaselineSnapshot() | KernelEvaluated()):
                pass
            case _:
                assert_never(event)


def fold_for_resume(events: Iterable[AnyEvent], appliers: list[Callable[[AnyEvent], None]]) -> ResumeState:
    """One pass over a log's events: feed each to ``appliers`` and gather ``ResumeState``."""
    state = ResumeState()
    for event in events:
        state.apply(event)
        for apply in appliers:
            apply(event)
    return state


def first_event(path: Path) -> SessionStarted:
    """The ``session_started`` a log begins with.

    Raises:
        LogCorrupt: the log does not begin with one.
    """
    first = next(iter_events(path), None)
    if not isinstance(first, SessionStarted):
        raise LogCorrupt(f"{path.name} does not begin with session_started; it cannot be resumed")
    return first


def resume_session(index: SessionIndex, deps: AgentDeps, req: p.ResumeSession) -> tuple[Session, bool, list[str]]:
    """Reopen the session ``req`` names; return it, whether a turn must be finished, and
    the ids of the calls found interrupted.

    Raises:
        SessionNotFound, SessionLocked, LogCorrupt, BadRequest.
    """
    from .agent_setup import build_main_agent

    if req.session_id:
        sid = index.resolve_id(req.session_id)
    else:
        latest = index.latest(req.workspace)
        if latest is None:
            raise BadRequest(f"no session to continue in {req.workspace}; start one with `musec run`")
        sid = latest
    if sid in index.live:
        raise BadRequest(f"session {sid} is live in this daemon; join it with `musec attach {sid}`")
    path = index.log_path(sid)
    credentials = {k: v for k, v in req.credentials.items() if k in p.CREDENTIAL_VARS}
    secrets_ = p.secret_values(credentials) + list(req.redact)
    elog, report = EventLog.open(path, secrets=secrets_, faults=deps.faults)
    try:
        started = first_event(path)
        session = Session(sid, elog, interactive=req.interactive, end_when_idle=req.end_when_idle)
        session.resumed_at_seq = report.events
        from musec.agents.blackboard import Blackboard

        session.blackboard = Blackboard() if started.blackboard else None
        start = p.StartSession(
            id=req.id, workspace=started.workspace, model=started.model,
            approval=req.approval or started.approval,
            max_turns=req.max_turns or started.max_turns,
            credentials=credentials, interactive=req.interactive, end_when_idle=req.end_when_idle,
            sandbox=started.sandbox, agents=list(started.background),
            blackboard=started.blackboard,
            agents_model=started.agents_model, agents_budget_usd=started.agents_budget_usd,
        )
        agent = build_main_agent(deps, session, start, credentials)
    except BaseException:
        elog.close()
        raise
    agent.system_prompt = started.system_prompt or agent.system_prompt
    session.agent = agent
    try:
        appliers = [agent.history.apply, session.restore, *(bg.restore for bg in session.background.values())]
        state = fold_for_resume(iter_events(path), appliers)
    except BaseException:
        elog.close()
        raise
    if report.torn_bytes:
        session.record(LogRepaired(torn_bytes=report.torn_bytes, torn_path=report.torn_path))
    cut = list(state.open_calls.values())
    if state.fanout.pending and any(call.tool == "spawn_workers" for call in cut):
        session.resume_fanout = (state.fanout.pending, state.fanout.pending_finished)
    for call in cut:
        session.record(ToolInterrupted(agent=call.agent, call_id=call.call_id, tool=call.tool,
                                       reason="the daemon stopped while it ran"))
    session.record(SessionResumed(pid=os.getpid(), interrupted_calls=[c.call_id for c in cut], approval=start.approval))
    return session, state.in_turn, [c.call_id for c in cut]


class _ReplayModel:
    """Stands in for the provider during replay: it only names the model; it is never called."""

    def __init__(self, name: str, model: str) -> None:
        self.name, self.model = name, model

    async def complete(self, request: Any, on_delta: Any) -> Any:  # pragma: no cover - never called
        raise RuntimeError("replay makes no model calls")

    async def aclose(self) -> None:  # pragma: no cover
        pass


def replay(index: SessionIndex, session_id: str, request_id: int) -> p.ReplayResult:
    """Rebuild a session's state from its log alone and re-derive every model request.

    For each ``model_request`` event, the request the agent would send after folding the
    events before it is built again and its digest compared with the logged one.
    """
    from musec.agents.core.conversation import request_digest
    from musec.agents.history import History
    from musec.agents.loop import Agent
    from musec.agents.tools.base import ToolContext

    sid = index.resolve_id(session_id)
    path = index.log_path(sid)
    problems: list[str] = []
    try:
        events = read_events(path)
    except LogCorrupt as exc:
        return p.ReplayResult(id=request_id, session_id=sid, ok=False, events=0, model_requests=0, turns=0, problems=[str(exc)])
    started = events[0] if events else None
    if not isinstance(started, SessionStarted):
        raise LogCorrupt(f"{path.name} does not begin with session_started; it cannot be replayed")
    spawned = {ev.agent: ev for ev in events if isinstance(ev, AgentSpawned)}
    agents: dict[str, Agent] = {}

    def agent_for(ev: ModelRequest) -> Agent:
        if ev.agent not in agents:
            offered = spawned[ev.agent].tools if ev.agent in spawned else started.tools
            prompt = spawned[ev.agent].system_prompt if ev.agent in spawned else started.system_prompt
            agent = Agent(
                agent_id=ev.agent, provider=_ReplayModel(ev.provider, ev.model),
                tools=_tools_for(offered), ctx=ToolContext(workspace=Path(started.workspace), env={}),
                record=_no_record, ask=_no_ask, on_delta=_no_delta, approval_mode="auto", max_turns=1,
                system_prompt=prompt, store_blob=_no_blob, session_id=sid,
            )
            agent.history = History(ev.agent)
            for earlier in events[: ev.seq]:
                agent.history.apply(earlier)
            agents[ev.agent] = agent
        return agents[ev.agent]

    requests = 0
    for ev in events:
        if isinstance(ev, ModelRequest):
            agent = agent_for(ev)
            requests += 1
            if request_digest(agent.build_request()) != ev.digest:
                problems.append(f"seq {ev.seq}: the rebuilt request differs from the one the live run sent")
        for agent in agents.values():
            agent.history.apply(ev)
    main = agents.get("main")
    next_digest = request_digest(main.build_request()) if main else ""
    turns = sum(1 for ev in events if isinstance(ev, ModelResponse))
    return p.ReplayResult(id=request_id, session_id=sid, ok=not problems, events=len(events), model_requests=requests,
                          turns=turns, problems=problems, next_request_digest=next_digest)


def _tools_for(names: list[str]) -> list[Any]:
    """The tools an agent was offered, in order, as named in its ``session_started`` (main)
    or ``agent_spawned`` event."""
    from musec.agents.ask_agent import AskAgentTool
    from musec.agents.tools import default_tools
    from musec.agents.workers.tool import SpawnWorkersTool

    available = {t.name: t for t in [*default_tools(), SpawnWorkersTool(_no_fanout), AskAgentTool(_no_fanout)]}
    return [available[name] for name in names if name in available]


async def _no_fanout(tasks: Any) -> Any:  # pragma: no cover - replay runs no tool
    raise RuntimeError("replay runs no tool")


def _no_record(*args: Any, **kwargs: Any) -> dict[str, Any]:  # pragma: no cover - replay records nothing
    raise RuntimeError("replay writes nothing")


async def _no_ask(*args: Any) -> tuple[str, str]:  # pragma: no cover
    raise RuntimeError("replay asks nothing")


async def _no_delta(*args: Any) -> None:  # pragma: no cover
    pass


def _no_blob(data: bytes) -> str:  # pragma: no cover
    raise RuntimeError("replay stores nothing")
