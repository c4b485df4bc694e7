"""The wire's messages (DESIGN §4): every message of both directions as a frozen msgspec
Struct, the closed sets of strings, the reply each request causes, and the msgpack codec.

Part of ``musec.daemon.protocol`` (the package's docstring tells the rules of the wire);
reached through it (``protocol.Hello``), which imports this module on first use. The parts
that need no msgspec (framing, limits, the socket's place, secrets) are in ``base``.

Why over 500 lines: every message of the wire is defined here, in one module, by design
(DESIGN §4), so that a reader and a reviewer see all of them at once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

import msgspec
import msgspec.structs

from .base import (
    EVENT_PIECE_BYTES,
    MAX_EVENT_BYTES,
    MIN_SECRET_CHARS,
    FrameError,
    InvalidMessage,
    frame,
)

# --- closed sets of strings on the wire ------------------------------------------------

Role = Literal["client", "daemon"]
ApprovalMode = Literal["ask", "auto", "read-only", "never"]
"""How tool calls that change things are approved (DESIGN §3 ``--approval``)."""
SandboxMode = Literal["auto", "bwrap", "seatbelt", "off"]
"""Where commands run: ``auto`` is the platform's sandbox (bwrap on Linux, seatbelt on macOS)."""
Decision = Literal["allow", "deny", "always"]
DeltaKind = Literal["text", "thinking"]
ExitReason = Literal[
    "finished", "goal_unmet", "error", "needs_approval", "max_turns", "budget", "max_wall",
    "provider_unreachable", "interrupted", "paused", "not_live",
]
"""How a session (``SessionEnded``) or a turn (``Idle``) stopped. ``paused``: the event log
could not be written. ``not_live``: the answer to an ``Attach`` of a session that is not
running: its log was sent, and its logged ``session_ended`` event (if any) tells how it
ended."""
IdleReason = Literal[ExitReason, "ready"]
"""``Idle.exit_reason``: an ``ExitReason``, or ``ready`` for a session waiting for its first message."""
ErrorCode = Literal[
    "daemon_error", "daemon_already_running", "session_locked", "log_corrupt", "session_not_found",
    "bad_request", "trust_required", "permission_denied", "bad_frame", "no_hello",
    "protocol_mismatch", "internal", "already_resolved", "too_large", "check_failed", "disk_full",
    "still_followed",
]
"""``Error.code``: the condition, by name (each ``DaemonError`` subclass has one; ``too_large``:
a reply that no frame can carry, named in the message; the connection goes on;
``still_followed``: an ``EndSession.unless_followed`` not done, another client follows)."""
ApplyHow = Literal["fast-forward", "merge", "commit", "uncommitted", "up-to-date"]
PlanAction = Literal["", "approve", "approve_auto", "edit", "fresh", "feedback", "grill"]
"""An answer to a plan's approval (``ApprovalAnswer.plan_action``): approve it, approve and
switch to approval mode ``auto``, approve the edited ``text``, approve and start a fresh
context with the plan alone, keep planning with ``text`` as feedback, or grill it first
(``/grill``: a critic questions its decisions, then it is proposed again)."""


class _Msg(msgspec.Struct, frozen=True, tag_field="type", omit_defaults=True):
    pass


# --- both directions ------------------------------------------------------------------


class Hello(_Msg, tag="hello"):
    """First frame each way; the daemon answers a client's ``Hello`` with its own.

    ``version`` is the sender's musec version. ``sessions`` (daemon only) is how many
    sessions it hosts now, so a client of another version can tell whether restarting it
    would cut anyone off; -1: not said (a daemon of protocol 1). A ``protocol_version``
    the daemon does not speak is answered with its ``Hello`` and then an
    ``Error{protocol_mismatch}`` and a close. This message never changes shape.
    """

    protocol_version: int
    version: str
    role: Role = "client"
    pid: int = 0
    sessions: int = -1


# --- client -> daemon -----------------------------------------------------------------


class GoalRequest(msgspec.Struct, frozen=True, omit_defaults=True):
    """A goal to work toward (``musec run --goal``): the agent works until the check
    passes and an evaluator judges ``condition`` met, or the goal's budget (``budget_usd``,
    ``max_turns``, ``max_wall_s``; 0: none) is spent."""

    condition: str
    check: str = ""
    budget_usd: float = 0.0
    max_turns: int = 0
    max_wall_s: float = 0.0


