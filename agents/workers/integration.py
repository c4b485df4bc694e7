"""Integration of worker branches, tests on the merged tree, and bringing the result home.

``merge_branches`` merges the worker branches one after another onto the base commit, in
memory with libgit2, committing each merge on ``musec/<session>/integration``; a branch
that conflicts is left out and its conflicts reported per file with both sides. The
result is checked out in the integration worktree (``STATE/worktrees/<session>/integration``)
where ``integrate`` runs the project's test command: two branches can each be green and
break together, and only the merged tree shows it.

Bringing the result onto the person's branch is ``landing.apply``'s.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio
import pygit2
from pygit2.enums import CheckoutStrategy

from ..tools.base import printable
from .errors import (
    FileConflict,
    UnknownBranch,
    WorktreeError,
)
from .repo import (
    BaseCommit,
    default_signature,
    open_repository,
)
from .testcmd import (
    DEFAULT_MAX_OUTPUT_BYTES,
    DEFAULT_TIMEOUT_S,
    TestCommand,
    TestRun,
    detect_test_command,
    run_tests,
)
from .worktrees import INTEGRATION, create_worktree

__all__ = [
    "BranchConflict",
    "FileConflict",
    "IntegrationResult",
    "MergeOutcome",
    "MergedBranch",
    "integrate",
    "merge_branches",
]

DEFAULT_MAX_SIDE_CHARS = 4000
"""Each side of a conflict is cut to this many characters."""


@dataclass(frozen=True)
class BranchConflict:
    """A branch left out of the integration because merging it conflicted."""

    branch: str
    files: tuple[FileConflict, ...]


@dataclass(frozen=True)
class MergedBranch:
    """A branch taken into the integration, and how.

    ``how``: ``"fast-forward"``, ``"merge"`` (a merge commit), or ``"up-to-date"`` (nothing
    it holds was missing).
    """

    branch: str
    tip: str
    how: Literal["fast-forward", "merge", "commit", "up-to-date"]


NOTHING_TESTED = ("none run: no test command was found, so nothing was tested; set one as "
                  "test_command in the [workers] table of musec's config.toml")


@dataclass(frozen=True)
class MergeOutcome:
    """The result of ``merge_branches``.

    Attributes:
        base: the base commit (hex).
        branch: the integration branch (short name).
        worktree: the integration worktree, checked out at ``head``.
        head: the integrated commit (hex).
        merged: the branches taken, in order.
        conflicts: the branches left out, with their conflicts.
    """

    base: str
    branch: str
    worktree: Path
    head: str
    merged: tuple[MergedBranch, ...]
    conflicts: tuple[BranchConflict, ...]


@dataclass(frozen=True)
class IntegrationResult:
    """The result of ``integrate``: the merge, and the tests run on the merged tree.

    Attributes:
        merge: what was merged and what conflicted.
        test_command: the command run, ``None`` when none was configured or found.
        tests: how the run ended, ``None`` when no command was run.
    """

    merge: MergeOutcome
    test_command: TestCommand | None
    tests: TestRun | None

    @property
    def ok(self) -> bool:
        """Every branch merged and the tests passed, or no test command was found (nothing
        was tested then: ``summary`` says so, and how to set one)."""
        return not self.merge.conflicts and (self.tests is None or self.tests.passed)

    def summary(self) -> str:
        """A few lines for the person and the model: merges, conflicts, test outcome."""
        m = self.merge
        lines = [f"integration {m.branch} at {m.head[:12]} (base {m.base[:12]})"]
        lines += [f"  merged {b.branch} ({b.how})" for b in m.merged]
        for c in m.conflicts:
            lines.append(f"  CONFLICT {c.branch}, left out: " + ", ".join(f.path for f in c.files))
        if self.tests is None:
            lines.append(f"  tests: {NOTHING_TESTED}")
        elif self.tests.passed:
            lines.append(f"  tests passed: {self.tests.command}")
        else:
            why = "timed out" if self.tests.timed_out else f"exit status {self.tests.exit_status}"
            if self.tests.no_tests_ran:
                why = "no tests ran"
            lines.append(f"  tests FAILED ({why}): {self.tests.command}")
            lines += [f"    {name}" for name in self.tests.failing_tests]
        return "\n".join(lines)


def _side(repo: pygit2.Repository, entry: pygit2.IndexEntry | None, limit: int) -> tuple[str | None, bool, bool]:
    if entry is None:
        return None, False, False
    data = repo[entry.id].data
    if b"\0" in data[:8000]:
        return None, False, True
    text = data.decode("utf-8", errors="replace")
    return text[:limit], len(text) > limit, False


def _file_conflicts(repo: pygit2.Repository, index: pygit2.Index, limit: int) -> list[FileConflict]:
    files = []
    for ancestor, ours, theirs in index.conflicts:
        path = printable(next(e.path for e in (ours, theirs, ancestor) if e is not None))
        sides = [_side(repo, e, limit) for e in (ancestor, ours, theirs)]
        files.append(FileConflict(
            path, sides[0][0], sides[1][0], sides[2][0],
            truncated=any(s[1] for s in sides), binary=any(s[2] for s in sides),
        ))
    return sorted(files, key=lambda f: f.path)


def _branch_tip(repo: pygit2.Repository, branch: str) -> pygit2.Oid:
    ref = repo.branches.local.get(branch)
    if ref is None:
        raise UnknownBranch(f"there is no branch {branch!r} in {repo.path}")
    return ref.peel(pygit2.Commit).id


def merge_branches(
    repo_path: Path | str,
    state_dir: Path | str,
    session_id: str,
    base: BaseCommit | str,
    branches: Sequence[str],
    *,
    signature: pygit2.Signature | None = None,
    max_side_chars: int = DEFAULT_MAX_SIDE_CHARS,
) -> MergeOutcome:
    """Merge ``branches`` in order onto ``base`` on the integration branch; check it out.

    The integration branch ``musec/<session>/integration`` is reset to ``base`` first, so
    calling this again (after workers fixed something) starts over. A branch that already
    holds the result so far is fast-forwarded to; one that conflicts is left out and its
    conflicted files reported. The integration worktree is then checked out at the result
    (forced: untracked files there, such as build output, are removed).

    Args:
        repo_path: the person's working tree.
        state_dir: musec's state directory.
        session_id: the session.
        base: the base commit of the fan-out, or its id.
        branches: the worker branches (short names), merged in this order.
        signature: author and committer of merge commits; default ``default_signature``.
        max_side_chars: each side of a conflict is cut to this many characters.

    Returns:
        What was merged and what conflicted, and where the result is checked out.

    Raises:
        UnknownBranch: a branch does not exist.
        WorktreeError: the integration worktree could not be created or checked out.
        InvalidName, NotARepository, SubmodulesUnsupported: see ``create_worktree``.
    """
    repo = open_repository(repo_path)
    tips = [(b, _branch_tip(repo, b)) for b in branches]
    wt = create_worktree(repo_path, state_dir, session_id, INTEGRATION, base, _reserved_ok=True)
    sig = signature or default_signature(repo)
    head = repo[wt.base].peel(pygit2.Commit).id
    merged: list[MergedBranch] = []
    conflicts: list[BranchConflict] = []
    for branch, tip in tips:
        if tip == head or repo.descendant_of(head, tip):
            merged.append(MergedBranch(branch, str(tip), "up-to-date"))
        elif repo.descendant_of(tip, head):
            head = tip
            merged.append(MergedBranch(branch, str(tip), "fast-forward"))
        else:
            index = repo.merge_commits(head, tip)
            if index.conflicts is not None:
                conflicts.append(BranchConflict(branch, tuple(_file_conflicts(repo, index, max_side_chars))))
                continue
            tree = index.write_tree(repo)
            head = repo.create_commit(None, sig, sig, f"musec: merge {branch}\n", tree, [head, tip])
            merged.append(MergedBranch(branch, str(tip), "merge"))
    wt_repo = pygit2.Repository(str(wt.path))
    try:
        wt_repo.checkout_tree(
            wt_repo[head], strategy=CheckoutStrategy.FORCE | CheckoutStrategy.REMOVE_UNTRACKED
        )
    except pygit2.GitError as exc:
        raise WorktreeError(f"could not check out the integration in {wt.path}: {exc}") from exc
    repo.branches.local[wt.branch].set_target(head, "musec: integrate")
    return MergeOutcome(wt.base, wt.branch, wt.path, str(head), tuple(merged), tuple(conflicts))


async def integrate(
    repo_path: Path | str,
    state_dir: Path | str,
    session_id: str,
    base: BaseCommit | str,
    branches: Sequence[str],
    test_command: TestCommand | Sequence[str] | str | None = None,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    env: Mapping[str, str] | None = None,
    wrap: Callable[[list[str], Path], list[str]] | None = None,
    signature: pygit2.Signature | None = None,
    subdir: str = "",
) -> IntegrationResult:
    """Merge the worker branches (``merge_branches``, in a worker thread), then run the
    test command in the integration worktree (``testcmd.run_tests``).

    Args:
        repo_path, state_dir, session_id, base, branches, signature: as ``merge_branches``.
        test_command: the command; ``None`` detects it in the merged tree
            (``detect_test_command``), and when none is found no tests run.
        timeout_s: the deadline of the test run; its process group is killed after it.
        max_output_bytes: the cap on the output kept.
        env: the test run's environment (default: this one's, credentials removed).
        wrap: turns ``(argv, cwd)`` into the argv to run (a sandbox).
        subdir: the folder of the merged tree (relative, POSIX) the tests run in, and where
            a command is detected: a fan-out started in a repository's ``pkg/`` tests ``pkg/``.

    Returns:
        The merge and the test run. Conflicts and failing tests are results, not errors.

    Raises:
        See ``merge_branches``.
    """
    outcome = await anyio.to_thread.run_sync(functools.partial(
        merge_branches, repo_path, state_dir, session_id, base, branches, signature=signature,
    ))
    where = outcome.worktree / subdir if subdir else outcome.worktree
    command = detect_test_command(where, test_command)
    tests = None
    if command is not None:
        tests = await run_tests(
            command, where, timeout_s=timeout_s, max_output_bytes=max_output_bytes,
            env=env, wrap=wrap,
        )
    return IntegrationResult(outcome, command, tests)
