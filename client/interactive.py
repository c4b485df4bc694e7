"""The interactive client: a prompt (prompt_toolkit: history, completion of slash commands
and ``@path`` mentions, multi-line input, a status line), the session's turns (rendered by
``render.Renderer``), approvals, and slash commands (``slash``).

Ctrl-C or Esc during a turn interrupts the turn; Ctrl-C or Esc at an approval interrupts the
turn too; Ctrl-C or Ctrl-D at the prompt leaves. prompt_toolkit and rich load only here.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Callable

from musec.daemon import protocol as p

from .approvals import ask_trust, late_answer
from .connection import Connection, connect
from .ctrlc import CTRL_C, Terminated, stop_cause, stop_signals_raise
from .errors import DaemonLost, NothingToResume, UsageError
from .exitcodes import OK, Condition, Exit, for_condition, for_error, for_reason, for_signal
from .interactive_follow import TurnFollower
from .interactive_input import Woken
from .output import err, out
from .picker import pick_session
from .render import Renderer
from .requests import credentials, resolve_workspace, secret_env, secret_values, start_request, wire_environment
from .slash import Context, run_command
from .status import SessionStatus
from .version import __version__

BANNER = ("musec {version} · {model} · approval {approval} · {workspace}\n"
          "Type a task; /help lists the commands, /exit leaves. Ctrl-C or Esc interrupts a turn.")
_SESSION_DEFAULTS = (("model", None), ("workspace", None), ("approval", None), ("max_turns", None), ("sandbox", "auto"))


def lost(exc: DaemonLost, session_id: str = "") -> None:
    """Say that the connection ended: the daemon stopped, or (still running) it closed
    this connection only; never that a live daemon stopped."""
    if exc.daemon_alive:
        err(f"musec: {exc}" + (f"; the session goes on: `musec attach {session_id}` follows it" if session_id else ""))
    elif session_id:
        err(f"musec: the daemon stopped; the session's log is kept (`musec resume {session_id}`)")
    else:
        err("musec: the daemon stopped; check `musec daemon status`")


def _prompt_reader(status: SessionStatus, slash: set[str], workspace: str, wake_fd: int) -> Callable[[str], str]:
    """A prompt: history across sessions, completion, Alt-Enter for a new line, the status
    line; it gives way (``Woken``) when the daemon sends something (``wake_fd``)."""
    if not sys.stdin.isatty():
        from .interactive_input import line_reader

        return line_reader(wake_fd)
    from .prompt import make_prompt

    return make_prompt(status, slash, workspace, wake_fd)


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


def prompt_loop(conn: Connection, args: argparse.Namespace, follower: TurnFollower | None = None,
                *, end_on_leave: bool = True) -> Exit:
    """``_prompt_loop``; SIGTERM or SIGHUP (the terminal closed) ends it with 143 or 129,
    interrupting this terminal's running turn unless another terminal follows the session
    (``TurnFollower.stopped``, fresh-user G16)."""
    held: list[TurnFollower] = [follower] if follower is not None else []
    with stop_signals_raise():
        try:
            return _prompt_loop(conn, args, held, end_on_leave=end_on_leave)
        except Terminated as stop:
            return held[-1].stopped(stop.signum) if held else for_signal(stop.signum)
        except Exception as exc:  # a write to the terminal that hung up before its SIGHUP came (J10)
            if (signum := stop_cause(exc)) is None:
                raise
            return held[-1].stopped(signum) if held else for_signal(signum)


def _prompt_loop(conn: Connection, args: argparse.Namespace, held: list[TurnFollower], *, end_on_leave: bool) -> Exit:
    """Read the person's messages and show the session, until /exit, Ctrl-D or Ctrl-C, or
    until the session ends (then with its exit code).

    The session's stream is read all the time (``TurnFollower``): a turn started anywhere
    (here, in another terminal, by a goal) is shown live, with the spinner instead of the
    prompt until the agent is idle. ``follower`` follows a session already open on
    ``conn`` (a resumed or attached one); without it a new session starts from ``args``.
    ``end_on_leave``: leaving ends the session (not so for ``musec attach``, which leaves
    it to its other clients).
    """
    follower = held[0] if held else None
    renderer = follower.renderer if follower is not None else Renderer(sys.stdout, rich=True)
    renderer.messages = True
    status = follower.status if follower is not None else SessionStatus()
    slash: set[str] = set()
    session_id = follower.stream.session_id if follower is not None else ""
    workspace = resolve_workspace(getattr(args, "workspace", None))
    if follower is None:
        started = _start(conn, args, renderer, status)
        if not isinstance(started, tuple):
            return started
        follower, slash = started
        held.append(follower)
        session_id = follower.session_id
    models: list[p.ModelInfo] | None = None
    read = _prompt_reader(status, slash, workspace, conn.sock.fileno())
    ahead: list[str] = []  # lines typed (and queued) while the agent worked: taken as if typed now
    # what was typed when the prompt gave way to the session's stream; first, what was typed
    # (and queued) while the session started or resumed (G18: it was shown queued, then dropped)
    typed = _typed_ahead(follower, ahead, "")
    with CTRL_C.while_busy(lambda: follower.busy):  # a Ctrl-C while the agent works interrupts it, wherever it lands
        while True:
            try:
                follower.drain()  # what came while the prompt (or a slash command) waited
                if follower.busy and follower.ended is None:
                    follower.follow()
                    typed = _typed_ahead(follower, ahead, typed)
                    continue  # what came with the turn's end (the session's end) is drained first
            except DaemonLost as exc:
                lost(exc, session_id)
                return for_condition(Condition.DAEMON_LOST)
            if follower.ended is not None:
                return follower.exit_code
            if follower.error_code and not follower.session_id:  # an attach the daemon refused
                return for_error(follower.error_code)
            session_id = follower.session_id or session_id
            if models is None and status.model:
                models = _catalog(conn, status)
            if conn.has_ready():
                continue  # read with the last reply, or while the catalog was asked for: shown first
            try:
                queued = bool(ahead)
                if ahead:
                    text = ahead.pop(0)
                else:
                    text, typed = read(typed), ""
            except Woken as woken:
                typed = woken.text
                continue
            except (EOFError, KeyboardInterrupt):  # Ctrl-D, Ctrl-C: a session another terminal follows stays open
                return _end(conn, session_id, unless_followed=True) if end_on_leave else OK
            ctx = Context(conn, session_id, status, workspace, renderer.last_result, {"models": models or []}, slash)
            done = _take(conn, args, text, queued, ctx, follower)
            if done == "leave":
                break
            if done != "stay":
                return done
    return _end(conn, session_id) if end_on_leave else OK


def _take(conn: Connection, args: argparse.Namespace, text: str, queued: bool, ctx: Context,
          follower: TurnFollower) -> Exit | str:
    """Act on a line the person typed (``queued``: typed while the agent worked): a
    message is sent, a slash command run; ``"stay"`` to read the next line, ``"leave"``
    to leave, else the exit code."""
    if not text.strip():
        return "stay"
    if note := late_answer(text, queued):  # a y typed as another terminal answered (J2)
        out(f"  {note}")
        return "stay"
    if sys.stdin.isatty():
        follower.renderer.person(text)  # the prompt is erased when done: the message stays above
    if text.strip().startswith("/"):
        done = _slash(conn, args, text.strip(), ctx, follower)
        if done != "send":
            return done
    try:
        _send(conn, follower, text)
    except DaemonLost as exc:
        lost(exc, ctx.session_id)
        return for_condition(Condition.DAEMON_LOST)
    return "stay"


def _start(conn: Connection, args: argparse.Namespace, renderer: Renderer,
           status: SessionStatus) -> tuple[TurnFollower, set[str]] | Exit:
    """Start the session now, before the first task: the banner, the trust prompt and any
    config error come first, and a task is never typed into a failing start. Returns its
    follower and the ``/NAME`` it answers, or the exit code when it did not start."""
    req = _start_request(conn, args)
    out(BANNER.format(version=__version__, model=req.model, approval=req.approval, workspace=req.workspace))
    slash = _print_extensions(conn, req.workspace)
    status.model, status.approval = req.model, req.approval
    conn.send(req)
    follower = TurnFollower(conn, req.id, renderer, _trust_asker(conn, req), status=status)
    if req.kernel_spec:  # where to see the campaign's leaderboard, once its session has an id
        follower.on_started = lambda sid: out(f"(`musec kernels {sid}` shows the campaign's leaderboard)")
    try:
        session_id = follower.follow()
    except DaemonLost as exc:
        lost(exc)
        return for_condition(Condition.DAEMON_LOST)
    if not session_id:
        return for_error(follower.error_code) if follower.error_code else for_condition(Condition.USAGE)
    if not slash:  # the workspace's own commands and skills apply once trusted (--trust, or the question just now)
        slash |= _slash_names(conn, req.workspace)
    return follower, slash


def _slash_names(conn: Connection, workspace: str) -> set[str]:
    """The ``/NAME`` a started session answers (its trust decided); says which of them a
    built-in shadows (the banner listed them as waiting for trust, so never said it)."""
    from .extensions import fetch_report, shadowed_lines, slash_names

    try:
        report = fetch_report(conn, workspace)
    except Exception:  # noqa: BLE001 - /help and completion go on without them
        return set()
    for line in shadowed_lines(report):
        out(f"  {line}")
    return slash_names(report)


def _typed_ahead(follower: TurnFollower, ahead: list[str], typed: str) -> str:
    """After a turn: the lines queued while it ran go to ``ahead`` (taken as if typed
    now), and the line being typed is returned for the prompt; after an interrupt all of
    it is given back to the prompt instead, not sent."""
    queued, line = follower.keys.ahead.take()
    if follower.interrupted:
        return "\n".join([*queued, line]) if queued else line or typed
    ahead.extend(queued)
    return line or typed


def _slash(conn: Connection, args: argparse.Namespace, line: str, ctx: Context, follower: TurnFollower) -> Exit | str:
    """A slash command at the prompt: ``leave``, ``stay`` (ask again), ``send`` (the line
    goes to the session as a message), or the exit code when the client goes on elsewhere
    (``/clear``, ``/optimize``, ``/resume``) or lost the daemon."""
    session_id = ctx.session_id
    try:
        outcome = run_command(line, ctx)
        if outcome.action == "compact":
            follower.compact(outcome.arg)  # shown as a turn: the spinner, then its outcome
            return "stay"
    except DaemonLost as exc:
        lost(exc, session_id)
        return for_condition(Condition.DAEMON_LOST)
    except Exception as exc:  # noqa: BLE001 - a failed view is one line, the session goes on
        err(f"musec: {line.split()[0]} failed: {exc}")
        return "stay"
    if outcome.action == "exit":
        return "leave"
    if outcome.action in ("clear", "optimize"):
        return _start_in_place(conn, args, ctx.status, session_id, outcome.arg if outcome.action == "optimize" else "")
    if outcome.action == "resume":
        target = _choose(conn, outcome.arg, session_id)
        if target is None:
            return "stay"  # cancelled, or nothing to switch to: this session goes on
        _end(conn, session_id)
        return _resume_on(conn, _resume_args(args, target), back_to=session_id)
    return "stay" if outcome.action == "stay" else "send"


def _send(conn: Connection, follower: TurnFollower, text: str) -> None:
    """Send a person's message (the agent is busy with it until ``Idle``)."""
    msg_id = uuid.uuid4().hex
    sent = p.UserInput(id=conn.next_id(), session_id=follower.session_id, text=text,
                       credentials=credentials(), client_msg_id=msg_id)
    conn.send(sent)
    follower.sent(sent.id, msg_id)
    follower.renderer.start_wait()