class StartSession(_Msg, tag="start_session"):
    """Create a session and (if ``task`` is non-empty) run it as the first user message.

    ``credentials`` carries the client's provider variables (``ANTHROPIC_API_KEY``...);
    the daemon uses them for this session's model calls and never writes them anywhere.
    ``interactive`` says a person can answer approvals; a headless run that needs one
    ends with ``exit_reason="needs_approval"``. ``end_when_idle`` ends the session when
    the agent stops (headless ``musec run``).

    ``trust`` trusts the workspace's project files (``.musec/``) as they are now and records
    it (``--trust``, or the person's yes). ``ask_trust`` (an interactive client that can
    ask) makes an untrusted workspace with project files refuse with ``trust_required``,
    the message listing what would apply; the client asks and sends the request again
    with ``trust`` or without ``ask_trust``. Neither: such files are ignored.

    ``kernel_spec`` (``musec optimize SPEC``) makes the session a kernel-optimisation
    campaign: a shipped spec name or a path to a ``kernel-task.toml``. ``max_wall_s``
    (``--max-wall``; 0: none) stops the main agent before a model call once it has worked
    that many seconds since the person's latest message; it is also a campaign's wall-time
    budget (0: the spec's).

    Replies: ``SessionStarted``, then the session's stream on this request's id (``Event``,
    ``Delta``, ``Idle``, ``SessionEnded``, or ``Resync`` when this client falls behind);
    or an ``Error`` (``bad_request``, ``trust_required``).

    ``environment`` is the client's environment: the daemon expands ``${VAR}`` in MCP server
    configs from it for this session only, holds it in memory and never writes it.

    ``goal`` sets a goal before the task (which may then be empty): the session works until
    the goal ends (met, impossible, its budget spent) or pauses (stuck).
    ``plan`` starts the session in plan mode (the task is planned first, read-only, and the
    plan needs approval); ``plan_only`` (``musec run --plan``) ends the session with the plan
    as its result; ``approve_plan`` (``--approve-plan``) approves a proposed plan without
    asking, so a headless run goes on to carry it out. ``grill`` grills the proposed plan
    (``/grill``) before it is approved or printed.
    """

    id: int
    workspace: str
    model: str
    task: str = ""
    approval: ApprovalMode = "ask"
    max_turns: int = 50
    credentials: dict[str, str] = {}
    interactive: bool = False
    end_when_idle: bool = True
    sandbox: SandboxMode = "auto"
    title: str = ""
    redact: list[str] = []
    redact_named: dict[str, str] = {}  # the same secrets by variable name (written as [REDACTED:NAME])
    budget_usd: float = 0.0
    agents: list[str] = []
    blackboard: bool = True
    agents_model: str = ""
    agents_budget_usd: float = 0.0
    trust: bool = False
    ask_trust: bool = False
    kernel_spec: str = ""
    max_wall_s: float = 0.0
    environment: dict[str, str] = {}
    goal: GoalRequest | None = None
    plan: bool = False
    plan_only: bool = False
    approve_plan: bool = False
    grill: bool = False


class ResumeSession(_Msg, tag="resume_session"):
    """Go on with a session from its log (after a restart, a crash, or its end).

    ``session_id`` empty means the latest session of ``workspace`` (``--continue``).
    ``task``, when given, is the next user message. ``approval``/``max_turns``/``max_wall_s``
    empty or 0 keep the session's. ``backlog`` sends every logged event first (interactive
    resume); otherwise only new events are sent.

    A session live in this daemon that no starting or resuming client follows any more
    (its client was killed) is taken over: it takes this request's mode, ``task`` is
    queued, and an idle one is answered with ``Idle{ready}`` after the backlog (or, for a
    headless resume with no task, ended).

    Replies: ``SessionStarted`` (``resumed``), then the stream as for ``StartSession``; or
    an ``Error`` (``session_not_found``, ``bad_request`` when another client follows it,
    ``log_corrupt``, ``session_locked``).
    """

    id: int
    session_id: str = ""
    workspace: str = ""
    task: str = ""
    credentials: dict[str, str] = {}
    interactive: bool = False
    end_when_idle: bool = True
    approval: ApprovalMode | Literal[""] = ""
    max_turns: int = 0
    backlog: bool = False
    redact: list[str] = []
    redact_named: dict[str, str] = {}  # as StartSession.redact_named (and fills its placeholders again)
    environment: dict[str, str] = {}  # as StartSession.environment
    model: str = ""  # switch to this model from the next request (``model_switched``); empty keeps it
    max_wall_s: float = 0.0
    approve_plan: bool = False  # as StartSession.approve_plan: approves a plan waiting for approval
    budget_usd: float = 0.0  # caps what this run spends from now on (0: none; a session's cap is not kept)


class Replay(_Msg, tag="replay"):
    """Rebuild a session's state from its log, with no model calls, and check it.

    Reply: ``ReplayResult``, or ``Error{session_not_found}``.
    """

    id: int
    session_id: str


class Attach(_Msg, tag="attach"):
    """Receive every logged event after ``since_seq`` (-1: all), then the live stream.

    Replies: ``Event`` frames (``backlog`` set on those read from the log), then for a live
    session its stream as for ``StartSession`` (with ``tell_idle``, an ``Idle{ready}``
    first when its agent waits for input); for a session that is not live, its log and
    ``SessionEnded{not_live}``. ``Error{session_not_found}`` for an unknown id.
    """

    id: int
    session_id: str
    since_seq: int = -1
    tell_idle: bool = False  # a client that would send input: an idle session answers Idle{ready} after the backlog


