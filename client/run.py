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
from .ctrlc import Terminated, stop_cause, stop_signals_raise
from .exitcodes import Condition, Exit, for_condition, for_error, for_reason, for_signal
from .output import counted, err, out_json, out_json_line
from .render import Renderer
from .requests import check_budgets, check_sandbox, resume_request, start_request
from .stream import SessionStream
from .words import interrupter_words

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
    elif args.grill and not (args.plan or args.approval == "plan"):  # README: musec run --plan "TASK" [--grill]
        raise UsageError('--grill questions a plan: add --plan (musec run --plan --grill "TASK")')
    elif args.plan and not args.approve_plan and args.goal is not None:
        raise UsageError("--plan only plans (the run ends with the plan), so a --goal would never be worked on; "
                         "add --approve-plan to carry the plan out, or plan first, then resume with the message \"/goal CONDITION\"")
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
    from the last event read; the daemon going away exits 5 at once. Ctrl-C, wherever it
    lands, interrupts the turn (the session then ends); a second one stops waiting.
    SIGTERM or SIGHUP interrupts the turn too, says so in one line and exits 143 or 129
    (``_Follower.stopped``): the run's turn never goes on without the client.
    """
    follower = _Follower(conn, req, output_format, events, {} if info is None else info, quiet)
    with stop_signals_raise():
        while True:
            try:
                code = follower.step()
            except KeyboardInterrupt:
                code = _ctrl_c(follower)
            except Terminated as stop:
                return follower.stopped(stop.signum)
            except Exception as exc:  # a write to a terminal that hung up before its SIGHUP came (J10)
                if (signum := stop_cause(exc)) is None:
                    raise
                return follower.stopped(signum)
            if code is not None:
                return code


def _ctrl_c(follower: _Follower) -> int | None:
    """``follower.ctrl_c()``, where a Ctrl-C landing while it runs is the next Ctrl-C (it
    escaped as a bare exit 130 with nothing said)."""
    while True:
        try:
            return follower.ctrl_c()
        except KeyboardInterrupt:
            continue


class _Follower:
    """``follow_run``'s state: one ``step`` per daemon message, ``ctrl_c`` per Ctrl-C."""

    def __init__(self, conn: Connection, req: p.StartSession | p.ResumeSession, output_format: OutputFormat,
                 events: list[dict[str, Any]] | None, info: dict[str, str], quiet: bool) -> None:
        self.conn, self.req, self.output_format, self.events, self.info, self.quiet = conn, req, output_format, events, info, quiet
        self.renderer = Renderer(sys.stdout, turn_ends=False)  # the end is said once, by finish_run
        self.renderer.start_warnings = True
        self.stream = SessionStream(conn, req.id)
        self.interrupted = False
        self.sent = False

    def ctrl_c(self) -> int | None:
        """The first Ctrl-C interrupts the turn (sent once the session's id is known); the
        second stops waiting (exit 130)."""
        if self.interrupted:
            return stop_waiting(self.stream.session_id)
        self.interrupted = True
        if self.stream.session_id:
            self.conn.send(p.Interrupt(id=self.conn.next_id(), session_id=self.stream.session_id))
        err(f"\n{INTERRUPTING}")
        return None

    def stopped(self, signum: int) -> int:
        """SIGTERM or SIGHUP: interrupt the turn (once the session's id is known: waited for
        a few seconds), say so in one line, and return 143 or 129. The session then ends, as
        after Ctrl-C; a signal before the request went out leaves nothing to stop."""
        import signal
        import time

        name = signal.Signals(signum).name
        deadline = time.monotonic() + 5
        try:
            if self.sent and not self.stream.session_id:
                self._until(lambda m: isinstance(m, p.SessionStarted | p.Error | p.SessionEnded), deadline)
            sid = self.stream.session_id
            if sid:
                stop = p.Interrupt(id=self.conn.next_id(), session_id=sid)
                self.conn.send(stop)
                self._until(lambda m: isinstance(m, p.Ok | p.Error) and m.id == stop.id, deadline)
                err(f"\nmusec: {name}: the turn of session {sid} was interrupted and the session ends "
                    f"(`musec log {sid}` shows it)")
            else:
                err(f"\nmusec: {name}: stopped before the session had started")
        except (DaemonLost, OSError):
            pass  # the daemon is gone (its turn with it), or so is the terminal (SIGHUP)
        return for_signal(signum)

    def _until(self, done: Callable[[p.DaemonMsg], bool], deadline: float) -> None:
        """Read (and note the session id from) the daemon's messages until ``done`` says so
        or ``deadline`` (``time.monotonic``) passes."""
        import time

        while (left := deadline - time.monotonic()) > 0:
            msg = self.conn.recv(left)
            if isinstance(msg, p.SessionStarted) and msg.id == self.req.id:
                self.stream.session_id = msg.session_id
            if done(msg):
                return

    def step(self) -> int | None:
        """Send the request (the first time), read one message and show it; the exit code
        once the session has ended (or the daemon refused or went away), else ``None``."""
        if not self.sent:
            self.sent = True
            self.conn.send(self.req)
        try:
            msg = self.conn.recv()
        except DaemonLost as exc:
            return self._lost(exc)
        return self._handle(msg)

    def _lost(self, exc: DaemonLost) -> int:
        sid = self.stream.session_id
        if exc.daemon_alive:
            again = f"; follow the session again with `musec attach {sid}`" if sid else ""
            err(f"musec: {exc}{again}")
        elif sid:
            err(f"musec: the daemon stopped during session {sid}; nothing acknowledged is lost. "
                f"Go on with `musec run --resume {sid}`")
        else:
            err("musec: the daemon stopped; check `musec daemon status`")
        return for_condition(Condition.DAEMON_LOST)

    def _handle(self, msg: p.DaemonMsg) -> int | None:
        text = self.output_format == "text"
        match msg:
            case p.Error():
                if msg.id in (self.req.id, 0):
                    err(f"musec: {msg.message}")
                    return for_error(msg.code)
                if text:  # the answer to an Interrupt sent here
                    err(f"musec: {msg.message}")
            case p.SessionStarted():
                self.stream.session_id = msg.session_id
                self.info.update(session_id=msg.session_id, log_path=msg.log_path)
                if self.interrupted:  # Ctrl-C before the id was known: the daemon interrupts its first turn
                    self.conn.send(p.Interrupt(id=self.conn.next_id(), session_id=msg.session_id))
                if text and not self.quiet:
                    verb = "resumed" if msg.resumed else "session"
                    cut = (f" ({counted(len(msg.interrupted_calls), 'interrupted call')} answered as interrupted)"
                           if msg.interrupted_calls else "")
                    err(f"{verb} {msg.session_id}{cut}")
            case p.Event():
                self._event(msg)
            case p.Delta():
                if text:
                    self.renderer.delta(msg.text, msg.kind, msg.agent)
            case p.Resync():
                if text and not self.quiet:
                    self.renderer.resynced()
                self.stream.reattach(msg)
            case p.SessionEnded():
                return finish_run(self.output_format, self.stream.ended(msg))
            case p.Busy() | p.Idle():
                pass  # a headless session ends by itself when idle (end_when_idle)
            case (p.Hello() | p.EventPart() | p.Ok() | p.Sessions() | p.LogLines() | p.VerifyResult() | p.ReplayResult() | p.Models()
                  | p.CostReport() | p.Agents() | p.Workers() | p.Applied() | p.Collected() | p.StatusReply() | p.WorkspaceReport() | p.GoalReply() | p.PlanReport()):
                pass  # replies to requests this loop does not make
            case _:
                assert_never(msg)
        return None

    def _event(self, msg: p.Event) -> None:
        ev = self.stream.event(msg)
        if ev is None:
            return
        if self.events is not None:
            self.events.append(ev)
        note = (ev.get("trust") or {}).get("note") if msg.seq == 0 and isinstance(ev.get("trust"), dict) else None
        if note:
            err(f"musec: {note}")
        if ev.get("type") == "turn_ended" and not self.interrupted and interrupter_words(ev) and not self.quiet:
            err(f"musec: the turn was interrupted{interrupter_words(ev)} (`musec attach`)")
        if self.output_format == "stream-json":
            out_json_line(msg.line)
        elif self.output_format == "text":
            self.renderer.event(ev)


