"""Showing a session's events to a person: streamed text, tool calls and results compactly."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

_CONTROL = {c: None for c in range(32) if c not in (9, 10)} | {127: None} | {c: None for c in range(0x80, 0xA0)}


def safe(text: str) -> str:
    """``text`` with terminal control characters removed (ESC, BEL, CSI...), keeping tab and
    newline: model text and repository text are untrusted and must not drive the terminal."""
    return text.translate(_CONTROL)


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(safe(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def call_summary(tool: str, input: dict[str, Any]) -> str:
    """``tool(main argument)``, e.g. ``bash(pytest -q)`` or ``edit_file(src/a.py)``."""
    for key in ("command", "path", "pattern"):
        if key in input:
            return f"{tool}({_short(input[key])})"
    return f"{tool}({_short(input)})"


class Renderer:
    """Turns event lines and deltas into terminal output (text mode)."""

    def __init__(self, out: TextIO = sys.stdout, color: bool | None = None) -> None:
        self.out = out
        self.color = out.isatty() if color is None else color
        self._streamed = False
        self._at_line_start = True

    def _c(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def _line(self, text: str) -> None:
        if not self._at_line_start:
            self.out.write("\n")
        self.out.write(text + "\n")
        self._at_line_start = True
        self.out.flush()

    def delta(self, text: str, kind: str = "text") -> None:
        if kind != "text" or not text:
            return
        text = safe(text)
        self.out.write(text)
        self._streamed = True
        self._at_line_start = text.endswith("\n")
        self.out.flush()

    def event(self, ev: dict[str, Any]) -> None:
        kind = ev.get("type")
        agent = ev.get("agent", "main")
        prefix = "" if agent == "main" else self._c("35", f"[{agent}] ")
        if kind == "model_response":
            if not self._streamed:
                text = "".join(b.get("text", "") for b in ev.get("content", []) if b.get("type") == "text")
                if text.strip():
                    self._line(prefix + safe(text.strip()))
            elif not self._at_line_start:
                self._line("")
            self._streamed = False
        elif kind == "tool_started":
            self._line(prefix + self._c("36", "● ") + call_summary(ev.get("tool", "?"), ev.get("input") or {}))
        elif kind == "tool_finished":
            self._line(prefix + "  " + self._c("2", "⎿ " + self.result_summary(ev)))
        elif kind == "tool_interrupted":
            self._line(prefix + "  " + self._c("33", f"⎿ interrupted: {ev.get('reason', '')}"))
        elif kind == "file_edited":
            diff = ev.get("diff", "")
            added = sum(1 for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
            removed = sum(1 for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---"))
            self._line(prefix + "  " + self._c("32", f"✎ {ev.get('path')} (+{added} -{removed})"))
        elif kind == "agent_message":
            body = safe(str(ev.get("body", ""))).strip().splitlines()
            self._line(self._c("35", f"[{ev.get('from')} → {ev.get('to')}, {ev.get('priority', 'normal')}] ") + (body[0] if body else ""))
            for extra in body[1:6]:
                self._line("    " + extra)
        elif kind == "agent_failed":
            self._line(self._c("31", f"[{agent}] failed: {ev.get('error')}; restarting in {ev.get('retry_in_s')} s"))
        elif kind == "approval_resolved":
            self._line(prefix + self._c("33", f"  approval {ev.get('decision')} by {ev.get('by')}"))
        elif kind == "turn_ended" and ev.get("exit_reason") not in ("finished", None):
            self._line(self._c("33", f"[{ev.get('exit_reason')}] {ev.get('message', '')}".rstrip()))

    @staticmethod
    def result_summary(ev: dict[str, Any]) -> str:
        content = ev.get("content", "")
        lines = content.splitlines()
        if ev.get("timed_out"):
            return f"timed out · {len(lines)} lines of output"
        if ev.get("is_error"):
            return "error: " + _short(lines[0] if lines else content, 100)
        status = ev.get("exit_status")
        head = f"exit {status} · " if status is not None else ""
        return f"{head}{len(lines)} line{'s' if len(lines) != 1 else ''}"
