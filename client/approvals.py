"""The approval desk: asking the person about a tool call, in the interactive client and
in ``musec attach`` alike, and the workspace-trust question.

Approvals that arrive live are asked at once; those found in a backlog (a resumed or
attached session) are asked once the backlog ends, and only if still pending. While a
question waits, the daemon is watched: when another terminal answers first, the question
is withdrawn (the first answer wins, DESIGN §4).
"""

from __future__ import annotations

import json
import select
import sys
from typing import Any

from musec.daemon import protocol as p

from .connection import Connection
from .output import out
from .render import call_summary


class ApprovalDesk:
    """Pending approvals of one session, each asked once.

    Args:
        conn: where answers go (``ApprovalAnswer``) and the daemon is watched.
    """

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.pending: dict[str, dict[str, Any]] = {}

    def on_event(self, msg: p.Event, ev: dict[str, Any]) -> None:
        """Note an ``approval_requested`` or ``approval_resolved`` event; ask about what is
        pending when ``msg`` is live or ends a backlog."""
        if ev.get("type") == "approval_requested" and isinstance(ev.get("call_id"), str):
            self.pending[ev["call_id"]] = ev
        elif ev.get("type") == "approval_resolved":
            self.pending.pop(ev.get("call_id"), None)  # type: ignore[arg-type]
        if not msg.backlog or msg.backlog_end:
            self.ask_pending(msg.session_id)

    def ask_pending(self, session_id: str) -> None:
        """Ask about every pending approval, in order, and send the answers."""
        for call_id, asked in list(self.pending.items()):
            del self.pending[call_id]
            decision = ask_approval(asked, self.conn)
            if decision is not None:
                self.conn.send(p.ApprovalAnswer(id=self.conn.next_id(), session_id=session_id, call_id=call_id,
                                                decision=decision))


def ask_approval(ev: dict[str, Any], conn: Connection | None = None) -> p.Decision | None:
    """Ask the person about one call; return allow, deny or always (Ctrl-C, Ctrl-D: deny).

    With ``conn``, the daemon is watched while the question waits: when another terminal
    answers first, the question is withdrawn and ``None`` returned.
    """
    summary = call_summary(ev.get("tool", "?"), ev.get("input") or {})
    while True:
        try:
            answer = _read_answer(f"Allow {summary}? [y]es / [n]o / [a]lways (then Enter): ", conn, ev.get("call_id"))
        except (EOFError, KeyboardInterrupt):
            out()
            return "deny"
        if answer is None:
            out("\n(answered in another terminal)")
            return None
        answer = answer.strip().lower()
        if answer in ("y", "yes"):
            return "allow"
        if answer in ("n", "no"):
            return "deny"
        if answer in ("a", "always"):
            return "always"


def _resolved(msg: p.DaemonMsg, call_id: Any) -> bool:
    return (isinstance(msg, p.Event) and b'"approval_resolved"' in msg.line
            and json.loads(msg.line).get("call_id") == call_id)


def _read_answer(question: str, conn: Connection | None, call_id: Any) -> str | None:
    """A line from the person, or ``None`` when the daemon says the call was resolved."""
    if conn is None or not sys.stdin.isatty():
        return input(question)
    out(question, end="")
    while True:
        ready, _, _ = select.select([sys.stdin, conn.sock], [], [])
        if sys.stdin in ready:
            line = sys.stdin.readline()
            if not line:
                raise EOFError
            return line
        if any(_resolved(msg, call_id) for msg in conn.pending()):
            return None


def ask_trust(message: str) -> bool:
    """Show what trusting the workspace would apply (every hook, skill and config file) and
    ask; Ctrl-C or Ctrl-D: not trusted."""
    head, _, listing = message.partition(" applies: ")
    out(f"{head} applies:" if listing else head)
    for item in listing.split("; "):
        out(f"  {item}")
    while True:
        try:
            answer = input("Trust it? Hooks will run as commands. [y]es / [n]o (then Enter): ").strip().lower()
        except (EOFError, KeyboardInterrupt):
            out()
            return False
        if answer in ("y", "yes", "n", "no"):
            return answer.startswith("y")
