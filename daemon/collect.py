"""Collection (``musec gc``): removing ended sessions, their worktrees, their plan documents
and kernel campaign results (``state/plans/<id>.md``, ``state/kernels/<id>/``), and
unreferenced blobs.

Live sessions are never touched, and a session whose worker worktree holds uncommitted
work is kept whole (its integration worktree and branches too), with the reason and how
to rescue the work.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import structlog

from . import protocol as p
from .index import SessionIndex

log = structlog.get_logger("musec.daemon")


def collect(index: SessionIndex, state_dir: Path, blobs_dir: Path, older_than_s: float,
            dry_run: bool, *, discard_unapplied: bool = False
            ) -> tuple[list[str], int, list[str], list[int], list[str], list[list[str]]]:
    """Remove ended sessions last updated more than ``older_than_s`` ago, and blobs no
    remaining log refers to.

    Args:
        index: the sessions (its live ones are skipped).
        state_dir: musec's state directory (worktrees under ``worktrees/<session>``).
        blobs_dir: the blob store's directory.
        older_than_s: the minimum age, in seconds since the last event.
        dry_run: only say what would go, and its size (the blobs that would go counted).
        discard_unapplied: remove worker branches holding commits never applied too (a
            session with one is kept otherwise: the branch may be their only copy).

    Returns:
        The removed (or, with ``dry_run``, removable) session ids, the bytes freed (that
        would be), one line per session kept (why, and how to rescue the work), the
        bytes of each removed session (its log and worktrees), and one line per removed
        session with more to say (its repository was gone: what may be left where it went),
        and the worktrees and branches of each removed session (``worktree PATH``, ``branch
        NAME``): the same lists with and without ``dry_run``.
    """
    now = time.time()
    removed, freed, kept, sizes, notes, items = [], 0, [], [], [], []
    for info in index.list_sessions():
        if info.id in index.live or now - info.updated_at < older_than_s:
            continue
        path = index.log_path(info.id)
        why, size, note, gone = _remove_worktrees(state_dir, info, dry_run, path, discard_unapplied)
        if why:
            kept.append(f"{info.id}: {why}")
            continue  # a worker worktree holds uncommitted work: keep the whole session
        if note:
            notes.append(f"{info.id}: {note}")
        for extra in (path, path.with_name(path.name + ".torn"), state_dir / "plans" / f"{info.id}.md"):
            if extra.exists():
                size += extra.stat().st_size
                if not dry_run:
                    extra.unlink()
        size += _remove_tree(state_dir / "kernels" / info.id, dry_run)
        removed.append(info.id)
        items.append(gone)
        sizes.append(size)
        freed += size
    if removed:  # a dry run counts them too (fresh-user s8 J4: it said 6 KB, the run freed 2 MB)
        freed += _collect_blobs(index.directory, blobs_dir, dry_run, going={f"{sid}.jsonl" for sid in removed})
    return removed, freed, kept, sizes, notes, items


def _remove_worktrees(state_dir: Path, info: p.SessionInfo, dry_run: bool, log_path: Path,
                      discard_unapplied: bool) -> tuple[str, int, str, list[str]]:
    """Remove a session's worktrees and branches (``dry_run``: only look); why not, when
    one holds uncommitted work or a branch holds commits never applied, the size of the
    worktrees, a note (``Removal.note``: they were orphans of a repository that is gone),
    and the worktrees and branches that go (``Removal.items``)."""
    if not (state_dir / "worktrees" / info.id).exists() or not info.workspace:
        return "", 0, "", []
    from musec.agents.tools.base import printable
    from musec.agents.workers import WorkerError, remove_worktrees

    try:
        removal = remove_worktrees(info.workspace, state_dir, info.id, dry_run=dry_run,
                                   applied=_applied_branches(log_path), discard_unapplied=discard_unapplied)
    except (WorkerError, OSError) as exc:
        log.warning("worktrees_not_removed", session_id=info.id, error=str(exc))
        return printable(f"its worktrees could not be removed ({exc})"), 0, "", []
    if removal.kept:
        log.info("worktrees_kept", session_id=info.id, kept=removal.message)
        return removal.message.replace("\n", "; "), 0, "", []
    if removal.note:
        log.info("orphaned_worktrees_removed", session_id=info.id, workspace=info.workspace, dry_run=dry_run)
    if removal.items and not dry_run:
        log.info("worktrees_removed", session_id=info.id, items=list(removal.items))
    return "", removal.bytes, removal.note, list(removal.items)


def _applied_branches(log_path: Path) -> set[str]:
    """The worker branches the session's log says were applied (``integration_applied``
    after the ``integration`` that merged them)."""
    from musec.agents.core.events import Integration, IntegrationApplied

    from .eventlog import iter_events

    applied: set[str] = set()
    merged: list[str] = []
    try:
        for ev in iter_events(log_path, check=False):
            if isinstance(ev, Integration):
                merged = list(ev.merged)
            elif isinstance(ev, IntegrationApplied):
                applied.update(merged)
    except Exception:  # an unreadable log: nothing counts as applied (branches with commits are kept)
        log.warning("log_unreadable_for_gc", path=str(log_path), exc_info=True)
    return applied


def _remove_tree(folder: Path, dry_run: bool) -> int:
    """Remove ``folder`` (``dry_run``: only size it); its bytes."""
    if not folder.is_dir():
        return 0
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    if not dry_run:
        shutil.rmtree(folder, ignore_errors=True)
    return size


def _collect_blobs(sessions_dir: Path, blobs_dir: Path, dry_run: bool = False, going: set[str] | None = None) -> int:
    """Delete the blobs no log under ``sessions_dir`` refers to (``going``: the names of logs
    about to go, whose references do not count; ``dry_run``: only size them); the bytes
    freed."""
    referenced: set[str] = set()
    for path in sessions_dir.glob("*.jsonl"):
        if going and path.name in going:
            continue
        data = path.read_bytes()
        start = 0
        while (i := data.find(b'"blob":"', start)) >= 0:
            referenced.add(data[i + 8 : i + 72].decode("ascii", "replace"))
            start = i + 8
    freed = 0
    for blob in blobs_dir.glob("*/*"):
        if blob.parent.name + blob.name not in referenced:
            freed += blob.stat().st_size
            if not dry_run:
                blob.unlink()
    return freed