def _start_request(conn: Connection, args: argparse.Namespace) -> p.StartSession:
    """The interactive session's ``StartSession``; with ``args.kernel_spec`` (``/optimize
    SPEC``) a kernel campaign that starts at once with the campaign's first message."""
    req = start_request(conn, args, "", interactive=True)
    spec = getattr(args, "kernel_spec", "")
    if spec:
        import msgspec

        from .kernels import campaign_task, spec_ref

        req = msgspec.structs.replace(req, task=campaign_task(spec), kernel_spec=spec_ref(spec), title=f"optimize {spec}")
    return req


def _start_in_place(conn: Connection, args: argparse.Namespace, status: SessionStatus, session_id: str,
                    kernel_spec: str) -> Exit:
    """``/clear`` and ``/optimize SPEC``: end this session and go on in a new one set up like
    it (a kernel campaign when ``kernel_spec`` is given)."""
    _end(conn, session_id)
    like = like_this_session(args, status)
    like.kernel_spec = kernel_spec
    out(f"(a new session: the kernel campaign {kernel_spec})" if kernel_spec else "(a new session)")
    return prompt_loop(conn, like)


def _end(conn: Connection, session_id: str, *, unless_followed: bool = False) -> Exit:
    """End the session and return its exit code, as ``musec attach`` gives it for the same
    session (an error the agent reported: 1), except that an interrupted last turn is 0:
    the person interrupted it and then chose to leave. ``unless_followed`` (Ctrl-D): a
    session another terminal follows is left open for it (``EndSession.unless_followed``);
    ``/exit`` ends it for every terminal."""
    if not session_id:
        return OK
    req = p.EndSession(id=conn.next_id(), session_id=session_id, unless_followed=unless_followed)
    deadline = time.monotonic() + 10
    try:
        conn.send(req)
        while (left := deadline - time.monotonic()) > 0:
            msg = conn.recv(left)
            if isinstance(msg, p.SessionEnded) and msg.session_id == session_id:
                return OK if msg.exit_reason == "interrupted" else for_reason(msg.exit_reason)
            if isinstance(msg, p.Error) and msg.id == req.id:
                if msg.code == "still_followed":  # fresh-user s8 K3: it ended under the other terminal
                    out(f"(left; session {session_id} stays open for the terminal attached to it)")
                break
    except Exception:  # noqa: BLE001 - leaving anyway; the daemon ends idle sessions itself
        pass
    return OK


