"""The client's side of plan mode (issue 14): ``musec plan ID`` and the plan's approval
question (in the interactive client and ``musec attach`` alike, through ``ApprovalDesk``).

The question offers the daemon's plan answers (``protocol.PlanAction``): approve; approve
and switch to auto edits; edit first (``$EDITOR`` opens the plan; the saved text is what
is approved); keep planning with feedback; approve and start fresh with the plan alone.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable
from typing import Any

from musec.daemon import protocol as p

from .connection import connect
from .exitcodes import OK, Exit
from .output import out, out_json, safe

CHOICES = {
    "a": ("approve", "approve"),
    "u": ("approve_auto", "approve and switch to auto edits"),
    "e": ("edit", "edit it first ($EDITOR), then approve the edited text"),
    "k": ("feedback", "keep planning, with feedback"),
    "f": ("fresh", "approve and start fresh with the plan alone"),
    "g": ("grill", "grill it first: a critic questions its decisions, then you approve it again"),
}


def cmd_plan(args: argparse.Namespace) -> Exit:
    """``musec plan ID``: the session's plan, its state and its progress."""
    conn = connect()
    r = conn.request(p.ShowPlan(id=conn.next_id(), session_id=args.session_id))
    if args.json:
        out_json({"session_id": r.session_id, "status": r.status, "path": r.path, "sha256": r.sha256, "by": r.by,
                  "text": r.text, "files": r.files, "checks": r.checks})
        return OK
    if r.status == "none":
        out(f"session {r.session_id} has no plan (start one with /plan or `musec run --plan`)")
        return OK
    by = f" by {safe(r.by)}" if r.by else ""
    out(f"session {r.session_id} · plan {r.status}{by} · {safe(r.path)}" + (f" · sha256 {r.sha256[:12]}" if r.sha256 else ""))
    if r.text:
        out(safe(r.text).rstrip("\n"))
    if r.status == "approved":
        out("progress:")
        for name, done in r.files.items():
            out(f"  [{'x' if done else ' '}] edit {safe(name)}")
        for command, status in r.checks.items():
            mark = " " if status is None else ("x" if status == 0 else "!")
            state = "not run" if status is None else f"exit {status}"
            out(f"  [{mark}] run {safe(command)} ({state})")
    return OK


def plan_text(ev: dict[str, Any], known: str) -> str:
    """The plan an approval asks about: ``known`` (the latest ``plan_proposed``), else the
    plan document the request names (the daemon runs on this machine)."""
    if known:
        return known
    path = (ev.get("input") or {}).get("path") if isinstance(ev.get("input"), dict) else None
    try:
        return open(str(path), encoding="utf-8").read() if path else ""
    except OSError:
        return ""


def ask_plan(text: str, read_answer: Callable[[str], str | None],
             edit: Callable[[str], str] | None = None) -> tuple[str, str] | None:
    """Show the plan and ask what to do with it.

    Args:
        text: the proposed plan.
        read_answer: reads one answer line after showing the question (``None``: another
            terminal answered first); raises ``EOFError``/``KeyboardInterrupt`` as ``input``.
        edit: opens the text in an editor and returns it (default: ``edit_in_editor``).

    Returns:
        ``(plan_action, text)`` (``text``: the edited plan, or the feedback), or ``None``
        when another terminal answered.
    """
    out("The agent proposes this plan:")
    for line in safe(text).rstrip("\n").split("\n"):
        out(f"  │ {line}")
    for key, (_, what) in CHOICES.items():
        out(f"  [{key}] {what}")
    while True:
        answer = read_answer("Your answer (a/u/e/k/f/g, then Enter): ")
        if answer is None:
            out("\n(answered in another terminal)")
            return None
        key = answer.strip().lower()[:1]
        if key not in CHOICES:
            continue
        action = CHOICES[key][0]
        if action == "edit":
            return action, (edit or edit_in_editor)(text)
        if action == "feedback":
            feedback = read_answer("What should the plan change? ")
            if feedback is None:
                out("\n(answered in another terminal)")
                return None
            return action, feedback.strip()
        return action, ""


def ask_grill(ev: dict[str, Any], read_answer: Callable[[str], str | None]) -> tuple[str, str] | None:
    """Ask the person one question of a grill (``/grill``).

    Returns:
        ``("allow", "")`` to take the recommended answer (Enter), ``("allow", TEXT)`` for the
        person's own answer, ``("deny", "")`` to end the grill (``/end``), or ``None`` when
        another terminal answered.
    """
    inp = ev.get("input") if isinstance(ev.get("input"), dict) else {}
    out(f"The critic asks about {safe(str(inp.get('decision', '?')))}:")
    for line in safe(str(inp.get("question", ""))).split("\n"):
        out(f"  │ {line}")
    out(f"  recommended: {safe(str(inp.get('recommended', '')))}")
    answer = read_answer("Your answer (Enter takes the recommended one; /end ends the grill): ")
    if answer is None:
        out("\n(answered in another terminal)")
        return None
    answer = answer.strip()
    if answer == "/end":
        return "deny", ""
    return "allow", answer


def edit_in_editor(text: str) -> str:
    """Open ``text`` in ``$VISUAL``/``$EDITOR`` (default ``vi``) and return what was saved."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    fd, path = tempfile.mkstemp(prefix="musec-plan-", suffix=".md")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        subprocess.run([*shlex.split(editor), path], check=False)
        with open(path, encoding="utf-8") as f:
            return f.read()
    finally:
        os.unlink(path)
