"""Reopening a session from its log: resume after a crash or an end, and replay.

The log is the single source of truth (DESIGN §5): the agent's history is rebuilt by
folding every logged event, exactly as the live run built it. A ``tool_started`` with no
answer becomes ``tool_interrupted`` (never re-run silently); a model call without its
response is simply made again; calls that never started are run.

Why over 500 lines: resuming and replaying share the fold over the whole log and the
rebuilt agents; the plan's and the goal's parts are in plans.py and goals.py.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, assert_never

import anyio
import anyio.to_thread
from musec.agents.core import events as evt
from musec.agents.workers.state import FanoutState

from . import protocol as p
from .errors import BadRequest, LogCorrupt
from .eventlog import EventLog, iter_events, read_events
from .memory import drop_in_slices, quiet_collector
from .pending import settle_asked, stopped_turn
from .plans import restore_mode
from .redaction import Refill
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
        approval: the approval mode the person last switched to, "" when never.
        last_stop: how the main agent's latest turn ended (``turn_ended``), "" before any
            or while a person's message waits for its turn.
    """

    events: int = 0
    open_calls: dict[str, evt.ToolStarted] = field(default_factory=dict)
    in_turn: bool = False
    fanout: FanoutState = field(default_factory=FanoutState)
    approval: str = ""  # the last ``/approval MODE`` switch ("" when none)
    edits_announced: dict[str, evt.FileEditStarted] = field(default_factory=dict)
    edits_logged: set[str] = field(default_factory=set)
    approvals_asked: dict[str, evt.ApprovalRequested] = field(default_factory=dict)
    last_stop: str = ""

    def apply(self, event: evt.AnyEvent) -> None:
        """Fold one event."""
        self.events += 1
        self.fanout.apply(event)
        match event:
            case evt.ModelRequest() | evt.ModelResponse():
                pass  # the most frequent types first: each class pattern tried is an isinstance (issue 19)
            case evt.ToolStarted():
                self.open_calls[event.call_id] = event
            case evt.ToolFinished() | evt.ToolInterrupted():
                self.open_calls.pop(event.call_id, None)
                self.edits_announced.pop(event.call_id, None)
                self.edits_logged.discard(event.call_id)
            case evt.FileEditStarted():
                self.edits_announced[event.call_id] = event
            case evt.FileEdited():
                self.edits_logged.add(event.call_id)
            case evt.ApprovalRequested():
                self.approvals_asked[event.call_id] = event
            case evt.ApprovalResolved():
                self.approvals_asked.pop(event.call_id, None)
            case evt.UserMessage():
                self.in_turn = True
                if event.agent == "main":
                    self.last_stop = ""
            case evt.TurnEnded():
                self.in_turn = False
                self.last_stop = event.exit_reason
            case evt.ApprovalModeChanged():
                self.approval = event.approval
            case (evt.SessionStarted() | evt.SessionResumed() | evt.LogRepaired() | evt.SessionEnded() | evt.AgentMessage() | evt.ModelSwitched() | evt.ToolResultsCleared() | evt.ModelRetry() | evt.RateLimited()
                  | evt.AgentSpawned() | evt.AgentFailed() | evt.WorkerSpawned() | evt.WorkerFinished() | evt.Integration()
                  | evt.IntegrationApplied() | evt.TestRun() | evt.RepoMap() | evt.Review() | evt.BaselineSnapshot() | evt.KernelEvaluated()
                  | evt.PlanStarted() | evt.PlanProposed() | evt.PlanApproved() | evt.GrillRound()
                  | evt.NetConnection() | evt.InstructionsAdded() | evt.SkillLoaded() | evt.HookContext() | evt.HookRan()
                  | evt.PromptBlocked() | evt.McpServerStarted() | evt.McpServerRestarting() | evt.McpServerFailed()
                  | evt.GoalSet() | evt.GoalChecked() | evt.GoalUpdated() | evt.CompactionStarted() | evt.CompactionFinished() | evt.ContextCut()):
                pass
            case _:
                assert_never(event)


