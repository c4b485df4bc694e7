"""``musec run``: one task (or the next message of a session) headlessly, followed until
the session ends; the exit code says how it ended (DESIGN §3)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, assert_never

from musec.daemon import protocol as p

from .connection import Connection, connect
from .errors import DaemonLost, UsageError
from .exitcodes import Condition, Exit, for_condition, for_error, for_reason
from .output import err, out_json, out_json_line
from .render import Renderer
from .requests import check_budgets, check_sandbox, resume_request, start_request
from .stream import SessionStream

OutputFormat = str  # "text" | "json" | "stream-json"


def read_task(args: argparse.Namespace) -> str:
    """The task: the argument, or stdin for ``-``; bytes that are not UTF-8 (a bad locale,
    a binary paste) become U+FFFD, not a crash."""
    task = args.task if args.task != "-" else sys.stdin.buffer.read().decode("utf-8", "replace")
    return task.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


# Options a resumed session cannot take: each is fixed when the session starts. (name,
# whether ``args`` holds a value other than its default)
_STARTING_ONLY: tuple[tuple[str, Callable[[argparse.Namespace], bool]], ...] = (
    ("--sandbox", lambda a: a.sandbox != "auto"),
    ("--agents", lambda a: a.agents is not None),
    ("--agents-model", lambda a: bool(a.agents_model)),
    ("--agents-budget-usd", lambda a: bool(a.agents_budget_usd)),
    ("--no-blackboard", lambda a: not a.blackboard),
    ("--trust", lambda a: a.trust),
    ("--grill", lambda a: a.grill),
)


def check_options(args: argparse.Namespace) -> None:
    """Refuse options that would be silently ignored in this combination (one line each).

    Raises:
        UsageError: e.g. ``--approve-plan`` without a plan, ``--sandbox`` on a resume.
    """
    resuming = bool(args.resume or args.continue_)
    check_budgets(args)
    check_sandbox(args.sandbox)
    if args.resume and args.continue_:
        raise UsageError("give either --resume ID or --continue, not both")
    if resuming and (args.goal is not None or args.check is not None):
        raise UsageError('a goal is set when a run starts; in a resumed session send "/goal CONDITION --check CMD" as the message')
    if resuming:
        for name, given in _STARTING_ONLY:
            if given(args):
                raise UsageError(f"{name} is set when a session starts; a resumed session keeps its own "
                                 f"(start a new one with musec run {name} ...)")
        if args.resume and args.workspace:
            raise UsageError("--workspace picks the latest session of a workspace for --continue; "
                             "--resume ID names the session itself")
    elif args.approve_plan and not (args.plan or args.grill or args.approval == "plan"):
        raise UsageError('--approve-plan approves a plan: use it with --plan (musec run --plan --approve-plan "TASK") '
                         "or to carry out a resumed session's plan (musec run --resume ID --approve-plan)")


def cmd_run(args: argparse.Namespace) -> int:
    """``musec run``: start a session, or go on with one (``--resume``/``--continue``)."""
    check_options(args)
    task = read_task(args)
    if args.resume or args.continue_:
        conn = connect()
        return follow_run(conn, resume_request(conn, args, task), args.output_format)
    if not task.strip() and args.goal is None:
        raise UsageError('give the task: musec run "fix the failing test" (or musec run - to read it from stdin)')
    conn = connect()
    return follow_run(conn, start_request(conn, args, task, interactive=False), args.output_format)


def follow_run(
    conn: Connection, req: p.StartSession | p.ResumeSession, output_format: OutputFormat,
    events: list[dict[str, Any]] | None = None, info: dict[str, str] | None = None, quiet: bool = False,
) -> int:
    """Send ``req`` and show the session until it ends; return the exit code.

    ``events``, when given, collects every logged event (decoded) as it arrives;
    ``info`` gets the ``session_id`` and ``log_path``. A cut-off (``Resync``) re-attaches
    from the last event read; the daemon going away exits 5 at once.
    """
    info = {} if info is None else info
    conn.send(req)
    renderer = Renderer(sys.stdout, turn_ends=False)  # the end is said once, by finish_run
    stream = SessionStream(conn, req.id)
    interrupted = False
    while True:
        try:
            msg = conn.recv()
        except KeyboardInterrupt:
            if interrupted:
                return stop_waiting(stream.session_id)
            interrupted = True
            if stream.session_id:  # else sent as soon as the session's id is known
                conn.send(p.Interrupt(id=conn.next_id(), session_id=stream.session_id))
            err(f"\n{INTERRUPTING}")
            continue
        except DaemonLost as exc:
            if exc.daemon_alive:
                again = f"; follow the session again with `musec attach {stream.session_id}`" if stream.session_id else ""
                err(f"musec: {exc}{again}")
            elif stream.session_id:
                err(f"musec: the daemon stopped during session {stream.session_id}; nothing acknowledged is lost. "
                    f"Go on with `musec run --resume {stream.session_id}`")
            else:
                err("musec: the daemon stopped; check `musec daemon status`")
            return for_condition(Condition.DAEMON_LOST)
        match msg:
            case p.Error():
                if msg.id in (req.id, 0):
                    err(f"musec: {msg.message}")
                    return for_error(msg.code)
                if output_format == "text":  # the answer to an Interrupt sent here
                    err(f"musec: {msg.message}")
            case p.SessionStarted():
                stream.session_id = msg.session_id
                info.update(session_id=msg.session_id, log_path=msg.log_path)
                if interrupted:  # Ctrl-C before the id was known: the daemon interrupts its first turn
                    conn.send(p.Interrupt(id=conn.next_id(), session_id=msg.session_id))
                if output_format == "text" and not quiet:
                    verb = "resumed" if msg.resumed else "session"
                    cut = f" ({len(msg.interrupted_calls)} interrupted call(s) answered as interrupted)" if msg.interrupted_calls else ""
                    err(f"{verb} {msg.session_id}{cut}")
            case p.Event():
                ev = stream.event(msg)
                if ev is None:
                    continue
                if events is not None:
                    events.append(ev)
                note = (ev.get("trust") or {}).get("note") if msg.seq == 0 and isinstance(ev.get("trust"), dict) else None
                if note:
                    err(f"musec: {note}")
                if output_format == "stream-json":
                    out_json_line(msg.line)
                elif output_format == "text":
                    renderer.event(ev)
            case p.Delta():
                if output_format == "text":
                    renderer.delta(msg.text, msg.kind, msg.agent)
            case p.Resync():
                if output_format == "text" and not quiet:
                    renderer.resynced()
                stream.reattach(msg)
            case p.SessionEnded():
                return finish_run(output_format, stream.ended(msg))
            case p.Idle():
                pass  # a headless session ends by itself when idle (end_when_idle)
            case (p.Hello() | p.EventPart() | p.Ok() | p.Sessions() | p.LogLines() | p.VerifyResult() | p.ReplayResult() | p.Models()
                  | p.CostReport() | p.Agents() | p.Workers() | p.Applied() | p.Collected() | p.StatusReply() | p.WorkspaceReport() | p.GoalReply() | p.PlanReport()):
                pass  # replies to requests this loop does not make
            case _:
                assert_never(msg)


INTERRUPTING = "musec: interrupting the turn; the session then ends (Ctrl-C again: stop waiting for it)"


def stop_waiting(session_id: str) -> Exit:
    """A second Ctrl-C: exit 130 at once. The interrupt asked for goes on in the daemon,
    which ends the session when its turn has stopped; the line says where to see it."""
    if session_id:
        err(f"musec: not waiting; the daemon ends session {session_id} once its turn has stopped "
            f"(`musec log {session_id}` shows it)")
    else:
        err("musec: not waiting; the session ends in the daemon as soon as it has started (`musec sessions` lists it)")
    return for_condition(Condition.INTERRUPTED)


def finish_run(output_format: OutputFormat, msg: p.SessionEnded) -> Exit:
    """Print the run's end (a JSON result, or a line on stderr) and return its exit code."""
    code = for_reason(msg.exit_reason)
    sys.stdout.flush()
    if output_format in ("json", "stream-json"):
        out_json({
            "type": "result", "session_id": msg.session_id, "exit_reason": msg.exit_reason, "exit_code": int(code),
            "result": msg.result, "message": msg.message, "turns": msg.turns, "usage": msg.usage,
            "cost_usd": msg.cost_usd, "log_path": msg.log_path,
        })
    else:
        if msg.message and msg.exit_reason != "finished":
            err(f"musec: {msg.message}")
        err(f"musec: {msg.exit_reason} after {msg.turns} turns; log: {msg.log_path}")
    return code