def attached_prompt(conn: Connection, args: argparse.Namespace, request_id: int, banner: str,
                    on_end: Callable[[p.SessionEnded], None]) -> Exit:
    """``musec attach ID`` in a terminal: the session's backlog, then its stream live and
    the prompt when the agent is idle, as for the client that started it (issue 13 case 6:
    a session whose client went away is taken over). Its pending approvals are asked here.
    Leaving leaves the session running, for its other clients and the daemon's idle
    timeout; the session's end ends this client with the session's exit code."""
    renderer = Renderer(sys.stdout, rich=True)
    follower = TurnFollower(conn, request_id, renderer, on_end=on_end)
    follower.banner = banner
    follower.busy = True  # until the daemon says the agent waits (``Idle`` after the backlog)
    for name, default in _SESSION_DEFAULTS:
        setattr(args, name, getattr(args, name, default))
    return prompt_loop(conn, args, follower, end_on_leave=False)


def _catalog(conn: Connection, status: SessionStatus) -> list[p.ModelInfo]:
    """The model catalog (for the context window and /model); empty when it cannot be read."""
    try:
        models = conn.request(p.ListModels(id=conn.next_id()), timeout_s=10).models
    except Exception:  # noqa: BLE001 - the status line then shows tokens only
        return []
    status.learn_catalog(models)
    return models


