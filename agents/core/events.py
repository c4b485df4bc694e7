"""The session log's event types (DESIGN §5, contract: the line format).

One frozen msgspec Struct per event type, in a tagged union (``AnyEvent``) whose JSON is
the log's line format::

    {"seq": N, "ts": UNIX_SECONDS, "agent": "main", "type": "tool_started", ...fields, "h": H}

``seq``, ``ts`` and ``agent`` are common to every type (``Event``); the log sets ``seq``
and ``ts`` when it appends, the recorder sets ``agent``. ``h`` is the log's hash chain and
is no field of any event. ``line_fields`` gives the members of a line in the order they
are written: ``seq``, ``ts``, ``agent``, ``type``, then the type's fields in the order
declared here (which is the order the log has always had, so old lines re-encode byte for
byte).

Rules for growing the format (msgspec's schema evolution): a field is never renamed or
retyped; a new field gets a default, so older logs still decode; unknown members are
ignored, so a newer log still decodes here. A field that only some events of a type carry
is ``UNSET`` when absent, and is then left out of the line (never written as ``null``).

How to use it: build the Struct and record it (``session.record(ToolStarted(call_id=...,
tool=...))``; the recorder sets ``agent``, the log ``seq`` and ``ts``); read events back with
``decode_event`` (the log's readers do), and look at them with ``match``/``isinstance``,
never by their ``type`` string.

Adding an event type means, in this order:

1. a Struct here (in the section of its feature), every field with a default unless every
   line of the type has always carried it;
2. a member of ``AnyEvent`` (``EVENT_TYPES`` follows);
3. its decision in ``persistence`` (write-ahead or group commit, sent to clients or not);
4. its case in every fold: ``History.apply`` (agents/history.py), the session's
   ``Counters`` (daemon/projections.py), ``ResumeState`` (daemon/resume.py), ``FanoutState``
   (agents/workers/state.py), the agents/workers/costs views (daemon/projections.py) and
   ``BackgroundAgent.fold`` (agents/roles/base.py); each is a ``match`` ending in
   ``assert_never``, so a type left out fails type checking and
   ``tests/daemon/test_folds.py``;
5. a line of it in ``tests/agents/core/old_lines.jsonl`` (``test_events.py`` fails until
   every type has one), so the format it writes today stays readable.

Why over 500 lines: this is the log's whole contract, one short Struct per event type with
its field notes, and the persistence decision beside them; kept in one module on purpose,
so that every type and its policy are read (and grow) in one place.
"""

from __future__ import annotations

import enum
from typing import Any, Literal, NamedTuple, assert_never, get_args

import msgspec
from msgspec import UNSET, UnsetType

from .conversation import Block

__all__ = [
    "UNSET", "AgentFailed", "Attachment", "AgentMessage", "AgentSpawned", "AnyEvent", "ApprovalModeChanged", "ApprovalRequested", "ApprovalResolved",
    "BaselineSnapshot", "CompactionFinished", "CompactionStarted", "Conflict", "ConflictFile", "ContextCut", "Durability", "EVENT_TYPES", "Event", "FileEditStarted", "FileEdited", "GoalChecked",
    "GoalSet", "GoalUpdated", "HookContext",
    "HookRan", "InstructionsAdded", "Integration", "IntegrationApplied", "KernelEvaluated", "LogRepaired",
    "McpServerFailed", "McpServerRestarting", "McpServerStarted", "ModelRequest", "ModelResponse", "ModelRetry",
    "ModelSwitched", "ToolResultsCleared",
    "NetConnection", "Persistence", "PlanApproved", "PlanProposed", "PlanStarted", "GrillRound", "PromptBlocked", "RateLimited", "RepoMap", "Review", "SessionEnded",
    "SessionResumed", "SessionStarted", "SkillLoaded", "TestRun", "ToolFinished", "ToolInterrupted", "ToolStarted",
    "TurnEnded", "UnsetType", "UserMessage", "WorkerFinished", "WorkerSpawned", "decode_event", "event_type",
    "RESULT_PREVIEW_CHARS", "line_fields", "persistence", "result_preview",
]


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """What every event carries.

    Attributes:
        seq: the event's place in its log, from 0 without gaps (-1 until appended).
        ts: when it was appended, Unix seconds (0.0 until appended).
        agent: the agent it belongs to: ``main``, ``worker:NAME``, a background role.
    """

    seq: int = -1
    ts: float = 0.0
    agent: str = "main"


# --- the session --------------------------------------------------------------------


