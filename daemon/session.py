"""One live session: its log, its main agent, and the hub that fans events out.

Every event goes through ``Session.record``: appended to the log (the single writer),
folded into the agent's history, then offered to each attached client. Clients get
small bounded streams; one that falls behind is cut off with a ``Resync`` instead of
slowing the agent (DESIGN §4, §6).

Why over 500 lines: the session's turn loop is one piece (input, turns, the reviewer's and
the goal's rounds, lifecycle hooks, the end); the goal's own logic is in ``daemon/goals.py``
and ``agents/goal``, and splitting the loop further would scatter one state machine.
The take-over of a session whose client went away is in ``takeover.py`` (this file holds
its hooks: ``driven``, ``unattended``, ``end_idle``). Plan mode's gate is in
``daemon/plans.py`` and ``daemon/grill.py``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import msgspec
import structlog
from musec.agents.core.events import (
    AgentMessage,
    AnyEvent,
    ApprovalModeChanged,
    ApprovalRequested,
    Durability,
    HookContext,
    PromptBlocked,
    SessionEnded,
    SkillLoaded,
    TurnEnded,
    UserMessage,
    persistence,
    result_preview,
)
from musec.agents.goal.state import GoalState

from . import protocol as p
from .commit import GroupCommit
from .errors import BadRequest
from .eventlog import EventLog
from .goals import goal_arguments, goal_message
from .projections import Counters
from .takeover import IDLE_TIMEOUT_S, REDECIDE, redecide, watch_unattended

log = structlog.get_logger("musec.session")
SUBSCRIBER_BUFFER = 512
INPUT_BUFFER = 64
MAX_REVIEW_ROUNDS = 2  # times the reviewer may send a finished turn back
VERIFY_WAIT_S = 5.0  # the most a finished turn waits for the verifier's run on its edits
MCP_FIRST_WAIT_S = 5.0  # the most the first model request waits for the MCP servers to come up
ENDED_BY_PERSON = "the person ended the session while it ran"
"""Why a turn was cut off by ``EndSession`` (``Session.end``'s default cause)."""
_KICK = "\0start a turn"  # an input that starts a turn with no person's message (Session.kick)


COMPACTING = "compacting the context"
"""``Busy.activity`` of a compaction asked for while idle."""


class CompactOutcome(NamedTuple):
    """What ``Session.compact`` did (the fields of its ``Compacted`` reply): ``done`` now,
    the sizes before and after in tokens, else ``message`` saying why not; ``failed`` when
    the summarising call failed; ``ran`` when it was done now, between ``Busy`` and ``Idle``."""

    done: bool
    tokens_before: int
    tokens_after: int
    message: str
    failed: bool
    ran: bool = False

    def line(self) -> str:
        """The outcome in one line, as every terminal shows it."""
        return f"compacted: about {self.tokens_before} tokens to {self.tokens_after}" if self.done else self.message


class Subscriber:
    """One attached client's view of a session: a bounded stream of daemon messages."""

    def __init__(self, request_id: int) -> None:
        self.request_id = request_id
        self.send, self.receive = anyio.create_memory_object_stream[Any](SUBSCRIBER_BUFFER)
        self.last_seq = -1
        self.since_seq = -1
        self.cut_off = False
        self.drives = False  # opened by StartSession/ResumeSession: a client that drives the session


@dataclass
class PendingApproval:
    call_id: str
    tool: str
    done: anyio.Event = field(default_factory=anyio.Event)
    decision: str = ""
    by: str = ""
    plan_action: str = ""  # a plan's approval (daemon/plans.py): approve, approve_auto, edit, fresh, feedback, grill
    text: str = ""  # with plan_action: the edited plan or the feedback; for a grill's question, the answer
    asked_seq: int = -1  # the seq of the approval_requested event asking it: the question's identity


class Session:
    """A session hosted by the daemon.

    Args:
        session_id: the session's id (also its log's file name).
        log: the session's event log, already holding ``session_started``.
        interactive: whether a person can answer approvals.
        end_when_idle: end the session when the agent stops (headless runs).
    """

    def __init__(self, session_id: str, log_: EventLog, *, interactive: bool, end_when_idle: bool) -> None:
        self.id = session_id
        self.log = log_
        # Write-ahead fsyncs off the event loop, shared (issue 19); what clients are sent
        # waits behind the first write-ahead event not yet durable (``_held``).
        self.commit = GroupCommit(log_, on_durable=self._release)
        self._held: deque[tuple[int | None, Callable[[Subscriber], Any] | None, bool]] = deque()
        self.released_seq = log_.next_seq - 1  # the last event the clients have been sent (or would be)
        self._want_commit = anyio.Event()  # set by a write-ahead event: the committer fsyncs
        self.interactive = interactive
        self.end_when_idle = end_when_idle
        self.subscribers: list[Subscriber] = []
        self.approvals: dict[str, PendingApproval] = {}
        self._asked_seq: dict[str, int] = {}  # call id -> seq of its latest approval_requested
        self.agent: Any = None  # agents.loop.Agent, set by the daemon
        self.workers: dict[str, Any] = {}  # worker agents of a fan-out, by agent id
        self.background: dict[str, Any] = {}  # background roles (agents.roles), by role
        self._background_scope: anyio.CancelScope | None = None
        self._ending: tuple[str, str, str, bool] = ("interrupted", "", "the daemon stopped", False)
        self.blackboard: Any = None  # agents.blackboard.Blackboard, set by the daemon
        self.fanout: Any = None  # agents.workers.run.FanOut, set by the daemon
        self.extensions: Any = None  # agents.extensions.Extensions (daemon/extensions.py)
        self.hooks: Any = None  # agents.hooks.Hooks, when any are configured
        self.mcp: Any = None  # agents.mcp.McpManager, when servers are configured
        self.net_proxy: Any = None  # daemon.netproxy.NetProxy, when net rules open the network
        self.resume_fanout: tuple[list[dict[str, Any]], set[str]] | None = None
        self.status = "running"
        self.ended = anyio.Event()
        self._inputs_send, self._inputs = anyio.create_memory_object_stream[tuple[str, str]](INPUT_BUFFER)
        self.counters = Counters()
        self.seen_client_msg_ids = self.counters.client_msg_ids
        self.skills_loaded = self.counters.skills_loaded  # folded from skill_loaded, live and on resume
        self._turn_scope: anyio.CancelScope | None = None
        self._interrupt_next = False  # an interrupt that came before the turn (headless)
        self.interrupted_by = ""  # the client whose interrupt cut the running turn (``turn_ended``)
        self.stop_cause = ""  # why the running turn was cancelled, when not by the person (``_cut_turn``)
        self.last_stop = ""  # how the latest turn ended (``turn_ended``): a stopped one may be gone on with
        self.unlogged_stop = ""  # why it stopped without its end logged while the daemon went on (a full disk)
        self.go_on_stopped = False  # a take-over goes on with the stopped turn (``pending.stopped_live_turn``)
        self._scope: anyio.CancelScope | None = None
        self.on_end: Callable[[Session], None] | None = None
        self.resumed_at_seq = 0
        self.campaign: Any = None  # agents.kernel_opt.campaign.Campaign of ``musec optimize``
        self.kernel_past: Any = None  # a resumed campaign's (evaluations, started_at), read off the loop
        self.goal = GoalState()  # the session's goal: a fold of its events (agents.goal)
        self.goals: Any = None  # agents.goal.driver.GoalDriver, set by the daemon
        self.initial_goal: Any = None  # agents.goal.GoalSpec of ``musec run --goal``, set when _run starts
        self.idle_timeout_s = IDLE_TIMEOUT_S  # 0: never end for want of a client
        self.stir = anyio.Event()  # set when clients, status or approvals change (the idle watch)
        self._end_note: tuple[str, str] | None = None  # (exit_reason, message) of an end asked for while idle
        from .plans import init_session

        init_session(self)  # self.plan and the rest of plan mode's state (daemon/plans.py)
        self._agent_lock = anyio.Lock()  # a turn or a manual compaction: one at a time on the main agent
        self.compact_first: str | None = None  # ``musec compact`` of a session that was not live: its focus
        self.compacted: CompactOutcome | None = None  # what that compaction did
        self.activity = ""  # work under way that is no turn (``Busy.activity``): told to a client attaching now

    # -- events -------------------------------------------------------------------

    def record(self, event: AnyEvent) -> AnyEvent:
        """Append an event to the log, fold it into every live view (the agents'
        histories, the background agents, the counters), then send its line to the
        attached clients; return it with its ``seq`` and ``ts``.

        A write-ahead event is written at once and made durable off the event loop (the
        group commit, ``daemon.commit``): whoever starts the effect it announces awaits
        ``durable`` first (the agent before a model call, a tool or a file edit; the
        request handler before its reply; the net proxy before connecting), and the
        clients are sent it, and everything after it, only once it is durable.

        The views get ``event`` itself, never the redacted line read back: redaction is
        for what is stored and shown.

        Raises:
            OSError: the log could not be written (nothing was folded or sent).
        """
        event, line = self.log.append(event, defer_sync=True)
        if self.agent is not None:
            self.agent.history.apply(event)
        self.goal.apply(event)
        for worker in self.workers.values():
            worker.history.apply(event)
        for agent in self.background.values():
            agent.notify(event)
        self.counters.apply(event)
        self.plan.apply(event)
        how, seq = persistence(event), event.seq
        if isinstance(event, ApprovalRequested):
            self._asked_seq[event.call_id] = seq
        make = (lambda sub: p.Event(id=sub.request_id, session_id=self.id, seq=seq, line=line)) if how.to_clients else None
        ahead = how.durability is Durability.WRITE_AHEAD
        if ahead:
            self._want_commit.set()
        if self._held or (ahead and self.log.durable_through < seq):
            self._held.append((seq, make, ahead))
        else:
            self._deliver(seq, make)
        return event

    async def durable(self) -> None:
        """Return once every write-ahead event recorded so far, and every event before
        it, is on disk (the agents' ``durable``: awaited before a tool, a file edit or a
        model call starts; the handler's before it replies).

        Raises:
            OSError: the fsync failed.
        """
        await self.commit.durable()

    async def _committer(self) -> None:
        """Fsync soon after each write-ahead event, awaited or not (so the clients are sent
        it without waiting for the next effect); runs beside the session."""
        while True:
            await self._want_commit.wait()
            self._want_commit = anyio.Event()
            try:
                await self.commit.durable()
            except OSError as exc:  # the effects' own ``durable`` raise it and pause the session
                log.error("log_fsync_failed", session_id=self.id, error=str(exc))
                return

    def _release(self, durable_seq: int) -> None:
        """Send the clients what waited for the log to be durable through ``durable_seq``."""
        held = self._held
        while held and not (held[0][2] and held[0][0] > durable_seq):  # type: ignore[operator]
            seq, make, _ = held.popleft()
            self._deliver(seq, make)

    def _deliver(self, seq: int | None, make: Callable[[Subscriber], Any] | None) -> None:
        if seq is not None:
            self.released_seq = seq
        if make is not None:
            self._send_now(make, seq)

    @property
    def turns(self) -> int:
        """Model responses so far, of every agent."""
        return self.counters.turns

    @property
    def tool_calls(self) -> int:
        """Tool calls started so far, of every agent."""
        return self.counters.tool_calls

    @property
    def usage(self) -> dict[str, int]:
        """Token counts so far, by kind."""
        return self.counters.usage

    @property
    def cost_usd(self) -> float:
        """Dollars spent so far."""
        return self.counters.cost_usd

    def _broadcast(self, make: Callable[[Subscriber], Any]) -> None:
        """Send every attached client a message (not an event), after what is held back."""
        if self._held:
            self._held.append((None, make, False))
        else:
            self._send_now(make, None)

    def _send_now(self, make: Callable[[Subscriber], Any], seq: int | None) -> None:
        for sub in list(self.subscribers):
            if sub.cut_off or (seq is not None and seq <= sub.since_seq):
                continue  # a client attached with since_seq ahead of the log skips what it has
            try:
                sub.send.send_nowait(make(sub))
                if seq is not None:
                    sub.last_seq = seq
            except anyio.WouldBlock:
                self._cut_off(sub)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self.detach(sub)

    def _cut_off(self, sub: Subscriber) -> None:
        sub.cut_off = True
        self.detach(sub)
        log.warning("client_cut_off", session_id=self.id, last_seq=sub.last_seq)

    async def delta(self, agent: str, delta: Any) -> None:
        """Fan out a streamed text piece (live only)."""
        self._broadcast(lambda sub: p.Delta(id=sub.request_id, session_id=self.id, agent=agent, text=delta.text, kind=delta.kind))

    # -- clients ------------------------------------------------------------------

    def attach(self, request_id: int, since_seq: int, *, drives: bool = False) -> tuple[Subscriber, int]:
        """Subscribe; return the subscriber and the last seq of its backlog.

        The backlog is the log's lines after ``since_seq`` up to that seq: every one is in
        the file already and durable, and every later event goes to the subscriber's
        stream (once durable: ``record``), so a caller that sends the backlog from the file
        and then the stream misses and repeats nothing. Nothing is read here: a log of
        any size is attached to in constant time and memory (issue 12 part 8). ``drives``:
        the client started or resumed the session.
        """
        upto_seq = self.released_seq
        sub = Subscriber(request_id)
        sub.since_seq = since_seq
        sub.last_seq, sub.drives = max(upto_seq, since_seq), drives
        self.subscribers.append(sub)
        self.stir.set()
        return sub, upto_seq

    def detach(self, sub: Subscriber) -> None:
        if sub in self.subscribers:
            self.subscribers.remove(sub)
            self.stir.set()
        sub.send.close()

    @property
    def driven(self) -> bool:
        """Whether a client that started or resumed the session still follows it."""
        return any(sub.drives for sub in self.subscribers)

    @property
    def unattended(self) -> bool:
        """No client follows it and it does no work (idle, or waiting for an approval)."""
        return not self.subscribers and (self.status == "idle" or bool(self.approvals))

    def end_idle(self, exit_reason: str, message: str) -> None:
        """End the session once idle with this reason and message (``daemon.takeover``);
        approvals no one can give end their turn with ``needs_approval``."""
        self._end_note, self.interactive = (exit_reason, message), False
        for pending in list(self.approvals.values()):
            self.answer(pending.call_id, REDECIDE, "")
        self._inputs_send.close()

    # -- input, approvals, interrupts ---------------------------------------------

    def submit(self, text: str, client_msg_id: str = "") -> bool:
        """Queue a person's message; it becomes a ``user_message`` at the next idle point.

        Returns False (and queues nothing) when ``client_msg_id`` was seen before: a
        reconnecting client's re-send is applied once.
        """
        if client_msg_id:
            if client_msg_id in self.seen_client_msg_ids:
                return False
            self.seen_client_msg_ids.add(client_msg_id)
        try:
            self._inputs_send.send_nowait((text, client_msg_id))
        except anyio.WouldBlock:
            raise BadRequest(f"{INPUT_BUFFER} messages are already queued for this session; wait for the agent") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise BadRequest("the session is ending; start or resume another") from None
        return True

    def restore(self, event: AnyEvent) -> None:
        """Fold one event of a log being resumed into the counters, the plan and seen message ids."""
        self.counters.apply(event)
        self.goal.apply(event)
        self.plan.apply(event)

    async def ask(self, agent_id: str, call: Any, tool: Any) -> tuple[str, str]:
        """Wait for the first client's answer to an approval (the agent loop's ``ask``)."""
        from musec.agents.loop import NeedsApproval

        if not self.interactive:
            summary = msgspec.json.encode(call.input).decode()[:120]
            raise NeedsApproval(f"{call.name}({summary}) [call {call.id}] needs approval")
        while True:
            pending = self._pending(call.id, call.name)
            try:
                await pending.done.wait()
            finally:
                self._settled(pending)
            if pending.decision != REDECIDE:
                return pending.decision, pending.by
            decided = redecide(self, agent_id, call, tool)
            if decided is not None:
                return decided
            if not self.interactive:
                summary = msgspec.json.encode(call.input).decode()[:120]
                raise NeedsApproval(f"{call.name}({summary}) [call {call.id}] needs approval")

    async def wait_answer(self, call_id: str, tool: str) -> PendingApproval:
        """Wait for the first attached client's answer to the approval ``call_id`` (a plan's,
        a grill's question: ``daemon/plans.py``, ``daemon/grill.py``).

        Raises:
            NeedsApproval: the clients went away and the session is unattended now.
        """
        from musec.agents.loop import NeedsApproval

        while True:
            pending = self._pending(call_id, tool)
            try:
                await pending.done.wait()
            finally:
                self._settled(pending)
            if pending.decision != REDECIDE:
                return pending
            if not self.interactive:
                raise NeedsApproval(f"{tool} [call {call_id}] needs an answer and no client is attached")

    def _pending(self, call_id: str, tool: str) -> PendingApproval:
        """A question now pending: the call asked about by the ``approval_requested`` just recorded."""
        pending = PendingApproval(call_id, tool, asked_seq=self._asked_seq.get(call_id, -1))
        self.approvals[call_id] = pending
        self.stir.set()
        return pending

    def _settled(self, pending: PendingApproval) -> None:
        if self.approvals.get(pending.call_id) is pending:  # not another agent's question of the same id
            del self.approvals[pending.call_id]
        self.stir.set()

    def answer(self, call_id: str, decision: str, by: str, plan_action: str = "", text: str = "",
               asked_seq: int = -1) -> bool:
        """Resolve a pending approval; the first answer wins. Returns whether it counted.
        ``plan_action`` and ``text`` answer a plan's approval (``daemon/plans.py``).
        ``asked_seq`` (the seq of the question's ``approval_requested``; -1: not said) names
        the question: an answer to one no longer pending counts for nothing, even when a
        question of the same call id is pending now (G2: a late answer from a second
        terminal approved the next question)."""
        pending = self.approvals.get(call_id)
        if pending is None or pending.done.is_set():
            return False
        if asked_seq >= 0 and pending.asked_seq >= 0 and asked_seq != pending.asked_seq:
            return False
        pending.decision, pending.by, pending.plan_action, pending.text = decision, by, plan_action, text
        pending.done.set()
        return True

    def set_approval(self, mode: str, by: str) -> None:
        """Switch the main agent's approval mode from its next tool call on, logged as
        ``approval_mode_changed`` (a switch to the mode in force changes nothing).

        In plan mode it is the way out of it: the plan (if one was proposed) is dropped, not
        carried out, and the workspace is writable in ``mode`` (the event's ``previous`` is
        ``plan``: the plan's fold ends planning there). It only set the mode a later
        approval gave, while the client said "approval is auto" and writes stayed refused
        (fresh-user s8 J11)."""
        previous = self.agent.approval_mode
        self.base_approval = mode
        if mode != previous:
            if self.plan.planning:
                from musec.agents.plan import leave_plan_mode

                leave_plan_mode(self.agent, mode)
                previous = "plan"
            else:
                self.agent.follow_mode(mode)
            self.record(ApprovalModeChanged(approval=mode, previous=previous, by=by))
        for worker in self.workers.values():  # a running fan-out's workers follow it too (fresh-user s8 J5)
            worker.follow_mode(self.worker_approval)

    @property
    def worker_approval(self) -> str:
        """The approval mode a fan-out's workers work under: the session's own as it is now
        (a ``/approval`` switch, or one a resume restored, included); while the main agent
        plans, the mode the session goes back to."""
        mode = self.agent.approval_mode if self.agent is not None else self.base_approval
        return self.base_approval if mode == "plan" else mode

    def kick(self) -> None:
        """Start a turn with no person's message (a goal set or resumed while idle)."""
        self.submit(_KICK, "")

    def interrupt(self, by: str = "") -> None:
        """Cancel the current turn (the agent answers the calls it cut off); a headless
        session not yet in one (its client's Ctrl-C as it starts) has its next turn cancelled.
        ``by``: the client asking (``client:N``), named on the ``turn_ended`` (the first stands)."""
        if self._turn_scope is not None:
            if not self._turn_scope.cancel_called:
                self.interrupted_by = by
            self._cut_turn("")
        elif self.end_when_idle:
            self.interrupted_by = self.interrupted_by if self._interrupt_next else by
            self._interrupt_next = True

    def end(self, cause: str = ENDED_BY_PERSON) -> None:
        """End the session: the current turn is cancelled (``cause`` says why, to the
        model and in the transcript) and ``session_ended`` written."""
        self._inputs_send.close()
        if self.fanout is not None and (self._turn_scope is None or not self._turn_scope.cancel_called):
            self.fanout.stop_cause = cause  # a fan-out resumed before any turn is cut off by this end too
        if self._turn_scope is not None:
            self._cut_turn(cause)

    def _cut_turn(self, cause: str) -> None:
        """Cancel the running turn; ``cause``: why, when not the person's interrupt ("").
        The first cause stands: a turn already being cancelled keeps the reason it has."""
        scope = self._turn_scope
        if scope is None or scope.cancel_called:
            return
        self.stop_cause = cause
        for agent in (self.agent, *self.workers.values()):
            if agent is not None:
                agent.stop_cause = cause
        if self.fanout is not None:  # what the workers it cuts off end with (``worker_finished``)
            self.fanout.stop_cause = cause
        scope.cancel()

    # -- running ------------------------------------------------------------------

    async def _work(self, pending_plan: str | None = None) -> Any:
        """The agent's run, sent back by the reviewer's findings (at most ``MAX_REVIEW_ROUNDS``)."""
        from .plans import run_agent

        outcome = await run_agent(self, pending_plan)
        reviewer = self.background.get("reviewer")
        verifier = self.background.get("verifier")
        rounds = 0
        while reviewer is not None and outcome.exit_reason == "finished" and rounds < MAX_REVIEW_ROUNDS:
            if verifier is not None:  # a quick suite's verdict on the turn's edits first
                await verifier.settled(VERIFY_WAIT_S)
            findings = await reviewer.review()
            if not findings:
                break
            rounds += 1  # sent back: the agent goes on with the findings in its history
            reviewer.record(AgentMessage(to="main", from_="reviewer", priority="high",
                                         body="Before you finish, the review of your changes found:\n" + "\n".join(f"- {f}" for f in findings)))
            outcome = await run_agent(self)
        return outcome

    async def compact(self, focus: str = "") -> CompactOutcome:
        """Compact the main agent's context (``/compact``, ``musec compact``): at once when
        no turn is running, else before the turn's next model call.

        Done now, it is shown like a turn in every attached terminal: ``Busy`` (activity
        ``compacting the context``) first, ``Idle`` with its outcome (``note``) after; an
        interrupt stops it (it is then done before the next model call, its
        ``compaction_started`` having no result).
        """
        if self._agent_lock.locked():
            self.agent.request_compaction(focus)
            return CompactOutcome(False, 0, 0, "the session is in a turn: it compacts before its next model call", False)
        async with self._agent_lock:
            self.activity = COMPACTING
            self._broadcast(lambda sub: p.Busy(id=sub.request_id, session_id=self.id, activity=COMPACTING))
            outcome = None
            try:
                with anyio.CancelScope() as scope:
                    self._turn_scope = scope  # Ctrl-C or Esc in any terminal stops it, as a turn
                    self._cut_turn_reset()
                    outcome = (await self._compact_now(focus))._replace(ran=True)
            finally:
                stopped = outcome is None
                if outcome is None:  # interrupted; begun (compaction_started logged): done before the next call
                    outcome = CompactOutcome(False, 0, 0, "the compaction was interrupted" + (
                        "; it is done before the next model call" if self.agent.history.pending is not None else ""),
                        False, ran=True)
                self._turn_scope, self.activity = None, ""
                note, reason = outcome.line(), "interrupted" if stopped else "error" if outcome.failed else "finished"
                self._broadcast(lambda sub: p.Idle(id=sub.request_id, session_id=self.id, exit_reason=reason, note=note))
        return outcome

    async def _compact_now(self, focus: str) -> CompactOutcome:
        from musec.agents.core.errors import AgentError

        before = self.agent.history.last_compaction
        try:
            done = await self.agent.compact_now(focus)
        except AgentError as exc:
            return CompactOutcome(False, 0, 0, f"compacting failed: {exc}", True)
        last = self.agent.history.last_compaction
        if not done and last is not None and last is not before and last.applied is False:
            return CompactOutcome(False, last.tokens_before, last.tokens_after, (
                f"nothing gained: the summary would make the context about {last.tokens_after} tokens, not smaller "
                f"than its {last.tokens_before}; it is kept as it was"), False)
        if not done or last is None:
            return CompactOutcome(False, 0, 0, "nothing to compact yet: the conversation is as short as it gets", False)
        return CompactOutcome(True, last.tokens_before, last.tokens_after, "", False)

    async def _compact_first(self) -> CompactOutcome:
        self.compacted = await self.compact(self.compact_first or "")
        return self.compacted

    async def _turn(self, pending_plan: str | None = None) -> tuple[str, str, str]:
        """Run the agent until it stops (and, with a goal, until the goal ends or pauses);
        return (exit_reason, result, message). One at a time with a manual compaction."""
        async with self._agent_lock:
            return await self._turn_locked(pending_plan)

    def _cut_turn_reset(self) -> None:
        """A new turn: no cause of a cancellation yet (the person's, until one is given)."""
        self.stop_cause = ""
        if not self._interrupt_next:
            self.interrupted_by = ""
        for agent in (self.agent, *self.workers.values()):
            if agent is not None:
                agent.stop_cause = ""
        if self.fanout is not None:
            self.fanout.stop_cause = ""

    async def _turn_locked(self, pending_plan: str | None) -> tuple[str, str, str]:
        self.status = "running"
        self.stir.set()
        self._broadcast(lambda sub: p.Busy(id=sub.request_id, session_id=self.id))  # every terminal: busy, whoever started it
        outcome = None
        pending = [pending_plan]

        async def once() -> Any:  # a plan waiting is settled in the first run only
            plan, pending[0] = pending[0], None
            return await self._work(plan)

        self._cut_turn_reset()
        with anyio.CancelScope() as scope:
            self._turn_scope = scope
            if self._interrupt_next:
                self._interrupt_next = False
                scope.cancel()
            outcome = await (self.goals.drive(once) if self.goals is not None else once())
        self._turn_scope = None
        if outcome is None:
            reason, result, message = "interrupted", "", "the turn was interrupted" + (
                f": {self.stop_cause}" if self.stop_cause else "")
        else:
            reason, result, message = outcome.exit_reason, outcome.result, outcome.message
        self.status, self.last_stop = "idle", reason
        self.stir.set()
        by = self.interrupted_by if reason == "interrupted" and not self.stop_cause else ""
        logged, whole = result_preview(result)  # the whole is logged where it was made
        self.record(TurnEnded(exit_reason=reason, result=logged, result_chars=whole, message=message,
                              interrupted_by=by or msgspec.UNSET))
        await self.commit.durable(self.log.next_seq - 1)
        self._broadcast(lambda sub: p.Idle(id=sub.request_id, session_id=self.id, exit_reason=reason, result=result))
        return reason, result, message

    async def run(self, first_task: str, *, resume_turn: bool = False) -> None:
        """Run the session with its background agents beside it, until it ends."""
        self._ending = ("interrupted", "", "the daemon stopped", False)
        try:
            async with anyio.create_task_group() as tg:
                self._background_scope = tg.cancel_scope
                tg.start_soon(self._committer)
                await self._start_mcp(tg)
                if self.net_proxy is not None:
                    await tg.start(self.net_proxy.serve)  # bound before any command can run
                for name, agent in self.background.items():
                    await self.lifecycle("AgentStart", {"agent_type": name}, agent=name)
                    tg.start_soon(agent.supervise)
                if self.idle_timeout_s > 0:
                    tg.start_soon(watch_unattended, self)
                try:
                    await self._run(first_task, resume_turn=resume_turn)
                finally:
                    tg.cancel_scope.cancel()
        finally:
            # Only once every background agent, MCP server and proxy of the session has
            # stopped (the task group has exited): nothing of theirs is written after
            # ``session_ended``, and nothing reaches a closed log.
            reason, result, message, paused = self._ending
            with anyio.CancelScope(shield=True):
                await self._finish(reason, result, message, write=not paused)

    async def _resume_fanout(self) -> None:
        """Go on with the fan-out a crash cut off, stopped like a turn: by an interrupt from
        any terminal, or the session's end (its workers then end ``interrupted``). The person's
        interrupt also stops the turn that was to follow it (``resume_turn``)."""
        spawned, finished = self.resume_fanout or ([], set())
        self.resume_fanout = None
        try:
            with anyio.CancelScope() as scope:
                self._turn_scope = scope
                self._cut_turn_reset()
                if self._interrupt_next:
                    scope.cancel()
                await self.fanout.resume_from_log(spawned, finished)
        finally:
            self._turn_scope = None
        if scope.cancelled_caught and not self.stop_cause:
            self._interrupt_next = True

    async def _start_mcp(self, tg: anyio.abc.TaskGroup) -> None:
        """Start the MCP servers (they stop with the session's task group) and offer the
        tools of those that came up within ``MCP_FIRST_WAIT_S``: the session never waits
        longer on a slow or stuck server; the tools of one that comes up later are offered
        from then on (``_late_mcp``)."""
        if self.mcp is None:
            return
        await tg.start(self.mcp.run)
        slow = await self.mcp.wait_ready(MCP_FIRST_WAIT_S)
        self._offer_mcp_tools()
        if slow:
            log.warning("mcp_servers_still_starting", session_id=self.id, servers=[s.spec.name for s in slow],
                        waited_s=MCP_FIRST_WAIT_S)
            tg.start_soon(self._late_mcp)

    async def _late_mcp(self) -> None:
        await self.mcp.wait_ready()
        self._offer_mcp_tools()

    def _offer_mcp_tools(self) -> None:
        from musec.agents.mcp import mcp_tools

        tools, problems = mcp_tools(self.mcp)
        for tool in tools:
            self.agent.tools.setdefault(tool.name, tool)
        for problem in problems:
            log.warning("mcp_tool_left_out", session_id=self.id, problem=problem)

    async def lifecycle(self, event: str, payload: dict[str, Any], *, agent: str = "main") -> Any:
        """Run the hooks of a session-level lifecycle point (agents.hooks); their added
        context becomes ``hook_context``. ``None`` without hooks."""
        if self.hooks is None:
            return None
        outcome = await self.hooks.run(event, payload, agent=agent)
        for text in outcome.context:
            self.record(HookContext(agent=agent, hook_event=event, text=f"[{event} hook: {text}]"))
        return outcome

    def _invocation(self, text: str) -> tuple[str, list[tuple[Any, str]]]:
        """``/NAME args`` (a custom command's expansion, or a skill) and ``$NAME`` mentions:
        the message to record and the skills to load with their arguments."""
        ext = self.extensions
        if ext is None:
            return text, []
        from musec.agents.commands import expand, mentions, parse_invocation

        names = [*(sk.name for sk in ext.skills), *(c.name for c in ext.commands)]
        found = parse_invocation(text, names)
        if found is not None and ext.command(found.name) is not None:
            return expand(ext.command(found.name), found.arguments), []
        loads = [(ext.skill(found.name), found.arguments)] if found is not None else []
        loads += [(ext.skill(n), "") for n in mentions(text, [sk.name for sk in ext.skills]) if found is None or n != found.name]
        return text, [(sk, a) for sk, a in loads if sk is not None]

    async def _submit_prompt(self, text: str, client_msg_id: str) -> bool:
        """Record a person's message as ``user_message`` with what it invokes, after the
        UserPromptSubmit hooks; ``False`` when a hook blocked it (nothing recorded but that)."""
        text, loads = self._invocation(text)
        outcome = None if self.hooks is None else await self.hooks.run("UserPromptSubmit", {"prompt": text})
        if outcome is not None and outcome.blocked:
            self.record(PromptBlocked(reason=outcome.reason))
            return False
        attachments = await self._attachments(text)
        self.record(UserMessage(text=text, client_msg_id=client_msg_id or msgspec.UNSET,
                                attachments=attachments or msgspec.UNSET))
        for skill, arguments in loads:
            if skill.name not in self.skills_loaded:  # recording it adds it (Counters)
                self.record(SkillLoaded(name=skill.name, scope=skill.scope, path=skill.path,
                                        text=skill.loaded_text(arguments)))
        for context in outcome.context if outcome is not None else []:
            self.record(HookContext(hook_event="UserPromptSubmit", text=f"[UserPromptSubmit hook: {context}]"))
        return True

    async def _attachments(self, text: str) -> list[Any]:
        """What the message's ``@path`` mentions attach, read now (once: the event keeps
        it) under the main agent's read rules (``agents/attachments.py``)."""
        from musec.agents.attachments import attach

        return await attach(text, self.agent)

    async def ask_agent(self, agent: str, question: str) -> str:
        """A background agent's answer (the ``ask_agent`` tool). Raises ``LookupError``."""
        found = self.background.get(agent)
        if found is None:
            there = ", ".join(self.background) or "none in this session"
            raise LookupError(f"no background agent {agent!r}; the agents are: {there}")
        return await found.answer(question)

    async def _run(self, first_task: str, *, resume_turn: bool = False) -> None:
        """Run turns until the session ends; always writes ``session_ended``. ``resume_turn``
        first finishes the turn a crash cut off (its unanswered calls are run, a model call
        without its response is made again) before any new input. A failed log write (a full
        disk) pauses the session: nothing more is written and the clients are told how to go on.
        """
        from .plans import builtin

        reason, result, message = "interrupted", "", "the daemon stopped"
        paused = False
        try:
            for agent in self.background.values():
                await agent.prepare()  # quick (the verifier's copy of the workspace), never a test run
            await self.lifecycle("SessionStart", {"source": "resume" if self.resumed_at_seq else "startup"})
            if self.resume_fanout is not None and self.fanout is not None:
                await self._resume_fanout()
            if self.compact_first is not None:  # ``musec compact`` of a session that was not live
                reason, message = "finished", (await self._compact_first())[3]
                return
            if self.initial_goal is not None:
                await self.goals.set(self.initial_goal, by="run")
                if not first_task:
                    self.kick()
            plan_waits = self.plan.awaiting_approval and (self.interactive or self.approve_plan)
            if resume_turn or plan_waits:
                reason, result, message = await self._turn(pending_plan=self.plan.proposed if plan_waits else None)
                if self.end_when_idle and not first_task:
                    return
            elif not first_task and self.initial_goal is None:
                self.status = "idle"
                self.stir.set()
                self._broadcast(lambda sub: p.Idle(id=sub.request_id, session_id=self.id, exit_reason="ready"))
                if self.end_when_idle:
                    reason, message = "finished", "nothing to resume: the session was not in a turn"
                    return
            if first_task:
                self.submit(first_task)
            async for text, client_msg_id in self._inputs:
                what, text = ("submit", text) if text is _KICK else builtin(self, text)  # /plan, /grill
                if what != "submit":  # /grill settles a plan now; "idle": nothing to run (told by builtin)
                    reason, result, message = await self._turn(pending_plan=text) if what == "grill" else ("finished", "", text)
                elif text is _KICK:
                    reason, result, message = await self._turn()
                elif self.goals is not None and (arguments := goal_arguments(text)) is not None:
                    reason, result, message = await goal_message(self, arguments)
                elif await self._submit_prompt(text, client_msg_id):
                    reason, result, message = await self._turn()
                else:
                    reason, result, message = "error", "", "a UserPromptSubmit hook blocked the message"
                    self._broadcast(lambda sub: p.Idle(id=sub.request_id, session_id=self.id, exit_reason="error"))
                if self.end_when_idle and not self._inputs.statistics().current_buffer_used:
                    break  # a headless session ends when idle with nothing queued (a take-over's message may be)
            else:
                if self._end_note is not None:
                    note_reason, message = self._end_note
                    reason = reason if reason == "needs_approval" else note_reason
                elif reason == "interrupted" and self.turns == 0:
                    reason, message = "finished", ""
        except OSError as exc:
            paused = True
            self.unlogged_stop = ("the session stopped while it ran, the daemon did not: its event log could "
                                  f"not be written ({exc.strerror or exc})")
            reason, message = "paused", (
                f"the event log could not be written ({exc.strerror or exc}); nothing after it was done. "
                f"Free space, then resume with `musec run --resume {self.id}`")
            log.error("session_paused", session_id=self.id, error=str(exc))
        except Exception as exc:  # supervision at the edge: a bug ends this session, not the daemon
            log.exception("session_failed", session_id=self.id)
            reason, message = "error", (f"musec failed inside the session ({type(exc).__name__}: {exc}); the log is kept: "
                                        f"resume with `musec run --resume {self.id}`")
        finally:
            with anyio.CancelScope(shield=True):
                if self.hooks is not None and not paused:
                    with anyio.move_on_after(30):
                        for name in self.background:
                            await self.hooks.run("AgentStop", {"agent_type": name}, agent=name)
                        await self.hooks.run("SessionEnd", {"reason": reason})
                if self._background_scope is not None:
                    self._background_scope.cancel()  # nothing of theirs is written after the end
                self._ending = (reason, result, message, paused)  # written by ``run`` once they have stopped

    async def _finish(self, exit_reason: str, result: str, message: str, *, write: bool = True) -> None:
        self.status = exit_reason
        if write:
            try:
                board = self.blackboard.stats() if self.blackboard is not None else msgspec.UNSET
                logged, whole = result_preview(result)
                self.record(SessionEnded(exit_reason=exit_reason, result=logged, result_chars=whole,
                                         message=message, turns=self.turns,
                                         usage=dict(self.usage), cost_usd=round(self.cost_usd, 8), blackboard=board))
                await self.commit.durable(self.log.next_seq - 1)  # the clients are told the end once it is on disk
            except OSError as exc:
                log.error("session_end_not_logged", session_id=self.id, error=str(exc))
        self._held.clear()  # not durable (a failed fsync): never sent
        cost = round(self.cost_usd, 8) if math.isfinite(self.cost_usd) else 0.0
        self._broadcast(lambda sub: p.SessionEnded(
            id=sub.request_id, session_id=self.id, exit_reason=exit_reason, result=result,
            turns=self.turns, usage=self.usage, cost_usd=cost, message=message, log_path=str(self.log.path)))
        for sub in list(self.subscribers):
            self.detach(sub)
        for agent in self.background.values():
            agent.close()
        self.log.close()
        self.ended.set()
        if self.on_end is not None:
            self.on_end(self)

    def let_go(self) -> None:
        """After the end: drop the agents and what is as large as the log (their histories).

        The session, its agents, tools and roles refer to each other (bound methods,
        closures), so the whole graph is freed only by the cyclic collector, whose full
        passes are rare: a large resumed session stayed resident long after its end (issue
        19). Emptying the histories frees the bulk by reference counting at once; the
        rest, small, goes at the collector's next pass.
        """
        from musec.agents.history import History

        agents = [self.agent, *self.workers.values(), *(getattr(bg, "agent", None) for bg in self.background.values())]
        for agent in agents:
            if agent is not None and getattr(agent, "history", None) is not None:
                agent.history = History(agent.history.agent)
        self.agent = None
        self.workers.clear()
        self.background.clear()
        self.fanout = self.goals = self.campaign = self.kernel_past = None
        self.hooks = self.mcp = self.extensions = self.net_proxy = None

    @property
    def log_path(self) -> Path:
        return self.log.path
