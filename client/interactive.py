"""The interactive client: a prompt, streamed text, tool calls compactly, approvals y/n.

Ctrl-C during a turn interrupts the turn; Ctrl-C or Ctrl-D at the prompt leaves.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from typing import Any

from musec.daemon import protocol as p

from . import exitcodes
from .cli import _age, credentials, start_request
from .connection import Connection, connect
from .errors import DaemonLost
from .render import Renderer, call_summary, safe

BANNER = "musec {version} · {model} · approval {approval} · {workspace}\nType a task; /exit leaves. Ctrl-C interrupts a turn."


def _prompt_reader() -> Any:
    try:
        from prompt_toolkit import PromptSession
    except ImportError:  # pragma: no cover - prompt_toolkit is a dependency
        return lambda: input("› ")
    session: Any = PromptSession()
    return lambda: session.prompt("› ")


def ask_approval(ev: dict[str, Any], conn: Connection | None = None) -> str | None:
    """Ask the person about one call; return allow, deny or always (Ctrl-C, Ctrl-D: deny).

    With ``conn``, the daemon is watched while the question waits: when another terminal
    answers first, the question is withdrawn and ``None`` returned.
    """
    summary = call_summary(ev.get("tool", "?"), ev.get("input") or {})
    while True:
        try:
            answer = _read_answer(f"Allow {summary}? [y]es / [n]o / [a]lways (then Enter): ", conn, ev.get("call_id"))
        except (EOFError, KeyboardInterrupt):
            print()
            return "deny"
        if answer is None:
            print("\n(answered in another terminal)")
            return None
        answer = answer.strip().lower()
        if answer in ("y", "yes"):
            return "allow"
        if answer in ("n", "no"):
            return "deny"
        if answer in ("a", "always"):
            return "always"


def _read_answer(question: str, conn: Connection | None, call_id: Any) -> str | None:
    """A line from the person, or ``None`` when the daemon says the call was resolved."""
    if conn is None or not sys.stdin.isatty():
        return input(question)
    import select

    sys.stdout.write(question)
    sys.stdout.flush()
    while True:
        ready, _, _ = select.select([sys.stdin, conn.sock], [], [])
        if sys.stdin in ready:
            line = sys.stdin.readline()
            if not line:
                raise EOFError
            return line
        for msg in conn.pending():
            if isinstance(msg, p.Event) and b'"approval_resolved"' in msg.line and json.loads(msg.line).get("call_id") == call_id:
                return None


def ask_trust(message: str) -> bool:
    """Show what trusting the workspace would apply (every hook, skill and config file) and
    ask; Ctrl-C or Ctrl-D: not trusted."""
    head, _, listing = safe(message).partition(" applies: ")
    print(f"{head} applies:" if listing else head)
    for item in listing.split("; "):
        print(f"  {item}")
    while True:
        try:
            answer = input("Trust it? Hooks will run as commands. [y]es / [n]o (then Enter): ").strip().lower()
        except (EOFError, KeyboardInterrupt):
            print()
            return False
        if answer in ("y", "yes", "n", "no"):
            return answer.startswith("y")


def cmd_interactive(args: argparse.Namespace) -> int:
    for name, default in (("model", None), ("workspace", None), ("approval", None), ("max_turns", None), ("sandbox", "auto")):
        if not hasattr(args, name):
            setattr(args, name, default)
    return prompt_loop(connect(), "", args)


def prompt_loop(conn: Connection, session_id: str, args: argparse.Namespace) -> int:
    """Read the person's messages and show each turn, until /exit, Ctrl-D or Ctrl-C."""
    read = _prompt_reader()
    renderer = Renderer(sys.stdout)
    if not session_id:
        # The session starts now, before the first task: the banner, the trust prompt and
        # any config error come first, and a task is never typed into a failing start.
        req = start_request(conn, args, "", interactive=True)
        print(BANNER.format(version=p.__version__, model=req.model, approval=req.approval, workspace=req.workspace),
              flush=True)
        conn.send(req)
        try:
            session_id = follow_turn(conn, "", renderer, _trust_asker(conn, req))
        except DaemonLost:
            print("musec: the daemon stopped; check `musec daemon status`", file=sys.stderr)
            return exitcodes.UNREACHABLE
        if not session_id:
            return exitcodes.USAGE
    while True:
        try:
            text = read()
        except (EOFError, KeyboardInterrupt):
            break
        if not text.strip():
            continue
        if text.strip() in ("/exit", "/quit"):
            break
        if text.strip().startswith("/") and " " not in text.strip():
            print("commands: /exit or /quit leave (Ctrl-D too); Ctrl-C interrupts a turn; anything else goes to the agent"
                  if text.strip() == "/help" else f"unknown command {text.strip()}; /help lists the commands")
            continue
        conn.send(p.UserInput(id=conn.next_id(), session_id=session_id, text=text, credentials=credentials(),
                              client_msg_id=uuid.uuid4().hex))
        try:
            session_id = follow_turn(conn, session_id, renderer)
        except DaemonLost:
            print("musec: the daemon stopped; the session's log is kept (`musec resume --last`)", file=sys.stderr)
            return exitcodes.UNREACHABLE
        if session_id == "":
            return exitcodes.GOAL_UNMET
    if session_id:
        try:
            conn.request(p.EndSession(id=conn.next_id(), session_id=session_id), timeout_s=10)
        except Exception:  # noqa: BLE001 - leaving anyway; the daemon ends idle sessions itself
            pass
    return exitcodes.OK


