"""How a tool call is named on the screen: ``tool(main argument)``, and the names of the
calls a model made that never started (a refused call has no ``tool_started``)."""

from __future__ import annotations

import json
from typing import Any

from .output import safe


def short(value: Any, limit: int = 80) -> str:
    """``value`` (a text, else its JSON) on one line of at most ``limit`` characters, cleaned."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    head = " ".join(safe(text[: limit * 16]).split())  # a long text: its head is enough
    if len(head) <= limit and len(text) > limit * 16:
        head = " ".join(safe(text).split())  # mostly spaces or control characters
    return head if len(head) <= limit else head[: limit - 1] + "…"


def call_summary(tool: str, input: dict[str, Any]) -> str:
    """``tool(main argument)``, e.g. ``bash(pytest -q)`` or ``edit_file(src/a.py)``."""
    for key in ("command", "path", "pattern"):
        if key in input:
            return f"{safe(str(tool))}({short(input[key])})"
    return f"{safe(str(tool))}({short(input)})"


class CallHeads:
    """The header (``call_summary``) of each tool call a model made that has not started:
    a call that is refused (by a rule, the person, a hook, the approval mode, an unknown
    tool or input) is answered with ``tool_finished`` without ``tool_started``, so its
    header is shown from here, before its outcome, live, on replay and in ``musec log``.
    A call leaves when it starts or is answered, so it holds at most one turn's calls."""

    def __init__(self) -> None:
        self._heads: dict[str, str] = {}

    def fold(self, ev: dict[str, Any]) -> str:
        """Take one event into account; for the answer to a call that never started
        (``tool_finished``, ``tool_interrupted``), its header; else ""."""
        kind = ev.get("type")
        if kind == "model_response":
            for b in _blocks(ev):
                if b.get("type") == "tool_call" and isinstance(b.get("id"), str):
                    tool = b.get("name", "?")
                    self._heads[b["id"]] = call_summary(tool, b["input"] if isinstance(b.get("input"), dict) else {})
        elif kind == "tool_started":
            self._heads.pop(str(ev.get("call_id")), None)
        elif kind in ("tool_finished", "tool_interrupted"):
            return self._heads.pop(str(ev.get("call_id")), "")
        return ""


def _blocks(ev: dict[str, Any]) -> list[dict[str, Any]]:
    content = ev.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
