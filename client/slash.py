"""The interactive client's slash commands (DESIGN §3): ``/help /model /cost /agents
/workers /compact /clear /resume /approval /last /goal /exit``.

A ``/NAME`` of a skill or custom command goes to the session as a message: the daemon
expands it there. ``/help`` lists the ones the daemon reported. Any other ``/NAME``, with
arguments or not, is refused with the nearest known name (a typo of ``/compact FOCUS``
is never a paid model turn), unless the first word is a path (``/usr/bin/foo is
broken``: another ``/`` in it), which is sent as a message.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from musec.daemon import protocol as p

from .connection import Connection
from .output import counted, out, safe
from .status import SessionStatus

BUILTIN = {
    "/help": "this list",
    "/model": "the model, its context window and prices; /model M switches to M from the next request",
    "/cost": "tokens and dollars so far, per agent and model",
    "/agents": "the session's agents and their state",
    "/workers": "the session's fan-out workers",
    "/compact": "compact the context now: /compact [what the summary should focus on]",
    "/clear": "end this session and start a new one",
    "/optimize": "/optimize SPEC: end this session and start a kernel-optimisation campaign here (cpu-example, kda, mla-decode, or a kernel-task.toml)",
    "/resume": "switch to another session (a picker), or /resume ID",
    "/approval": "the approval mode; /approval MODE (ask, auto, read-only, never) switches it (and leaves plan mode)",
    "/last": "the last tool result in full",
    "/goal": '/goal CONDITION [--check "CMD"] [--budget-usd X] [--max-turns N] [--max-wall D]; /goal pause|resume|clear; /goal: its status',
    "/plan": "/plan [TASK]: plan first, read-only; the plan needs your approval",
    "/grill": "/grill [FILE]: a critic questions the plan's decisions, then you approve it again",
    "/exit": "end the session and leave (Ctrl-D leaves it open for a terminal attached to it); Ctrl-C or Esc interrupts a running turn",
}


@dataclass
class Outcome:
    """What the prompt loop does after a command: ``stay`` (ask again), ``send`` (send
    ``text`` to the session), ``exit``, ``clear`` (a new session), ``resume`` (``arg``),
    ``optimize`` (a new session running the kernel campaign ``arg``), ``compact`` (with
    the focus ``arg``)."""

    action: str
    text: str = ""
    arg: str = ""


@dataclass
class Context:
    """What a command may look at: the connection, the session, its status, the workspace."""

    conn: Connection
    session_id: str
    status: SessionStatus
    workspace: str
    last_result: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)  # the session's skills and custom commands (``extensions.slash_names``)


def run_command(line: str, ctx: Context) -> Outcome:  # noqa: C901 - one branch per command
    """Do the slash command ``line``; unknown ones go to the session as messages."""
    name, _, arg = line.strip().partition(" ")
    arg = arg.strip()
    conn, sid = ctx.conn, ctx.session_id
    if name in ("/exit", "/quit"):
        return Outcome("exit")
    if name == "/help":
        for cmd, what in BUILTIN.items():
            out(f"  {cmd:<10} {what}")
        usable = sorted(n for n in ctx.names if "/" + n not in BUILTIN)
        if usable:
            out("  skills and custom commands: " + ", ".join("/" + n for n in usable))
        shadowed = sorted("/" + n for n in ctx.names if "/" + n in BUILTIN)
        if shadowed:
            out(f"  shadowed by the built-in of the same name (rename the file to use it): {', '.join(shadowed)}")
        out("  @path attaches a file; Alt-Enter (or Esc Enter) starts a new line; Enter sends")
    elif name == "/model":
        _model(ctx, arg)
    elif name == "/cost":
        report = conn.request(p.Cost(id=conn.next_id(), session_id=sid))
        from .views import cost_table, interrupted_line

        for line in cost_table(report.rows, indent="  "):
            out(line)
        out(f"  total ${report.total_usd:.4f}" + (f" · {counted(report.retries, 'retry', 'retries')}" if report.retries else ""))
        if report.interrupted:
            out("  " + interrupted_line(report.interrupted))
    elif name == "/agents":
        from .views import agents_table

        for line in agents_table(conn.request(p.ListAgents(id=conn.next_id(), session_id=sid)).agents, indent="  "):
            out(line)
    elif name == "/workers":
        reply = conn.request(p.ListWorkers(id=conn.next_id(), session_id=sid))
        if not reply.workers:
            out("  no workers in this session")
        from .views import workers_table

        for line in workers_table(reply.workers, indent="  "):
            out(line)
        if reply.integration:
            out(f"  integration: {reply.integration}")
    elif name == "/compact":
        return Outcome("compact", arg=arg)  # followed as a turn is (``TurnFollower.compact``)
    elif name == "/clear":
        return Outcome("clear")
    elif name == "/optimize":
        if not arg:
            out("  /optimize SPEC starts a kernel campaign: cpu-example, kda, mla-decode, or a path to a kernel-task.toml")
        else:
            return Outcome("optimize", arg=arg)
    elif name == "/resume":
        return Outcome("resume", arg=arg)
    elif name == "/approval":
        if arg not in ("ask", "auto", "read-only", "never"):
            out(f"  approval is {ctx.status.approval or 'ask'}; /approval MODE takes ask, auto, read-only or never")
        else:
            conn.request(p.SetApproval(id=conn.next_id(), session_id=sid, approval=arg))
            left_plan = ctx.status.approval == "plan"
            ctx.status.approval = arg
            out(f"  {'plan mode is off (its plan is not carried out); ' if left_plan else ''}"
                f"approval is {arg} from the next tool call on")
    elif name in ("/plan", "/grill"):
        return Outcome("send", text=line)  # the daemon switches the session to plan mode
    elif name == "/last":
        out(ctx.last_result or "  no tool result yet")
    elif name == "/goal":
        _goal(ctx, arg)
    elif name[1:] in ctx.names or "/" in name[1:]:
        return Outcome("send", text=line)  # the daemon expands skills and custom commands; a path is a message
    else:
        out(unknown_command(name, ctx.names))
    return Outcome("stay")


def unknown_command(name: str, names: set[str]) -> str:
    """The refusal of ``/NAME`` that is no command, skill or custom command, with the
    nearest known name when one is close (``/compcat``: ``did you mean /compact?``)."""
    from difflib import get_close_matches

    known = [*BUILTIN, "/quit", *("/" + n for n in sorted(names))]
    near = get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"did you mean {near[0]}?" if near else "/help lists the commands"
    return f"unknown command {safe(name)}; {hint}"


def _goal(ctx: Context, arg: str) -> None:
    """``/goal``: the daemon parses and does it (the goal is the session's, in its log)."""
    from .errors import RequestFailed

    try:
        reply = ctx.conn.request(p.GoalCommand(id=ctx.conn.next_id(), session_id=ctx.session_id, text=arg))
    except RequestFailed as exc:
        out(f"  {safe(str(exc))}")
        return
    for line in reply.lines:
        if line.startswith("goal ") and line.split(":", 1)[0].endswith(" set"):
            continue  # its goal_set event shows it ("◎ goal g1 set: ..."): said once (fresh-user s8 J3)
        out(f"  {safe(line)}")


def _model(ctx: Context, arg: str) -> None:
    """``/model``: the model, its window, prices and context used; ``/model M`` switches."""
    models = ctx.extra.get("models") or []
    status = ctx.status
    if arg:
        from .errors import RequestFailed
        from .requests import credentials

        try:
            ctx.conn.request(p.SwitchModel(id=ctx.conn.next_id(), session_id=ctx.session_id, model=arg,
                                           credentials=credentials()))
        except RequestFailed as exc:
            out(f"  the model stays {safe(status.model)}: {safe(str(exc))}")
            return
        # (the model_switched event came while this request waited: the status is told here)
        status.model, status.context_window_tokens = arg, 0
        status.learn_catalog(models)
        out(f"  the session goes on with {safe(arg)} from the next request")
        return
    entry = next((m for m in models if status.model in (m.id, *m.aliases)), None)
    out(f"  model: {safe(status.model)}")
    if entry is not None:
        out(f"  context window {entry.context_window_tokens} tokens · ${entry.input_per_mtok}/M in, "
            f"${entry.output_per_mtok}/M out")
    out(f"  {status.context_text()} used")
    if models:
        out("  others: " + ", ".join(m.aliases[0] if m.aliases else m.id for m in models[:12]) + " (/model M switches)")


def history_path() -> Path:
    """The prompt history file under the state directory (made 0600)."""
    path = p.state_home() / "prompt_history"
    p.private_dir(path.parent)
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)
    os.chmod(path, 0o600)
    return path