class UserInput(_Msg, tag="user_input"):
    """A person's message into a live session.

    ``client_msg_id``, when set, makes a re-send idempotent: a message whose id the
    session has already logged is not applied again.

    Reply: ``Ok`` (the turn it starts shows on the session's stream), or
    ``Error{session_not_found}`` when the session is not live.
    """

    id: int
    session_id: str
    text: str
    credentials: dict[str, str] = {}
    client_msg_id: str = ""


class SwitchModel(_Msg, tag="switch_model"):
    """Switch a live session's main agent to ``model`` from its next request on (``/model M``).

    The history is converted for the new model (opaque reasoning dropped whole, tool call
    ids kept) and ``model_switched`` is logged; naming the session's own model changes nothing.

    Reply: ``Ok``, or ``Error{session_not_found}`` (not live), ``Error{bad_request}`` (an
    unknown model, missing credentials: the message says which).
    """

    id: int
    session_id: str
    model: str
    credentials: dict[str, str] = {}


class ApprovalAnswer(_Msg, tag="approval_answer"):
    """An answer to a pending approval: ``decision`` is ``allow``, ``deny`` or ``always``.

    A plan's approval (``tool`` ``propose_plan`` in its ``approval_requested``) may say more
    with ``plan_action`` (``PlanAction``) and ``text`` (the edited plan, or feedback);
    without it, ``allow`` approves and ``deny`` keeps planning.

    ``asked_seq`` names the question answered: the ``seq`` of its ``approval_requested``
    event. A call id alone does not (a model may give two calls the same id; a plan or a
    grill's question is asked again under its id), so an answer naming a question no longer
    pending is refused and never decides the one asked next. -1 (not said, as by an older
    client): whatever question is pending under ``call_id``.

    Reply: ``Ok`` when this answer decided, ``Error{already_resolved}`` when another came
    first or the question is no longer asked (nothing is applied); every attached client
    then sees the ``approval_resolved`` event.
    """

    id: int
    session_id: str
    call_id: str
    decision: Decision
    plan_action: PlanAction = ""
    text: str = ""
    asked_seq: int = -1


class Interrupt(_Msg, tag="interrupt"):
    """Stop the session's current turn (the tool running is killed, the model call dropped).

    ``unless_followed``: only when no other client follows the session (a terminal that
    closed, SIGHUP, while its turn ran: the turn goes on for the other terminals, else it
    stops). A daemon that does not know the field interrupts.

    Reply: ``Ok``; the stream then shows the turn ending (``Idle{interrupted}``).
    """

    id: int
    session_id: str
    unless_followed: bool = False


class EndSession(_Msg, tag="end_session"):
    """End a live session.

    ``unless_followed``: only when no other client follows the session (the terminal that
    started it leaves with Ctrl-D while another terminal is attached: the session stays
    theirs); when another does, the reply is ``Error`` with code ``still_followed``.

    Reply: ``Ok``; subscribers get ``SessionEnded``.
    """

    id: int
    session_id: str
    unless_followed: bool = False


class SetApproval(_Msg, tag="set_approval"):
    """Switch a live session's approval mode (``ask``, ``auto``, ``read-only``, ``never``)
    from its next tool call on; logged as ``approval_mode_changed`` (``/approval MODE``).

    Reply: ``Ok``; ``Error{bad_request}`` for a mode not in that list.
    """

    id: int
    session_id: str
    approval: str


class Compact(_Msg, tag="compact"):
    """Compact a session's context now (``musec compact ID [FOCUS]``, ``/compact [focus]``):
    its older turns are summarised (with ``focus`` in mind) and its recent ones kept.

    A live session that is idle compacts at once; one in a turn compacts before its next
    model call; one that is not live is resumed for it, headless, and ends again.
    ``credentials`` are for the summarising call of a session that is not live.

    Reply: ``Compacted``, or ``Error{session_not_found}``.
    """

    id: int
    session_id: str
    focus: str = ""
    credentials: dict[str, str] = {}


class CollectSessions(_Msg, tag="collect_sessions"):
    """Remove ended sessions older than ``older_than_s`` with their blobs (never a live one).

    Reply: ``Collected`` (what was, or with ``dry_run`` would be, removed).
    """

    id: int
    older_than_s: float
    dry_run: bool = False
    discard_unapplied: bool = False


class Cost(_Msg, tag="cost"):
    """Tokens and dollars of a session (empty id: the latest of ``workspace``), per agent and model.

    Reply: ``CostReport``, or ``Error{session_not_found}``.
    """

    id: int
    session_id: str = ""
    workspace: str = ""


