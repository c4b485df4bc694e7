"""The person's repository as a fan-out reads it: opening it, its state, and the base
commit every worker starts from (HEAD, or a snapshot of uncommitted changes).

Everything goes through pygit2 (libgit2); nothing here touches the person's working tree,
index or branches: only ``refs/musec/<session>/base`` and objects are written.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pygit2
from pygit2.enums import FileStatus, RepositoryState

from ..core.words import counted
from ..tools.base import printable
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
    "filter_drivers",
    "refuse_filters",
    "run_git",
    "skip_worktree_paths",
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


def run_git(workdir: Path | str, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run the ``git`` program in ``workdir`` (for what libgit2 does not do as git does:
    sparse checkouts, filter drivers); its output is bytes, its errors are in the result.

    Raises:
        WorktreeError: there is no ``git`` program.
    """
    git = shutil.which("git")
    if git is None:
        from .errors import WorktreeError

        raise WorktreeError("the git program is needed for this and was not found; install git")
    # Never a program the repository's config or hooks name: musec's git runs outside any
    # sandbox, and what a sandboxed command wrote into a workspace must not run here (fresh
    # user s5 F18: core.fsmonitor and a reference-transaction hook ran on the host).
    harden = ["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "credential.helper="]
    return subprocess.run([git, *harden, "-C", str(workdir), *args], input=input, capture_output=True, check=False)


def skip_worktree_paths(repo: pygit2.Repository) -> frozenset[str]:
    """The index entries marked skip-worktree (outside a sparse checkout, or set by
    ``git update-index --skip-worktree``): absent or stale on disk by design, never
    deleted or changed. libgit2 does not read the flag, so ``git ls-files -t`` does."""
    if repo.workdir is None or shutil.which("git") is None:
        return frozenset()
    out = run_git(repo.workdir, "ls-files", "-t", "-z").stdout
    return frozenset(e[2:].decode("utf-8", "surrogateescape") for e in out.split(b"\0") if e.startswith(b"S "))


def filter_drivers(repo: pygit2.Repository) -> dict[str, str]:
    """The clean/smudge filter drivers configured for ``repo`` (``filter.NAME.clean``,
    ``.smudge`` or ``.process``, e.g. Git LFS), by name: libgit2 cannot run them."""
    found: dict[str, str] = {}
    for entry in repo.config:
        m = re.fullmatch(r"filter\.(.+)\.(clean|smudge|process)", entry.name)
        if m and entry.value:
            found[m.group(1)] = entry.value
    return found


MAX_ATTRIBUTE_FILES = 200
"""``refuse_filters`` reads at most this many ``.gitattributes`` files."""


def refuse_filters(repo: pygit2.Repository, tree: pygit2.Tree) -> None:
    """Refuse a fan-out when ``tree``'s ``.gitattributes`` (or ``.git/info/attributes``)
    use a filter driver configured here (Git LFS and the like): libgit2 cannot run it, so
    workers would see the stored form (an LFS pointer) and a snapshot would store files
    unfiltered. Without the driver configured, git itself does not filter either, and
    neither does musec.

    Raises:
        FiltersUnsupported: the message names the filter and what to do.
    """
    drivers = filter_drivers(repo)
    if not drivers:
        return
    texts = []
    info = Path(repo.path) / "info" / "attributes"
    if info.is_file():
        texts.append(info.read_text("utf-8", "replace"))
    stack, seen = [tree], 0
    while stack and seen < MAX_ATTRIBUTE_FILES:
        for entry in stack.pop():
            if entry.type_str == "tree":
                stack.append(repo[entry.id])
            elif entry.name == ".gitattributes":
                seen += 1
                texts.append(repo[entry.id].data.decode("utf-8", "replace"))
    used = sorted({m for t in texts for m in re.findall(r"\bfilter=([^\s]+)", t) if m in drivers})
    if used:
        from .errors import FiltersUnsupported

        raise FiltersUnsupported(
            f"this repository runs files through the Git filter {', '.join(used)} "
            f"({drivers[used[0]]}), which musec's worktrees cannot run yet: workers would see the "
            "stored form of those files (e.g. Git LFS pointers). Run the task without fan-out, or "
            "unset the filter for this repository (git config --unset-all filter." + used[0] + ".smudge)",
            tuple(used),
        )


def uncommitted_paths(path: Path | str) -> tuple[str, ...]:
    """The paths of a working tree that differ from its HEAD: staged, unstaged and untracked
    (ignored files do not count); a skip-worktree path missing on disk (a sparse checkout)
    is not a change. Reads only; the index file is not refreshed.

    Raises:
        NotARepository: ``path`` is not in a repository.
    """
    repo = open_repository(path)
    status = repo.status(untracked_files="all", ignored=False)
    changed = {p for p, flags in status.items() if flags & ~FileStatus.IGNORED}
    skipped = skip_worktree_paths(repo) if changed else frozenset()
    for p in skipped & changed:
        if status[p] & ~(FileStatus.WT_DELETED | FileStatus.WT_MODIFIED) == 0:
            changed.discard(p)  # absent or stale by design, as git sees it
    return tuple(sorted(changed))


def working_state_tree(repo: pygit2.Repository) -> pygit2.Oid:
    """The tree of what is on disk in ``repo``'s working tree, as ``git add -A`` would stage it
    (tracked files as they are now, deletions, untracked files; ignored files left out).

    Skip-worktree entries (a sparse checkout) stay as the index has them, whether or not a
    file is on disk. The tree objects are written to the object database; the index file is
    not touched: the staging happens in a fresh in-memory copy of the index, dropped
    afterwards.
    """
    private = pygit2.Repository(repo.path)  # its own index object, never written
    index = private.index
    index.read(force=True)
    kept = {p: index[p] for p in skip_worktree_paths(private) if p in index}
    index.add_all()
    for entry in kept.values():  # outside the sparse checkout: as the index has it
        index.add(entry)
    return index.write_tree()


@dataclass(frozen=True)
class BaseCommit:
    """The commit every worker of a fan-out starts from.

    Attributes:
        commit: its id (hex).
        head: the person's HEAD commit when it was taken (hex).
        branch: the person's branch (short name), ``None`` when HEAD was detached.
        snapshot: whether ``commit`` is a snapshot of uncommitted changes made on ``head``.
        dirty_paths: the paths that were uncommitted (empty unless ``snapshot``), as text
            for the log and the person (``printable``: ``\\xNN`` for a byte that is not
            UTF-8; the snapshot itself holds the names' bytes).
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
            f"workers start from a snapshot {self.commit[:12]} of "
            f"{counted(len(self.dirty_paths), 'uncommitted path')} on top of {self.head[:12]}; your working tree is untouched"
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
        FiltersUnsupported: the repository uses a filter driver (``refuse_filters``).
    """
    check_name("session id", session_id)
    if dirty not in ("snapshot", "refuse"):
        raise ValueError(f"dirty must be 'snapshot' or 'refuse', not {dirty!r}")
    repo = open_repository(repo_path)
    head = head_commit(repo)
    refuse_busy(repo)
    refuse_filters(repo, head.tree)
    branch = None if repo.head_is_detached else repo.head.shorthand
    paths = uncommitted_paths(repo.workdir)
    ref = f"refs/musec/{session_id}/base"
    if not paths:
        repo.references.create(ref, head.id, force=True)
        return BaseCommit(str(head.id), str(head.id), branch, False, (), ref)
    if dirty == "refuse":
        raise WorktreeDirty(
            f"the working tree has {counted(len(paths), 'uncommitted change')}; commit or stash them, "
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
    return BaseCommit(str(commit), str(head.id), branch, True, tuple(printable(p) for p in paths), ref)


def drop_foreign_entries(repo: pygit2.Repository, index: pygit2.Index) -> pygit2.Index:
    """``index`` (not written) without the entries whose object ``repo`` lacks: a worker's
    own ``git add`` writes its blobs to its sandbox's object store, not the repository's
    (``tools.gitmounts``), and committing such an index fails with "object not found";
    ``add_all`` then hashes those files again."""
    for path in [e.path for e in index if e.mode != pygit2.enums.FileMode.COMMIT and e.id not in repo.odb]:
        index.remove(path)
    return index
