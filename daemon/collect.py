"""Collection (``musec gc``): removing ended sessions, their worktrees, and unreferenced blobs.

Live sessions are never touched, and a session whose worker worktree holds uncommitted
work is kept, with the reason.
"""

from __future__ import annotations

import time
from pathlib import Path

import structlog

from . import protocol as p
from .index import SessionIndex

log = structlog.get_logger("musec.daemon")


def collect(index: SessionIndex, state_dir: Path, blobs_dir: Path, older_than_s: float,
            dry_run: bool) -> tuple[list[str], int, list[str]]:
    """Remove ended sessions last updated more than ``older_than_s`` ago, and blobs no
    remaining log refers to.

    Args:
        index: the sessions (its live ones are skipped).
        state_dir: musec's state directory (worktrees under ``worktrees/<session>``).
        blobs_dir: the blob store's directory.
        older_than_s: the minimum age, in seconds since the last event.
        dry_run: only say what would go.

    Returns:
        The removed session ids, the bytes freed, and one line per session kept (why).
    """
    now = time.time()
    removed, freed, kept = [], 0, []
    for info in index.list_sessions():
        if info.id in index.live or now - info.updated_at < older_than_s:
            continue
        path = index.log_path(info.id)
        if not dry_run and (why := _remove_worktrees(state_dir, info)):
            kept.append(f"{info.id}: {why}")
            continue  # a worker worktree holds uncommitted work: keep the session too
        removed.append(info.id)
        if not dry_run:
            for extra in (path, path.with_name(path.name + ".torn")):
                if extra.exists():
                    freed += extra.stat().st_size
                    extra.unlink()
    if removed and not dry_run:
        freed += _collect_blobs(index.directory, blobs_dir)
    return removed, freed, kept


def _remove_worktrees(state_dir: Path, info: p.SessionInfo) -> str:
    """Remove a session's worktrees and branches; why not, when one holds uncommitted work."""
    if not (state_dir / "worktrees" / info.id).exists() or not info.workspace:
        return ""
    from musec.agents.workers import WorkerError, remove_worktrees

    try:
        removal = remove_worktrees(info.workspace, state_dir, info.id)
    except (WorkerError, OSError) as exc:
        log.warning("worktrees_not_removed", session_id=info.id, error=str(exc))
        return f"its worktrees could not be removed ({exc})"
    if removal.kept:
        log.info("worktrees_kept", session_id=info.id, kept=removal.message)
        return removal.message.replace("\n", "; ") + f" (in {state_dir / 'worktrees' / info.id})"
    return ""


def _collect_blobs(sessions_dir: Path, blobs_dir: Path) -> int:
    """Delete the blobs no log under ``sessions_dir`` refers to; the bytes freed."""
    referenced: set[str] = set()
    for path in sessions_dir.glob("*.jsonl"):
        data = path.read_bytes()
        start = 0
        while (i := data.find(b'"blob":"', start)) >= 0:
            referenced.add(data[i + 8 : i + 72].decode("ascii", "replace"))
            start = i + 8
    freed = 0
    for blob in blobs_dir.glob("*/*"):
        if blob.parent.name + blob.name not in referenced:
            freed += blob.stat().st_size
            blob.unlink()
    return freed
