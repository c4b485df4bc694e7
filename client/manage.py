"""Commands that change things through the daemon: ``musec gc`` and ``musec apply``."""

from __future__ import annotations

import argparse

from musec.daemon import protocol as p

from .connection import connect
from .errors import UsageError
from .exitcodes import OK, Exit
from .output import counted, out

_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_age_s(text: str) -> float:
    """``30d``, ``12h``, ``90m``... in seconds. Raises ``UsageError``."""
    try:
        age_s = float(text[:-1]) * _AGE_UNITS[text[-1]]
    except (KeyError, ValueError, IndexError):
        age_s = -1.0
    if not age_s >= 0 or age_s == float("inf"):
        raise UsageError(f"--older-than takes an age like 30d, 12h or 90m, not {text!r}")
    return age_s


def cmd_gc(args: argparse.Namespace) -> Exit:
    """``musec gc --older-than AGE [--dry-run]``."""
    older_than_s = parse_age_s(args.older_than)
    conn = connect()
    r = conn.request(p.CollectSessions(id=conn.next_id(), older_than_s=older_than_s, dry_run=args.dry_run,
                                       discard_unapplied=args.discard_unapplied))
    verb = "would remove" if args.dry_run else "removed"
    out(f"{verb} {counted(len(r.sessions), 'session')}, {counted(r.bytes_freed, 'byte')}")
    sizes = r.session_bytes if len(r.session_bytes) == len(r.sessions) else [None] * len(r.sessions)
    items = r.session_items if len(r.session_items) == len(r.sessions) else [[]] * len(r.sessions)
    for sid, size, its in zip(r.sessions, sizes, items, strict=True):
        out(f"  {sid}" + (f"  {counted(size, 'byte')}" if size is not None else ""))
        for item in its:  # the worktrees and branches that go with it (s8 J9: the dry run named none)
            out(f"    {item}")
    for line in r.notes:
        out(f"note {line}")
    for line in r.kept:
        out(f"kept {line}")
    return OK


def cmd_apply(args: argparse.Namespace) -> Exit:
    """``musec apply ID``: the integrated fan-out result onto the person's branch."""
    conn = connect()
    r = conn.request(p.ApplyIntegration(id=conn.next_id(), session_id=args.session_id), timeout_s=300)
    if r.how == "up-to-date" and r.note:  # applied already, uncommitted: the note says where
        out(f"{r.branch}: the integration of session {r.session_id} was applied already; nothing to apply")
    elif r.how == "up-to-date":
        out(f"{r.branch}: the integration of session {r.session_id} is already on your branch; nothing to apply")
    elif r.how == "uncommitted":
        out(f"{r.branch}: the workers' changes are in your working tree, uncommitted")
    else:
        out(f"{r.branch}: {r.how} {r.old_head[:12]} -> {r.new_head[:12]}")
    if r.note:
        out(f"  {r.note}")
    return OK
