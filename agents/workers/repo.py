"""The person's repository as a fan-out reads it: opening it, its state, and the base
commit every worker starts from (HEAD, or a snapshot of uncommitted changes).

Everything goes through pygit2 (libgit2); nothing here touches the person's working tree,
index or branches: only ``refs/musec/<session>/base`` and objects are written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pygit2
from pygit2.enums import FileStatus, RepositoryState

from .errors import (
    InvalidName,
    NotARepository,
    RepositoryBusy,
    UnbornHead,
    WorktreeDirty,
    list_paths,
)

__all__ = [
    "BaseCommit",
    "default_signature",
    "open_repository",
    "prepare_base",
    "uncommitted_paths",
    "working_state_tree",
]

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")


def check_name(kind: str, name: str) -> None:
    """Refuse a session id or worker name that cannot be part of a branch name.

    Raises:
        InvalidName: the message says what a name may hold.
    """
    if not _NAME.fullmatch(name) or name.endswith((".lock", ".")) or ".." in name:
        raise InvalidName(
            f"{kind} {name!r} cannot name a branch: use 1-64 letters, digits, '.', '_' or '-', "
            "not starting with '.' or '-'"
        )


def open_repository(path: Path | str) -> pygit2.Repository:
    """The repository holding ``path`` (a working tree, a worktree whose ``.git`` is a file,
    or any folder inside one).

    Raises:
        NotARepository: no repository holds ``path``.
    """
    found = pygit2.discover_repository(str(path))
    if found is None:
        raise NotARepository(f"{path} is not inside a Git repository")
    return pygit2.Repository(found)


def default_signature(repo: pygit2.Repository) -> pygit2.Signature:
    """The committer configured for ``repo`` (``user.name``/``user.email``), else musec's."""
    try:
        return repo.default_signature
    except (KeyError, pygit2.GitError):
        return pygit2.Signature("musec", "musec@localhost")


def head_commit(repo: pygit2.Repository) -> pygit2.Commit:
    """HEAD's commit. Raises ``UnbornHead`` when the repository has none."""
    if repo.head_is_unborn:
        raise UnbornHead(f"{repo.workdir} has no commit yet; commit something before fanning out")
    return repo.head.peel(pygit2.Commit)


def refuse_busy(repo: pygit2.Repository) -> None:
    """Raise ``RepositoryBusy`` when a merge, rebase or the like is in progress, or the
    index holds unresolved conflicts."""
    state = repo.state()
    if state != RepositoryState.NONE:
        raise RepositoryBusy(
            f"a {state.name.lower().replace('_', ' ')} is in progress in {repo.workdir}; "
            "finish or abort it first"
        )
    if repo.index.conflicts is not None:
        raise RepositoryBusy(f"the index of {repo.workdir} holds unresolved conflicts")


def uncommitted_paths(path: Path | str) -> tuple[str, ...]:
    """The paths of a working tree that differ from its HEAD: staged, unstaged and untracked
    (ignored files do not count). Reads only; the index file is not refreshed.

    Raises:
        NotARepository: ``path`` is not in a repository.
    """
    repo = open_repository(path)
    status = repo.status(untracked_files="all", ignored=False)
    return tuple(sorted(p for p, flags in status.items() if flags & ~FileStatus.IGNORED))


def working_state_tree(repo: pygit2.Repository) -> pygit2.Oid:
    """The tree of what is on disk in ``repo``'s working tree, as ``git add -A`` would stage it
    (tracked files as they are now, deletions, untracked files; ignored files left out).

    The tree objects are written to the object database; the index file is not touched: the
    staging happens in a fresh in-memory copy of the index, dropped afterwards.
    """
    private = pygit2.Repository(repo.path)  # its own index object, never written
    index = private.index
    index.read(force=True)
    index.add_all()
    return index.write_tree()


@dataclass(frozen=True)
class BaseCommit:
    """The commit every worker of a fan-out starts from.

    Attributes:
        commit: its id (hex).
        head: the person's HEAD commit when it was taken (hex).
        branch: the person's branch (short name), ``None`` when HEAD was detached.
        snapshot: whether ``commit`` is a snapshot of uncommitted changes made on ``head``.
        dirty_paths: the paths that were uncommitted (empty unless ``snapshot``).
        ref: the ref keeping it reachable (``refs/musec/<session>/base``).
    """

    commit: str
    head: str
    branch: str | None
    snapshot: bool
    dirty_paths: tuple[str, ...]
    ref: str

    @property
    def note(self) -> str:
        """A line for the person about what the workers start from."""
        if not self.snapshot:
            return f"workers start from {self.head[:12]} ({self.branch or 'detached HEAD'})"
        return (
            f"workers start from a snapshot {self.commit[:12]} of {len(self.dirty_paths)} "
            f"uncommitted path(s) on top of {self.head[:12]}; your working tree is untouched"
        )


def prepare_base(
    repo_path: Path | str,
    session_id: str,
    *,
    dirty: Literal["snapshot", "refuse"] = "snapshot",
    signature: pygit2.Signature | None = None,
) -> BaseCommit:
    """Fix the base commit of a fan-out: HEAD, or a snapshot of the uncommitted changes.

    A clean working tree gives HEAD. A dirty one (staged, unstaged or untracked changes;
    ignored files do not count) is refused, or snapshotted into a commit whose parent is
    HEAD and whose tree is the working tree as ``git add -A`` would stage it, made as
    ``git stash create`` makes its commit: without touching the working tree, the index
    file or any ref but ``refs/musec/<session>/base``. Unlike a stash it is a plain
    one-parent commit, so the workers' branches and the integrated result descend from it
    and ``apply`` can fast-forward onto it.

    Args:
        repo_path: the person's working tree (or a folder inside it).
        session_id: the fan-out's session; names ``refs/musec/<session>/base``.
        dirty: ``"snapshot"`` or ``"refuse"`` for a dirty working tree.
        signature: author and committer of a snapshot; default ``default_signature``.

    Returns:
        The base commit.

    Raises:
        NotARepository: ``repo_path`` is in no repository.
        UnbornHead: the repository has no commit.
        RepositoryBusy: a merge, rebase or the like is in progress.
        WorktreeDirty: the working tree is dirty and ``dirty="refuse"``; lists the paths.
        InvalidName: ``session_id`` cannot name a ref.
    """
    check_name("session id", session_id)
    if dirty not in ("snapshot", "refuse"):
        raise ValueError(f"dirty must be 'snapshot' or 'refuse', not {dirty!r}")
    repo = open_repository(repo_path)
    head = head_commit(repo)
    refuse_busy(repo)
    branch = None if repo.head_is_detached else repo.head.shorthand
    paths = uncommitted_paths(repo.workdir)
    ref = f"refs/musec/{session_id}/base"
    if not paths:
        repo.references.create(ref, head.id, force=True)
        return BaseCommit(str(head.id), str(head.id), branch, False, (), ref)
    if dirty == "refuse":
        raise WorktreeDirty(
            f"the working tree has {len(paths)} uncommitted change(s); commit or stash them, "
            f"or let musec snapshot them:\n{list_paths(paths)}",
            paths,
        )
    tree = working_state_tree(repo)
    sig = signature or default_signature(repo)
    message = (
        f"musec: snapshot of uncommitted changes on {branch or 'detached HEAD'}\n\n"
        f"Session {session_id}. Paths:\n{list_paths(paths, limit=200)}\n"
    )
    commit = repo.create_commit(None, sig, sig, message, tree, [head.id])
    repo.references.create(ref, commit, force=True)
    return BaseCommit(str(commit), str(head.id), branch, True, paths, ref)
