"""Errors of the workers package, named by condition.

Every error raised by ``musec.agents.workers`` is a ``WorkerError``; its message is one
or a few lines written for the person (and the model), naming what to do about it.
Errors of pygit2 are mapped to these at the boundary with ``raise ... from exc``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.errors import AgentError
from ..tools.base import printable

__all__ = [
    "BranchExists",
    "FileConflict",
    "HeadMoved",
    "InvalidName",
    "MergeConflict",
    "NotARepository",
    "NotOnBranch",
    "RepositoryBusy",
    "SubmodulesUnsupported",
    "UnbornHead",
    "UnknownBranch",
    "WorkerError",
    "FiltersUnsupported",
    "WorktreeDirty",
    "WorktreeError",
]

MAX_LISTED_PATHS = 20
"""Messages list at most this many paths, then say how many more there are."""


def list_paths(paths: Sequence[str], limit: int = MAX_LISTED_PATHS) -> str:
    """``paths`` as an indented list for a message, cut after ``limit`` entries.

    Paths are as pygit2 gives them (a byte that is not UTF-8 is a lone surrogate, as
    ``os.fsdecode`` makes it); each is shown with ``\\xNN`` for such a byte
    (``tools.base.printable``), so that the message can reach the log, the wire and a
    commit message."""
    lines = [f"  {printable(p)}" for p in paths[:limit]]
    if len(paths) > limit:
        lines.append(f"  ... and {len(paths) - limit} more")
    return "\n".join(lines)


class WorkerError(AgentError):
    """Base of every error raised by ``musec.agents.workers``.

    Its message is made encodable as UTF-8 (``printable``): a repository path with bytes
    that are not UTF-8 is shown with ``\\xNN``, never a lone surrogate that would fail
    the log or the wire."""

    def __init__(self, message: str = "", *args: object) -> None:
        super().__init__(printable(message), *args)


class NotARepository(WorkerError):
    """The path is not inside a Git repository."""


class UnbornHead(WorkerError):
    """The repository has no commit yet, so there is nothing to branch from."""


class InvalidName(WorkerError, ValueError):
    """A session id or worker name cannot be used in a branch or directory name."""


class WorktreeDirty(WorkerError):
    """A working tree holds uncommitted changes (tracked or untracked, not ignored).

    Attributes:
        paths: the changed paths, relative to the working tree, sorted.
    """

    def __init__(self, message: str, paths: Sequence[str]):
        super().__init__(message)
        self.paths = tuple(paths)


class RepositoryBusy(WorkerError):
    """A merge, rebase, cherry-pick or similar is in progress in the repository."""


class NotOnBranch(WorkerError):
    """HEAD is detached; the operation needs a checked-out branch."""


class HeadMoved(WorkerError):
    """The person's HEAD is no longer the commit the operation was prepared against.

    Attributes:
        expected: the commit id expected.
        actual: the commit id HEAD points to now.
    """

    def __init__(self, message: str, *, expected: str, actual: str):
        super().__init__(message)
        self.expected = expected
        self.actual = actual


class UnknownBranch(WorkerError):
    """A branch named to merge or apply does not exist."""


class BranchExists(WorkerError):
    """A worker's branch exists already and does not descend from the base commit."""


class WorktreeError(WorkerError):
    """Git could not create, check out or remove a worktree (the cause is chained)."""


class SubmodulesUnsupported(WorkerError):
    """The base commit holds submodules, which worker worktrees do not initialise.

    Attributes:
        paths: the submodule paths named by ``.gitmodules``.
    """

    def __init__(self, message: str, paths: Sequence[str]):
        super().__init__(message)
        self.paths = tuple(paths)


class FiltersUnsupported(WorkerError):
    """The repository runs files through a filter driver (Git LFS...) that libgit2 cannot run.

    Attributes:
        filters: the filters' names.
    """

    def __init__(self, message: str, filters: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.filters = filters


class MergeConflict(WorkerError):
    """Merging two commits left conflicts.

    Attributes:
        conflicts: one ``FileConflict`` per conflicted path, with both sides.
    """

    def __init__(self, message: str, conflicts: Sequence[FileConflict]):
        super().__init__(message)
        self.conflicts = tuple(conflicts)


@dataclass(frozen=True)
class FileConflict:
    """One conflicted path, with the text of each side (``None``: absent on that side).

    Attributes:
        path: the path in the tree, as text (``printable``: ``\\xNN`` for a byte that is
            not UTF-8).
        ancestor: the file at the merge base.
        ours: the file on the integration side (the base plus the branches merged so far;
            for ``apply``, the person's branch).
        theirs: the file on the branch being merged.
        truncated: whether a side was cut to the limit.
        binary: whether a side holds NUL bytes (its text is then not shown).
    """

    path: str
    ancestor: str | None
    ours: str | None
    theirs: str | None
    truncated: bool = False
    binary: bool = False
