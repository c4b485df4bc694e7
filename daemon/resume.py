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
from typing import TYPE_CHECKING, Any

from . import protocol as p
from .errors import BadRequest, LogCorrupt
from .eventlog import EventLog, first_and_last, iter_events, read_events
from .session import Session

if TYPE_CHECKING:
    from .agent_setup import AgentDeps
    from .index import SessionIndex


@dataclass
class ResumeState:
    """What resuming needs from a log, gathered in one pass.

    Attributes:
        events: how many events were folded.
        open_calls: ``tool_started`` events with no ``tool_finished``/``tool_interrupted``.
        in_turn: the log stops inside a turn (a user message not followed by ``turn_ended``).
    """

    events: int = 0
    open_calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    in_turn: bool = False
    fanout_spawned: list[dict[str, Any]] = field(default_factory=list)
    fanout_finished: set[str] = field(default_factory=set)


def fold_for_resume(events: Iterable[dict[str, Any]], appliers: list[Callable[[dict[str, Any]], None]]) -> ResumeState:
    """One pass over a log's events: feed each to ``appliers`` and gather ``ResumeState``."""
    state = ResumeState()
    for ev in events:
        state.events += 1
        kind = ev.get("type")
        if kind == "tool_started":
            state.open_calls[ev["call_id"]] = ev
        elif kind in ("tool_finished", "tool_interrupted"):
            state.open_calls.pop(ev.get("call_id"), None)
        elif kind == "user_message":
            state.in_turn = True
        elif kind == "turn_ended":
            state.in_turn = False
        elif kind == "worker_spawned":
            state.fanout_spawned.append(ev)
        elif kind == "worker_finished":
            state.fanout_finished.add(ev.get("worker"))
        elif kind == "integration":
            state.fanout_spawned, state.fanout_finished = [], set()
        for apply in appliers:
            apply(ev)
    return state


def _started(first: dict[str, Any] | None, path: Path) -> dict[str, Any]:
    if first is None or first.get("type") != "session_started":
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
    elog, report = EventLog.open(path, secrets=secrets_)
    try:
        started = _started(first_and_last(path)[0], path)
        if not Path(started["workspace"]).is_dir():
            raise BadRequest(f"the workspace {started['workspace']} of session {sid} no longer exists; restore it "
                             f"to go on (`musec log {sid}` shows what the session did)")
        session = Session(sid, elog, interactive=req.interactive, end_when_idle=req.end_when_idle)
        session.resumed_at_seq = report.events
        from musec.agents.blackboard import Blackboard

        session.blackboard = Blackboard() if started.get("blackboard", True) else None
        start = p.StartSession(
            id=req.id, workspace=started["workspace"], model=started["model"],
            approval=req.approval or started.get("approval", "ask"),
            max_turns=req.max_turns or int(started.get("max_turns", 50)),
            credentials=credentials, interactive=req.interactive, end_when_idle=req.end_when_idle,
            sandbox=started.get("sandbox", "auto"), agents=list(started.get("background", [])),
            blackboard=bool(started.get("blackboard", True)),
            agents_model=str(started.get("agents_model", "")), agents_budget_usd=float(started.get("agents_budget_usd", 0.0)),
            kernel_spec=str(started.get("kernel_spec", "")), max_wall_s=float(started.get("max_wall_s", 0.0)),
            environment=dict(req.environment),
        )
        agent = build_main_agent(deps, session, start, credentials)
    except BaseException:
        elog.close()
        raise
    agent.system_prompt = started.get("system_prompt", agent.system_prompt)
    session.agent = agent
    try:
        appliers = [agent.history.apply, session.restore, *(bg.restore for bg in session.background.values())]
        state = fold_for_resume(iter_events(path), appliers)
    except BaseException:
        elog.close()
        raise
    if report.torn_bytes:
        session.record("log_repaired", torn_bytes=report.torn_bytes, torn_path=report.torn_path, sync=True)
    cut = list(state.open_calls.values())
    if state.fanout_spawned and any(ev.get("tool") == "spawn_workers" for ev in cut):
        session.resume_fanout = (state.fanout_spawned, state.fanout_finished)
    for ev in cut:
        session.record("tool_interrupted", agent=ev.get("agent", "main"), call_id=ev["call_id"], tool=ev.get("tool"),
                       reason="the daemon stopped while it ran", sync=True)
    session.record("session_resumed", pid=os.getpid(), interrupted_calls=[e["call_id"] for e in cut],
                   approval=start.approval, sync=True)
    return session, state.in_turn, [e["call_id"] for e in cut]


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
    started = _started(events[0] if events else None, path)
    spawned = {ev["agent"]: ev for ev in events if ev.get("type") == "agent_spawned"}
    prompts = {agent: ev.get("system_prompt", "") for agent, ev in spawned.items()}
    agents: dict[str, Agent] = {}

    def agent_for(agent_id: str, ev: dict[str, Any]) -> Agent:
        if agent_id not in agents:
            agents[agent_id] = Agent(
                agent_id=agent_id, provider=_ReplayModel(ev.get("provider", ""), ev.get("model", "")),
                tools=_tools_for(agent_id, spawned.get(agent_id, started)) + _mcp_tools_for(agent_id, events[: ev["seq"]]),
                ctx=ToolContext(workspace=Path(started["workspace"]), env={}),
                record=_no_record, ask=_no_ask, on_delta=_no_delta, approval_mode="auto", max_turns=1,
                system_prompt=prompts.get(agent_id, started.get("system_prompt", "")), store_blob=_no_blob, session_id=sid,
            )
            agents[agent_id].history = History(agent_id)
            for earlier in events[: ev["seq"]]:
                agents[agent_id].history.apply(earlier)
        return agents[agent_id]

    requests = 0
    digests: dict[str, PrefixDigest] = {}
    for ev in events:
        if ev.get("type") == "model_request":
            agent_id = ev.get("agent", "main")
            agent = agent_for(agent_id, ev)
            requests += 1
            digest = digests.setdefault(agent_id, PrefixDigest()).digest(agent)
            if digest != ev.get("digest") and request_digest(agent.build_request()) != ev.get("digest"):
                problems.append(f"seq {ev['seq']}: the rebuilt request differs from the one the live run sent")
        for agent in agents.values():
            agent.history.apply(ev)
    main = agents.get("main")
    next_digest = request_digest(main.build_request()) if main else ""
    turns = sum(1 for ev in events if ev.get("type") == "model_response")
    return p.ReplayResult(id=request_id, session_id=sid, ok=not problems, events=len(events), model_requests=requests,
                          turns=turns, problems=problems, next_request_digest=next_digest)


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