INTERRUPTING = "musec: interrupting the turn; the session then ends (Ctrl-C again: stop waiting for it)"


def stop_waiting(session_id: str) -> Exit:
    """A second Ctrl-C: exit 130 at once. The interrupt asked for goes on in the daemon,
    which ends the session when its turn has stopped; the line says where to see it. (Before
    the session's id came back no interrupt could be sent: a session that did start runs on.)"""
    if session_id:
        err(f"musec: not waiting; the daemon ends session {session_id} once its turn has stopped "
            f"(`musec log {session_id}` shows it)")
    else:
        err("musec: stopped before the session had started; if it did, it runs on in the daemon "
            "(`musec sessions` lists it, `musec attach ID` follows it)")
    return for_condition(Condition.INTERRUPTED)


GOAL_RESUME_HINT = "/goal resume goes on"


def _headless_hint(message: str, session_id: str) -> str:
    """``message`` with the interactive ``/goal resume`` (a paused goal's hint) said as a
    headless run goes on: ``musec run --resume ID "/goal resume"`` (fresh-user s8 J12)."""
    return message.replace(GOAL_RESUME_HINT, f'`musec run --resume {session_id} "/goal resume"` goes on')


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
            err(f"musec: {_headless_hint(msg.message, msg.session_id)}")
        err(f"musec: {msg.exit_reason} after {counted(msg.turns, 'turn')}; log: {msg.log_path}")
    return code