def like_this_session(args: argparse.Namespace, status: SessionStatus) -> argparse.Namespace:
    """The options of a new session set up like the current one (``/clear``, and every other
    way the interactive client starts a session from inside one): its model, approval mode,
    sandbox, turn limit, background agents and workspace as the session's events say now
    (a resumed session's, a switched model's), else as ``args`` gave them."""
    like = argparse.Namespace(**vars(args))
    for name, value in status.session_options().items():
        setattr(like, name, value)
    return like


def _resume_args(args: argparse.Namespace, session_id: str) -> argparse.Namespace:
    resume_args = argparse.Namespace(**vars(args))
    resume_args.session_id, resume_args.last = session_id, False
    return resume_args


def _choose(conn: Connection, arg: str, current: str) -> str | None:
    """The session ``/resume [ID]`` switches to: ``ID`` when it names one other session,
    else one picked from the others; ``None`` (with a line saying why) to stay."""
    sessions = [s for s in conn.request(p.ListSessions(id=conn.next_id(), workspace="")).sessions
                if s.status != "broken" and s.id != current]
    if arg:
        from .output import safe

        found = [s.id for s in sessions if s.id == arg] or [s.id for s in sessions if s.id.startswith(arg)]
        if current and current.startswith(arg) and not found:
            out("  that is this session")
            return None
        if len(found) != 1:
            out(f"  {'no other session' if not found else f'{len(found)} sessions'} named {safe(arg)!r}; "
                "/resume alone picks from a list")
            return None
        return found[0]
    if not sessions:
        out("  no other session to resume")
        return None
    return pick_session(sessions)