def fold_for_resume(events: Iterable[evt.AnyEvent], appliers: list[Callable[[evt.AnyEvent], None]]) -> ResumeState:
    """One pass over a log's events: feed each to ``appliers`` and gather ``ResumeState``."""
    state = ResumeState()
    for event in events:
        state.apply(event)
        for apply in appliers:
            apply(event)
    return state


def _quiet_fold(events: Iterable[evt.AnyEvent], appliers: list[Callable[[evt.AnyEvent], None]]) -> ResumeState:
    """``fold_for_resume`` with the collector's full passes held off (``quiet_collector``)."""
    with quiet_collector():
        return fold_for_resume(events, appliers)


def first_event(path: Path, refill: Callable[[bytes], bytes] | None = None) -> evt.SessionStarted:
    """The ``session_started`` a log begins with (``refill``: as ``iter_events``).

    Raises:
        LogCorrupt: the log does not begin with one.
    """
    first = next(iter_events(path, refill), None)
    if not isinstance(first, evt.SessionStarted):
        raise LogCorrupt(f"{path.name} does not begin with session_started; it cannot be resumed")
    return first


def _not_empty(path: Path, sid: str) -> Path:
    """``path``, refused when empty: a start that failed before its first line (a full disk,
    with an older musec: fresh-user s8 J4), not a session to resume."""
    if path.stat().st_size == 0:
        raise BadRequest(f"session {sid} never started (its log is empty): there is nothing to resume; start "
                         "a new session with `musec run` (`musec gc` removes the empty log)")
    return path


DAEMON_STOPPED = "the daemon stopped while it ran"
"""What cut a call off, unless the daemon knows better (``resume_session``'s ``stops``)."""


async def _session_id(index: SessionIndex, req: p.ResumeSession) -> str:
    """The id of the session ``req`` resumes: the one it names, else the workspace's latest."""
    if req.session_id:
        return index.resolve_id(req.session_id)
    latest = await anyio.to_thread.run_sync(index.latest, req.workspace)
    if latest is None:
        raise BadRequest(f"no session to continue in {req.workspace}; start one with `musec run`")
    return latest