def pick_session(sessions: list[p.SessionInfo]) -> str | None:
    """An arrow-key picker over sessions, newest first; None when cancelled."""
    from prompt_toolkit.shortcuts import choice

    options = [(s.id, f"{s.title[:50] or '(untitled)':<50}  {s.status:<12} {_age(s.updated_at):>4}  {s.workspace}") for s in sessions]
    try:
        return choice(message="Resume which session?", options=options)
    except (KeyboardInterrupt, EOFError):
        return None


def cmd_resume(args: argparse.Namespace) -> int:
    from .cli import resolve_workspace

    conn = connect()
    sid = args.session_id
    if not sid:
        workspace = resolve_workspace(args.workspace) if args.last or args.workspace else ""
        sessions = conn.request(p.ListSessions(id=conn.next_id(), workspace=workspace)).sessions
        sessions = [s for s in sessions if s.status != "broken"]
        if not sessions:
            print("musec: no session to resume" + (f" in {workspace}" if workspace else ""), file=sys.stderr)
            return exitcodes.GOAL_UNMET
        sid = sessions[0].id if args.last else pick_session(sessions)
        if sid is None:
            return exitcodes.OK
    conn.send(p.ResumeSession(id=conn.next_id(), session_id=sid, credentials=credentials(), interactive=True,
                              end_when_idle=False, backlog=True))
    session_id = follow_turn(conn, "", Renderer(sys.stdout))
    if not session_id:
        return exitcodes.GOAL_UNMET
    for name in ("model", "workspace", "approval", "max_turns", "sandbox"):
        setattr(args, name, getattr(args, name, None))
    return prompt_loop(conn, session_id, args)


def _trust_asker(conn: Connection, req: p.StartSession) -> Any:
    """Answers a ``trust_required`` refusal: ask, then send the request again."""

    def on_trust(message: str) -> None:
        import msgspec

        conn.send(msgspec.structs.replace(req, id=conn.next_id(), trust=ask_trust(message), ask_trust=False))

    return on_trust


def follow_turn(conn: Connection, session_id: str, renderer: Renderer, on_trust: Any = None) -> str:
    """Show one turn until the agent is idle; return the session id ("" on failure).

    Approvals are asked for when they arrive live; those found in a backlog (a resumed or
    attached session) are asked for once the backlog ends, and only if still pending.
    """
    interrupted = False
    pending: dict[str, dict[str, Any]] = {}
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
            case p.Error() if msg.code == "trust_required" and on_trust is not None and not session_id:
                on_trust(msg.message)
            case p.Error():
                print(f"musec: {msg.message}", file=sys.stderr)
                if not session_id:
                    return ""
            case p.SessionStarted():
                session_id = msg.session_id
            case p.Event():
                ev = json.loads(msg.line)
                renderer.event(ev)
                session_id = session_id or msg.session_id
                if ev.get("type") == "approval_requested":
                    pending[ev["call_id"]] = ev
                elif ev.get("type") == "approval_resolved":
                    pending.pop(ev.get("call_id"), None)
                if not msg.backlog or msg.backlog_end:
                    for call_id, req in list(pending.items()):
                        del pending[call_id]
                        decision = ask_approval(req, conn)
                        if decision is not None:
                            conn.send(p.ApprovalAnswer(id=conn.next_id(), session_id=session_id, call_id=call_id,
                                                       decision=decision))
            case p.Delta():
                renderer.delta(msg.text, msg.kind)
            case p.Idle():
                return session_id
            case p.SessionEnded():
                print(f"session ended: {msg.exit_reason}")
                return ""
            case _:
                pass
