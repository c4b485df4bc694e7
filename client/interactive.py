"""The interactive client: a prompt, streamed text, tool calls compactly, approvals y/n.

Ctrl-C during a turn interrupts the turn; Ctrl-C or Ctrl-D at the prompt leaves.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from musec.daemon import protocol as p

from . import exitcodes
from .cli import credentials, start_request
from .connection import Connection, connect
from .errors import DaemonLost
from .render import Renderer, call_summary

BANNER = "musec {version} · {model} · approval {approval} · {workspace}\nType a task; /exit leaves. Ctrl-C interrupts a turn."


def _prompt_reader() -> Any:
    try:
        from prompt_toolkit import PromptSession
    except ImportError:  # pragma: no cover - prompt_toolkit is a dependency
        return lambda: input("› ")
    session: Any = PromptSession()
    return lambda: session.prompt("› ")


def ask_approval(ev: dict[str, Any]) -> str:
    """Ask the person about one call; return allow, deny or always."""
    summary = call_summary(ev.get("tool", "?"), ev.get("input") or {})
    while True:
        try:
            answer = input(f"Allow {summary}? [y]es / [n]o / [a]lways: ").strip().lower()
        except EOFError:
            return "deny"
        if answer in ("y", "yes"):
            return "allow"
        if answer in ("n", "no"):
            return "deny"
        if answer in ("a", "always"):
            return "always"


def cmd_interactive(args: argparse.Namespace) -> int:
    for name, default in (("model", None), ("workspace", None), ("approval", "ask"), ("max_turns", 50), ("sandbox", "auto")):
        if not hasattr(args, name):
            setattr(args, name, default)
    read = _prompt_reader()
    conn = connect()
    session_id = ""
    renderer = Renderer(sys.stdout)
    first = True
    while True:
        try:
            text = read()
        except (EOFError, KeyboardInterrupt):
            break
        if not text.strip():
            continue
        if text.strip() in ("/exit", "/quit"):
            break
        if first:
            req = start_request(conn, args, text, interactive=True)
            print(BANNER.format(version=p.__version__, model=req.model, approval=req.approval, workspace=req.workspace))
            conn.send(req)
            first = False
        else:
            conn.send(p.UserInput(id=conn.next_id(), session_id=session_id, text=text, credentials=credentials()))
        try:
            session_id = follow_turn(conn, session_id, renderer)
        except DaemonLost:
            print("musec: the daemon stopped; the session's log is kept (`musec sessions --all`)", file=sys.stderr)
            return exitcodes.UNREACHABLE
        if session_id == "":
            return exitcodes.GOAL_UNMET
    if session_id:
        try:
            conn.request(p.EndSession(id=conn.next_id(), session_id=session_id), timeout_s=10)
        except Exception:  # noqa: BLE001 - leaving anyway; the daemon ends idle sessions itself
            pass
    return exitcodes.OK


def follow_turn(conn: Connection, session_id: str, renderer: Renderer) -> str:
    """Show one turn until the agent is idle; return the session id ("" on failure)."""
    interrupted = False
    while True:
        try:
            msg = conn.recv()
        except KeyboardInterrupt:
            if session_id and not interrupted:
                interrupted = True
                conn.send(p.Interrupt(id=conn.next_id(), session_id=session_id))
                print("\n[interrupting…]", flush=True)
                continue
            raise
        match msg:
            case p.Error():
                print(f"musec: {msg.message}", file=sys.stderr)
                if not session_id:
                    return ""
            case p.SessionStarted():
                session_id = msg.session_id
            case p.Event():
                ev = json.loads(msg.line)
                renderer.event(ev)
                if ev.get("type") == "approval_requested":
                    decision = ask_approval(ev)
                    conn.send(p.ApprovalAnswer(id=conn.next_id(), session_id=session_id, call_id=ev["call_id"], decision=decision))
            case p.Delta():
                renderer.delta(msg.text, msg.kind)
            case p.Idle():
                return session_id
            case p.SessionEnded():
                print(f"session ended: {msg.exit_reason}")
                return ""
            case _:
                pass