async def resume_session(index: SessionIndex, deps: AgentDeps, req: p.ResumeSession, *,
                         compacting: bool = False, stops: dict[str, str] | None = None,
                         ) -> tuple[Session, bool, list[str]]:
    """Reopen the session ``req`` names; return it, whether a turn must be finished (or a
    stopped one gone on with: ``pending.stopped_turn``), and the ids of the calls found
    interrupted. ``compacting``: reopened only to compact it (``musec compact``).
    ``stops``: why sessions of this daemon stopped while it went on (a log that could not
    be written), by id: the words for the calls that stop cut off; else the daemon stopped.

    What reads the whole log (opening it: the torn-tail check and the hash chain; the fold
    into the agents' histories) runs in worker threads, one event at a time, so a long log
    neither stops the daemon serving others nor is held in memory (issue 19). The session
    is reachable by no one else until it is returned, so the fold's thread is the only one
    touching it.

    Raises:
        SessionNotFound, SessionLocked, LogCorrupt, BadRequest.
    """
    from .agent_setup import build_main_agent

    sid = await _session_id(index, req)
    if sid in index.live:
        raise BadRequest(f"session {sid} is live in this daemon; join it with `musec attach {sid}`")
    path = _not_empty(index.log_path(sid), sid)
    credentials = {k: v for k, v in req.credentials.items() if k in p.CREDENTIAL_VARS}
    named = p.named_secrets(credentials, req.redact_named)
    with anyio.CancelScope(shield=True):  # an open log holds the lock: it is never abandoned half-way
        elog, report = await anyio.to_thread.run_sync(
            lambda: EventLog.open(path, secrets=req.redact, named=named, faults=deps.faults))
    refill = Refill(elog.redact, named)  # the history is what it was (issue 13 case 1)
    try:
        started, current, kernel_past = await anyio.to_thread.run_sync(_setup_facts, path, refill.line)
        if not Path(started.workspace).is_dir():
            raise BadRequest(f"the workspace {started.workspace} of session {sid} no longer exists; restore it "
                             f"to go on (`musec log {sid}` shows what the session did)")
        session = Session(sid, elog, interactive=req.interactive, end_when_idle=req.end_when_idle)
        session.resumed_at_seq = report.events
        session.kernel_past = kernel_past
        from musec.agents.blackboard import Blackboard
        session.blackboard = Blackboard() if started.blackboard else None
        start = p.StartSession(
            id=req.id, workspace=started.workspace, model=req.model or current,
            approval=req.approval or started.approval,
            max_turns=req.max_turns or started.max_turns,
            credentials=credentials, interactive=req.interactive, end_when_idle=req.end_when_idle,
            sandbox=started.sandbox, agents=list(started.background),
            blackboard=started.blackboard,
            agents_model=started.agents_model, agents_budget_usd=started.agents_budget_usd,
            kernel_spec=started.kernel_spec or "", max_wall_s=req.max_wall_s or started.max_wall_s or 0.0,
            environment=dict(req.environment),
        )
        agent = build_main_agent(deps, session, start, credentials)
    except BaseException:
        elog.close()
        raise
    agent.system_prompt = started.system_prompt or agent.system_prompt
    session.agent = agent
    try:
        appliers = [agent.history.apply, session.restore, *(bg.restore for bg in session.background.values())]
        state = await anyio.to_thread.run_sync(_quiet_fold, iter_events(path, refill.line, check=False), appliers)
    except BaseException:
        elog.close()
        raise
    # An active goal goes on: its unjudged stop is judged, or the agent is sent back to it.
    mid_turn = state.in_turn or session.goal.active or bool(agent.history.unanswered_calls())
    if not req.approval and state.approval:  # a switch the person made holds until they pass another
        agent.follow_mode(state.approval)
    restore_mode(session, start.approval, req.approve_plan, approval_given=bool(req.approval or state.approval))
    try:
        continues = "" if compacting else stopped_turn(session, state, req, sid, mid_turn=mid_turn)
    except BadRequest:
        elog.close()  # nothing written: the session stays as it ended
        raise
    cut_by = (stops or {}).pop(sid, DAEMON_STOPPED)
    interrupted = _settle(session, state, req, Path(started.workspace), continues, report, cut_by)
    if req.model:
        _note_switch(deps, agent, current)
    return session, mid_turn or bool(continues), interrupted


def _settle(session: Session, state: ResumeState, req: p.ResumeSession, workspace: Path, continues: str,
            report: Any, cut_by: str = "") -> list[str]:
    """Record what the stop left open (a torn line cut off, per ``report`` of the open; cut
    calls, waiting approvals) and ``session_resumed``; return the ids of the calls found
    interrupted. ``cut_by``: what stopped them (``DAEMON_STOPPED``, or why the session
    stopped while the daemon went on)."""
    agent = session.agent
    if report.torn_bytes:
        session.record(evt.LogRepaired(torn_bytes=report.torn_bytes, torn_path=report.torn_path))
    cut = list(state.open_calls.values())
    goes_on = bool(state.fanout.pending) and any(call.tool == "spawn_workers" for call in cut)
    if goes_on:
        session.resume_fanout = (state.fanout.pending, state.fanout.pending_finished)
    interrupted = _answer_cut_calls(session, state, cut, workspace, cut_by or DAEMON_STOPPED)
    going = {ev.worker for ev in state.fanout.pending} if goes_on else set()
    _end_cut_workers(session, [ev for ev in state.fanout.unfinished() if ev.worker not in going], cut_by or DAEMON_STOPPED)
    settle_asked(session, state, mode_given=bool(req.approval))
    session.last_stop = state.last_stop
    if req.budget_usd:  # this run's spending from now on (the session's own cap is not kept)
        agent.budget_usd = agent.history.cost_usd + req.budget_usd
    session.record(evt.SessionResumed(pid=os.getpid(), interrupted_calls=interrupted, approval=agent.approval_mode,
                                  continues=continues or evt.UNSET))
    return interrupted


