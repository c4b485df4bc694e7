"""Views of a session folded from its events (the log is the index, DESIGN §5 rule 7):
its agents, its fan-out workers, its costs, and the live session's counters. Each view is
a fold over the events (a class with ``apply``), one ``match`` per view; the counters are
folded live from each recorded event and on resume from the log, by the same ``apply``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, assert_never

from musec.agents.core import events as evt
from musec.agents.core.words import counted
from musec.agents.workers.state import FanoutState

from . import protocol as p

if TYPE_CHECKING:
    from .index import SessionIndex


@dataclass
class WorkersView:
    """The fan-out workers of a session: the fan-out state and each worker's tokens and
    dollars (``usage[name] = [input_tokens, output_tokens, cost_usd]``)."""

    fanout: FanoutState = field(default_factory=FanoutState)
    usage: dict[str, list[float]] = field(default_factory=dict)

    def apply(self, event: evt.AnyEvent) -> None:
        """Fold one event."""
        self.fanout.apply(event)
        match event:
            case evt.ModelResponse() | evt.CompactionFinished():  # a summarising call is a model call too
                if event.agent.startswith("worker:"):
                    u = self.usage.setdefault(event.agent.removeprefix("worker:"), [0, 0, 0.0])
                    u[0] += int(event.usage.get("input_tokens", 0))
                    u[1] += int(event.usage.get("output_tokens", 0))
                    u[2] += float(event.cost_usd)
            case (evt.ModelSwitched() | evt.ToolResultsCleared()
                  | evt.SessionStarted() | evt.SessionResumed() | evt.LogRepaired() | evt.TurnEnded() | evt.SessionEnded() | evt.UserMessage()
                  | evt.AgentMessage() | evt.ModelRequest() | evt.ModelRetry() | evt.RateLimited() | evt.ApprovalRequested()
                  | evt.ApprovalResolved() | evt.ApprovalModeChanged() | evt.ToolStarted() | evt.FileEditStarted() | evt.FileEdited() | evt.ToolFinished() | evt.ToolInterrupted()
                  | evt.AgentSpawned() | evt.AgentFailed() | evt.WorkerSpawned() | evt.WorkerFinished() | evt.Integration()
                  | evt.IntegrationApplied() | evt.TestRun() | evt.RepoMap() | evt.Review() | evt.BaselineSnapshot() | evt.KernelEvaluated()
                  | evt.PlanStarted() | evt.PlanProposed() | evt.PlanApproved() | evt.GrillRound()
                  | evt.NetConnection() | evt.InstructionsAdded() | evt.SkillLoaded() | evt.HookContext() | evt.HookRan()
                  | evt.PromptBlocked() | evt.McpServerStarted() | evt.McpServerRestarting() | evt.McpServerFailed()
                  | evt.GoalSet() | evt.GoalChecked() | evt.GoalUpdated()
                  | evt.CompactionStarted() | evt.ContextCut()):
                pass
            case _:
                assert_never(event)

    def integration_summary(self) -> str:
        """One line on the latest integration ("" when there was none)."""
        ev = self.fanout.integration
        if ev is None:
            return ""
        if not ev.conflicts and ev.tests_passed is None:  # applicable, untested (s8 J7)
            return (f"{ev.branch} at {ev.head[:12]}: ok, nothing tested (no test command found; "
                    "set [workers] test_command in config.toml)")
        tests = "passed" if ev.tests_passed else "FAILED" if ev.tests_passed is False else "not run"
        return f"{ev.branch} at {ev.head[:12]}: " + ("ok" if ev.ok else f"{counted(len(ev.conflicts), 'conflict')}, tests {tests}")


def list_workers(index: SessionIndex, session_id: str, request_id: int) -> p.Workers:
    """A session's workers, from its log (the source of truth) and the branches' commits."""
    from musec.agents.workers import WorkerError, worker_states

    from .eventlog import iter_events

    sid = index.resolve_id(session_id)
    view = WorkersView()
    for ev in iter_events(index.log_path(sid)):
        view.apply(ev)
    spawned, finished = view.fanout.spawned, view.fanout.finished
    workspace = view.fanout.workspace
    base = list(spawned.values())[-1].base_commit if spawned else ""
    commits: dict[str, int] = {}
    if spawned and workspace:
        try:
            commits = {w.worker: w.commits for w in worker_states(workspace, sid, base)}
        except (WorkerError, OSError):
            commits = {}
    out = []
    for name, ev in spawned.items():
        state = finished[name].exit_reason if name in finished else (
            "running" if sid in index.live else "interrupted")
        u = view.usage.get(name, [0, 0, 0.0])
        out.append(p.WorkerInfo(name=name, branch=ev.branch, state=state, commits=commits.get(name, 0),
                                path=ev.path, input_tokens=int(u[0]), output_tokens=int(u[1]),
                                cost_usd=round(u[2], 8), instruction=ev.instruction[:200]))
    return p.Workers(id=request_id, session_id=sid, workers=out, integration=view.integration_summary())


@dataclass
class AgentActivity:
    """One agent's totals in the agents view."""

    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    events: int = 0
    last: float = 0.0
    state: str = ""
    model: str = ""
    context: tuple[int, int, float] = (0, 0, -1.0)  # tokens, window (0: unknown), percent (-1: unknown)