class ListAgents(_Msg, tag="list_agents"):
    """A session's agents: main, background roles, workers.

    Reply: ``Agents``, or ``Error{session_not_found}``.
    """

    id: int
    session_id: str


class ListWorkers(_Msg, tag="list_workers"):
    """A session's fan-out workers: branch, state, commits, tokens and cost.

    Reply: ``Workers``, or ``Error{session_not_found}``.
    """

    id: int
    session_id: str


class ApplyIntegration(_Msg, tag="apply_integration"):
    """Bring a session's integrated fan-out result onto the person's branch, through git.

    Reply: ``Applied``, or ``Error{bad_request}`` saying why not.
    """

    id: int
    session_id: str


class ListModels(_Msg, tag="list_models"):
    """The model catalog: the shipped default merged with the user's models.toml.

    Reply: ``Models``.
    """

    id: int


class ListSessions(_Msg, tag="list_sessions"):
    """List sessions, the most recently active first; ``workspace`` filters, empty means all.

    Reply: ``Sessions``.
    """

    id: int
    workspace: str = ""


class ReadLog(_Msg, tag="read_log"):
    """Send a session's log lines (``session_id`` may be a unique prefix), however long.

    Replies: one ``Event`` frame per whole line, in order (``seq`` = the line's number; a
    line over ``EVENT_PIECE_BYTES`` as pieces, see ``Event``), then ``LogLines`` with no
    lines and ``events`` = how many were sent, which ends the reply. Or
    ``Error{session_not_found}``.
    """

    id: int
    session_id: str


class ShowPlan(_Msg, tag="show_plan"):
    """A session's plan and its progress (``musec plan ID``; ``session_id`` may be a prefix).

    Reply: ``PlanReport``, or ``Error{session_not_found}``.
    """

    id: int
    session_id: str


class VerifyLog(_Msg, tag="verify_log"):
    """Check a session log's hash chain.

    Reply: ``VerifyResult``, or ``Error{session_not_found}``.
    """

    id: int
    session_id: str


class Status(_Msg, tag="status"):
    """Ask the daemon for its pid, socket, version and live sessions.

    Reply: ``StatusReply``.
    """

    id: int


class Shutdown(_Msg, tag="shutdown"):
    """Stop the daemon (live sessions are ended cleanly).

    Reply: ``Ok``, then the daemon closes every connection and exits.
    """

    id: int


class InspectWorkspace(_Msg, tag="inspect_workspace"):
    """What would apply to a session in ``workspace``: AGENTS.md files, skills, commands,
    hooks and MCP servers, active or waiting for trust (``musec doctor``, the banner,
    ``musec mcp list``). ``start_mcp`` starts the MCP servers briefly to list their tools
    (``${VAR}`` from ``environment``, held in memory only); nothing else runs.

    Reply: ``WorkspaceReport``.
    """

    id: int
    workspace: str
    environment: dict[str, str] = {}
    start_mcp: bool = False


class GoalCommand(_Msg, tag="goal_command"):
    """``/goal ARGS`` for a live session: ``text`` is what follows ``/goal`` (a condition
    with options, ``pause``, ``resume``, ``clear``, or nothing for the status).

    Reply: ``GoalReply``, or ``Error{bad_request}`` (bad arguments, nothing to act on) or
    ``Error{session_not_found}`` (not live).
    """

    id: int
    session_id: str
    text: str = ""


ClientMsg = (
    Hello | StartSession | ResumeSession | Replay | Attach | UserInput | SwitchModel | ApprovalAnswer | Interrupt
    | EndSession | ListSessions | ListModels | Cost | ListAgents | ListWorkers | ApplyIntegration | CollectSessions | ReadLog | VerifyLog | Status | Shutdown
    | InspectWorkspace | SetApproval | GoalCommand | ShowPlan | Compact
)


# --- daemon -> client -----------------------------------------------------------------


class Error(_Msg, tag="error"):
    """A request failed. ``code`` names the condition; ``message`` is one line for a person."""

    id: int
    code: ErrorCode
    message: str


class Ok(_Msg, tag="ok"):
    """A request succeeded with nothing more to say."""

    id: int


class Compacted(_Msg, tag="compacted"):
    """The answer to ``Compact``: ``done`` when the context was compacted now (its
    estimated size before and after, in tokens); otherwise ``message`` says why not (the
    session is in a turn and compacts before its next model call; nothing to summarise;
    the summarising call failed, ``failed``; the summary would not have made it smaller, not
    applied, with the sizes it would have had). ``ran``: it was done now, between ``Busy``
    and ``Idle``, whose ``note`` told every attached terminal the outcome."""

    id: int
    session_id: str
    done: bool = False
    tokens_before: int = 0
    tokens_after: int = 0
    message: str = ""
    failed: bool = False
    ran: bool = False


