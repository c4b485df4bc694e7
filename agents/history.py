"""An agent's conversation as a pure fold over its logged events (DESIGN §5 rule 1).

The live loop and replay both build the history with ``History.apply``, one event at a
time, from the events exactly as they were written to the log; so the request replay
would send next is byte-identical to the one the live run sent.

Events that shape the history (others are ignored):

- ``user_message`` ``{text}``: a person's message.
- ``agent_message`` ``{to, from, body, priority}``: a message to this agent, shown as
  user text at its next turn boundary.
- ``model_response`` ``{content: [Block...]}``: the assistant's message.
- ``tool_finished`` ``{call_id, content, is_error, untrusted?}``: the result of a call;
  ``untrusted`` (written for every call a tool ran) marks it as outside data. A log written
  before that field existed is folded as it was then (by tool name), so replay keeps its bytes.
- ``tool_interrupted`` ``{call_id, reason}``: a call cut off (crash, Ctrl-C); answered to
  the model as an interrupted call, never re-run.
- ``instructions_added`` ``{path, text}``: a subdirectory's AGENTS.md, reached by a read
  or an edit; ``hook_context`` ``{text}``: what a hook adds (a Stop hook's reason to go on);
  ``skill_loaded`` ``{name, text}``: a skill the person invoked (``/NAME``, ``$NAME``).
  Each is user text at the next turn boundary, as an agent message.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .core.conversation import Block, Message, TextBlock, ToolCallBlock, ToolResultBlock
from .tools.untrusted import mark_untrusted


def decode_blocks(raw: Any) -> list[Block]:
    """Decode the ``content`` of a ``model_response`` event into blocks."""
    return msgspec.convert(raw, list[Block])


#: The tools whose results were marked in logs without the ``untrusted`` field (before every
#: tool run's result was); only for folding those logs as they were sent.
LEGACY_UNTRUSTED_SOURCES = frozenset({"read_file", "grep", "glob", "bash"})


def is_untrusted_result(event: dict[str, Any]) -> bool:
    """Whether a ``tool_finished`` event's content is outside data (see the module doc)."""
    flag = event.get("untrusted")
    if flag is None:
        return str(event.get("tool", "")) in LEGACY_UNTRUSTED_SOURCES
    return bool(flag)


class History:
    """The conversation of one agent, and the counters derived from it.

    Attributes:
        messages: roles alternate, starting with ``user``.
        turns_since_user: model responses since the latest person's message.
        turns: model responses in all.
    """

    def __init__(self, agent: str = "main") -> None:
        self.agent = agent
        self.messages: list[Message] = []
        self.turns = 0
        self.turns_since_user = 0
        self.tokens_in = 0
        self.tokens_out = 0
        self.cost_usd = 0.0
        self._held: list[TextBlock] = []  # agent messages waiting for the turn boundary
        self.instructions_loaded: set[str] = set()  # AGENTS.md files added by instructions_added

    def apply(self, event: dict[str, Any]) -> None:
        """Fold one event (a decoded log line) into the history."""
        kind = event.get("type")
        if kind == "agent_message":
            if event.get("to") != self.agent:
                return
            text = f"[message from agent {event.get('from')}, priority {event.get('priority', 'normal')}]\n{event.get('body', '')}"
            # Delivered at the next turn boundary: after every result of the calls in flight
            # (tool results must come first in their message), else at once.
            self._held.append(TextBlock(text))
            self._release_held()
            return
        if event.get("agent") != self.agent:
            return
        if kind in ("instructions_added", "hook_context", "skill_loaded"):
            if kind == "instructions_added":
                self.instructions_loaded.add(event.get("path", ""))
            self._held.append(TextBlock(event.get("text", "")))
            self._release_held()
        elif kind == "user_message":
            self._user_block(TextBlock(event["text"]))
            self.turns_since_user = 0
        elif kind == "model_response":
            content = decode_blocks(event["content"])
            self.messages.append(Message("assistant", content))
            self.turns += 1
            self.turns_since_user += 1
            usage = event.get("usage") or {}
            self.tokens_in += int(usage.get("input_tokens", 0))
            self.tokens_out += int(usage.get("output_tokens", 0))
            self.cost_usd += float(event.get("cost_usd", 0.0))
        elif kind == "tool_finished":
            content = event.get("content", "")
            if is_untrusted_result(event):
                content = mark_untrusted(str(event.get("tool", "")), content)
            self._user_block(ToolResultBlock(event["call_id"], content, bool(event.get("is_error"))))
            self._release_held()
        elif kind == "tool_interrupted":
            reason = event.get("reason", "interrupted")
            self._user_block(ToolResultBlock(event["call_id"], f"[tool call interrupted: {reason}; it may have partly run]", True))
            self._release_held()

    def _release_held(self) -> None:
        if self._held and not self.unanswered_calls():
            held, self._held = self._held, []
            for block in held:
                self._user_block(block)

    def _user_block(self, block: TextBlock | ToolResultBlock) -> None:
        if self.messages and self.messages[-1].role == "user":
            last = self.messages[-1]
            self.messages[-1] = Message("user", [*last.content, block])
        else:
            self.messages.append(Message("user", [block]))

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
