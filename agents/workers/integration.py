"""Integration of worker branches, tests on the merged tree, and bringing the result home.

``merge_branches`` merges the worker branches one after another onto the base commit, in
memory with libgit2, committing each merge on ``musec/<session>/integration``; a branch
that conflicts is left out and its conflicts reported per file with both sides. The
result is checked out in the integration worktree (``STATE/worktrees/<session>/integration``)
where ``integrate`` runs the project's test command: two branches can each be green and
break together, and only the merged tree shows it.

``apply`` is the only function that writes to the person's working tree: it moves their
branch to the integrated result (fast-forward, or a merge commit) and checks it out with
libgit2's safe checkout, after checking that their HEAD and working tree are as they were
when the fan-out started. No file is ever copied.
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

from .errors import (
    FileConflict,
    HeadMoved,
    MergeConflict,
    NotOnBranch,
    UnbornHead,
    UnknownBranch,
    WorktreeDirty,
    WorktreeError,
    list_paths,
)
from .repo import (
    BaseCommit,
    default_signature,
    open_repository,
    refuse_busy,
    run_git,
    uncommitted_paths,
    working_state_tree,
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
    "ApplyResult",
    "BranchConflict",
    "FileConflict",
    "IntegrationResult",
    "MergeOutcome",
    "MergedBranch",
    "apply",
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
        """Every branch merged and the tests passed."""
        return not self.merge.conflicts and self.tests is not None and self.tests.passed

    def summary(self) -> str:
        """A few lines for the person and the model: merges, conflicts, test outcome."""
        m = self.merge
        lines = [f"integration {m.branch} at {m.head[:12]} (base {m.base[:12]})"]
        lines += [f"  merged {b.branch} ({b.how})" for b in m.merged]
        for c in m.conflicts:
            lines.append(f"  CONFLICT {c.branch}, left out: " + ", ".join(f.path for f in c.files))
        if self.tests is None:
            lines.append("  tests: no test command found; configure one")
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
        path = next(e.path for e in (ours, theirs, ancestor) if e is not None)
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

    Returns:
        The merge and the test run. Conflicts and failing tests are results, not errors.

    Raises:
        See ``merge_branches``.
    """
    outcome = await anyio.to_thread.run_sync(functools.partial(
        merge_branches, repo_path, state_dir, session_id, base, branches, signature=signature,
    ))
    command = detect_test_command(outcome.worktree, test_command)
    tests = None
    if command is not None:
        tests = await run_tests(
            command, outcome.worktree, timeout_s=timeout_s, max_output_bytes=max_output_bytes,
            env=env, wrap=wrap,
        )
    return IntegrationResult(outcome, command, tests)


@dataclass(frozen=True)
class ApplyResult:
    """What ``apply`` did to the person's branch.

    Attributes:
        branch: the person's branch (short name).
        old_head: where it pointed before (hex).
        new_head: where it points now (hex).
        how: ``"fast-forward"``, ``"merge"`` (a merge commit), ``"commit"`` (the workers'
            changes as one commit, when the fan-out started from a snapshot of uncommitted
            work, which stays uncommitted) or ``"up-to-date"``.
    """

    branch: str
    old_head: str
    new_head: str
    how: Literal["fast-forward", "merge", "commit", "up-to-date"]


def _changed_paths(repo: pygit2.Repository, a: pygit2.Oid, b: pygit2.Oid) -> list[str]:
    diff = repo.diff(repo[a], repo[b])
    return sorted({d.delta.new_file.path for d in diff} | {d.delta.old_file.path for d in diff})