def cmd_resume(args: argparse.Namespace) -> Exit:
    """``musec resume [ID | --last]``: reopen a session interactively.

    Raises:
        UsageError: there is no terminal (the session is left as it is).
        NothingToResume: there is no session to resume.
    """
    return _resume_on(connect(), args)


def _need_terminal(session_id: str = "") -> None:
    """Refuse without a terminal, naming the headless command (with the session's id when known)."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(f"musec resume needs a terminal; use `musec run --resume {session_id or 'ID'}` "
                         "(or --continue) without one")


def _resume_on(conn: Connection, args: argparse.Namespace, back_to: str = "") -> Exit:
    """Resume ``args.session_id`` (``--last``, or a picked one) and read messages for it.
    ``back_to``: the session the person left for it (``/resume``), taken up again when this
    one cannot be resumed, so a failed switch never leaves them without a session."""
    sid = args.session_id
    if not sid:
        workspace = resolve_workspace(args.workspace) if args.last or args.workspace else ""
        sessions = conn.request(p.ListSessions(id=conn.next_id(), workspace=workspace)).sessions
        sessions = [s for s in sessions if s.status != "broken"]
        if not sessions:
            raise NothingToResume("no session to resume" + (f" in {workspace}" if workspace else "")
                                  + "; start one with `musec`")
        _need_terminal(sessions[0].id if args.last else "")
        sid = sessions[0].id if args.last else pick_session(sessions)
        if sid is None:
            return OK
    _need_terminal(sid)
    req = p.ResumeSession(id=conn.next_id(), session_id=sid, credentials=credentials(), interactive=True,
                          end_when_idle=False, backlog=True, environment=wire_environment(),
                          redact=secret_values(), redact_named=secret_env())
    conn.send(req)
    follower = TurnFollower(conn, req.id, Renderer(sys.stdout, rich=True))
    follower.renderer.messages = True  # the transcript shows what the person asked
    session_id = follower.follow()
    follower.renderer.stop_wait(turn_over=True)
    if not session_id:
        if back_to:
            out(f"(back in session {back_to})")
            return _resume_on(conn, _resume_args(args, back_to))
        return for_error(follower.error_code) if follower.error_code else follower.exit_code
    for name, default in _SESSION_DEFAULTS:
        setattr(args, name, getattr(args, name, default))
    return prompt_loop(conn, args, follower)


def _trust_asker(conn: Connection, req: p.StartSession) -> Callable[[str], None]:
    """Answers a ``trust_required`` refusal: ask, then send the request again."""

    def on_trust(message: str) -> None:
        import msgspec

        conn.send(msgspec.structs.replace(req, id=req.id, trust=ask_trust(message), ask_trust=False))

    return on_trust
