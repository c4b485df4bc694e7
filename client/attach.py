"""``musec attach ID``: join a live session from another terminal. It prints the events
until the session ends and exits with the session's exit code; in a terminal it follows
the session as the client that started it does (``interactive.attached_prompt``): every
turn live whoever started it, its approvals answered here too (the first answer from any
attached client wins), the prompt when the agent is idle."""

from __future__ import annotations

import argparse
import sys
from typing import assert_never

from musec.daemon import protocol as p

from .connection import connect
from .exitcodes import Exit, for_error, for_reason
from .output import err, out_json_line
from .render import Renderer
from .stream import SessionStream


def cmd_attach(args: argparse.Namespace) -> Exit:
    """Follow a session until it ends; a session that is not live shows its log."""
    conn = connect()
    text = args.output_format == "text"
    answering = text and sys.stdin.isatty()
    req = p.Attach(id=conn.next_id(), session_id=args.session_id, since_seq=-1, tell_idle=answering)
    conn.send(req)
    banner = ("" if not text else "(attached; you can answer approvals here, the first answer from any terminal wins, "
                                  "and send messages when the agent is idle; leaving leaves the session running)"
              if answering else "(attached; stdin is not a terminal, so approvals are answered elsewhere)")
    if answering:  # a terminal: the stream live, its approvals asked, the prompt when the agent is idle
        from .interactive import attached_prompt

        return attached_prompt(conn, args, req.id, banner, _say_end)
    renderer = Renderer(sys.stdout, rich=True)
    renderer.messages = True  # the transcript shows what the person asked
    stream = SessionStream(conn, req.id)
    while True:
        msg = conn.recv()
        match msg:
            case p.Error():
                err(f"musec: {msg.message}")
                if msg.id in (req.id, 0):
                    return for_error(msg.code)
            case p.Event():
                ev = stream.event(msg)
                if ev is None:
                    continue
                if banner:  # said once the session is known to exist
                    err(banner)
                    banner = ""
                if not text:
                    out_json_line(msg.line)
                    continue
                renderer.event(ev, backlog=msg.backlog)
            case p.Delta():
                if text:
                    renderer.delta(msg.text, msg.kind, msg.agent)
            case p.Resync():
                if text:
                    renderer.resynced()
                stream.reattach(msg)
            case p.SessionEnded():
                end = stream.ended(msg)
                if text:
                    _say_end(end)
                return for_reason(end.exit_reason)
            case (p.Busy() | p.Idle() | p.SessionStarted() | p.Hello() | p.EventPart() | p.Ok() | p.Sessions() | p.LogLines() | p.VerifyResult()
                  | p.ReplayResult() | p.Models() | p.CostReport() | p.Agents() | p.Workers() | p.Applied()
                  | p.Collected() | p.StatusReply() | p.WorkspaceReport() | p.GoalReply() | p.PlanReport()):
                pass  # Ok answers an approval sent here; the rest answer nothing this loop asks (pieces come joined)
            case _:
                assert_never(msg)


def _say_end(end: p.SessionEnded) -> None:
    """How the followed session ended (``not_live``: it had ended before attach)."""
    err(f"musec: session {end.session_id} {'was not live' if end.exit_reason == 'not_live' else 'ended'}: "
        f"{end.exit_reason}" + (f" ({end.message})" if end.message else ""))
