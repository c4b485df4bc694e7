"""An agent's conversation as a pure fold over its logged events (DESIGN §5 rule 1).

The live loop and replay both build the history with ``History.apply``, one event at a
time: live from the events as they are recorded, replay from the events read back from
the log; so the request replay would send next is byte-identical to the one the live run
sent (as long as nothing in it was redacted).

Events that shape the history (``History.apply`` says what it does with every type):

- ``UserMessage``: a person's message (or a worker's task), then what its ``@path``
  mentions attached, one block per file (``agents/attachments.py``).
- ``AgentMessage``: a message to this agent, shown as user text at its next turn
  boundary.
- ``ModelResponse``: the assistant's message; one cut off while it streamed
  (``interrupted``) keeps its text, followed by a user note that it was cut off
  (agents/cutoff.py), and adds nothing when no text had come.
- ``ToolFinished``: the result of a call; ``untrusted`` (written for every call a tool
  ran) marks it as outside data. A log written before that field existed is folded as it
  was then (by tool name), so replay keeps its bytes.
- ``ModelSwitched``: the history converted for the new model (agents/modelswitch.py).
- ``ToolResultsCleared``: old results replaced by one-line stubs (agents/budget.py).
- ``ModelRequest``, ``ModelResponse``: the context accounting's fold (``History.context``,
  agents/context.py).
- ``ToolInterrupted``: a call cut off (crash, Ctrl-C); answered to the model as an
  interrupted call, never re-run.
- ``InstructionsAdded``: a subdirectory's AGENTS.md, reached by a read or an edit;
  ``HookContext``: what a hook adds (a Stop hook's reason to go on); ``SkillLoaded``: a
  skill the person invoked (``/NAME``, ``$NAME``). Each is user text at the next turn
  boundary, as an agent message.
- ``PlanStarted``: plan mode's instructions, the same way; ``PlanApproved``: the approved
  plan, whole, as a person's message (``action`` ``fresh`` first drops the whole
  conversation: the plan alone starts it again).

- ``GoalSet``: the goal the agent works toward (``agents/goal``); ``GoalChecked`` with
  ``instruct``: the judgment that it is not met yet, with the reason; ``GoalUpdated`` to
  ``active``: the person resumed it. Each is user text at the next turn boundary and, like
  a person's message, starts the turn count and the working time afresh (the goal has its
  own budget).

The working time since the person's latest message (``wall_s``, for ``--max-wall``) is a
``WorkClock`` over the events' ``ts``: it starts at the message, stops at ``TurnEnded``,
and the daemon's downtime before a ``SessionResumed`` does not count. A ``SessionResumed``
that ``continues`` a stopped turn starts it and the turn count afresh, as a message does.
- ``CompactionStarted``: a compaction is under way (``pending``); ``CompactionFinished``:
  the new start of the conversation: the history becomes ``head`` as one user message,
  then the messages from ``keep_from`` on (``agents/compaction.py``). The person's
  messages, subdirectory AGENTS.md files and loaded skills are ``pinned``: a compaction
  puts them into its head verbatim. ``ContextCut`` only reports.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import assert_never

import msgspec

from .attachments import user_turn
from .budget import clear_results
from .clock import WorkClock
from .compaction import Pinned, PinnedKind
from .context import ContextMeter, block_chars
from .core import events as evt
from .core.conversation import Message, TextBlock, ToolCallBlock, ToolResultBlock, Usage
from .cutoff import CUT_OFF_NOTES
from .goal.texts import goal_instruction
from .modelswitch import convert_history
from .plan import approved_message, planning_message
from .tools.untrusted import mark_untrusted

#: The tools whose results were marked in logs without the ``untrusted`` field (before every
#: tool run's result was); only for folding those logs as they were sent.
LEGACY_UNTRUSTED_SOURCES = frozenset({"read_file", "grep", "glob", "bash"})


def is_untrusted_result(event: evt.ToolFinished) -> bool:
    """Whether a ``tool_finished`` event's content is outside data (see the module doc)."""
    if isinstance(event.untrusted, bool):
        return event.untrusted
    return event.tool in LEGACY_UNTRUSTED_SOURCES


