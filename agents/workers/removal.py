"""Removing a session's worker worktrees, their branches and refs (``musec gc``, and
``musec apply`` once an integration is home), keeping whatever holds work.

Layout and naming: ``worktrees.py``. Nothing here runs the git program; nothing of the
person's working tree, index or own branches is touched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2

from ..core.words import counted
from ..tools.base import printable
from .errors import NotARepository, WorktreeError
from .repo import check_name, open_repository, uncommitted_paths
from .worktrees import INTEGRATION, _git_name, _prune_stale, branch_name

__all__ = ["Removal", "remove_worktrees", "unapplied_commits"]


@dataclass(frozen=True)
class Removal:
    """What ``remove_worktrees`` did.

    Attributes:
        removed: the workers whose worktree (and branch) were removed.
        kept: ``(worker, reason)`` for each worktree holding work; when not empty,
            nothing of the session was removed.
        pruned: Git worktree names whose stale metadata was pruned.
        bytes: the size of the session's worktree folders.
        note: a line for the person when the worktrees were orphaned (their repository is
            gone: deleted or moved), saying what may be left where it went; else ``""``.
        items: what was (or would be) removed, one line each: ``worktree PATH`` and
            ``branch NAME`` (with the commits it holds that were never applied).
    """

    removed: tuple[str, ...]
    kept: tuple[tuple[str, str], ...]
    pruned: tuple[str, ...]
    bytes: int = 0
    note: str = ""
    items: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        """Lines for the person: what was kept and why."""
        return "\n".join(f"kept worktree of {w}: {why}" for w, why in self.kept)


def remove_worktrees(
    repo_path: Path | str,
    state_dir: Path | str,
    session_id: str,
    *,
    force: bool = False,
    dry_run: bool = False,
    applied: Collection[str] = (),
    discard_unapplied: bool = False,
) -> Removal:
    """Remove a session's worktrees, their branches and ``refs/musec/<session>/*``.

    When ``repo_path`` is no repository any more (deleted or moved), the repository is
    found through the session's worktrees (a workspace that was a linked worktree of a
    repository still there); when none is found, the worktrees are orphans (each one's
    ``.git`` points at a Git directory that is gone, so no Git can hold anything of them)
    and their folders are removed (``note`` says so, and how to clean a moved repository).

    When a worker worktree holds uncommitted work (staged, unstaged or untracked, not
    ignored), nothing of the session is removed unless ``force``: not that worktree, nor
    the others, the integration worktree, the branches or the refs, so that ``musec
    workers`` and ``musec apply`` still work; ``kept`` says which worktree holds what and
    how to rescue it (its path and branch). The same holds when a worker's branch holds
    commits that were never applied (``unapplied_commits``), unless ``discard_unapplied``:
    the branch may be their only copy. Stale metadata of musec worktrees whose
    folders are gone is pruned (the person's own worktrees are never pruned).

    Args:
        repo_path: the person's working tree.
        state_dir: musec's state directory.
        session_id: the session.
        force: remove worktrees even when they hold uncommitted work.
        dry_run: change nothing; say what would be removed or kept, and the size.
        applied: the worker branches the session's log says were applied (an apply that
            left the changes uncommitted makes no commit of theirs reachable).
        discard_unapplied: remove worker branches holding commits never applied, too.

    Returns:
        What was (or would be) removed and kept, what was pruned, and the size in bytes
        of the session's worktree folders.

    Raises:
        InvalidName: ``session_id`` cannot name a branch.
        NotARepository: ``repo_path`` is in no repository, and a worktree of the session
            is not an orphan (its ``.git`` is a folder, or points at a Git directory that
            is there).
        WorktreeError: a worktree folder could not be deleted.
    """
    check_name("session id", session_id)
    prefix = _git_name(session_id, "")
    session_dir = Path(state_dir) / "worktrees" / session_id
    try:
        repo = open_repository(repo_path)
    except NotARepository:
        found = _repository_of(session_dir)
        if found is None:
            return _remove_orphans(repo_path, session_dir, session_id, dry_run)
        repo = found
    size = _tree_bytes(session_dir)
    workers = {n[len(prefix):] for n in repo.list_worktrees() if n.startswith(prefix)}
    workers |= {b.split("/", 2)[2] for b in repo.branches.local if b.startswith(f"musec/{session_id}/")}
    trees = {}
    for worker in sorted(workers):
        name = _git_name(session_id, worker)
        trees[worker] = repo.lookup_worktree(name) if name in repo.list_worktrees() else None
    unapplied = unapplied_commits(repo, session_id, sorted(workers), applied)
    kept = [] if force else _kept(session_id, trees, {} if discard_unapplied else unapplied)
    items = tuple(_items(repo, session_id, sorted(workers), trees, unapplied))
    if kept or dry_run:
        return Removal(() if kept else tuple(sorted(workers)), tuple(kept), (), size, items=() if kept else items)
    removed = [_remove_one(repo, session_id, worker, trees[worker]) for worker in sorted(workers)]
    for ref in list(repo.references):
        if ref.startswith(f"refs/musec/{session_id}/"):
            repo.references.delete(ref)
    for folder in _orphans(session_dir):  # left by a repository deleted and made anew
        shutil.rmtree(folder, ignore_errors=True)
    if session_dir.is_dir() and not any(session_dir.iterdir()):
        os.rmdir(session_dir)
    pruned = _prune_stale(repo)
    return Removal(tuple(removed), (), tuple(pruned), size, items=items)


def _kept(session_id: str, trees: dict[str, Any], unapplied: dict[str, int]) -> list[tuple[str, str]]:
    """``(worker, why)`` for what keeps the whole session: worktrees holding uncommitted
    work, else worker branches holding commits never applied (``unapplied``)."""
    return _holding_work(session_id, trees) or [
        (w, f"its branch {branch_name(session_id, w)} holds {counted(n, 'commit')} never applied; "
            f"bring them home with `musec apply {session_id}` (or git merge {branch_name(session_id, w)}), "
            "or let them go with `musec gc --discard-unapplied`; the whole session stays until then")
        for w, n in unapplied.items()]


def unapplied_commits(repo: pygit2.Repository, session_id: str, workers: Sequence[str],
                      applied: Collection[str] = ()) -> dict[str, int]:
    """``{worker: commits}`` for each worker branch of the session (the integration's left
    out) holding commits that none of the person's branches (nor HEAD) holds, and that the
    log does not say were applied (``applied``, branch names): what is lost with the branch.
    Counted back to the session's base (``refs/musec/<session>/base``) or the person's
    history, whichever comes first."""
    mine = [repo.branches.local[b].target for b in repo.branches.local if not b.startswith("musec/")]
    with contextlib.suppress(pygit2.GitError):
        mine.append(repo.head.target)
    base = repo.references.get(f"refs/musec/{session_id}/base")
    out = {}
    for worker in workers:
        branch = branch_name(session_id, worker)
        ref = repo.branches.local.get(branch)
        if worker == INTEGRATION or ref is None or branch in applied:
            continue
        tip = ref.target
        if base is not None and tip == base.target:
            continue
        if any(tip == m or repo.descendant_of(m, tip) for m in mine):
            continue
        walker = repo.walk(tip)
        for hidden in [*mine, *([base.target] if base is not None else [])]:
            walker.hide(hidden)
        if count := sum(1 for _ in walker):
            out[worker] = count
    return out


def _items(repo: pygit2.Repository, session_id: str, workers: Sequence[str], trees: dict[str, Any],
           unapplied: dict[str, int]) -> list[str]:
    """The lines of ``Removal.items``: each worktree folder and each branch that goes."""
    out = []
    for worker in workers:
        wt = trees.get(worker)
        if wt is not None and Path(wt.path).exists():
            out.append(f"worktree {printable(str(wt.path))}")
        branch = branch_name(session_id, worker)
        if repo.branches.local.get(branch) is not None:
            lost = f" ({counted(unapplied[worker], 'commit')} never applied)" if worker in unapplied else ""
            out.append(f"branch {branch}{lost}")
    return out


def _remove_one(repo: pygit2.Repository, session_id: str, worker: str, wt: Any) -> str:
    """Delete a worker's worktree folder, its Git metadata and its branch; its name.

    Raises:
        WorktreeError: the folder could not be deleted.
    """
    path = Path(wt.path) if wt is not None else None
    if path is not None and path.exists():
        try:
            shutil.rmtree(path)
        except OSError as exc:
            raise WorktreeError(f"could not delete the worktree {path}: {exc}") from exc
    if wt is not None and wt.is_prunable:
        wt.prune(False)
    ref = repo.branches.local.get(f"musec/{session_id}/{worker}")
    if ref is not None:
        ref.delete()
    return worker


def _gitdir_of(folder: Path) -> Path | None:
    """The Git directory a worktree folder's ``.git`` file points at; ``None`` when it has
    no ``.git`` file (a folder is not a worktree's link) or it cannot be read."""
    try:
        text = (folder / ".git").read_bytes().decode("utf-8", "surrogateescape")
    except (IsADirectoryError, FileNotFoundError, NotADirectoryError, PermissionError):
        return None
    if not text.startswith("gitdir:"):
        return None
    gitdir = Path(text[len("gitdir:"):].strip())
    return gitdir if gitdir.is_absolute() else folder / gitdir


def _is_orphan(folder: Path) -> bool:
    """Whether a worktree folder belongs to no repository: no ``.git`` at all (a folder
    left half made), or a ``.git`` file pointing at a Git directory that is gone."""
    if not (folder / ".git").exists() and not (folder / ".git").is_symlink():
        return True
    gitdir = _gitdir_of(folder)
    return gitdir is not None and not gitdir.is_dir()


def _orphans(session_dir: Path) -> list[Path]:
    """The folders under ``session_dir`` that are orphaned worktrees (``_is_orphan``)."""
    if not session_dir.is_dir():
        return []
    return [f for f in sorted(session_dir.iterdir()) if f.is_dir() and not f.is_symlink() and _is_orphan(f)]


def _repository_of(session_dir: Path) -> pygit2.Repository | None:
    """The repository of the first worktree under ``session_dir`` that still has one."""
    for folder in sorted(session_dir.iterdir()) if session_dir.is_dir() else []:
        if folder.is_dir() and not _is_orphan(folder) and _gitdir_of(folder) is not None:
            try:
                return pygit2.Repository(str(folder))
            except pygit2.GitError:
                continue
    return None


def _remove_orphans(repo_path: Path | str, session_dir: Path, session_id: str, dry_run: bool) -> Removal:
    """Remove the session's worktree folders when every one is an orphan: their repository
    is gone, so nothing of them is held anywhere (``remove_worktrees``).

    Raises:
        NotARepository: a folder is not an orphan (it is left alone, as all the others).
        WorktreeError: a folder could not be deleted.
    """
    folders, orphans = sorted(session_dir.iterdir()) if session_dir.is_dir() else [], _orphans(session_dir)
    if folders != orphans:
        raise NotARepository(f"{repo_path} is not inside a Git repository, and "
                             f"{', '.join(str(f) for f in folders if f not in orphans)} is not an orphaned worktree; "
                             "nothing was removed")
    size = _tree_bytes(session_dir)
    if not dry_run:
        try:
            shutil.rmtree(session_dir)
        except OSError as exc:
            raise WorktreeError(f"could not delete the worktrees {session_dir}: {exc}") from exc
    note = printable(f"its repository {repo_path} is gone (deleted or moved), so its worktrees were orphans and "
            f"{'would be' if dry_run else 'were'} removed; if the repository was moved, clean up there with: "
            f"git for-each-ref --format='delete %(refname)' refs/heads/musec/{session_id} refs/musec/{session_id} "
            "| git update-ref --stdin && git worktree prune")
    return Removal(tuple(f.name for f in folders), (), (), size, note,
                   items=tuple(f"worktree {printable(str(f))}" for f in folders))


def _holding_work(session_id: str, trees: dict[str, Any]) -> list[tuple[str, str]]:
    """``(worker, reason)`` for each worker worktree with uncommitted work, the reason
    naming the paths, the worktree's folder and branch, and how to rescue the work."""
    kept = []
    for worker, wt in trees.items():
        if worker == INTEGRATION or wt is None or not Path(wt.path).exists():
            continue
        path = Path(wt.path)
        try:
            dirty = uncommitted_paths(path)
        except NotARepository:
            dirty = ("(not a repository any more)",)
        if dirty:
            branch = branch_name(session_id, worker)
            kept.append((worker, f"{counted(len(dirty), 'uncommitted path')} in {path}: "
                         + ", ".join(printable(d) for d in dirty[:5]) + (" ..." if len(dirty) > 5 else "")
                         + f"; to keep them, commit them there (git -C {path} add -A && git -C {path} "
                         f"commit -m wip) and merge branch {branch}, or copy them out; the whole "
                         "session stays (integration included) until that worktree is clean"))
    return kept


def _tree_bytes(path: Path) -> int:
    """The bytes of the files under ``path`` (symlinks not followed); 0 when absent."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total
