"""The tool-output budget and clearing old tool results (issue 12 part 2).

Two steps keep tool output from filling an agent's context, the cheapest first:

1. **Budget.** A tool result over its token budget reaches the model as its head and its
   tail around a note; the whole text is kept in a blob, and the note says where and how
   to read the rest (``read_file`` with ``offset``/``limit``, ``grep``). The cut is made
   before the result is logged, so the log holds what the model saw and replay is exact.
2. **Clearing.** Once the context passes a share of the window (``ContextConfig.clear_at``),
   the results of all but the most recent calls are replaced in the request by a one-line
   stub naming the call and where its full result is. Which calls were cleared is logged
   (``tool_results_cleared``), so the history fold, live or replayed, makes the same
   request; the results are cleared in one batch, so a prompt cache is broken once per
   clearing, not once per request.

Summarising (compaction) comes only after these (``agents/compaction.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import msgspec

from .core.conversation import Message, ToolCallBlock, ToolResultBlock

__all__ = [
    "ContextConfig",
    "Whole",
    "clear_results",
    "clear_stub",
    "clearable_calls",
    "fit_attachment",
    "fit_to_budget",
    "kept_note",
    "over_budget",
]

_BUDGET_CHARS_PER_TOKEN = 3.0  # conservative (code): the budget is a cap, not a guess


@dataclass(frozen=True)
class ContextConfig:
    """The person's ``[context]`` table of ``config.toml``.

    ::

        [context]
        tool_output_tokens = 10000   # one tool result's budget
        clear_at = 0.6               # clear old tool results past this share of the window
        keep_tool_results = 8        # the most recent results never cleared

    Attributes:
        tool_output_tokens: the budget of one tool result, in tokens (0: no budget).
        clear_at: share of the window (0..1) past which old results are cleared (0: never).
        keep_tool_results: how many of the most recent results clearing keeps.
    """

    tool_output_tokens: int = 10_000
    clear_at: float = 0.6
    keep_tool_results: int = 8

    @classmethod
    def from_table(cls, table: object, where: str) -> ContextConfig:
        """Read a ``[context]`` table.

        Raises:
            ValueError: a value of the wrong type or out of range; the message names it.
        """
        if table is None:
            return cls()
        if not isinstance(table, dict):
            raise ValueError(f"{where}: [context] must be a table, like [context] tool_output_tokens = 10000")
        out: dict[str, Any] = {}
        for key, kind, low, high in (("tool_output_tokens", int, 0, None), ("clear_at", float, 0.0, 1.0),
                                     ("keep_tool_results", int, 0, None)):
            if key not in table:
                continue
            value = table[key]
            if isinstance(value, bool) or not isinstance(value, int | float) or (kind is int and not isinstance(value, int)):
                raise ValueError(f"{where}: [context].{key} must be a{'n integer' if kind is int else ' number'}, got {value!r}")
            if value < low or (high is not None and value > high):
                raise ValueError(f"{where}: [context].{key} must be {f'between {low} and {high}' if high is not None else f'{low} or more'}, got {value!r}")
            out[key] = kind(value)
        return cls(**out)


def over_budget(content: str, budget_tokens: int) -> bool:
    """Whether ``content`` is over a budget of ``budget_tokens`` (0: no budget)."""
    return budget_tokens > 0 and len(content) > int(budget_tokens * _BUDGET_CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Whole:
    """What a tool produced in all, when its result was already capped by the tool.

    Attributes:
        produced_bytes: bytes the tool produced (a command's whole output stream).
        kept_bytes: bytes of the blob that keeps it (its head and tail when the stream was
            longer than the tool keeps in memory).
        kept_lines: lines of that blob.
    """

    produced_bytes: int
    kept_bytes: int
    kept_lines: int

    @classmethod
    def of_blob(cls, produced_bytes: int, blob: bytes) -> Whole:
        """The counts of ``blob`` (``bytes.count`` in C: about 10 ms for 30 MB)."""
        return cls(produced_bytes, len(blob), blob.count(b"\n") + (not blob.endswith(b"\n") and bool(blob)))


def fit_to_budget(content: str, budget_tokens: int, *, tool: str, input: dict[str, Any], blob_path: str,
                  whole: Whole | None = None) -> str:
    """``content`` cut to its head and tail around a note, if it is over ``budget_tokens``.

    The budget is turned into characters at a conservative 3 characters per token. The
    head and the tail each get about half of it, cut at line ends where a line end is near.
    The note says how many lines are shown of how many, where the result is kept
    (``blob_path``), and how to read the rest: ``read_file`` with ``offset``/``limit`` (on
    the file itself for a ``read_file`` result), or ``grep`` in it. Its counts are of the
    whole result: of ``whole`` when the tool had capped ``content`` already (a command's
    output over its own cap), else of ``content``.

    Args:
        content: the tool's result as the model would see it.
        budget_tokens: the budget (0: none).
        tool: the tool's name; input: its input (a read's path goes in the note).
        blob_path: where the result is stored (a file ``read_file`` can read).
        whole: what the tool produced and the blob keeps, when ``content`` is capped.

    Returns:
        ``content`` itself when within the budget.
    """
    if not over_budget(content, budget_tokens):
        return content
    half = int(budget_tokens * _BUDGET_CHARS_PER_TOKEN) // 2
    head = _cut_at_line(content[:half], keep="head")
    tail = _cut_at_line(content[len(content) - half:], keep="tail")
    head_lines = head.count("\n")
    tail_lines = tail.count("\n") + (not tail.endswith("\n") and bool(tail))
    if whole is None:
        lines_total = content.count("\n") + (not content.endswith("\n"))
        kept = f"The whole result ({lines_total:,} lines, {len(content):,} characters) is kept"
    elif whole.kept_bytes >= whole.produced_bytes:
        lines_total = whole.kept_lines
        kept = f"The whole result ({lines_total:,} lines, {whole.produced_bytes:,} bytes) is kept"
    else:
        lines_total = whole.kept_lines
        kept = (f"The {tool} output was {whole.produced_bytes:,} bytes; its first and last {whole.kept_bytes // 2:,} bytes "
                f"({lines_total:,} lines, the middle marked as omitted) are kept")
    hidden = max(lines_total - head_lines - tail_lines, 0)
    how = (f"read_file(path={blob_path!r}, offset={head_lines + 1}, limit=...) reads what is not shown in parts, "
           f"and grep(pattern=..., path={blob_path!r}) searches it")
    if tool == "read_file" and isinstance(input.get("path"), str):
        how = (f"read the file in parts with read_file(path={input['path']!r}, offset=N, limit=M), "
               f"or search it with grep(pattern=..., path={input['path']!r}); this whole result is also at {blob_path}")
    note = (f"\n[... {hidden:,} lines of this {tool} result left out: it is over the {budget_tokens:,}-token budget of one "
            f"tool result. Shown: lines 1-{head_lines:,} and the last {tail_lines:,} of {lines_total:,}. {kept}: {how}.]\n")
    return head + note + tail


def kept_note(tool: str, whole: Whole, blob_path: str) -> str:
    """The line added to a result the tool capped itself (within the budget): how big the
    whole was and where it is kept, so the model can read what the cap left out."""
    kept = (f"all {whole.kept_lines:,} lines of it are kept" if whole.kept_bytes >= whole.produced_bytes else
            f"its first and last {whole.kept_bytes // 2:,} bytes ({whole.kept_lines:,} lines) are kept")
    return (f"\n[the whole {tool} output was {whole.produced_bytes:,} bytes; {kept}: read_file(path={blob_path!r}, "
            f"offset=N, limit=M) reads it in parts, and grep(pattern=..., path={blob_path!r}) searches it]\n")


def fit_attachment(content: str, budget_tokens: int, *, path: str) -> str:
    """An attached file's text (an ``@path`` mention, ``agents/attachments.py``) cut to its
    head and tail around a note, if it is over ``budget_tokens``, as ``fit_to_budget`` cuts a
    tool result; the note says how to read the rest of the file itself.

    Returns:
        ``content`` itself when within the budget (0: none).
    """
    if not over_budget(content, budget_tokens):
        return content
    head, left_out, tail, (lines_total, head_lines, tail_lines) = _head_and_tail(content, budget_tokens)
    note = (f"\n[... {len(left_out):,} characters ({left_out.count(chr(10)):,} lines) of {path} left out: it is over "
            f"the {budget_tokens:,}-token budget of one attachment. Shown: lines 1-{head_lines} and the last "
            f"{tail_lines} of {lines_total:,}. Read the rest with read_file(path={path!r}, offset={head_lines + 1}, "
            f"limit=...), or search it with grep(pattern=..., path={path!r}).]\n")
    return head + note + tail


def _head_and_tail(content: str, budget_tokens: int) -> tuple[str, str, str, tuple[int, int, int]]:
    """``content``'s head, the part left out, its tail (each about half the budget, cut at
    line ends), and the line counts: of the whole, of the head, of the tail."""
    half = int(budget_tokens * _BUDGET_CHARS_PER_TOKEN) // 2
    head = _cut_at_line(content[:half], keep="head")
    tail = _cut_at_line(content[len(content) - half:], keep="tail")
    left_out = content[len(head): len(content) - len(tail)]
    lines_total = content.count("\n") + (not content.endswith("\n"))
    head_lines = head.count("\n")
    tail_lines = tail.count("\n") + (not tail.endswith("\n") and bool(tail))
    return head, left_out, tail, (lines_total, head_lines, tail_lines)


def _cut_at_line(text: str, *, keep: str) -> str:
    """``text`` trimmed to whole lines when a line end is within its last (head) or first
    (tail) quarter; otherwise as it is."""
    quarter = len(text) // 4
    if keep == "head":
        at = text.rfind("\n", len(text) - quarter)
        return text[: at + 1] if at >= 0 else text
    at = text.find("\n", 0, quarter)
    return text[at + 1:] if at >= 0 else text


def clearable_calls(messages: list[Message], keep: int, cleared: set[str]) -> list[str]:
    """The call ids whose results clearing would replace: every answered call but the
    ``keep`` most recent, oldest first, leaving out those cleared before.

    Results of calls not answered yet (the turn in flight) are never among them.
    """
    results = [b.call_id for m in messages if m.role == "user" for b in m.content if isinstance(b, ToolResultBlock)]
    older = results[: max(len(results) - keep, 0)]
    return [c for c in older if c not in cleared]


def clear_stub(call: ToolCallBlock | None, result: ToolResultBlock, where: str) -> str:
    """The one line a cleared result becomes: the call, its size, and where the whole is."""
    name = call.name if call is not None else "tool"
    args = ""
    if call is not None:
        shown = msgspec.json.encode(call.input).decode()
        args = shown if len(shown) <= 160 else shown[:157] + "..."
    tokens = math.ceil(len(result.content) / 4)
    return (f"[result of {name} {args} (call {result.call_id}, ~{tokens:,} tokens) cleared to save context; "
            f"the whole result: read_file(path={where!r}), or run the call again]")


def clear_results(messages: list[Message], where: dict[str, str]) -> list[Message]:
    """The history with the results of the calls in ``where`` replaced by their stubs.

    Args:
        messages: the history.
        where: call id -> where its whole result is kept (a blob's path).

    Returns:
        A new list; messages with nothing cleared are the same objects.
    """
    calls = {b.id: b for m in messages if m.role == "assistant" for b in m.content if isinstance(b, ToolCallBlock)}
    out: list[Message] = []
    for message in messages:
        if message.role != "user" or not any(isinstance(b, ToolResultBlock) and b.call_id in where for b in message.content):
            out.append(message)
            continue
        blocks = [ToolResultBlock(b.call_id, clear_stub(calls.get(b.call_id), b, where[b.call_id]), b.is_error)
                  if isinstance(b, ToolResultBlock) and b.call_id in where
                  else b for b in message.content]
        out.append(Message("user", blocks))
    return out