def _setup_facts(path: Path, refill: Callable[[bytes], bytes]) -> tuple[evt.SessionStarted, str, Any]:
    """What building a resumed session's agents reads of its log (each a pass over the
    whole log: run in a worker thread): its ``session_started``, its main agent's model
    now, and a kernel campaign's evaluations (``agent_setup.campaign_past``; ``None``
    for a session that is not one)."""
    from .agent_setup import campaign_past

    started = first_event(path, refill)
    return started, current_model(path, started.model), campaign_past(path) if started.kernel_spec else None


def _answer_cut_calls(session: Session, state: ResumeState, cut: list[evt.ToolStarted], workspace: Path,
                      cut_by: str) -> list[str]:
    """Answer each call the stop cut off: a file write with what landed (``landed``), any
    other call as interrupted (never run again). Returns the ids of the interrupted ones."""
    from .landed import WRITE_TOOLS, settle_write

    interrupted = []
    for call in cut:
        if call.tool in WRITE_TOOLS:
            for event in settle_write(call, state.edits_announced.get(call.call_id), call.call_id in state.edits_logged,
                                      workspace if call.agent == "main" else None):
                session.record(event)
            continue
        session.record(evt.ToolInterrupted(agent=call.agent, call_id=call.call_id, tool=call.tool,
                                       reason=cut_by))
        interrupted.append(call.call_id)
    return interrupted


def _end_cut_workers(session: Session, workers: list[evt.WorkerSpawned], cut_by: str) -> None:
    """End each worker a stop cut off without its ``worker_finished`` (a crash, or a log of
    before fresh-user F23) as ``interrupted``, as a cut-off call is answered (rule 4): it is
    not run again, and its worktree keeps what it changed, uncommitted."""
    for ev in workers:
        session.record(evt.WorkerFinished(
            worker=ev.worker, exit_reason="interrupted", branch=ev.branch,
            message=f"{cut_by}; nothing of it was committed: what it changed is in its worktree {ev.path}"[:500]))


def _note_switch(deps: AgentDeps, agent: Any, current: str) -> None:
    """``--resume ID --model M``: the agent was built with M; log the switch from the
    session's model ``current`` unless M is that model (by catalog id)."""
    from musec.agents.providers.catalog import load_catalog

    catalog = load_catalog(deps.paths.config)
    before = catalog.resolve(current)
    if catalog.resolve(agent.model_id).id != before.id:
        agent.record_switch(from_model=current, from_provider=before.provider, by="resume")