class SessionStarted(_Msg, tag="session_started"):
    """The session ``StartSession`` created (or ``ResumeSession`` reopened, ``resumed``)."""

    id: int
    session_id: str
    log_path: str
    resumed: bool = False
    interrupted_calls: list[str] = []


class Event(_Msg, tag="event"):
    """One logged event, exactly as its log line (``line``: the JSON bytes, no newline).

    ``backlog`` marks events sent from the log on attach (history, not news);
    ``backlog_end`` marks the last of them, after which everything is live.

    A line longer than ``EVENT_PIECE_BYTES`` comes as ``parts`` ``EventPart`` frames (its
    first pieces, in order, with nothing between them) and then this frame, whose ``line``
    is the last piece. ``EventJoiner`` (the client's connection) puts the line together,
    so above the connection every ``Event`` is whole (``parts`` 0). Splitting was chosen
    over cutting fields: an attached client, ``musec log --json`` and ``stream-json``
    then see every event byte for byte as logged, and the hash chain still checks.
    """

    id: int
    session_id: str
    seq: int
    line: bytes
    backlog: bool = False
    backlog_end: bool = False
    parts: int = 0


class EventPart(_Msg, tag="event_part"):
    """A piece of a log line too long for one frame (``Event``); ``data``: its bytes."""

    id: int
    session_id: str
    seq: int
    data: bytes


class Delta(_Msg, tag="delta"):
    """Streamed model text (live only, never logged). ``kind``: ``text`` or ``thinking``."""

    id: int
    session_id: str
    agent: str
    text: str
    kind: DeltaKind = "text"


class Busy(_Msg, tag="busy"):
    """The session's main agent started working: a turn (whoever started it: a person's
    message in any terminal, a goal, ``/grill``), or ``activity`` when it is no turn (a
    ``/compact`` done while idle: ``compacting the context``). Live only, sent to every
    attached client, so each shows the work and queues what is typed; ``Idle`` ends it."""

    id: int
    session_id: str
    activity: str = ""


class Idle(_Msg, tag="idle"):
    """The agent stopped and waits for input. ``exit_reason`` says why it stopped.
    ``note``: after work that was no turn (``Busy.activity``), its outcome in one line,
    shown by every attached terminal (a compaction's sizes, or why it did not happen)."""

    id: int
    session_id: str
    exit_reason: IdleReason
    result: str = ""
    note: str = ""


class SessionEnded(_Msg, tag="session_ended"):
    """The session ended (for ``musec run`` this is the last frame); see ``ExitReason``."""

    id: int
    session_id: str
    exit_reason: ExitReason
    result: str = ""
    turns: int = 0
    usage: dict[str, int] = {}
    cost_usd: float = 0.0
    message: str = ""
    log_path: str = ""


class Resync(_Msg, tag="resync"):
    """This client fell behind and was cut off: nothing more comes on this request's id.

    ``last_seq`` is the last event queued for it; the client re-attaches (``Attach``) from
    the last seq it actually read.
    """

    id: int
    session_id: str
    last_seq: int


class SessionInfo(msgspec.Struct, frozen=True):
    """One session as ``musec sessions`` lists it; times in UNIX seconds.

    ``status`` stays an open string: it is read from logs that older versions wrote
    (``running``, ``idle``, an exit reason, ``interrupted``, ``broken``).
    """

    id: str
    workspace: str
    started_at: float
    updated_at: float
    status: str
    title: str
    log_path: str = ""


class Sessions(_Msg, tag="sessions"):
    id: int
    sessions: list[SessionInfo]


class LogLines(_Msg, tag="log_lines"):
    """The end of a ``ReadLog`` reply: ``events`` lines were sent before it as ``Event``
    frames. ``lines`` is empty from protocol 3 on (it held the whole log in one frame,
    which a log over the frame limit could not be). ``damaged``: the line after the last
    one sent was changed after it was written (its hash chain is broken: what, and where);
    nothing past it was sent."""

    id: int
    session_id: str
    lines: list[bytes]
    log_path: str = ""
    events: int = 0
    damaged: str = ""


class VerifyResult(_Msg, tag="verify_result"):
    """``ok`` only when the chain is intact and there is no torn tail."""

    id: int
    session_id: str
    ok: bool
    events: int
    problems: list[str] = []


class ReplayResult(_Msg, tag="replay_result"):
    """What replay rebuilt: ``ok`` when every logged request digest was re-derived.

    ``redacted_requests`` counts requests that held text the log redacts (a secret, a
    key-shaped string): what was sent is exact, the log holds it redacted, so those
    requests cannot be rebuilt byte for byte and are not counted as problems.
    ``damaged``: the log could not be read (a line before its last is damaged), so
    nothing was replayed; ``problems`` says where.
    """

    id: int
    session_id: str
    ok: bool
    events: int
    model_requests: int
    turns: int
    problems: list[str] = []
    next_request_digest: str = ""
    redacted_requests: int = 0
    damaged: bool = False