@dataclass
class AgentsView:
    """Every agent of a session: its role, activity and tokens, and whether the session
    ended."""

    seen: dict[str, AgentActivity] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=lambda: {"main": "main"})
    ended: bool = False

    def apply(self, event: evt.AnyEvent) -> None:
        """Fold one event."""
        info = self.seen.setdefault(event.agent, AgentActivity())
        info.events += 1
        info.last = float(event.ts)
        match event:
            case evt.SessionStarted():
                for role in event.background:
                    self.roles[role] = role
            case evt.AgentSpawned():
                self.roles[event.agent] = event.role
            case evt.ModelRequest():
                info.model = event.catalog_id or info.model or event.model
                _context_of(info, event)
            case evt.ModelSwitched():
                info.model = event.model
                _context_of(info, event)
            case evt.ModelResponse() | evt.CompactionFinished():
                info.tokens_in += int(event.usage.get("input_tokens", 0))
                info.tokens_out += int(event.usage.get("output_tokens", 0))
                info.cost += float(event.cost_usd)
                if isinstance(event, evt.ModelResponse):
                    _context_of(info, event)
            case evt.WorkerFinished():
                worker = self.seen.setdefault(f"worker:{event.worker}", AgentActivity(**vars(info)))
                worker.state = event.exit_reason
            case evt.AgentFailed():
                info.state = "failed, restarting"
            case evt.SessionEnded():
                self.ended = True
            case (evt.ToolResultsCleared()
                  | evt.SessionResumed() | evt.LogRepaired() | evt.TurnEnded() | evt.UserMessage() | evt.AgentMessage()
                  | evt.ModelRetry() | evt.RateLimited() | evt.ApprovalRequested() | evt.ApprovalResolved() | evt.ApprovalModeChanged() | evt.ToolStarted()
                  | evt.FileEditStarted() | evt.FileEdited() | evt.ToolFinished() | evt.ToolInterrupted() | evt.WorkerSpawned() | evt.Integration()
                  | evt.IntegrationApplied() | evt.TestRun() | evt.RepoMap() | evt.Review() | evt.BaselineSnapshot() | evt.KernelEvaluated()
                  | evt.PlanStarted() | evt.PlanProposed() | evt.PlanApproved() | evt.GrillRound()
                  | evt.NetConnection() | evt.InstructionsAdded() | evt.SkillLoaded() | evt.HookContext() | evt.HookRan()
                  | evt.PromptBlocked() | evt.McpServerStarted() | evt.McpServerRestarting() | evt.McpServerFailed()
                  | evt.GoalSet() | evt.GoalChecked() | evt.GoalUpdated()
                  | evt.CompactionStarted() | evt.ContextCut()):
                pass
            case _:
                assert_never(event)


def list_agents(index: SessionIndex, session_id: str, request_id: int) -> Any:
    """Every agent of a session with its role, state, last activity, tokens and cost,
    from the log (and, for a live session, the background agents' own state)."""
    from .eventlog import iter_events

    sid = index.resolve_id(session_id)
    live = index.live.get(sid)
    view = AgentsView()
    for ev in iter_events(index.log_path(sid)):
        view.apply(ev)
    roles, seen = view.roles, view.seen
    out = []
    for agent, role in {**roles, **{a: roles.get(a, a.split(":")[0]) for a in seen}}.items():
        info = seen.get(agent, AgentActivity())
        if live is not None and agent in live.background:
            state = live.background[agent].state
        elif live is not None and agent == "main":
            state = live.status
        else:
            state = info.state or ("ended" if view.ended else "stopped")
        context = info.context
        running = _live_agent(live, agent)
        if running is not None:  # with what was added since its last request, estimated
            fields = running.context_use().fields()
            context = (fields["context_tokens"], fields["context_window_tokens"], fields["context_percent"])
        out.append(p.AgentInfo(agent=agent, role=role, state=state, last_activity_at=info.last,
                               input_tokens=info.tokens_in, output_tokens=info.tokens_out,
                               cost_usd=round(info.cost, 8), events=info.events, context_tokens=context[0],
                               context_window_tokens=context[1], context_percent=context[2], model=info.model))
    return p.Agents(id=request_id, session_id=sid, agents=out)