class SessionStarted(Event, frozen=True, tag="session_started"):
    """The first line of every log: how the session was set up (no credentials, ever).

    ``git`` is ``{git_dir, base_commit, branch}`` (empty outside a repository); ``trust``
    the workspace's trust record; ``rules`` the approval rules in force. A kernel campaign
    (``musec optimize``) carries its ``kernel_spec`` and ``max_wall_s``; a session with
    extensions their ``extensions`` (names of instructions, skills, commands, hooks and MCP
    servers, what waits for trust; never a secret).
    """

    session_id: str = ""
    workspace: str = ""
    title: str = ""
    model: str = ""
    provider: str = ""
    approval: str = "ask"
    sandbox: str = "auto"
    max_turns: int = 50
    interactive: bool = False
    tools: list[str] = []
    background: list[str] = []
    agents_model: str = ""
    agents_budget_usd: float = 0.0
    blackboard: bool = True
    kernel_spec: str | UnsetType = UNSET
    max_wall_s: float | UnsetType = UNSET
    system_prompt: str = ""
    musec_version: str = ""
    pid: int = 0
    git: dict[str, Any] = {}
    trust: dict[str, Any] = {}
    rules: list[dict[str, Any]] = []
    extensions: dict[str, Any] | UnsetType = UNSET


class SessionResumed(Event, frozen=True, tag="session_resumed"):
    """A daemon took the session up again; ``interrupted_calls`` were cut off by the stop.
    ``continues``: the exit reason of the stopped turn this resume goes on with, given no
    message (``daemon/pending.py``); its turn count and working time start afresh."""

    pid: int = 0
    interrupted_calls: list[str] = []
    approval: str = ""
    continues: str | UnsetType = UNSET


class LogRepaired(Event, frozen=True, tag="log_repaired"):
    """A torn last line was cut off on open and kept in ``torn_path``."""

    torn_bytes: int = 0
    torn_path: str | None = None


RESULT_PREVIEW_CHARS = 4000
"""The most of a turn's or session's result an end event (``TurnEnded``, ``SessionEnded``)
keeps: a long final answer is in the log once, in the ``model_response`` that gave it
(fresh-user s8 J8: a 5 MB answer made a 15 MB log, the last line 5 MB)."""


def result_preview(result: str) -> tuple[str, int | UnsetType]:
    """What an end event logs of ``result``: ``(result, UNSET)`` when short, else its first
    ``RESULT_PREVIEW_CHARS`` characters and the whole's length (``result_chars``)."""
    if len(result) <= RESULT_PREVIEW_CHARS:
        return result, UNSET
    return result[:RESULT_PREVIEW_CHARS], len(result)


class TurnEnded(Event, frozen=True, tag="turn_ended"):
    """The main agent stopped: ``exit_reason`` as in ``agents.loop.Outcome``.
    ``interrupted_by``: the client whose interrupt stopped it (``client:N``), so every
    terminal on the session can say whether it was this one or another (G10)."""

    exit_reason: str = ""
    result: str = ""
    message: str = ""
    interrupted_by: str | UnsetType = UNSET
    result_chars: int | UnsetType = UNSET


class SessionEnded(Event, frozen=True, tag="session_ended"):
    """The last line of a session that ended (not of one that crashed).

    ``usage`` sums the token counts of every model response; ``blackboard`` holds the
    shared blackboard's statistics when the session had one. ``result_chars``: as in
    ``TurnEnded`` (a long result is logged once, not again in each end event).
    """

    exit_reason: str = ""
    result: str = ""
    result_chars: int | UnsetType = UNSET
    message: str = ""
    turns: int = 0
    usage: dict[str, int] = {}
    cost_usd: float = 0.0
    blackboard: dict[str, Any] | UnsetType = UNSET


# --- the conversation ---------------------------------------------------------------