class ModelInfo(msgspec.Struct, frozen=True):
    """One catalog entry; prices in US dollars per million tokens (0 when unknown)."""

    id: str
    provider: str
    aliases: list[str] = []
    context_window_tokens: int = 0
    max_output_tokens: int = 0
    input_per_mtok: float = 0.0
    cached_input_per_mtok: float = 0.0
    cache_write_per_mtok: float = 0.0
    output_per_mtok: float = 0.0
    trains_on_data: bool = False


class Models(_Msg, tag="models"):
    id: int
    models: list[ModelInfo]


class WorkerInfo(msgspec.Struct, frozen=True):
    """One worker: ``state`` is running, finished, error, time_limit, needs_approval..."""

    name: str
    branch: str
    state: str
    commits: int = 0
    path: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    instruction: str = ""


class CostRow(msgspec.Struct, frozen=True):
    """One agent's use of one model: calls, tokens, dollars (list price, catalog)."""

    agent: str
    model: str
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0


class CostReport(_Msg, tag="cost_report"):
    id: int
    session_id: str
    rows: list[CostRow]
    total_usd: float = 0.0
    retries: int = 0
    interrupted: int = 0  # answers cut off while they streamed: counted, output tokens estimated


class AgentInfo(msgspec.Struct, frozen=True):
    """One agent of a session; ``last_activity_at`` in UNIX seconds.

    ``context_tokens``: how full its context is (its last request as the provider counted
    it, plus an estimate of what was added since; ``agents/context.py``);
    ``context_window_tokens``: its model's window (0: unknown); ``context_percent``: the
    share in percent (-1: unknown). ``model``: the model it uses now.
    """

    agent: str
    role: str
    state: str
    last_activity_at: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    events: int = 0
    context_tokens: int = 0
    context_window_tokens: int = 0
    context_percent: float = -1.0
    model: str = ""


class Agents(_Msg, tag="agents"):
    id: int
    session_id: str
    agents: list[AgentInfo]


class Workers(_Msg, tag="workers"):
    id: int
    session_id: str
    workers: list[WorkerInfo]
    integration: str = ""


class Applied(_Msg, tag="applied"):
    """``how``: fast-forward, merge, commit (the workers' changes as one commit, the
    person's uncommitted work left uncommitted), uncommitted (the workers' changes in the
    working tree, uncommitted, next to the person's: they touch the same files) or
    up-to-date. ``note``: a line more for the person (the tests did not run on a merge onto
    a branch that moved on; the changes are uncommitted), else empty."""

    id: int
    session_id: str
    branch: str
    old_head: str
    new_head: str
    how: ApplyHow
    note: str = ""


class Collected(_Msg, tag="collected"):
    """``kept``: one line per session kept back and why (a worktree with uncommitted work);
    ``session_bytes``: the size of each of ``sessions`` (its log and worktrees), in order;
    ``notes``: one line per removed session with more to say (its repository was gone, so
    its worktrees were orphans: how to clean a repository that was moved);
    ``session_items``: for each of ``sessions``, in order, the worktrees and branches
    removed with it (``worktree PATH``, ``branch NAME``)."""

    id: int
    sessions: list[str]
    bytes_freed: int = 0
    kept: list[str] = []
    session_bytes: list[int] = []
    notes: list[str] = []
    session_items: list[list[str]] = []


class StatusReply(_Msg, tag="status_reply"):
    id: int
    pid: int
    socket: str
    version: str
    sessions: list[str]
    home: str = ""
    log_file: str = ""


class ExtensionRow(msgspec.Struct, frozen=True):
    """One thing found for a workspace: ``kind`` (instructions, skill, command, hook, mcp,
    project file), ``name``, ``state`` (``active`` or ``waiting for trust``), ``detail``."""

    kind: str
    name: str
    state: str
    detail: str = ""


class McpServerInfo(msgspec.Struct, frozen=True):
    """An MCP server's ``state`` (running, failed, not started...), ``error`` and tools."""

    server: str
    transport: str
    source: str
    state: str
    error: str = ""
    restarts: int = 0
    tools: list[str] = []


class WorkspaceReport(_Msg, tag="workspace_report"):
    """The answer to ``InspectWorkspace``; ``trust`` is the workspace's trust state."""

    id: int
    workspace: str
    trust: str
    rows: list[ExtensionRow] = []
    mcp: list[McpServerInfo] = []
    warnings: list[str] = []


class GoalReply(_Msg, tag="goal_reply"):
    """The answer to ``GoalCommand``: lines for the person (the goal's status, or what was done)."""

    id: int
    session_id: str
    lines: list[str] = []