def _context_of(info: AgentActivity, event: evt.ModelRequest | evt.ModelResponse | evt.ModelSwitched) -> None:
    """The context fields an event carries (agents/context.py), kept as the agent's latest."""
    if isinstance(event.context_tokens, int):
        window = event.context_window_tokens if isinstance(event.context_window_tokens, int) else 0
        percent = event.context_percent if isinstance(event.context_percent, float | int) else -1.0
        info.context = (event.context_tokens, window, float(percent))


def _live_agent(live: Any, agent: str) -> Any:
    """The running ``Agent`` of a live session by id (main, a worker, the scout's), or ``None``."""
    if live is None:
        return None
    found = live.agent if agent == "main" else live.workers.get(agent.removeprefix("worker:")) or live.workers.get(agent)
    return found if hasattr(found, "context_use") else None


@dataclass
class CostsView:
    """Tokens and dollars per (agent, model), the number of model retries, and of answers
    cut off while they streamed (``interrupted``: counted, their output tokens estimated).

    A model is named as the provider reported it (``model_response.model``: the model that
    served the call, a dated snapshot for some providers). A compaction's summarising call
    (``compaction_finished``) is charged to the model that made it: its event names the
    model as the agent asked for it, which the responses to that agent's requests translate
    (``model_request`` then ``model_response``), so the agent's own model summarising adds
    to that model's row, and a separate compaction model (``compact_model``) gets its own.
    Rows are read with ``by_model`` once every event is folded (a compaction may come
    before the first response that names its model).
    """

    rows: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    retries: int = 0
    interrupted: int = 0
    _asked: dict[str, tuple[str, str]] = field(default_factory=dict)  # agent -> (provider, model) it last asked for
    _served: dict[tuple[str, str], str] = field(default_factory=dict)  # (provider, model asked for) -> model reported
    _summaries: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)  # (agent, provider, model)

    def apply(self, event: evt.AnyEvent) -> None:
        """Fold one event."""
        match event:
            case evt.ModelRetry():
                self.retries += 1
            case evt.ModelRequest():
                self._asked[event.agent] = (event.provider, event.model)
            case evt.ModelResponse():
                asked = self._asked.get(event.agent)
                if asked is not None and event.model:
                    self._served[asked] = event.model
                _charge(self.rows.setdefault((event.agent, event.model), _row()), event.usage, event.cost_usd)
                if event.interrupted:
                    self.interrupted += 1
            case evt.CompactionFinished():  # a summarising call is charged like any call
                _charge(self._summaries.setdefault((event.agent, event.provider, event.model), _row()),
                        event.usage, event.cost_usd)
            case (evt.ModelSwitched() | evt.ToolResultsCleared()
                  | evt.SessionStarted() | evt.SessionResumed() | evt.LogRepaired() | evt.TurnEnded() | evt.SessionEnded() | evt.UserMessage()
                  | evt.AgentMessage() | evt.RateLimited() | evt.ApprovalRequested() | evt.ApprovalResolved() | evt.ApprovalModeChanged()
                  | evt.ToolStarted() | evt.FileEditStarted() | evt.FileEdited() | evt.ToolFinished() | evt.ToolInterrupted() | evt.AgentSpawned() | evt.AgentFailed()
                  | evt.WorkerSpawned() | evt.WorkerFinished() | evt.Integration() | evt.IntegrationApplied() | evt.TestRun() | evt.RepoMap()
                  | evt.Review() | evt.BaselineSnapshot() | evt.KernelEvaluated()
                  | evt.PlanStarted() | evt.PlanProposed() | evt.PlanApproved() | evt.GrillRound()
                  | evt.NetConnection() | evt.InstructionsAdded() | evt.SkillLoaded() | evt.HookContext() | evt.HookRan()
                  | evt.PromptBlocked() | evt.McpServerStarted() | evt.McpServerRestarting() | evt.McpServerFailed()
                  | evt.GoalSet() | evt.GoalChecked() | evt.GoalUpdated()
                  | evt.CompactionStarted() | evt.ContextCut()):
                pass
            case _:
                assert_never(event)

    def by_model(self) -> dict[tuple[str, str], dict[str, Any]]:
        """(agent, model) -> calls, tokens (``in``, ``out``, ``cr``, ``cw``) and dollars
        (``usd``), compactions included under the model that made them."""
        merged = {key: dict(row) for key, row in self.rows.items()}
        for (agent, provider, model), row in self._summaries.items():
            into = merged.setdefault((agent, self._served.get((provider, model), model)), _row())
            for k, v in row.items():
                into[k] += v
        return merged


