"""The interactive client: a prompt, streamed text, tool calls compactly, approvals y/n.

Ctrl-C during a turn interrupts the turn; Ctrl-C or Ctrl-D at the prompt leaves.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from collections.abc import Callable
from typing import Any, assert_never

from musec.daemon import protocol as p

from .approvals import ApprovalDesk, ask_trust
from .connection import Connection, connect
from .errors import DaemonLost, NothingToResume
from .exitcodes import OK, Condition, Exit, for_condition
from .output import err, out
from .render import Renderer
from .requests import credentials, resolve_workspace, start_request
from .stream import SessionStream
from .version import __version__
from .views import age

BANNER = "musec {version} · {model} · approval {approval} · {workspace}\nType a task; /exit leaves. Ctrl-C interrupts a turn."
_SESSION_DEFAULTS = (("model", None), ("workspace", None), ("approval", None), ("max_turns", None), ("sandbox", "auto"))


def _prompt_reader() -> Callable[[], str]:
    try:
        from prompt_toolkit import PromptSession
    except ImportError:  # pragma: no cover - prompt_toolkit is a dependency
        return lambda: input("› ")
    session: Any = PromptSession()
    return lambda: session.prompt("› ")


def cmd_interactive(args: argparse.Namespace) -> Exit:
    """``musec`` / ``musec chat``: a new session in the workspace."""
    for name, default in _SESSION_DEFAULTS:
        if not hasattr(args, name):
            setattr(args, name, default)
    return prompt_loop(connect(), args)


def _print_extensions(conn: Connection, workspace: str) -> set[str]:
    """Under the banner: the AGENTS.md files, skills, hooks and MCP servers active, and what
    waits for trust. Returns the ``/NAME`` the session answers (skills, custom commands)."""
    from .extensions import fetch_report, report_lines, slash_names

    try:
        report = fetch_report(conn, workspace)
    except Exception:  # noqa: BLE001 - the banner goes on without it; the session reports errors itself
        return set()
    for line in report_lines(report):
        out(f"  {line}")
    return slash_names(report)


def prompt_loop(conn: Connection, args: argparse.Namespace, follower: TurnFollower | None = None) -> Exit:
    """Read the person's messages and show each turn, until /exit, Ctrl-D or Ctrl-C.

    ``follower`` follows a session already open on ``conn`` (a resumed one); without it a
    new session starts from ``args``.
    """
    read = _prompt_reader()
    renderer = Renderer(sys.stdout)
    slash: set[str] = set()
    session_id = follower.stream.session_id if follower is not None else ""
    if follower is None:
        # The session starts now, before the first task: the banner, the trust prompt and
        # any config error come first, and a task is never typed into a failing start.
        req = start_request(conn, args, "", interactive=True)
        out(BANNER.format(version=__version__, model=req.model, approval=req.approval, workspace=req.workspace))
        slash = _print_extensions(conn, req.workspace)
        conn.send(req)
        follower = TurnFollower(conn, req.id, renderer, _trust_asker(conn, req))
        try:
            session_id = follower.follow()
        except DaemonLost:
            err("musec: the daemon stopped; check `musec daemon status`")
            return for_condition(Condition.DAEMON_LOST)
        if not session_id:
            return for_condition(Condition.USAGE)
    while True:
        try:
            text = read()
        except (EOFError, KeyboardInterrupt):
            break
        if not text.strip():
            continue
        if text.strip() in ("/exit", "/quit"):
            break
        if text.strip().startswith("/") and " " not in text.strip() and text.strip()[1:] not in slash:
            out("commands: /exit or /quit leave (Ctrl-D too); Ctrl-C interrupts a turn; anything else goes to the agent"
                if text.strip() == "/help" else f"unknown command {text.strip()}; /help lists the commands")
            continue
        conn.send(p.UserInput(id=conn.next_id(), session_id=session_id, text=text, credentials=credentials(),
                              client_msg_id=uuid.uuid4().hex))
        try:
            session_id = follower.follow()
        except DaemonLost:
            err("musec: the daemon stopped; the session's log is kept (`musec resume --last`)")
            return for_condition(Condition.DAEMON_LOST)
        if session_id == "":
            return Exit.GOAL_UNMET
    if session_id:
        try:
            conn.request(p.EndSession(id=conn.next_id(), session_id=session_id), timeout_s=10)
        except Exception:  # noqa: BLE001 - leaving anyway; the daemon ends idle sessions itself
            pass
    return OK


def pick_session(sessions: list[p.SessionInfo]) -> str | None:
    """An arrow-key picker over sessions, the most recently active first; None when cancelled."""
    from prompt_toolkit.shortcuts import choice

    from .output import safe

    options = [(s.id, safe(f"{s.title[:50] or '(untitled)':<50}  {s.status:<12} {age(s.updated_at):>4}  {s.workspace}"))
               for s in sessions]
    try:
        return choice(message="Resume which session?", options=options)
    except (KeyboardInterrupt, EOFError):
        return None


def cmd_resume(args: argparse.Namespace) -> Exit:
    """``musec resume [ID | --last]``: reopen a session interactively."""
    conn = connect()
    sid = args.session_id
    if not sid:
        workspace = resolve_workspace(args.workspace) if args.last or args.workspace else ""
        sessions = conn.request(p.ListSessions(id=conn.next_id(), workspace=workspace)).sessions
        sessions = [s for s in sessions if s.status != "broken"]
        if not sessions:
            raise NothingToResume("no session to resume" + (f" in {workspace}" if workspace else "")
                                  + "; start one with `musec`")
        sid = sessions[0].id if args.last else pick_session(sessions)
        if sid is None:
            return OK
    req = p.ResumeSession(id=conn.next_id(), session_id=sid, credentials=credentials(), interactive=True,
                          end_when_idle=False, backlog=True, environment=dict(os.environ))
    conn.send(req)
    follower = TurnFollower(conn, req.id, Renderer(sys.stdout))
    session_id = follower.follow()
    if not session_id:
        return Exit.GOAL_UNMET
    for name, default in _SESSION_DEFAULTS:
        setattr(args, name, getattr(args, name, default))
    return prompt_loop(conn, args, follower)


def _trust_asker(conn: Connection, req: p.StartSession) -> Callable[[str], None]:
    """Answers a ``trust_required`` refusal: ask, then send the request again."""

    def on_trust(message: str) -> None:
        import msgspec

        conn.send(msgspec.structs.replace(req, id=req.id, trust=ask_trust(message), ask_trust=False))

    return on_trust


class TurnFollower:
    """Shows a session's turns: one ``follow`` call per turn, until the agent is idle.

    Args:
        conn: the connection.
        request_id: the id of the request whose stream this is.
        renderer: where events are shown.
        on_trust: called with the message of a ``trust_required`` refusal (a new session).
    """

    def __init__(self, conn: Connection, request_id: int, renderer: Renderer,
                 on_trust: Callable[[str], None] | None = None) -> None:
        self.conn = conn
        self.renderer = renderer
        self.on_trust = on_trust
        self.stream = SessionStream(conn, request_id)
        self.desk = ApprovalDesk(conn)

    def follow(self) -> str:
        """Show one turn until the agent is idle; return the session id ("" when the
        session could not start or has ended)."""
        interrupted = False
        stream = self.stream
        while True:
            if stream.turn_ended_while_away:
                stream.turn_ended_while_away = False
                return stream.session_id
            try:
                msg = self.conn.recv()
            except KeyboardInterrupt:
                if stream.session_id and not interrupted:
                    interrupted = True
                    self.conn.send(p.Interrupt(id=self.conn.next_id(), session_id=stream.session_id))
                    out("\n[interrupting…]")
                    continue
                raise
            match msg:
                case p.Error():
                    if msg.code == "trust_required" and self.on_trust is not None and not stream.session_id:
                        self.on_trust(msg.message)
                        continue
                    err(f"musec: {msg.message}")
                    if not stream.session_id:
                        return ""
                case p.SessionStarted():
                    stream.session_id = msg.session_id
                case p.Event():
                    ev = stream.event(msg)
                    if ev is not None:
                        self.renderer.event(ev)
                        self.desk.on_event(msg, ev)
                case p.Delta():
                    self.renderer.delta(msg.text, msg.kind)
                case p.Resync():
                    self.renderer.resynced()
                    stream.reattach(msg)
                case p.Idle():
                    return stream.session_id
                case p.SessionEnded():
                    out(f"session ended: {stream.ended(msg).exit_reason}")
                    return ""
                case (p.Hello() | p.Ok() | p.Sessions() | p.LogLines() | p.VerifyResult() | p.ReplayResult()
                      | p.Models() | p.CostReport() | p.Agents() | p.Workers() | p.Applied() | p.Collected()
                      | p.StatusReply() | p.WorkspaceReport()):
                    pass  # Ok answers a message or an approval sent here
                case _:
                    assert_never(msg)
