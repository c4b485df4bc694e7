"""Worker worktrees: one per worker, and their state (the base commit they start from is
made by ``repo.prepare_base``; their removal is ``removal.py``'s).

Layout (DESIGN §9): the worktree of worker ``W`` of session ``S`` lives at
``STATE/worktrees/S/W`` on branch ``musec/S/W``; Git knows it as ``musec+S+W`` (its
metadata sits in ``<common git dir>/worktrees/musec+S+W``). The base commit of the session
is kept reachable by ``refs/musec/S/base``.

Everything goes through pygit2 (libgit2); nothing here runs the git program, and nothing
touches the person's working tree, index or branches: only ``refs/musec/...``,
``refs/heads/musec/...`` and worktree metadata are written in their repository.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pygit2

from .errors import (
    BranchExists,
    InvalidName,
    SubmodulesUnsupported,
    WorktreeError,
    list_paths,
)
from .repo import (
    BaseCommit,
    check_name,
    default_signature,
    drop_foreign_entries,
    head_commit,
    open_repository,
    refuse_busy,
    uncommitted_paths,
)

__all__ = [
    "INTEGRATION",
    "WorkerState",
    "Worktree",
    "branch_name",
    "commit_all",
    "create_worktree",
    "worker_states",
    "worktree_path",
]

INTEGRATION = "integration"
"""The reserved worker name of the integration worktree."""

_SEP = "+"  # in Git's worktree names; never part of a session id or worker name


def branch_name(session_id: str, worker: str) -> str:
    """The branch of a worker: ``musec/<session>/<worker>``.

    Raises:
        InvalidName: the session id or worker name cannot be part of a branch name.
    """
    check_name("session id", session_id)
    check_name("worker name", worker)
    return f"musec/{session_id}/{worker}"


def worktree_path(state_dir: Path | str, session_id: str, worker: str) -> Path:
    """Where a worker's worktree lives: ``state_dir/worktrees/<session>/<worker>``."""
    branch_name(session_id, worker)
    return Path(state_dir) / "worktrees" / session_id / worker


def _git_name(session_id: str, worker: str) -> str:
    return f"musec{_SEP}{session_id}{_SEP}{worker}"


@dataclass(frozen=True)
class Worktree:
    """A worker's worktree.

    Attributes:
        session_id: the session.
        worker: the worker's name (``INTEGRATION`` for the integration worktree).
        path: its working tree.
        branch: its branch (short name, ``musec/<session>/<worker>``).
        base: the base commit it started from (hex).
        resumed: whether it existed already and was reused.
    """

    session_id: str
    worker: str
    path: Path
    branch: str
    base: str
    resumed: bool = False


def _submodule_paths(repo: pygit2.Repository, tree: pygit2.Tree) -> list[str]:
    if ".gitmodules" not in tree:
        return []
    blob = repo[tree[".gitmodules"].id]
    text = blob.data.decode("utf-8", errors="replace")
    return re.findall(r"^\s*path\s*=\s*(.+?)\s*$", text, flags=re.MULTILINE) or [".gitmodules"]


def _prune_stale(repo: pygit2.Repository, prefix: str = f"musec{_SEP}") -> list[str]:
    """Prune the metadata of musec worktrees whose folder is gone; returns their names."""
    pruned = []
    for name in repo.list_worktrees():
        if not name.startswith(prefix):
            continue
        wt = repo.lookup_worktree(name)
        if not Path(wt.path).exists() and wt.is_prunable:
            wt.prune(False)  # prune(True) would also delete the working tree
            pruned.append(name)
    return pruned