class History:
    """The conversation of one agent, and the counters derived from it.

    Attributes:
        messages: roles alternate, starting with ``user``.
        turns_since_user: model responses since the latest person's message.
        turns: model responses in all.
        pinned: the texts a compaction keeps verbatim, with the message each is in.
        message_seqs: per message, the ``seq`` of the last event folded into it.
        pending: the ``CompactionStarted`` of a compaction without its result.
        compactions: compactions applied; ``last_compaction`` the latest's event.
    """

    def __init__(self, agent: str = "main") -> None:
        self.agent = agent
        self.messages: list[Message] = []
        self.turns = 0
        self.turns_since_user = 0
        self.tokens_in = 0
        self.tokens_out = 0
        self.cost_usd = 0.0
        self._held: list[tuple[TextBlock, PinnedKind | None]] = []  # waiting for the turn boundary
        self.instructions_loaded: set[str] = set()  # AGENTS.md files added by instructions_added
        self.context = ContextMeter()  # how full the context is (agents/context.py)
        self.cleared: set[str] = set()  # call ids whose results were cleared (tool_results_cleared)
        self.result_blobs: dict[str, str] = {}  # call id -> blob of its whole result, when it has one
        self.clock = WorkClock()  # working time since the latest person's message
        self.goal_condition = ""  # of the latest GoalSet
        # The log's redaction of a text (set for a live agent by the daemon): a result is
        # marked with the digest of what the log stores of it, as replay marks it.
        self.stored: Callable[[str], str] | None = None
        self.pinned: list[Pinned] = []
        self.message_seqs: list[int] = []
        self.pending: evt.CompactionStarted | None = None
        self.compactions = 0
        self.last_compaction: evt.CompactionFinished | None = None
        self._seq = -1

    def apply(self, event: evt.AnyEvent) -> None:
        """Fold one event into the history (others' events are ignored, but a message to this one)."""
        self.clock.tick(event)
        self._seq = event.seq
        match event:
            case evt.ModelResponse():  # with the next two, the most frequent types first (issue 19)
                if event.agent == self.agent:
                    self._response(event)
            case evt.ToolFinished():
                if event.agent == self.agent:
                    if isinstance(event.blob, str):
                        self.result_blobs[event.call_id] = event.blob
                    content = event.content
                    if is_untrusted_result(event):
                        content = mark_untrusted(event.tool, content, self.stored(content) if self.stored else None)
                    self._user_block(ToolResultBlock(event.call_id, content, bool(event.is_error)))
                    self._release_held()
            case evt.ModelRequest():
                if event.agent == self.agent:
                    chars = event.request_chars if isinstance(event.request_chars, int) else 0
                    self.context.on_request(event.provider, chars)
            case evt.AgentMessage():
                if event.to != self.agent:
                    return
                text = f"[message from agent {event.from_}, priority {event.priority}]\n{event.body}"
                # Delivered at the next turn boundary: after every result of the calls in
                # flight (tool results must come first in their message), else at once.
                self._held.append((TextBlock(text), None))
                self._release_held()
            case evt.InstructionsAdded() | evt.HookContext() | evt.SkillLoaded():
                if event.agent == self.agent:
                    self._added_text(event)
            case evt.UserMessage():
                if event.agent == self.agent:
                    self._user_message(event)
                    self._afresh(event.ts)
            case evt.TurnEnded():
                if event.agent == self.agent:
                    self.clock.stop()
            case evt.SessionResumed():
                if event.continues and event.agent == self.agent:  # a stopped turn gone on with: counted afresh
                    self._afresh(event.ts)
            case evt.ModelSwitched():
                if event.agent == self.agent:
                    self.messages, _ = convert_history(self.messages)
                    self.context.switch(event.context_window_tokens or None)
            case evt.ToolResultsCleared():
                if event.agent == self.agent:
                    self.messages = clear_results(self.messages, event.where)
                    self.cleared |= set(event.where)
            case evt.GoalSet() | evt.GoalChecked() | evt.GoalUpdated():
                if event.agent == self.agent:
                    self._goal(event)
            case evt.CompactionStarted() | evt.CompactionFinished():
                if event.agent == self.agent:
                    self._compaction(event)
            case evt.PlanStarted() | evt.PlanApproved():
                if event.agent == self.agent:
                    self._plan(event)
            case evt.ApprovalModeChanged() if event.previous == "plan" and event.agent == self.agent:
                self._user_block(TextBlock(  # /approval MODE left plan mode (fresh-user s8 J11)
                    f"[the person left plan mode without approving a plan (approval mode {event.approval}): "
                    "the workspace is writable again; do what the person asks next, not the plan]"))
            case evt.ToolInterrupted():
                if event.agent == self.agent:
                    text = f"[tool call interrupted: {event.reason}; it may have partly run]"
                    self._user_block(ToolResultBlock(event.call_id, text, True))
                    self._release_held()
            case (evt.ToolStarted() | evt.SessionStarted() | evt.LogRepaired() | evt.SessionEnded()
                  | evt.ModelRetry() | evt.RateLimited() | evt.ApprovalRequested() | evt.ApprovalResolved() | evt.ApprovalModeChanged()
                  | evt.FileEditStarted() | evt.FileEdited() | evt.AgentSpawned() | evt.AgentFailed() | evt.WorkerSpawned() | evt.WorkerFinished() | evt.Integration()
                  | evt.IntegrationApplied() | evt.TestRun() | evt.BaselineSnapshot() | evt.RepoMap() | evt.Review() | evt.KernelEvaluated() | evt.PlanProposed() | evt.GrillRound()
                  | evt.NetConnection() | evt.HookRan() | evt.PromptBlocked() | evt.McpServerStarted() | evt.McpServerRestarting()
                  | evt.McpServerFailed() | evt.ContextCut()):
                pass  # no part of the conversation
            case _:
                assert_never(event)

    def _user_message(self, event: evt.UserMessage) -> None:
        """A person's message: its text (pinned: a compaction keeps it verbatim), then one
        block per file its ``@path`` mentions attached (``agents/attachments.py``; not
        pinned: a compaction may summarise a file)."""
        attached = event.attachments if isinstance(event.attachments, list) else []
        text, *files = user_turn(event.text, attached, self.stored)
        self._user_block(TextBlock(text), "person")
        for block in files:
            self._user_block(TextBlock(block))

    def _goal(self, event: evt.GoalSet | evt.GoalChecked | evt.GoalUpdated) -> None:
        """What a goal event tells this agent: like a person's message, it starts the turn
        count and the working time again."""
        if isinstance(event, evt.GoalSet):
            self.goal_condition = event.condition
        text = goal_instruction(event, self.goal_condition)
        if text:
            # the goal the person set survives compaction verbatim; a judgment does not need to
            self._held.append((TextBlock(text), "instructions" if isinstance(event, evt.GoalSet) else None))
            self._release_held()
            self.turns_since_user = 0
            self.clock.start(event.ts, afresh=True)

    def _afresh(self, ts: float) -> None:
        """The turn count and the working time start again at ``ts`` (a person's message)."""
        self.turns_since_user = 0
        self.clock.start(ts, afresh=True)

    def wall_s(self, now: float) -> float:
        """Seconds worked since the latest person's message, up to ``now`` (Unix seconds)."""
        return self.clock.seconds(now)

    def _plan(self, event: evt.PlanStarted | evt.PlanApproved) -> None:
        """Plan mode's instructions when it starts; the approved plan, as a person's word, when
        it ends (a fresh start keeps nothing else)."""
        if isinstance(event, evt.PlanStarted):
            self._held.append((TextBlock(planning_message(event)), None))
            self._release_held()
            return
        if event.action == "fresh":
            self.messages, self._held, self.message_seqs, self.pinned = [], [], [], []
        self._user_block(TextBlock(approved_message(event)), "instructions")  # the approved plan survives compaction
        self.turns_since_user = 0

    def _response(self, event: evt.ModelResponse) -> None:
        """The model's message; one cut off while it streamed keeps its text, followed by a
        note that it was cut off (agents/cutoff.py), and adds no message without text."""
        if not event.input_estimated:  # an estimate calibrates nothing: the meter goes on from the last report
            self.context.on_response(msgspec.convert(event.usage, Usage), sum(block_chars(b) for b in event.content))
        if event.content or not event.interrupted:
            self.messages.append(Message("assistant", list(event.content)))
            self.message_seqs.append(self._seq)
        if event.interrupted and event.content:
            self._user_block(TextBlock(CUT_OFF_NOTES.get(event.interrupted, CUT_OFF_NOTES["person"])))
        self.turns += 1
        self.turns_since_user += 1
        self.tokens_in += int(event.usage.get("input_tokens", 0))
        self.tokens_out += int(event.usage.get("output_tokens", 0))
        self.cost_usd += float(event.cost_usd)

    def _release_held(self) -> None:
        if self._held and not self.unanswered_calls():
            held, self._held = self._held, []
            for block, pin in held:
                self._user_block(block, pin)

    def _user_block(self, block: TextBlock | ToolResultBlock, pin: PinnedKind | None = None) -> None:
        if self.messages and self.messages[-1].role == "user":
            last = self.messages[-1]
            self.messages[-1] = Message("user", [*last.content, block])
            self.message_seqs[-1] = self._seq
        else:
            self.messages.append(Message("user", [block]))
            self.message_seqs.append(self._seq)
        if pin is not None and isinstance(block, TextBlock):
            self.pinned.append(Pinned(pin, block.text, len(self.messages) - 1))

    def _added_text(self, event: evt.InstructionsAdded | evt.HookContext | evt.SkillLoaded) -> None:
        """Text added at the next turn boundary; AGENTS.md files and skills are pinned."""
        if isinstance(event, evt.InstructionsAdded):
            self.instructions_loaded.add(event.path)
        pin: PinnedKind | None = "instructions" if isinstance(event, evt.InstructionsAdded) else (
            "skill" if isinstance(event, evt.SkillLoaded) else None)
        self._held.append((TextBlock(event.text), pin))
        self._release_held()

    def _compaction(self, event: evt.CompactionStarted | evt.CompactionFinished) -> None:
        """A compaction of this agent: under way (``pending``), or done (the new start)."""
        if isinstance(event, evt.CompactionStarted):
            self.pending = event
            return
        if event.applied is False:  # it would not have been smaller: nothing changes
            self.pending = None
        else:
            self._compacted(event.keep_from, event.head)
        self.last_compaction = event
        self.cost_usd += float(event.cost_usd)

    def _compacted(self, keep_from: int, head: str) -> None:
        """The history starts again: ``head``, then the messages from ``keep_from`` on.
        A new list (replay's ``PrefixDigest`` sees the history was replaced, not appended to)."""
        keep_from = min(max(keep_from, 0), len(self.messages))
        self.messages = [Message("user", [TextBlock(head)]), *self.messages[keep_from:]]
        self.message_seqs = [self._seq, *self.message_seqs[keep_from:]]
        self.pinned = [p._replace(index=0 if p.index < keep_from else p.index - keep_from + 1) for p in self.pinned]
        self.pending = None
        self.compactions += 1

    def pinned_before(self, keep_from: int) -> list[Pinned]:
        """The pinned texts of the messages before ``keep_from``, oldest first."""
        return [p for p in self.pinned if p.index < keep_from]

    def unanswered_calls(self) -> list[ToolCallBlock]:
        """Tool calls of the last assistant message that have no result yet, in order."""
        for i in range(len(self.messages) - 1, -1, -1):
            msg = self.messages[i]
            if msg.role == "assistant":
                answered = set()
                for later in self.messages[i + 1 :]:
                    answered |= {b.call_id for b in later.content if isinstance(b, ToolResultBlock)}
                return [b for b in msg.content if isinstance(b, ToolCallBlock) and b.id not in answered]
        return []

    def last_assistant_text(self) -> str:
        """The text of the latest assistant message (the run's result)."""
        for msg in reversed(self.messages):
            if msg.role == "assistant":
                return "".join(b.text for b in msg.content if isinstance(b, TextBlock))
        return ""