def apply(
    repo_path: Path | str,
    integration_branch: str,
    *,
    expected_head: str,
    snapshot: str | None = None,
    signature: pygit2.Signature | None = None,
) -> ApplyResult:
    """Bring the integrated result onto the person's current branch, through git only.

    Checks first, and refuses when: HEAD is not ``expected_head`` (the person committed or
    switched branch since the fan-out); the working tree is not as it was (without
    ``snapshot``: any uncommitted change, untracked files included; with ``snapshot``: what
    is on disk differs from the snapshot's tree); a merge or rebase is in progress; HEAD is
    detached. Then the branch fast-forwards to the integration, or gets a merge commit
    when the integration does not descend from it, and the index and working tree follow
    as ``git checkout`` would move them (refusing rather than overwrite a local change).

    With a snapshot, only the workers' changes (snapshot -> integration) become one
    commit on the branch; the person's uncommitted changes and untracked files stay
    uncommitted on disk, as they were (issue 13). The index and working tree move with
    ``git read-tree -m -u``, which honours what git honours (sparse checkout,
    skip-worktree, filter drivers such as Git LFS, eol attributes).

    Args:
        repo_path: the person's working tree.
        integration_branch: the branch to bring home (``musec/<session>/integration``).
        expected_head: the person's HEAD when the fan-out started (``BaseCommit.head``).
        snapshot: the snapshot commit the fan-out started from (``BaseCommit.commit`` when
            ``BaseCommit.snapshot``), else ``None``.
        signature: author and committer of a merge commit; default ``default_signature``.

    Returns:
        The branch and where it moved.

    Raises:
        UnbornHead: the repository has no commit.
        NotOnBranch: HEAD is detached.
        RepositoryBusy: a merge, rebase or the like is in progress.
        HeadMoved: HEAD is not ``expected_head``.
        WorktreeDirty: the working tree changed; lists the paths.
        UnknownBranch: ``integration_branch`` does not exist.
        MergeConflict: a merge commit was needed and the merge conflicts.
        WorktreeError: the checkout failed (a file changed while applying).
    """
    repo = open_repository(repo_path)
    if repo.head_is_unborn:
        raise UnbornHead(f"{repo.workdir} has no commit yet")
    if repo.head_is_detached:
        raise NotOnBranch("HEAD is detached; check out the branch to apply to, then apply again")
    refuse_busy(repo)
    branch_ref = repo.lookup_reference(repo.head.name)
    branch = repo.head.shorthand
    head = repo.head.target
    if str(head) != expected_head:
        raise HeadMoved(
            f"{branch} is at {str(head)[:12]}, not at {expected_head[:12]} where the workers "
            "started; it moved since (a commit, reset or branch switch). Apply refused; "
            "integrate again from the new HEAD or merge the integration branch yourself",
            expected=expected_head, actual=str(head))
    target = _branch_tip(repo, integration_branch)
    start = _clean_start(repo, head, snapshot)
    if target == start or repo.descendant_of(start, target):
        return ApplyResult(branch, str(head), str(head), "up-to-date")
    if snapshot is not None:
        new, how = _workers_commit(repo, head, start, target, integration_branch, signature), "commit"
        if new is None:
            return ApplyResult(branch, str(head), str(head), "up-to-date")
    elif repo.descendant_of(target, start):
        new, how = target, "fast-forward"
    else:
        new, how = _merge_commit(repo, start, target, integration_branch, branch, signature), "merge"
    _switch(repo, branch_ref.name, head, new, f"musec apply: {how} {integration_branch}")
    return ApplyResult(branch, str(head), str(new), how)


def _workers_commit(repo: pygit2.Repository, head: pygit2.Oid, snapshot: pygit2.Oid, target: pygit2.Oid,
                    integration_branch: str, signature: pygit2.Signature | None) -> pygit2.Oid | None:
    """One commit on ``head`` holding what the workers changed (``snapshot`` -> ``target``)
    and nothing of the person's uncommitted work (``head`` -> ``snapshot``); ``None`` when
    the workers changed nothing.

    Raises:
        MergeConflict: the workers' changes do not apply to ``head`` (never seen: they were
            made on the snapshot, which holds ``head``).
    """
    index = repo.merge_trees(repo[snapshot].peel(pygit2.Commit).tree, repo[head].peel(pygit2.Commit).tree,
                             repo[target].peel(pygit2.Commit).tree)
    if index.conflicts is not None:
        files = _file_conflicts(repo, index, DEFAULT_MAX_SIDE_CHARS)
        raise MergeConflict("the workers' changes do not apply to your branch; nothing was changed:\n"
                            + list_paths([f.path for f in files]), files)
    tree = index.write_tree(repo)
    if tree == repo[head].peel(pygit2.Commit).tree.id:
        return None
    walker = repo.walk(target, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE)
    walker.hide(snapshot)
    subjects = [c.message.splitlines()[0] if c.message else str(c.id)[:12] for c in walker]
    sig = signature or default_signature(repo)
    message = (f"musec: the workers' changes from {integration_branch}\n\n"
               + "".join(f"- {s}\n" for s in subjects[:50]))
    return repo.create_commit(None, sig, sig, message, tree, [head])