def _tools_for(agent_id: str, started: dict[str, Any]) -> list[Any]:
    """The tools an agent was offered, in order, as named in its ``session_started`` (main)
    or ``agent_spawned`` event."""
    from musec.agents.ask_agent import AskAgentTool
    from musec.agents.skills import Skill, SkillTool
    from musec.agents.tools import default_tools
    from musec.agents.workers.tool import SpawnWorkersTool

    offered = [*default_tools(), SpawnWorkersTool(_no_fanout), AskAgentTool(_no_fanout)]
    if started.get("kernel_spec"):
        from musec.agents.kernel_opt.campaign import Campaign
        from musec.agents.kernel_opt.spec import load_spec
        from musec.agents.kernel_opt.tools import campaign_tools

        campaign = Campaign(load_spec(started["kernel_spec"]), Path(started["workspace"]), Path(started["workspace"]))
        offered.extend(campaign_tools(campaign, lambda: 0))  # the same specs; replay runs no tool
    skills = [Skill(s["name"], "", "", s.get("scope", "user")) for s in started.get("extensions", {}).get("skills", [])
              if s.get("model", True)]
    offered.append(SkillTool(skills))
    available = {t.name: t for t in offered}
    return [available[name] for name in started.get("tools", []) if name in available]


def _mcp_tools_for(agent_id: str, events: list[dict[str, Any]]) -> list[Any]:
    """The main agent's MCP tools as the live run offered them: each server's first listing
    (``mcp_server_started``) before the request being rebuilt."""
    from musec.agents.mcp import McpTool, ToolInfo, tool_name

    if agent_id != "main":
        return []
    out: list[Any] = []
    seen_servers: set[str] = set()
    for ev in events:
        if ev.get("type") != "mcp_server_started" or ev.get("server") in seen_servers:
            continue
        seen_servers.add(ev["server"])
        for t in ev.get("tools", []):
            name = tool_name(ev["server"], t["name"])
            if name is not None and name not in {x.name for x in out}:
                out.append(McpTool(ev["server"], ToolInfo(t["name"], t.get("description", ""), t.get("input_schema", {})), name))
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