class PlanReport(_Msg, tag="plan_report"):
    """A session's plan (``ShowPlan``).

    ``status``: ``none`` (no plan), ``planning``, ``proposed`` (waiting for approval) or
    ``approved``. ``text`` is the latest plan (the approved one once approved), ``sha256``
    its digest, ``by`` who approved it. Progress since the approval: ``files`` maps each
    file of its "Files to change" to whether it was edited; ``checks`` each verification
    command to its last exit status (``None``: not run yet).
    """

    id: int
    session_id: str
    status: str = "none"
    path: str = ""
    text: str = ""
    sha256: str = ""
    by: str = ""
    files: dict[str, bool] = {}
    checks: dict[str, int | None] = {}


DaemonMsg = (
    Hello | Error | Ok | SessionStarted | Event | EventPart | Delta | Busy | Idle | SessionEnded | Resync
    | Sessions | LogLines | VerifyResult | ReplayResult | Models | CostReport | Agents | Workers | Applied | Collected | StatusReply
    | WorkspaceReport | GoalReply | PlanReport | Compacted
)


# Which reply each plain request causes (the session requests and ``Attach`` answer with
# a stream instead; see their docstrings). A client checks the reply it gets against it.
REPLY: dict[type, type] = {
    Replay: ReplayResult, UserInput: Ok, SwitchModel: Ok, ApprovalAnswer: Ok, Interrupt: Ok, EndSession: Ok, SetApproval: Ok,
    CollectSessions: Collected, Cost: CostReport, ListAgents: Agents, ListWorkers: Workers,
    ApplyIntegration: Applied, ListModels: Models, ListSessions: Sessions, ReadLog: LogLines,
    VerifyLog: VerifyResult, Status: StatusReply, Shutdown: Ok, InspectWorkspace: WorkspaceReport,
    GoalCommand: GoalReply,
    ShowPlan: PlanReport,
    Compact: Compacted,
}


# --- key shapes (with the secrets of ``base``; here so that importing the package compiles
# no regular expression: the quick client commands do not need them) ---------------------

# Shapes of provider keys: Anthropic sk-ant-..., OpenAI sk-..., sk-proj-... A key is a
# whole run of key characters (never the tail of a word: "task-scheduler-..." holds no key)
# with a digit in it; the longer OpenAI shape also needs a lower and an upper case letter,
# as random keys have and hyphenated words do not (issue 13 case 1). Shared by the event
# log's redaction (``daemon.redaction``) and the client's prompt history.
_K = r"[A-Za-z0-9_\-]"
KEY_SHAPES = re.compile(
    rf"(?<!{_K})(?:sk-ant-(?={_K}*[0-9]){_K}{{16,}}"
    rf"|sk-(?:proj-)?(?={_K}*[0-9])(?={_K}*[a-z])(?={_K}*[A-Z]){_K}{{32,}})"
)
"""Anything shaped like a provider key (``sk-ant-...``, ``sk-...``, ``sk-proj-...``)."""