def _switch(repo: pygit2.Repository, ref: str, old: pygit2.Oid, new: pygit2.Oid, reason: str) -> None:
    """Move the person's index and working tree from ``old`` to ``new`` as ``git checkout``
    does (``git read-tree -m -u``: local changes to paths the move does not touch are kept,
    sparse checkout, skip-worktree, filter drivers and eol attributes are honoured, and it
    refuses rather than overwrite a local change or an untracked file), then the branch.

    Raises:
        WorktreeDirty: the move would overwrite local changes; nothing was changed.
        WorktreeError: git failed otherwise.
    """
    done = run_git(repo.workdir, "read-tree", "-m", "-u", str(old), str(new))
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "backslashreplace").strip()
        paths = [ln.strip() for ln in why.splitlines() if ln.startswith(("\t", "    "))]
        raise WorktreeDirty(f"applying would overwrite local changes; nothing was changed (git: {why[:600]})",
                            tuple(paths))
    moved = run_git(repo.workdir, "update-ref", "-m", reason, ref, str(new), str(old))
    if moved.returncode != 0:
        run_git(repo.workdir, "read-tree", "-m", "-u", str(new), str(old))  # put the tree back
        raise WorktreeError(f"could not move {ref} to {str(new)[:12]}: "
                            + moved.stderr.decode("utf-8", "backslashreplace").strip()[:300])


def _clean_start(repo: pygit2.Repository, head: pygit2.Oid, snapshot: str | None) -> pygit2.Oid:
    """The commit ``apply`` starts from: ``head`` with a clean working tree, or the
    ``snapshot`` of ``head`` when the working tree is still exactly that snapshot.

    Raises:
        WorktreeError: ``snapshot`` was not made on ``head``.
        WorktreeDirty: the working tree is not as the fan-out left it; lists the paths.
    """
    if snapshot is None:
        paths = list(uncommitted_paths(repo.workdir))
        if paths:
            raise WorktreeDirty(
                "your working tree has uncommitted changes; commit or stash them, then apply "
                f"again:\n{list_paths(paths)}", paths,
            )
        return head
    snap = repo[snapshot].peel(pygit2.Commit)
    if list(snap.parent_ids) != [head]:
        raise WorktreeError(f"{snapshot[:12]} is not a snapshot made on {str(head)[:12]}")
    state = working_state_tree(repo)
    if state != snap.tree.id:
        paths = _changed_paths(repo, snap.tree.id, state)
        raise WorktreeDirty(
            "your working tree changed since musec snapshotted it; apply refused. Changed:\n"
            + list_paths(paths), paths,
        )
    return snap.id


def _merge_commit(repo: pygit2.Repository, start: pygit2.Oid, target: pygit2.Oid, integration_branch: str,
                  branch: str, signature: pygit2.Signature | None) -> pygit2.Oid:
    """A merge commit of ``target`` into ``start`` (on no branch yet).

    Raises:
        MergeConflict: the merge conflicts; nothing was changed.
    """
    index = repo.merge_commits(start, target)
    if index.conflicts is not None:
        files = _file_conflicts(repo, index, DEFAULT_MAX_SIDE_CHARS)
        raise MergeConflict(
            f"merging {integration_branch} into {branch} conflicts; nothing was changed:\n"
            + list_paths([f.path for f in files]), files,
        )
    sig = signature or default_signature(repo)
    tree = index.write_tree(repo)
    return repo.create_commit(None, sig, sig, f"Merge {integration_branch} into {branch}\n", tree, [start, target])