def current_model(path: Path, started_model: str) -> str:
    """The main agent's model now: the last ``model_switched`` of ``main`` in the log at
    ``path``, else the model the session started with. Only lines naming that event type
    are decoded (a scan of bytes, not a fold of the log)."""
    import msgspec
    from musec.agents.core.events import decode_event

    model = started_model
    needle = b'"type":"model_switched"'
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return model
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:  # found at C speed: no line split
            at = data.find(needle)
            while at >= 0:
                start = data.rfind(b"\n", 0, at) + 1
                end = data.find(b"\n", at)
                line = data[start:] if end < 0 else data[start:end]
                at = -1 if end < 0 else data.find(needle, end)
                if b'"agent":"main"' not in line:
                    continue
                try:
                    event = decode_event(line)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    continue  # a torn last line: the open has cut it off
                if isinstance(event, evt.ModelSwitched) and event.model:
                    model = event.model
    return model


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
        return p.ReplayResult(id=request_id, session_id=sid, ok=False, events=0, model_requests=0, turns=0, problems=[str(exc)],
                              damaged=True)
    started = events[0] if events else None
    if not isinstance(started, evt.SessionStarted):
        raise LogCorrupt(f"{path.name} does not begin with session_started; it cannot be replayed")
    spawned = {ev.agent: ev for ev in events if isinstance(ev, evt.AgentSpawned)}
    agents: dict[str, Agent] = {}

    def agent_for(ev: evt.ModelRequest) -> Agent:
        if ev.agent not in agents:
            own = spawned.get(ev.agent)
            offered = own.tools if own is not None else started.tools
            prompt = own.system_prompt if own is not None else started.system_prompt
            agent = Agent(
                agent_id=ev.agent, provider=_ReplayModel(ev.provider, ev.model),
                tools=_tools_for(offered, started, worker=own is not None) + _mcp_tools_for(ev.agent, events[: ev.seq]),
                ctx=ToolContext(workspace=Path(started.workspace), env={}),
                record=_no_record, ask=_no_ask, on_delta=_no_delta, approval_mode="auto", max_turns=1,
                system_prompt=prompt, store_blob=_no_blob, session_id=sid,
            )
            agent.history = History(ev.agent)
            for earlier in events[: ev.seq]:
                agent.history.apply(earlier)
            agents[ev.agent] = agent
        return agents[ev.agent]

    requests = redacted = 0
    digests: dict[str, PrefixDigest] = {}
    for ev in events:
        if isinstance(ev, evt.ModelRequest):
            agent = agent_for(ev)
            if (agent.provider.name, agent.provider.model) != (ev.provider, ev.model):
                agent.provider = _ReplayModel(ev.provider, ev.model)  # the model was switched
            requests += 1
            digest = digests.setdefault(ev.agent, PrefixDigest()).digest(agent)
            if digest != ev.digest and request_digest(agent.build_request()) != ev.digest:
                if _REDACTED_MARK in _request_bytes(agent):
                    redacted += 1  # the live request held what the log redacts: it cannot match
                else:
                    problems.append(f"seq {ev.seq}: the rebuilt request differs from the one the live run sent")
        for agent in agents.values():
            agent.history.apply(ev)
    main = agents.get("main")
    # The kept prefix state, not one encoding of the whole request: a C call of 40 ms at
    # 100k events that held the GIL (PrefixDigest equals request_digest, by its tests).
    next_digest = digests.setdefault("main", PrefixDigest()).digest(main) if main else ""
    turns = sum(1 for ev in events if isinstance(ev, evt.ModelResponse))
    result = p.ReplayResult(id=request_id, session_id=sid, ok=not problems, events=len(events), model_requests=requests,
                            turns=turns, problems=problems, next_request_digest=next_digest, redacted_requests=redacted)
    drop_in_slices(events)  # freed in slices, not in one call holding the GIL (daemon.memory)
    for agent in agents.values():
        drop_in_slices(agent.history.messages)
    return result


_REDACTED_MARK = b"[REDACTED]"  # what daemon.eventlog.Redactor writes in place of a secret


def _request_bytes(agent: Any) -> bytes:
    import msgspec

    return msgspec.json.encode(agent.build_request())


