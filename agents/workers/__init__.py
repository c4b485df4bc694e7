"""Fan-out workers in Git worktrees: the Git side (DESIGN §9).

A fan-out goes: ``prepare_base`` (HEAD, or a snapshot of uncommitted changes) ->
``create_worktree`` per worker -> the workers edit and ``commit_all`` -> ``integrate``
(merge the branches in an integration worktree, run the tests there) -> ``apply`` (bring
the result onto the person's branch, through git) -> ``remove_worktrees``.

Functions here are synchronous and may block on disk (libgit2), except ``integrate`` and
``run_tests``, which are async; call the others from a worker thread
(``anyio.to_thread.run_sync``) in the daemon.
"""

from .errors import (
    BranchExists,
    FiltersUnsupported,
    HeadMoved,
    InvalidName,
    MergeConflict,
    NotARepository,
    NotOnBranch,
    RepositoryBusy,
    SubmodulesUnsupported,
    UnbornHead,
    UnknownBranch,
    WorkerError,
    WorktreeDirty,
    WorktreeError,
)
from .integration import (
    BranchConflict,
    FileConflict,
    IntegrationResult,
    MergedBranch,
    MergeOutcome,
    integrate,
    merge_branches,
)
from .landing import ApplyResult, apply
from .repo import BaseCommit, prepare_base, uncommitted_paths
from .testcmd import TestCommand, TestRun, detect_test_command, failing_tests, run_tests
from .removal import Removal, remove_worktrees
from .worktrees import (
    INTEGRATION,
    WorkerState,
    Worktree,
    branch_name,
    commit_all,
    create_worktree,
    worker_states,
    worktree_path,
)

__all__ = [
    "INTEGRATION",
    "ApplyResult",
    "BaseCommit",
    "BranchConflict",
    "BranchExists",
    "FiltersUnsupported",
    "FileConflict",
    "HeadMoved",
    "IntegrationResult",
    "InvalidName",
    "MergeConflict",
    "MergeOutcome",
    "MergedBranch",
    "NotARepository",
    "NotOnBranch",
    "Removal",
    "RepositoryBusy",
    "SubmodulesUnsupported",
    "TestCommand",
    "TestRun",
    "UnbornHead",
    "UnknownBranch",
    "WorkerError",
    "WorkerState",
    "Worktree",
    "WorktreeDirty",
    "WorktreeError",
    "apply",
    "branch_name",
    "commit_all",
    "create_worktree",
    "detect_test_command",
    "failing_tests",
    "integrate",
    "merge_branches",
    "prepare_base",
    "remove_worktrees",
    "run_tests",
    "uncommitted_paths",
    "worker_states",
    "worktree_path",
]
