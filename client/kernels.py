"""``musec optimize SPEC`` (a kernel-optimisation campaign) and ``musec kernels ID`` (its
leaderboard), DESIGN §10.

``optimize`` is ``musec run`` with a campaign: the daemon loads the spec (a shipped name such
as ``cpu-example``, ``kda``, ``mla-decode``, or a path to a ``kernel-task.toml``), offers the
campaign's tools and records every evaluation as a ``kernel_evaluated`` event; the session
is attachable, resumable (``musec run --resume ID``) and replayable like any other.
``kernels`` folds those events from the session's log into the leaderboard, best first, and
names the CSV and the plot the daemon keeps beside it.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import msgspec
from musec.daemon import protocol as p

from .connection import connect
from .exitcodes import OK, Exit
from .output import out, out_json
from .requests import parse_wall, start_request
from .run import follow_run


def spec_ref(spec: str) -> str:
    """What the daemon is told: an existing path made absolute, else the name as given."""
    path = Path(spec).expanduser()
    return str(path.resolve()) if path.exists() else spec


def campaign_task(spec: str) -> str:
    """The first message of a campaign session (``musec optimize`` without a task, ``/optimize``)."""
    return (f"Run the kernel-optimisation campaign {spec}: improve the candidate, evaluate it "
            "after each change, and finish with the leaderboard.")


def cmd_optimize(args: argparse.Namespace) -> Exit:
    """``musec optimize SPEC [--budget-usd X] [--max-wall 24h]``: run a campaign headlessly."""
    max_wall_s = parse_wall(args.max_wall) if args.max_wall else 0.0
    task = args.task or campaign_task(args.spec)
    conn = connect()
    req = start_request(conn, args, task, interactive=False)
    req = msgspec.structs.replace(req, kernel_spec=spec_ref(args.spec), max_wall_s=max_wall_s,
                                  title=req.title or f"optimize {args.spec}")
    return follow_run(conn, req, args.output_format)


def leaderboard(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``kernel_evaluated`` events of a log, best first: correct and timed ones by speedup,
    then the rest in the order they happened."""
    evals = [e for e in events if e.get("type") == "kernel_evaluated"]
    timed = sorted((e for e in evals if e.get("correct") and e.get("speedup")), key=lambda e: -float(e["speedup"]))
    return timed + [e for e in evals if e not in timed]


def _row(e: dict[str, Any]) -> str:
    sp = f"{e['speedup']:.3f}x" if e.get("speedup") else "-"
    us = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
    what = (e.get("candidate_sha256") or "")[:12] + (f" commit {e['commit'][:12]}" if e.get("commit") else "")
    if not e.get("correct"):
        what = e.get("reason") or e.get("status", "")
    elif not e.get("speedup"):
        what += f" (timing {e.get('timing')})"
    return (f"{e.get('n', 0):>4} {e.get('tool_calls', 0):>6} {e.get('status', ''):<9} {sp:>8} "
            f"{us(e.get('candidate_us')):>10} {us(e.get('baseline_us')):>10}  {what}")


def cmd_kernels(args: argparse.Namespace) -> Exit:
    """``musec kernels ID [--json]``: the campaign's leaderboard from the session's log."""
    conn = connect()
    events = []
    for msg in conn.stream(p.ReadLog(id=conn.next_id(), session_id=args.session_id)):
        try:
            events.append(json.loads(msg.line))
        except ValueError:
            break  # a damaged tail: `musec log verify` says more
    session_id = conn.last_reply.session_id if conn.last_reply is not None else args.session_id
    board = leaderboard(events)
    if args.json:
        out_json([{k: v for k, v in e.items() if k != "evaluation"} | {"shapes": e.get("evaluation", {}).get("shapes", [])}
                  for e in board])
        return OK
    if not board:
        out(f"no kernel evaluations in session {session_id}")
        return OK
    out(f"{'#':>4} {'calls':>6} {'status':<9} {'speedup':>8} {'cand us':>10} {'base us':>10}  candidate / reason")
    for e in board:
        out(_row(e))
    evaluated = [e for e in events if e.get("type") == "kernel_evaluated"]
    last = evaluated[-1]
    # Only what is there: the branch once a candidate was committed on it (a workspace that
    # is not a git repository has none), the files the daemon wrote.
    if any(e.get("commit") for e in evaluated):
        out(f"branch: {last.get('branch', '')}")
    else:
        out("branch: none (no candidate committed; the workspace must be a git repository)")
    for what in ("csv_path", "plot_path"):
        path = str(last.get(what) or "")
        out(f"{what.removesuffix('_path').replace('csv', 'CSV')}: {path if path and os.path.exists(path) else 'not written'}")
    return OK