class PrefixDigest:
    """``request_digest(agent.build_request())``, in time proportional to what changed.

    A request's encoding is ``HEAD + m_0 + "," + m_1 + ... + m_last + TAIL``, where HEAD
    ends with ``"messages":[`` and TAIL starts with ``]``. A history only appends
    messages and replaces its last one (``History._user_block``), so every message but the
    last is hashed once into a kept SHA-256 state; each request copies that state and adds
    the last message and TAIL (issue 19: a 100k-event replay was quadratic in the digest).
    The kept state is dropped, and the messages hashed again, when the history's list, the
    head, or the last hashed message is not the one hashed before. Replay checks a
    mismatch with the full ``request_digest`` before reporting it.
    """

    def __init__(self) -> None:
        import hashlib

        import msgspec

        self._sha256 = hashlib.sha256
        self._encode = msgspec.json.Encoder(order="deterministic").encode  # as conversation.request_digest
        self._head = b""
        self._state: Any = None
        self._list: Any = None
        self._count = 0
        self._last: Any = None

    def digest(self, agent: Any) -> str:
        """The hex digest of the request ``agent`` would send next."""
        messages = agent.history.messages
        head, tail = self._head_and_tail(agent)
        stable = len(messages) - 1  # the last message may still be replaced
        if (self._state is None or head != self._head or messages is not self._list or stable < self._count
                or (self._count and messages[self._count - 1] is not self._last)):
            self._state, self._head, self._list, self._count, self._last = self._sha256(head), head, messages, 0, None
        for m in messages[self._count:stable]:
            self._state.update(b"," + self._encode(m) if self._count else self._encode(m))
            self._count += 1
            self._last = m
        out = self._state.copy()
        if stable >= 0:
            out.update(b"," + self._encode(messages[-1]) if stable else self._encode(messages[-1]))
        out.update(tail)
        return out.hexdigest()

    def _head_and_tail(self, agent: Any) -> tuple[bytes, bytes]:
        """The request's encoding around its messages (the request built with none)."""
        history = agent.history
        kept, history.messages = history.messages, []
        try:
            empty = self._encode(agent.build_request())
        finally:
            history.messages = kept
        marker = b'"messages":['
        at = empty.index(marker + b"]") + len(marker)
        return empty[:at], empty[at:]


def _tools_for(names: list[str], started: evt.SessionStarted, *, worker: bool) -> list[Any]:
    """The tools an agent was offered, in order, as ``names`` in its ``session_started``
    (main) or ``agent_spawned`` (``worker``) event: the session's skills for the main agent,
    a kernel campaign's tools (named by ``started``) for every agent of the campaign."""
    from musec.agents.ask_agent import AskAgentTool
    from musec.agents.plan import ProposePlanTool
    from musec.agents.roles.critic import GrillQuestionTool
    from musec.agents.skills import Skill, SkillTool
    from musec.agents.tools import default_tools
    from musec.agents.workers.tool import SpawnWorkersTool

    offered = [*default_tools(), SpawnWorkersTool(_no_fanout), ProposePlanTool(), AskAgentTool(_no_fanout),
               GrillQuestionTool(_no_fanout)]
    if started.kernel_spec:
        from musec.agents.kernel_opt.campaign import Campaign
        from musec.agents.kernel_opt.spec import load_spec
        from musec.agents.kernel_opt.tools import campaign_tools

        campaign = Campaign(load_spec(started.kernel_spec), Path(started.workspace), Path(started.workspace))
        offered.extend(campaign_tools(campaign, lambda: 0))  # the same specs; replay runs no tool
    extensions = started.extensions if not worker and started.extensions else {}
    skills = [Skill(s["name"], "", "", s.get("scope", "user")) for s in extensions.get("skills", []) if s.get("model", True)]
    offered.append(SkillTool(skills))
    available = {t.name: t for t in offered}
    return [available[name] for name in names if name in available]


def _mcp_tools_for(agent_id: str, events: list[evt.AnyEvent]) -> list[Any]:
    """The main agent's MCP tools as the live run offered them: each server's first listing
    (``mcp_server_started``) before the request being rebuilt."""
    from musec.agents.mcp import McpTool, ToolInfo, tool_name

    if agent_id != "main":
        return []
    out: list[Any] = []
    seen_servers: set[str] = set()
    for ev in events:
        if not isinstance(ev, evt.McpServerStarted) or ev.server in seen_servers:
            continue
        seen_servers.add(ev.server)
        for t in ev.tools:
            name = tool_name(ev.server, t["name"])
            if name is not None and name not in {x.name for x in out}:
                out.append(McpTool(ev.server, ToolInfo(t["name"], t.get("description", ""), t.get("input_schema", {})), name))
    return out


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