def create_worktree(
    repo_path: Path | str,
    state_dir: Path | str,
    session_id: str,
    worker: str,
    base: BaseCommit | str,
    *,
    _reserved_ok: bool = False,
) -> Worktree:
    """Create (or find again) a worker's worktree on branch ``musec/<session>/<worker>``.

    The branch is created at ``base``; an existing branch is kept when it descends from
    ``base`` (a worker resumed after a restart keeps its commits). An existing, registered
    worktree at the expected path is returned as is (``resumed=True``). Stale metadata of
    musec worktrees whose folders are gone is pruned first. Works when ``repo_path`` is
    itself a worktree (its ``.git`` a file): the new worktree joins the same repository.

    Args:
        repo_path: the person's working tree.
        state_dir: musec's state directory; worktrees go under ``state_dir/worktrees``.
        session_id: the session.
        worker: the worker's name (``"integration"`` is reserved).
        base: the base commit, or its id.

    Returns:
        The worktree.

    Raises:
        InvalidName: the session id or worker name cannot name a branch, or is reserved.
        NotARepository: ``repo_path`` is in no repository.
        SubmodulesUnsupported: the base commit holds submodules.
        BranchExists: the branch exists and does not descend from ``base``.
        WorktreeError: libgit2 failed to create or check out the worktree.
    """
    branch = branch_name(session_id, worker)
    if worker == INTEGRATION and not _reserved_ok:
        raise InvalidName(f"worker name {INTEGRATION!r} is reserved for the integration worktree")
    repo = open_repository(repo_path)
    base_id = base.commit if isinstance(base, BaseCommit) else str(base)
    base_commit = repo.get(base_id)
    if not isinstance(base_commit, pygit2.Commit):
        raise WorktreeError(f"base {base_id} is not a commit of {repo.path}")
    modules = _submodule_paths(repo, base_commit.tree)
    if modules:
        raise SubmodulesUnsupported(
            "the base commit holds submodules, which musec workers cannot use yet; "
            f"run the task without fan-out:\n{list_paths(modules)}", modules)
    path = worktree_path(state_dir, session_id, worker).absolute()
    name = _git_name(session_id, worker)
    _prune_stale(repo)
    if name in repo.list_worktrees():
        wt = repo.lookup_worktree(name)
        if Path(wt.path).resolve() == path.resolve():
            return Worktree(session_id, worker, path, branch, base_id, resumed=True)
        raise WorktreeError(f"Git worktree {name} exists at {wt.path}, not at {path}")
    if path.exists():
        raise WorktreeError(f"{path} exists but is not a registered worktree; remove it first")
    ref = repo.branches.local.get(branch)
    if ref is None:
        ref = repo.branches.local.create(branch, base_commit)
    else:
        tip = ref.target
        if tip != base_commit.id and not repo.descendant_of(tip, base_commit.id):
            raise BranchExists(
                f"branch {branch} exists and does not descend from the base {base_id[:12]}; "
                "remove the session's worktrees first"
            )
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        repo.add_worktree(name, str(path), ref)
    except (pygit2.GitError, OSError) as exc:
        raise WorktreeError(f"could not create the worktree {path}: {exc}") from exc
    return Worktree(session_id, worker, path, branch, base_id)


def commit_all(
    worktree: Worktree | Path | str,
    message: str,
    *,
    signature: pygit2.Signature | None = None,
) -> str | None:
    """Commit everything in a worktree (as ``git add -A && git commit``) on its branch.

    Args:
        worktree: the worktree, or its path.
        message: the commit message.
        signature: author and committer; default ``default_signature``.

    Returns:
        The new commit's id (hex), or ``None`` when nothing changed.

    Raises:
        NotARepository: the path is in no repository.
        RepositoryBusy: a merge or the like is in progress in the worktree.
    """
    path = worktree.path if isinstance(worktree, Worktree) else Path(worktree)
    repo = open_repository(path)
    refuse_busy(repo)
    index = drop_foreign_entries(repo, repo.index)  # a worker's own `git add` is hashed again
    index.add_all()
    index.write()
    tree = index.write_tree()
    head = head_commit(repo)
    if tree == head.tree.id:
        return None
    sig = signature or default_signature(repo)
    return str(repo.create_commit("HEAD", sig, sig, message, tree, [head.id]))


@dataclass(frozen=True)
class WorkerState:
    """One worker of a session, for ``musec workers ID``.

    Attributes:
        worker: the worker's name.
        branch: its branch (short name).
        path: its worktree, ``None`` when it is gone (the branch alone is left).
        head: the branch's commit (hex).
        commits: how many commits the branch holds beyond the base.
        uncommitted: the uncommitted paths in its worktree.
    """

    worker: str
    branch: str
    path: Path | None
    head: str
    commits: int
    uncommitted: tuple[str, ...]


def worker_states(repo_path: Path | str, session_id: str, base: BaseCommit | str) -> list[WorkerState]:
    """The branches ``musec/<session>/*`` (the integration's included), sorted by worker.

    Raises:
        InvalidName: ``session_id`` cannot name a branch.
        NotARepository: ``repo_path`` is in no repository.
    """
    check_name("session id", session_id)
    repo = open_repository(repo_path)
    base_id = pygit2.Oid(hex=base.commit if isinstance(base, BaseCommit) else str(base))
    names = set(repo.list_worktrees())
    states = []
    for branch in sorted(b for b in repo.branches.local if b.startswith(f"musec/{session_id}/")):
        worker = branch.split("/", 2)[2]
        head = repo.branches.local[branch].peel(pygit2.Commit).id
        walker = repo.walk(head)
        walker.hide(base_id)
        name = _git_name(session_id, worker)
        path = Path(repo.lookup_worktree(name).path) if name in names else None
        if path is not None and not path.exists():
            path = None
        dirty = uncommitted_paths(path) if path is not None else ()
        states.append(WorkerState(worker, branch, path, str(head), sum(1 for _ in walker), dirty))
    return states