def _row() -> dict[str, Any]:
    return {"calls": 0, "in": 0, "out": 0, "cr": 0, "cw": 0, "usd": 0.0}


def _charge(row: dict[str, Any], usage: dict[str, Any], cost_usd: float) -> None:
    """Add one model call's usage and cost to ``row``."""
    row["calls"] += 1
    row["in"] += int(usage.get("input_tokens", 0))
    row["out"] += int(usage.get("output_tokens", 0))
    row["cr"] += int(usage.get("cache_read_tokens", 0))
    row["cw"] += int(usage.get("cache_write_tokens", 0))
    row["usd"] += float(cost_usd)


def cost_report(index: SessionIndex, session_id: str, workspace: str, request_id: int) -> Any:
    """Tokens and dollars per agent and model, from the session's ``model_response`` events."""
    from .errors import SessionNotFound
    from .eventlog import iter_events

    if session_id:
        sid = index.resolve_id(session_id)
    else:
        latest = index.latest(workspace)
        if latest is None:
            raise SessionNotFound(f"no session in {workspace}; give a session id (`musec sessions --all`)")
        sid = latest
    view = CostsView()
    for ev in iter_events(index.log_path(sid)):
        view.apply(ev)
    out = [p.CostRow(agent=a, model=m, calls=r["calls"], input_tokens=r["in"], output_tokens=r["out"],
                     cache_read_tokens=r["cr"], cache_write_tokens=r["cw"], cost_usd=round(r["usd"], 8))
           for (a, m), r in sorted(view.by_model().items())]
    return p.CostReport(id=request_id, session_id=sid, rows=out, total_usd=round(sum(r.cost_usd for r in out), 8),
                        retries=view.retries, interrupted=view.interrupted)


class Counters:
    """A session's totals, folded from its events the same way live and on resume.

    Attributes:
        turns: model responses of every agent.
        usage: token counts summed over those responses, by kind.
        cost_usd: their cost in dollars.
        client_msg_ids: the clients' ids of the person's messages (a re-send counts once).
        tool_calls: ``tool_started`` events of every agent (a kernel campaign's x axis).
        skills_loaded: the skills the person invoked (``skill_loaded``): each is added to
            the conversation once per session, a resumed one too.
    """

    def __init__(self) -> None:
        self.turns = 0
        self.tool_calls = 0
        self.usage: dict[str, int] = {}
        self.cost_usd = 0.0
        self.client_msg_ids: set[str] = set()
        self.skills_loaded: set[str] = set()

    def apply(self, event: evt.AnyEvent) -> None:
        """Fold one event into the totals."""
        match event:
            case evt.ModelResponse() | evt.CompactionFinished():
                if isinstance(event, evt.ModelResponse):
                    self.turns += 1  # a summarising call is no turn, but its tokens and cost count
                self.cost_usd += float(event.cost_usd)
                for k, v in event.usage.items():
                    if isinstance(v, int):
                        self.usage[k] = self.usage.get(k, 0) + v
            case evt.ToolStarted():
                self.tool_calls += 1
            case evt.ModelRequest() | evt.ToolFinished():
                pass  # the most frequent types first: each class pattern tried is an isinstance (issue 19)
            case evt.UserMessage():
                if event.client_msg_id:
                    self.client_msg_ids.add(event.client_msg_id)
            case evt.SkillLoaded():
                self.skills_loaded.add(event.name)
            case (evt.ModelSwitched() | evt.ToolResultsCleared()
                  | evt.SessionStarted() | evt.SessionResumed() | evt.LogRepaired() | evt.TurnEnded() | evt.SessionEnded() | evt.AgentMessage() | evt.ModelRetry() | evt.RateLimited() | evt.ApprovalRequested() | evt.ApprovalResolved() | evt.ApprovalModeChanged()
                  | evt.FileEditStarted() | evt.FileEdited() | evt.ToolInterrupted() | evt.AgentSpawned() | evt.AgentFailed()
                  | evt.WorkerSpawned() | evt.WorkerFinished() | evt.Integration() | evt.IntegrationApplied() | evt.TestRun() | evt.RepoMap()
                  | evt.Review() | evt.BaselineSnapshot() | evt.KernelEvaluated()
                  | evt.PlanStarted() | evt.PlanProposed() | evt.PlanApproved() | evt.GrillRound() | evt.NetConnection() | evt.InstructionsAdded()
                  | evt.HookContext() | evt.HookRan() | evt.PromptBlocked() | evt.McpServerStarted()
                  | evt.McpServerRestarting() | evt.McpServerFailed()
                  | evt.GoalSet() | evt.GoalChecked() | evt.GoalUpdated()
                  | evt.CompactionStarted() | evt.ContextCut()):
                pass
            case _:
                assert_never(event)