def redact_keys(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with each of ``secrets`` (values, e.g. ``secret_values(os.environ)``) and
    every key-shaped run (``KEY_SHAPES``) written ``[REDACTED]``, as the event log writes
    them: for what a client stores of the person's typing (the prompt history)."""
    for value in sorted((s for s in secrets if len(s) >= MIN_SECRET_CHARS), key=len, reverse=True):
        text = text.replace(value, "[REDACTED]")
    return KEY_SHAPES.sub("[REDACTED]", text)


# --- the msgspec codec -----------------------------------------------------------------

_client_decoder = msgspec.msgpack.Decoder(ClientMsg)
_daemon_decoder = msgspec.msgpack.Decoder(DaemonMsg)
_encoder = msgspec.msgpack.Encoder()


def encode(msg: Any) -> bytes:
    """Encode one message as a frame: 4-byte big-endian length + msgpack body.

    Raises:
        FrameError: the body is over ``MAX_FRAME_BYTES``.
    """
    return frame(_encoder.encode(msg))


_CUT_CHARS = 64 * 1024


def encode_fitted(msg: Any) -> bytes:
    """Encode one daemon message as one or more frames, each under ``MAX_FRAME_BYTES``.

    What could outgrow a frame is fitted by its kind: an ``Event`` with a long line is
    sent in pieces (``event_frames``); a long ``Delta`` is split into several (deltas
    join by concatenation); the ``result`` and ``message`` of an ``Idle`` or
    ``SessionEnded`` too long for a frame are cut to their first 64 KiB characters with a
    note (the whole text is in the logged ``turn_ended``/``session_ended`` event, which
    comes whole as an ``Event``).

    Raises:
        FrameError: ``msg`` is another kind and over the limit (answered
            ``Error{too_large}`` by the daemon).
    """
    if isinstance(msg, Event):
        return event_frames(msg.id, msg.session_id, msg.seq, msg.line, backlog=msg.backlog,
                            backlog_end=msg.backlog_end)
    try:
        return encode(msg)
    except FrameError:
        if isinstance(msg, Delta):
            step = EVENT_PIECE_BYTES // 4  # characters: at most 4 UTF-8 bytes each
            return b"".join(encode(msgspec.structs.replace(msg, text=msg.text[i: i + step]))
                            for i in range(0, len(msg.text), step))
        if isinstance(msg, Idle | SessionEnded):
            fields: dict[str, str] = {}
            for name in ("result", "message"):
                text = getattr(msg, name, "")
                if len(text) > _CUT_CHARS:
                    fields[name] = (text[:_CUT_CHARS] + f"\n[cut: {len(text) - _CUT_CHARS} more characters; the whole "
                                    "text is in the session's log]")
            return encode(msgspec.structs.replace(msg, **fields))
        raise


def event_frames(request_id: int, session_id: str, seq: int, line: bytes, *, backlog: bool = False,
                 backlog_end: bool = False, piece_bytes: int = EVENT_PIECE_BYTES) -> bytes:
    """The frames of one log line as an ``Event``: one frame, or ``EventPart`` frames of
    ``piece_bytes`` and a last ``Event`` when the line is longer (send them together:
    nothing may come between them)."""
    if len(line) <= piece_bytes:
        return encode(Event(id=request_id, session_id=session_id, seq=seq, line=line, backlog=backlog,
                            backlog_end=backlog_end))
    view = memoryview(line)
    cuts = range(0, len(line), piece_bytes)
    pieces = [encode(EventPart(id=request_id, session_id=session_id, seq=seq, data=bytes(view[i: i + piece_bytes])))
              for i in cuts[:-1]]
    last = Event(id=request_id, session_id=session_id, seq=seq, line=bytes(view[cuts[-1]:]), backlog=backlog,
                 backlog_end=backlog_end, parts=len(pieces))
    return b"".join([*pieces, encode(last)])


class EventJoiner:
    """Puts events sent in pieces (``EventPart`` ... ``Event{parts}``) back together.

    ``take`` each decoded daemon message in order: it returns the message to act on, or
    ``None`` for a piece kept until its event is whole. Memory is bounded by
    ``max_event_bytes``.
    """

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._max = max_event_bytes
        self._key: tuple[int, str, int] | None = None
        self._pieces: list[bytes] = []
        self._size = 0

    def take(self, msg: DaemonMsg) -> DaemonMsg | None:
        """The message to hand on (an ``Event`` whole), or ``None`` while pieces come.

        Raises:
            FrameError: pieces out of order, interleaved with another message, not as many
                as announced, or a joined event over ``max_event_bytes``.
        """
        if isinstance(msg, EventPart):
            key = (msg.id, msg.session_id, msg.seq)
            if self._key is not None and key != self._key:
                raise FrameError(f"a piece of event seq {msg.seq} came inside event seq {self._key[2]}")
            self._key = key
            self._size += len(msg.data)
            if self._size > self._max:
                raise FrameError(f"event seq {msg.seq} is over the {self._max}-byte limit of a joined event")
            self._pieces.append(msg.data)
            return None
        if self._key is None:
            if isinstance(msg, Event) and msg.parts:
                raise FrameError(f"event seq {msg.seq} announces {msg.parts} pieces that never came")
            return msg
        if not isinstance(msg, Event) or (msg.id, msg.session_id, msg.seq) != self._key or msg.parts != len(self._pieces):
            raise FrameError(f"the pieces of event seq {self._key[2]} were cut off by another message")
        line = b"".join([*self._pieces, msg.line])
        self._key, self._pieces, self._size = None, [], 0
        return msgspec.structs.replace(msg, line=line, parts=0)


def decode_client(body: bytes) -> ClientMsg:
    """Decode a frame body sent by a client. Raises ``FrameError``."""
    try:
        return _client_decoder.decode(body)
    except msgspec.ValidationError as exc:
        fields = _fields(body)
        if fields is None:
            raise FrameError(f"bad client frame: {exc}") from exc
        rid = _field(fields, "id")
        raise InvalidMessage(f"bad request: {exc}", rid if isinstance(rid, int) and not isinstance(rid, bool) else 0) from exc
    except msgspec.DecodeError as exc:
        raise FrameError(f"bad client frame: {exc}") from exc


_fields_decoder = msgspec.msgpack.Decoder(dict[str, msgspec.Raw])


def _fields(body: bytes) -> dict[str, msgspec.Raw] | None:
    """The top-level fields of a body that is a map (values left undecoded), else ``None``."""
    try:
        return _fields_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None


def _field(fields: dict[str, msgspec.Raw], name: str) -> Any:
    try:
        return msgspec.msgpack.decode(fields[name]) if name in fields else None
    except (msgspec.DecodeError, RecursionError):
        return None


def decode_daemon(body: bytes) -> DaemonMsg:
    """Decode a frame body sent by the daemon. Raises ``FrameError``."""
    try:
        return _daemon_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise FrameError(f"bad daemon frame: {exc}") from exc