class Attachment(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A file or directory an ``@path`` mention in a person's message attached to it
    (``agents/attachments.py``), as read when the message was recorded.

    Attributes:
        path: the path as shown to the person: relative to the workspace when inside it,
            else absolute; for a refused mention, as it was written.
        kind: ``file`` (text, inlined), ``directory`` (its listing), ``binary`` (not
            inlined: ``content`` says so) or ``refused`` (nothing attached).
        size_bytes: the file's size on disk (0 for a directory and a refused mention).
        content: what the model sees of it: the text, cut to head and tail around a note
            when over the tool-output budget; a directory's listing; a binary file's note.
        refused: why nothing was attached (one line, for the person; the model sees none).
        partial: ``content`` is the file's head and tail only (it was over the budget).
    """

    path: str
    kind: str = "file"
    size_bytes: int = 0
    content: str = ""
    refused: str = ""
    partial: bool = False


class UserMessage(Event, frozen=True, tag="user_message"):
    """A message to ``agent`` from the person (or the task a worker or the scout is given).

    ``client_msg_id`` is the client's id of the message, so a re-send counts once.

    ``attachments`` holds what the message's ``@path`` mentions attached, read once when
    the message was recorded, so a resume or a replay rebuilds the same request without
    reading the files again (unset: none, and every log older than the field). The user
    turn the history builds from it (``agents/attachments.user_turn``) is the message's
    text as one block, then one block per attached file or directory::

        <untrusted-data id="ID" source="attached file src/x.py (1,234 bytes)">
        ...the file's text...
        </untrusted-data id="ID">

    (``source`` is ``attached directory PATH`` for a listing; ``ID`` is the digest of the
    content as the log stores it, as for tool results). Refused mentions add no block.
    """

    text: str
    client_msg_id: str | UnsetType = UNSET
    attachments: list[Attachment] | UnsetType = UNSET


class AgentMessage(Event, frozen=True, tag="agent_message"):
    """A message from one agent to another (``to``), delivered at its next turn boundary.

    ``from_`` is written as ``from``.
    """

    to: str
    from_: str = msgspec.field(default="", name="from")
    priority: str = "normal"
    body: str = ""


class ModelRequest(Event, frozen=True, tag="model_request"):
    """A model call is about to be made. ``digest`` is ``request_digest`` of the request
    (replay rebuilds it and compares); ``messages`` its number of messages."""

    provider: str = ""
    model: str = ""
    digest: str = ""
    messages: int = 0
    endpoint: str = ""
    catalog_id: str = ""
    # How full the agent's context is with this request (agents/context.py): its size in
    # characters (the accounting's fold), its estimate in tokens, the model's window (0:
    # unknown) and the share in percent (-1: unknown). Unset in logs older than them.
    request_chars: int | UnsetType = UNSET
    context_tokens: int | UnsetType = UNSET
    context_window_tokens: int | UnsetType = UNSET
    context_percent: float | UnsetType = UNSET


class ModelResponse(Event, frozen=True, tag="model_response"):
    """A model's complete answer: its content blocks (reasoning kept opaque), the token
    counts (``usage``: ``input_tokens``, ``output_tokens``, ``cache_read_tokens``,
    ``cache_write_tokens``), its cost in dollars and its latency in seconds; or the part of
    an answer streamed before it was cut off (``interrupted``)."""

    content: list[Block]
    stop_reason: str = ""
    usage: dict[str, int] = {}
    model: str = ""
    provider: str = ""
    endpoint: str = ""
    catalog_id: str = ""
    provider_ids: dict[str, str] = {}
    latency_s: float = 0.0
    cost_usd: float = 0.0
    # The provider's count of the request and this answer (prompt + output tokens), its
    # window and share; unset when it reported no input (the scripted model) or in older logs.
    context_tokens: int | UnsetType = UNSET
    context_window_tokens: int | UnsetType = UNSET
    context_percent: float | UnsetType = UNSET
    # An answer cut off while it streamed (issue 18): ``person`` (Esc, Ctrl-C, the session
    # ended), ``max_wall`` (the wall-time limit passed) or ``error`` (the model call failed
    # mid-stream: the connection dropped, a timeout, a server error, an unreadable frame; its
    # retries ran out). ``content`` is the text streamed until then (no thinking, no
    # half-made tool call); the history keeps it, followed by a note saying it was cut off
    # (agents/history.py). ``usage`` is what the stream had reported (Anthropic's input at
    # message_start) with the output tokens estimated from the text streamed (4 characters a
    # token): ``usage_estimated``; where the stream reported no input (OpenAI's streams say
    # it only at their end) the input tokens are the context meter's estimate of the request
    # (agents/context.py): ``input_estimated``. Unset on complete answers.
    interrupted: Literal["person", "max_wall", "error"] | UnsetType = UNSET
    usage_estimated: bool | UnsetType = UNSET
    input_estimated: bool | UnsetType = UNSET


class ModelSwitched(Event, frozen=True, tag="model_switched"):
    """The agent goes on with another model from its next request (``musec run --resume ID
    --model M``: ``by`` ``resume``; ``/model M``: ``interactive``).

    ``model`` is the model as the person named it (catalog id or alias), ``provider`` its
    provider; ``from_model``/``from_provider`` the one before. The history fold converts
    what was said before for it (agents/modelswitch.py): signed thinking and encrypted
    reasoning are dropped whole (``dropped_blocks`` of them), tool call ids kept. The
    context fields measure the converted history against the new model's window.
    """

    model: str = ""
    provider: str = ""
    from_model: str = ""
    from_provider: str = ""
    by: str = ""
    dropped_blocks: int = 0
    context_tokens: int = 0
    context_window_tokens: int = 0
    context_percent: float = -1.0


class ModelRetry(Event, frozen=True, tag="model_retry"):
    """A failed model call is tried again after ``delay_s`` seconds."""

    attempt: int = 0
    max_attempts: int = 0
    delay_s: float = 0.0
    status: int | None = None
    retry_after_s: float | None = None
    error: str = ""
    discarded_output_chars: int = 0


class RateLimited(Event, frozen=True, tag="rate_limited"):
    """A model call waits ``wait_s`` seconds for its credential's rate limit."""

    credential: str = ""
    wait_s: float = 0.0
    reason: str = ""


# --- tool calls -----------------------------------------------------------------------


class ApprovalRequested(Event, frozen=True, tag="approval_requested"):
    """A call waits for a person's answer; ``rule`` and ``source`` say what asked for it.
    ``preview``: for a file edit, the unified diff it would make (shown before the question).
    ``always``: the allow rules answering "always" would save (shown with the question,
    in every terminal); ``[]``: "always" would allow this call only; unset: not known."""

    call_id: str
    tool: str = ""
    input: dict[str, Any] = {}
    rule: str = ""
    source: str = ""
    preview: str | UnsetType = UNSET
    always: list[str] | UnsetType = UNSET


class ApprovalModeChanged(Event, frozen=True, tag="approval_mode_changed"):
    """A person switched the session's approval mode (``/approval MODE``): it holds from
    the next tool call on, and when the session is resumed without ``--approval``.
    ``by`` is the client that asked; ``previous`` the mode it replaced."""

    approval: str
    previous: str = ""
    by: str = ""


class ApprovalResolved(Event, frozen=True, tag="approval_resolved"):
    """A person answered (``decision``: allow, deny or always; ``by``: which client).
    An "always" carries the rules it saved and where (or why they were not saved). A
    plan's question carries the action the person chose (``plan_action``: approve,
    feedback, grill...; unset in logs older than the field), so a replay says what was
    chosen, not just allowed or denied."""

    call_id: str
    decision: str = ""
    by: str = ""
    plan_action: str | UnsetType = UNSET
    saved_rules: list[str] | UnsetType = UNSET
    saved_to: str | UnsetType = UNSET
    save_error: str | UnsetType = UNSET


class ToolStarted(Event, frozen=True, tag="tool_started"):
    """A call is about to run (write-ahead: on disk before it starts)."""

    call_id: str
    tool: str = ""
    input: dict[str, Any] = {}
    rule: str = ""
    source: str = ""


class FileEditStarted(Event, frozen=True, tag="file_edit_started"):
    """A call is about to rename a file's new content into place (write-ahead, issue 13
    case 4): the file as shown (``path``) and where it is (``abs_path``), its hashes
    before (``None``: it was new) and after, the unified diff, and the temporary file that
    holds the new content. A restart that finds the call unanswered hashes the file to
    tell whether the write landed, says so, and removes ``tmp_path``."""

    call_id: str = ""
    path: str = ""
    abs_path: str = ""
    tmp_path: str = ""
    before_sha256: str | None = None
    after_sha256: str = ""
    diff: str = ""


class FileEdited(Event, frozen=True, tag="file_edited"):
    """A call changed a file: its hashes before (``None``: it was new) and after, and a
    unified diff."""

    call_id: str = ""
    path: str = ""
    before_sha256: str | None = None
    after_sha256: str = ""
    diff: str = ""


class ToolFinished(Event, frozen=True, tag="tool_finished"):
    """A call's result, as the model sees it.

    ``untrusted`` says whether the content is outside data (every call a tool ran; unset in
    logs older than the field, whose results are judged by tool name). A refused call
    carries the ``rule`` and ``source`` that refused it; a call that ran
    carries ``duration_s`` and, as they apply, the ``blob`` (sha256 hex) and ``full_bytes``
    of an output too large to keep inline, the command's ``exit_status`` and ``timed_out``.
    When the model saw only part of the tool's result (cut by the tool or to the budget),
    ``whole_lines`` counts the lines of the whole (``whole_lines_at_least``: a floor, the
    rest was not kept or not read) and ``whole_bytes`` the bytes a command produced: the
    terminal shows the real size beside what the model saw (fresh-user s8 H4).
    """

    call_id: str
    tool: str = ""
    is_error: bool = False
    content: str = ""
    untrusted: bool | UnsetType = UNSET
    rule: str | UnsetType = UNSET
    source: str | UnsetType = UNSET
    duration_s: float | UnsetType = UNSET
    blob: str | UnsetType = UNSET
    full_bytes: int | UnsetType = UNSET
    exit_status: int | None | UnsetType = UNSET
    timed_out: bool | UnsetType = UNSET
    whole_lines: int | UnsetType = UNSET
    whole_lines_at_least: bool | UnsetType = UNSET
    whole_bytes: int | UnsetType = UNSET


class ToolResultsCleared(Event, frozen=True, tag="tool_results_cleared"):
    """Old tool results leave the agent's requests (agents/budget.py): ``where`` maps each
    call id to the file that keeps its whole result (a blob); the history fold replaces
    each result by a one-line stub naming the call and that file. ``tokens_before``: the
    context's estimate before the clearing."""

    where: dict[str, str] = {}
    tokens_before: int = 0


class ToolInterrupted(Event, frozen=True, tag="tool_interrupted"):
    """A call was cut off (a restart, the person); answered to the model as such, never
    run again."""

    call_id: str
    tool: str | None = None
    reason: str = "interrupted"


class NetConnection(Event, frozen=True, tag="net_connection"):
    """A sandboxed command asked the session's proxy for ``host``:``port`` (``method``:
    CONNECT or the HTTP method); ``decision`` allow or deny, by the ``net(...)`` ``rule``
    and its ``source`` (empty rule, source ``mode``: no rule opened it)."""

    host: str = ""
    port: int = 0
    method: str = ""
    decision: str = ""
    rule: str = ""
    source: str = ""


# --- extensions: instructions, skills, hooks, MCP servers ---------------------------------


class InstructionsAdded(Event, frozen=True, tag="instructions_added"):
    """A subdirectory's AGENTS.md (absolute ``path``, shown as ``rel``), reached by a read or
    an edit; ``text`` is what the agent is shown at its next turn boundary."""

    path: str = ""
    rel: str = ""
    text: str = ""


class SkillLoaded(Event, frozen=True, tag="skill_loaded"):
    """A skill the person invoked (``/NAME``, ``$NAME``): ``text`` is shown to the agent
    at its next turn boundary."""

    name: str = ""
    scope: str = ""
    path: str = ""
    text: str = ""


class HookContext(Event, frozen=True, tag="hook_context"):
    """What a hook adds to the conversation at ``hook_event`` (a Stop hook's reason to go
    on, a SessionStart or UserPromptSubmit hook's context), shown at the next turn boundary."""

    hook_event: str = ""
    text: str = ""


class HookRan(Event, frozen=True, tag="hook_ran"):
    """A hook ran at ``hook_event`` (``decision``: allow, approve (a PermissionRequest hook
    approved the call), block, error, timeout or untrusted); its output only as its ``reason`` and ``context``, and the tool input it
    amended (``updated_input``)."""

    hook_event: str = ""
    command: str = ""
    source: str = ""
    matcher: str = ""
    decision: str = ""
    duration_s: float = 0.0
    exit_status: int | None = None
    sandbox: bool = True
    reason: str | UnsetType = UNSET
    context: str | UnsetType = UNSET
    updated_input: dict[str, Any] | UnsetType = UNSET


class PromptBlocked(Event, frozen=True, tag="prompt_blocked"):
    """A UserPromptSubmit hook refused the person's message (it never reached the agent)."""

    reason: str = ""


class McpServerStarted(Event, frozen=True, tag="mcp_server_started"):
    """An MCP server is serving (after ``restarts`` restarts); ``tools`` its tools as listed
    (``name``, ``description``, ``input_schema``), which replay offers again."""

    server: str = ""
    transport: str = ""
    source: str = ""
    restarts: int = 0
    tools: list[dict[str, Any]] = []


class McpServerRestarting(Event, frozen=True, tag="mcp_server_restarting"):
    """An MCP server went away (``error``) and is started again after ``delay_s`` seconds."""

    server: str = ""
    attempt: int = 0
    delay_s: float = 0.0
    error: str = ""


class McpServerFailed(Event, frozen=True, tag="mcp_server_failed"):
    """An MCP server could not be (re)started and is given up on; its tools answer errors."""

    server: str = ""
    error: str = ""


# --- compaction (issue 12) --------------------------------------------------------------


class CompactionStarted(Event, frozen=True, tag="compaction_started"):
    """An agent is about to summarise the older part of its history (``agents/compaction.py``).

    ``reason``: ``threshold`` (a request would pass ``compact_at`` of the window),
    ``overflow`` (the provider said the request is over the window), ``manual`` (``/compact``,
    ``musec compact``). The kept part will begin at message ``keep_from``; ``tokens_before``
    is the estimated size of the request it replaces, ``window_tokens`` the window it must
    fit, ``model`` the summarising model. Without its ``compaction_finished`` (a crash), the
    compaction is done again.
    """

    reason: str = ""
    focus: str = ""
    keep_from: int = 0
    tokens_before: int = 0
    window_tokens: int = 0
    model: str = ""


class CompactionFinished(Event, frozen=True, tag="compaction_finished"):
    """The new start of an agent's conversation: its history becomes one user message,
    ``head`` (the person's messages and pinned instructions verbatim, then ``summary``),
    followed by the messages from ``keep_from`` on, unchanged. The history fold applies it
    from these fields alone, so replay needs no model call.

    ``from_seq``..``to_seq``: the events summarised; ``tokens_before``/``tokens_after``:
    the estimated request size either side; ``cut_messages``: the oldest messages dropped
    without a summary because they did not fit (``context_cut`` says so too); ``usage``,
    ``cost_usd``, ``model``, ``provider``, ``latency_s``: the summarising call's.
    ``applied`` False: the new start would not have been smaller (``tokens_after`` is its
    size), so the history is kept as it was; the call's cost still counts.
    """

    keep_from: int = 0
    head: str = ""
    summary: str = ""
    from_seq: int = 0
    to_seq: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    cut_messages: int = 0
    model: str = ""
    provider: str = ""
    usage: dict[str, int] = {}
    cost_usd: float = 0.0
    latency_s: float = 0.0
    applied: bool | UnsetType = UNSET


class ContextCut(Event, frozen=True, tag="context_cut"):
    """The oldest ``messages`` of an agent's history were dropped without a summary: the
    summarising request did not fit in the window (``reason`` says which way it failed)."""

    messages: int = 0
    reason: str = ""


# --- agents, workers, integration ---------------------------------------------------


class AgentSpawned(Event, frozen=True, tag="agent_spawned"):
    """An agent other than main began: its role, where it works (a worker's worktree), its
    model (a scout with its own), its system prompt and tools (for replay)."""

    role: str = "worker"
    workspace: str | UnsetType = UNSET
    model: str | UnsetType = UNSET
    system_prompt: str = ""
    tools: list[str] = []


class AgentFailed(Event, frozen=True, tag="agent_failed"):
    """A background agent failed and restarts after ``retry_in_s`` seconds."""

    role: str = ""
    error: str = ""
    retry_in_s: float = 0.0


class WorkerSpawned(Event, frozen=True, tag="worker_spawned"):
    """A fan-out worker got its worktree (on ``branch`` at ``path``) and its task."""

    worker: str
    instruction: str = ""
    branch: str = ""
    path: str = ""
    base_commit: str = ""
    base_head: str = ""
    base_branch: str | None = None
    snapshot: bool = False
    dirty_paths: list[str] = []


class WorkerFinished(Event, frozen=True, tag="worker_finished"):
    """A worker stopped; ``commit`` holds its changes (``None``: it changed nothing)."""

    worker: str
    exit_reason: str = ""
    commit: str | None = None
    branch: str = ""
    result: str = ""
    message: str = ""


class ConflictFile(msgspec.Struct, frozen=True):
    """A file that conflicted when a branch was merged (each side's text, or ``None``)."""

    path: str
    ours: str | None = None
    theirs: str | None = None


class Conflict(msgspec.Struct, frozen=True):
    """A branch left out of an integration because merging it conflicted."""

    branch: str
    files: list[ConflictFile] = []


class Integration(Event, frozen=True, tag="integration"):
    """The workers' branches merged on ``branch`` (at ``head``) and tested together."""

    branch: str = ""
    head: str = ""
    base_commit: str | None = None
    base_head: str | None = None
    base_branch: str | None = None
    snapshot: bool | None = None
    merged: list[str] = []
    conflicts: list[Conflict] = []
    test_command: str | None = None
    tests_passed: bool | None = None
    failing_tests: list[str] = []
    test_output: str = ""
    ok: bool = False


class IntegrationApplied(Event, frozen=True, tag="integration_applied"):
    """``musec apply`` brought an integration onto the person's branch."""

    branch: str = ""
    old_head: str = ""
    new_head: str = ""
    how: str = ""


# --- background roles -----------------------------------------------------------------


class TestRun(Event, frozen=True, tag="test_run"):
    """The verifier ran the tests (``trigger``: baseline or edit; ``narrowed``: only the
    tests touching the changed files, while the baseline was not known yet)."""

    __test__ = False  # not a pytest test class

    trigger: str = ""
    command: str = ""
    passed: bool = False
    exit_status: int | None = None
    failing_tests: list[str] = []
    duration_s: float = 0.0
    narrowed: bool | UnsetType = UNSET


class BaselineSnapshot(Event, frozen=True, tag="baseline_snapshot"):
    """The verifier copied the workspace to ``path`` for its baseline run (so a session
    resumed after a crash takes its baseline there, not on the edited workspace)."""

    path: str = ""


class RepoMap(Event, frozen=True, tag="repo_map"):
    """The scout mapped the repository."""

    files: int = 0
    python_symbols: int = 0
    test_files: list[str] = []


class Review(Event, frozen=True, tag="review"):
    """The reviewer read the turn's edits and found something."""

    edits: int = 0
    findings: list[str] = []


# --- plans: /plan and /grill (issue 14) ---------------------------------------------------


class PlanStarted(Event, frozen=True, tag="plan_started"):
    """The main agent entered plan mode (``/plan``, ``musec run --plan``): read-only until a
    plan is approved. ``path`` is the plan document; ``only`` (``musec run --plan``): the
    plan is the run's result and nothing is carried out."""

    task: str = ""
    path: str = ""
    only: bool = False


class PlanProposed(Event, frozen=True, tag="plan_proposed"):
    """A plan waits for approval: its ``sha256`` (of the UTF-8 ``text``) and where it is.
    A grill's amended plan says how many rounds amended it (``grilled``) and how (``note``)."""

    sha256: str
    text: str = ""
    path: str = ""
    grilled: int | UnsetType = UNSET
    note: str | UnsetType = UNSET


class PlanApproved(Event, frozen=True, tag="plan_approved"):
    """A plan was approved (``by``: a client, or ``--approve-plan``). ``action``: approve,
    approve_auto, edit (``text`` is the person's edited plan), fresh (the agent starts again
    from the plan alone); ``approval`` the mode it is carried out in. ``text`` is the
    approved plan, pinned verbatim through compaction."""

    sha256: str
    by: str = ""
    action: str = "approve"
    approval: str = ""
    text: str = ""


class GrillRound(Event, frozen=True, tag="grill_round"):
    """One question of a grill (``/grill``; the critic's): a decision of the plan, the
    critic's recommended answer, and the answer settled (``answered_by``: scout, person,
    recommended, or none when nothing was settled; ``assumption``: the recommendation was
    taken because nobody could be asked)."""

    round: int
    decision: str = ""
    kind: str = ""
    question: str = ""
    recommended: str = ""
    answer: str = ""
    answered_by: str = ""
    assumption: bool = False


# --- kernel campaigns -------------------------------------------------------------------


class KernelEvaluated(Event, frozen=True, tag="kernel_evaluated"):
    """A kernel campaign evaluated a candidate (``evaluate_kernel``): a flat summary for
    readers of the log, and the whole evaluation (``agents.kernel_opt.evaluate.Evaluation``
    as builtins) from which the campaign's leaderboard is rebuilt on resume. ``n`` is its
    place on the board (from 1); ``commit`` the kept commit on ``branch`` when it was the
    best so far."""

    campaign: str = ""
    n: int = 0
    candidate: str = ""
    candidate_sha256: str = ""
    status: str = ""
    correct: bool = False
    reason: str | None = None
    timing: str = ""
    candidate_us: float | None = None
    baseline_us: float | None = None
    speedup: float | None = None
    tool_calls: int = 0
    commit: str | None = None
    branch: str = ""
    csv_path: str = ""
    plot_path: str = ""
    evaluation: dict[str, Any] = {}


# --- goals (agents/goal) ------------------------------------------------------------


class GoalSet(Event, frozen=True, tag="goal_set"):
    """A goal to work toward (``/goal``, ``musec run --goal``); it ends the one before.

    ``condition`` verbatim; ``check`` a shell command that passes with exit 0 ("": none);
    the goal's budget (``budget_usd``, ``max_turns``, ``max_wall_s``; 0: none); how many
    judgments with no change to the workspace pause it (``stuck_turns``); who set it
    (``by``: ``person`` or ``run``); ``diff_hash`` the workspace's state then (the first
    "no change" baseline).
    """

    goal_id: str = ""
    condition: str = ""
    check: str = ""
    budget_usd: float = 0.0
    max_turns: int = 0
    max_wall_s: float = 0.0
    stuck_turns: int = 3
    by: str = ""
    diff_hash: str = ""


class GoalChecked(Event, frozen=True, tag="goal_checked"):
    """One stage of judgment ``n``: by the ``check`` command (``exit_status``, the end of
    its ``output``) or by the ``evaluator``. ``verdict``: ``met``, ``not_met`` or
    ``impossible`` (a passing check is ``met`` and the evaluator follows). ``instruct``: the
    ``reason`` goes back to the working agent as its next instruction. ``blocker`` names
    what blocks the goal (the stuck detector compares them); ``diff_hash`` is the
    workspace's state; ``summary`` the evaluator's, for the person.
    """

    goal_id: str = ""
    n: int = 0
    by: str = ""
    verdict: str = ""
    reason: str = ""
    blocker: str = ""
    diff_hash: str = ""
    instruct: bool = False
    exit_status: int | None | UnsetType = UNSET
    output: str | UnsetType = UNSET
    summary: str | UnsetType = UNSET


class GoalUpdated(Event, frozen=True, tag="goal_updated"):
    """The goal's ``status`` changed: ``paused``, ``active`` (resumed), ``cleared``, or an
    end (``met``, ``impossible``, ``budget_limited``), ``by`` the person, the stuck
    detector, the check or the goal's budget, with the ``reason`` and, at an end or a
    pause, a ``summary`` for the person."""

    goal_id: str = ""
    status: str = ""
    by: str = ""
    reason: str = ""
    summary: str | UnsetType = UNSET


AnyEvent = (
    SessionStarted | SessionResumed | LogRepaired | TurnEnded | SessionEnded
    | UserMessage | AgentMessage | ModelRequest | ModelResponse | ModelSwitched | ModelRetry | RateLimited
    | ApprovalRequested | ApprovalResolved | ApprovalModeChanged | ToolStarted | FileEditStarted | FileEdited | ToolFinished | ToolResultsCleared | ToolInterrupted
    | NetConnection
    | InstructionsAdded | SkillLoaded | HookContext | HookRan | PromptBlocked
    | McpServerStarted | McpServerRestarting | McpServerFailed
    | CompactionStarted | CompactionFinished | ContextCut
    | AgentSpawned | AgentFailed | WorkerSpawned | WorkerFinished | Integration | IntegrationApplied
    | TestRun | BaselineSnapshot | RepoMap | Review | KernelEvaluated
    | GoalSet | GoalChecked | GoalUpdated
    | PlanStarted | PlanProposed | PlanApproved | GrillRound
)
"""Every event type the log holds."""

#: The classes of ``AnyEvent``, in its order.
EVENT_TYPES: tuple[type[Event], ...] = get_args(AnyEvent)

_decoder = msgspec.json.Decoder(AnyEvent)
_COMMON = ("seq", "ts", "agent", "type")


def event_type(event: Event) -> str:
    """The ``type`` member of ``event``'s line (``tool_started``...)."""
    return str(event.__struct_config__.tag)


def decode_event(line: bytes | str) -> AnyEvent:
    """The event of one log line (with or without its ``h`` and newline).

    Raises:
        msgspec.ValidationError: an unknown ``type``, or a field of the wrong type.
        msgspec.DecodeError: the line is not JSON.
    """
    return _decoder.decode(line)


def line_fields(event: Event) -> dict[str, Any]:
    """The members of ``event``'s line as builtins, in the order they are written:
    ``seq``, ``ts``, ``agent``, ``type``, then the type's fields (``UNSET`` ones left out)."""
    fields = msgspec.to_builtins(event)
    out = {"seq": event.seq, "ts": event.ts, "agent": event.agent, "type": fields["type"]}
    for key, value in fields.items():
        if key not in _COMMON:
            out[key] = value
    return out


# --- persistence: one decision per type ------------------------------------------------


class Durability(enum.Enum):
    """How an event reaches the disk (DESIGN §5 rule 2)."""

    WRITE_AHEAD = "write_ahead"  # fsync before ``append`` returns: it announces a side effect
    GROUP_COMMIT = "group_commit"  # written at once, fsynced with the next write-ahead event


class Persistence(NamedTuple):
    """What happens to an appended event: how it is made durable, and whether attached
    clients are sent its line."""

    durability: Durability
    to_clients: bool


_AHEAD = Persistence(Durability.WRITE_AHEAD, to_clients=True)
_GROUP = Persistence(Durability.GROUP_COMMIT, to_clients=True)


def persistence(event: AnyEvent) -> Persistence:
    """How ``event`` is persisted and shown: the one place this is decided.

    Write-ahead: what announces a side effect or a wait (a tool starting, an approval
    asked or answered, a connection leaving the sandbox, a worker's worktree, a message
    another agent acts on, a kernel campaign's evaluation and its kept commit, a plan
    mode change, a plan waiting for approval or approved, a grill's answer, a summarising model call), the
    session's start, resume and end, and what later events build on (a compaction's result: the history starts again from it). Everything else is group-committed (what shapes the conversation without a
    side effect, like a hook's context or a skill's text, is as durable as the model's
    answers: a crash loses it only with the turn it belonged to). Every event reaches the attached clients.
    """
    match event:
        case (SessionStarted() | SessionResumed() | LogRepaired() | SessionEnded() | UserMessage() | AgentMessage()
              | ModelSwitched() | ApprovalRequested() | ApprovalResolved() | ApprovalModeChanged() | ToolStarted() | FileEditStarted() | ToolInterrupted() | NetConnection() | AgentSpawned()
              | WorkerSpawned() | Integration() | IntegrationApplied() | KernelEvaluated() | GoalSet() | GoalUpdated()
              | PlanStarted() | PlanProposed() | PlanApproved() | GrillRound()
              | CompactionStarted() | CompactionFinished()):
            return _AHEAD
        case (TurnEnded() | ModelRequest() | ModelResponse() | ModelRetry() | RateLimited() | FileEdited()
              | ToolFinished() | ToolResultsCleared() | AgentFailed() | WorkerFinished() | TestRun() | BaselineSnapshot() | RepoMap()
              | Review() | InstructionsAdded() | SkillLoaded() | HookContext() | HookRan()
              | PromptBlocked() | McpServerStarted() | McpServerRestarting() | McpServerFailed() | GoalChecked() | ContextCut()):
            return _GROUP
        case _:
            assert_never(event)
