"""Bringing an integrated fan-out result onto the person's branch (``musec apply``).

``apply`` is the only function of the package that writes to the person's working tree,
and it does so through git only (DESIGN §9): their branch moves to a fast-forward, a merge
commit, or one commit holding the workers' changes, and the index and working tree follow
as ``git read-tree -m -u`` moves them; or, when the workers changed files the person had
uncommitted changes in, their diff is applied to the working tree with ``git apply`` and
nothing is committed. No file is ever copied.

Which way is taken (``how``):

========================  ================================================================
the person's state        what happens
========================  ================================================================
HEAD as the fan-out left  clean tree: fast-forward (or a merge commit); a snapshot base
it                        whose tree is still on disk: one commit with the workers'
                          changes (``commit``), or, when they touch a path the person had
                          uncommitted, the workers' diff on the working tree, uncommitted
                          (``uncommitted``)
HEAD moved on (descends   the integration merged onto it (``merge``; from a snapshot base:
from where it was)        the workers' changes as one ``commit``); the tests ran on the
                          integration, not on this merge, and ``ApplyResult.note`` says so
HEAD reset or switched    refused (``HeadMoved``), naming the git command that would do it
========================  ================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pygit2

from ..core.words import counted
from ..tools.base import printable
from .errors import (
    HeadMoved,
    MergeConflict,
    NotOnBranch,
    UnbornHead,
    WorktreeDirty,
    WorktreeError,
    list_paths,
)
from .integration import DEFAULT_MAX_SIDE_CHARS, _branch_tip, _file_conflicts
from .repo import (
    default_signature,
    open_repository,
    refuse_busy,
    run_git,
    uncommitted_paths,
    working_state_tree,
)

__all__ = ["ApplyResult", "apply"]

How = Literal["fast-forward", "merge", "commit", "uncommitted", "up-to-date"]


@dataclass(frozen=True)
class ApplyResult:
    """What ``apply`` did to the person's branch.

    Attributes:
        branch: the person's branch (short name).
        old_head: where it pointed before (hex).
        new_head: where it points now (hex); ``old_head`` for ``uncommitted``.
        how: ``"fast-forward"``, ``"merge"`` (a merge commit), ``"commit"`` (the workers'
            changes as one commit, when the fan-out started from a snapshot of uncommitted
            work, which stays uncommitted), ``"uncommitted"`` (the workers' changes are in
            the working tree, uncommitted, next to the person's, because they touch files
            the person had uncommitted changes in) or ``"up-to-date"``.
        note: a line for the person when there is more to know (the tests did not run on
            this merge; the changes are uncommitted), else ``""``.
    """

    branch: str
    old_head: str
    new_head: str
    how: How
    note: str = ""


def apply(
    repo_path: Path | str,
    integration_branch: str,
    *,
    expected_head: str,
    snapshot: str | None = None,
    signature: pygit2.Signature | None = None,
) -> ApplyResult:
    """Bring the integrated result onto the person's current branch, through git only.

    Refuses when a merge or rebase is in progress, HEAD is detached, or HEAD neither is
    ``expected_head`` nor descends from it (a reset or a branch switch). When HEAD is
    ``expected_head``, the working tree must be as the fan-out left it (without
    ``snapshot``: no uncommitted change, untracked files included; with ``snapshot``: what
    is on disk is the snapshot's tree). When HEAD moved on (a commit, another session's
    apply), the integration is merged onto it; the person's local changes are kept unless
    the move would overwrite them, which is refused. The table in the module docstring
    says which way each case takes. Nothing the person did not commit is ever committed.

    Args:
        repo_path: the person's working tree.
        integration_branch: the branch to bring home (``musec/<session>/integration``).
        expected_head: the person's HEAD when the fan-out started (``BaseCommit.head``).
        snapshot: the snapshot commit the fan-out started from (``BaseCommit.commit`` when
            ``BaseCommit.snapshot``), else ``None``.
        signature: author and committer of a new commit; default ``default_signature``.

    Returns:
        The branch, where it moved, how, and a note.

    Raises:
        UnbornHead: the repository has no commit.
        NotOnBranch: HEAD is detached.
        RepositoryBusy: a merge, rebase or the like is in progress.
        HeadMoved: HEAD was reset or switched away from ``expected_head``; the message
            names the git command that brings the integration here anyway.
        WorktreeDirty: the working tree changed, or the move would overwrite local
            changes; lists the paths and says what to do.
        UnknownBranch: ``integration_branch`` does not exist.
        MergeConflict: the integration does not merge onto HEAD; the message says how to
            merge it by hand.
        WorktreeError: git failed otherwise (a file changed while applying).
    """
    repo = open_repository(repo_path)
    if repo.head_is_unborn:
        raise UnbornHead(f"{repo.workdir} has no commit yet")
    if repo.head_is_detached:
        raise NotOnBranch("HEAD is detached; check out the branch to apply to, then apply again")
    refuse_busy(repo)
    branch = repo.head.shorthand
    head = repo.head.target
    target = _branch_tip(repo, integration_branch)
    if target == head or repo.descendant_of(head, target):
        return ApplyResult(branch, str(head), str(head), "up-to-date")
    if str(head) != expected_head:
        return _apply_moved(repo, head, expected_head, target, integration_branch, snapshot, signature)
    start = _clean_start(repo, head, snapshot, target, integration_branch)
    if start is None:  # the working tree holds the result already (an ``uncommitted`` apply)
        return ApplyResult(branch, str(head), str(head), "up-to-date")
    if snapshot is not None:
        touched = sorted(set(_changed_paths(repo, head, start)) & set(_changed_paths(repo, start, target)))
        if touched:
            return _apply_uncommitted(repo, head, start, target, integration_branch, touched)
        new, how = _workers_commit(repo, head, start, target, integration_branch, signature), "commit"
        if new is None:
            return ApplyResult(branch, str(head), str(head), "up-to-date")
    elif repo.descendant_of(target, start):
        new, how = target, "fast-forward"
    else:
        new, how = _merge_commit(repo, start, target, integration_branch, branch, signature,
                                 f"git merge {integration_branch}"), "merge"
    _switch(repo, head, new, f"musec apply: {how} {integration_branch}")
    return ApplyResult(branch, str(head), str(new), how)


def _apply_moved(repo: pygit2.Repository, head: pygit2.Oid, expected_head: str, target: pygit2.Oid,
                 integration_branch: str, snapshot: str | None,
                 signature: pygit2.Signature | None) -> ApplyResult:
    """``apply`` when HEAD is not where the workers started: merged onto it when HEAD
    descends from there (it moved on: a commit, another session's apply), else refused."""
    branch = repo.head.shorthand
    by_hand = (f"git merge {integration_branch}" if snapshot is None
               else f"git diff {snapshot[:12]} {integration_branch} | git apply -3")
    try:
        moved_on = bool(expected_head) and repo.descendant_of(head, pygit2.Oid(hex=expected_head))
    except (ValueError, KeyError, pygit2.GitError):
        moved_on = False
    if not moved_on:
        raise HeadMoved(
            f"{branch} is at {str(head)[:12]}, which does not descend from {expected_head[:12] or 'the commit'} "
            "where the workers started (a reset or a branch switch); apply refused. Check out the branch "
            f"the workers started from and apply again, or bring the result here yourself: {by_hand}",
            expected=expected_head, actual=str(head))
    if snapshot is None:
        paths = list(uncommitted_paths(repo.workdir))
        if paths:
            raise WorktreeDirty(
                f"{branch} moved on since the workers started, and your working tree has uncommitted "
                f"changes; commit or stash them, then apply again:\n{list_paths(paths)}", paths)
        new, how = _merge_commit(repo, head, target, integration_branch, branch, signature, by_hand), "merge"
    else:
        new, how = _workers_commit(repo, head, repo[snapshot].id, target, integration_branch, signature,
                                   by_hand), "commit"
        if new is None:
            return ApplyResult(branch, str(head), str(head), "up-to-date")
    _switch(repo, head, new, f"musec apply: {how} {integration_branch} onto a moved {branch}")
    return ApplyResult(branch, str(head), str(new), how,
                       note=f"{branch} had moved on since the workers started ({expected_head[:12]} -> "
                            f"{str(head)[:12]}): their integration was merged onto it; its tests ran on the "
                            "integration, not on this merge, so run them")


def _changed_paths(repo: pygit2.Repository, a: pygit2.Oid, b: pygit2.Oid) -> list[str]:
    diff = repo.diff(repo[a], repo[b])
    return sorted({d.delta.new_file.path for d in diff} | {d.delta.old_file.path for d in diff})


def _apply_uncommitted(repo: pygit2.Repository, head: pygit2.Oid, snapshot: pygit2.Oid, target: pygit2.Oid,
                       integration_branch: str, touched: list[str]) -> ApplyResult:
    """The workers' diff (``snapshot`` -> ``target``) applied to the working tree with
    ``git apply`` (all of it or nothing); the index, HEAD and the branch stay as they are,
    so the person's uncommitted changes and the workers' are both uncommitted.

    Raises:
        WorktreeDirty: the diff did not apply (a file changed meanwhile); nothing changed.
    """
    diff = run_git(repo.workdir, "diff", "--binary", "--full-index", "--no-color", "--no-ext-diff",
                   "--no-textconv", "--no-renames", "--no-relative", "--src-prefix=a/", "--dst-prefix=b/",
                   str(snapshot), str(target))
    if diff.returncode != 0:
        raise WorktreeError("git diff failed: " + diff.stderr.decode("utf-8", "backslashreplace").strip()[:300])
    done = run_git(repo.workdir, "apply", "--whitespace=nowarn", "-", input=diff.stdout)
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "backslashreplace").strip()
        raise WorktreeDirty(f"the workers' changes no longer apply to your working tree; nothing was changed "
                            f"(git: {why[:600]}). Try again, or by hand: git diff {str(snapshot)[:12]} "
                            f"{integration_branch} | git apply -3", ())
    branch = repo.head.shorthand
    return ApplyResult(
        branch, str(head), str(head), "uncommitted",
        note=(f"the workers changed {counted(len(touched), 'file')} you had uncommitted changes in "
              f"({', '.join(printable(t) for t in touched[:5])}{' ...' if len(touched) > 5 else ''}); so that nothing of yours is "
              f"committed, all their changes are in your working tree, uncommitted, next to yours: review them "
              f"(git diff) and commit; theirs alone: git diff {str(snapshot)[:12]} {integration_branch}. "
              f"{branch} did not move"))


def _workers_commit(repo: pygit2.Repository, head: pygit2.Oid, snapshot: pygit2.Oid, target: pygit2.Oid,
                    integration_branch: str, signature: pygit2.Signature | None,
                    by_hand: str = "") -> pygit2.Oid | None:
    """One commit on ``head`` holding what the workers changed (``snapshot`` -> ``target``)
    and nothing of the person's uncommitted work (``head`` -> ``snapshot``); ``None`` when
    the workers changed nothing.

    Raises:
        MergeConflict: the workers' changes do not apply to ``head`` (it moved on and
            changed the same lines); ``by_hand`` says how to do it by hand.
    """
    index = repo.merge_trees(repo[snapshot].peel(pygit2.Commit).tree, repo[head].peel(pygit2.Commit).tree,
                             repo[target].peel(pygit2.Commit).tree)
    if index.conflicts is not None:
        files = _file_conflicts(repo, index, DEFAULT_MAX_SIDE_CHARS)
        raise MergeConflict("the workers' changes conflict with your branch; nothing was changed. "
                            + (f"To resolve it by hand: {by_hand}. " if by_hand else "") + "Conflicts:\n"
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


def _switch(repo: pygit2.Repository, old: pygit2.Oid, new: pygit2.Oid, reason: str) -> None:
    """Move the person's index and working tree from ``old`` to ``new`` as ``git checkout``
    does (``git read-tree -m -u``: local changes to paths the move does not touch are kept,
    sparse checkout, skip-worktree, filter drivers and eol attributes are honoured, and it
    refuses rather than overwrite a local change or an untracked file), then their branch.

    Raises:
        WorktreeDirty: the move would overwrite local changes; nothing was changed.
        WorktreeError: git failed otherwise.
    """
    ref = repo.head.name
    done = run_git(repo.workdir, "read-tree", "-m", "-u", str(old), str(new))
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "backslashreplace").strip()
        paths = [ln.strip() for ln in why.splitlines() if ln.startswith(("\t", "    "))]
        raise WorktreeDirty(f"applying would overwrite local changes; nothing was changed (git: {why[:600]}). "
                            "Commit or stash those files, then apply again", tuple(paths))
    moved = run_git(repo.workdir, "update-ref", "-m", reason, ref, str(new), str(old))
    if moved.returncode != 0:
        run_git(repo.workdir, "read-tree", "-m", "-u", str(new), str(old))  # put the tree back
        raise WorktreeError(f"could not move {ref} to {str(new)[:12]}: "
                            + moved.stderr.decode("utf-8", "backslashreplace").strip()[:300])


def _clean_start(repo: pygit2.Repository, head: pygit2.Oid, snapshot: str | None,
                 target: pygit2.Oid, integration_branch: str) -> pygit2.Oid | None:
    """The commit ``apply`` starts from: ``head`` with a clean working tree, or the
    ``snapshot`` of ``head`` when the working tree is still exactly that snapshot; ``None``
    when the working tree is exactly ``target``'s tree (applied already, uncommitted).

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
    if state == repo[target].peel(pygit2.Commit).tree.id:
        return None
    if state != snap.tree.id:
        paths = _changed_paths(repo, snap.tree.id, state)
        raise WorktreeDirty(
            "your working tree changed since musec snapshotted it for the workers, so their changes "
            "cannot be told from yours; apply refused. Put those files back as they were, or bring the "
            f"workers' changes in by hand (git diff {snapshot[:12]} {integration_branch} | git apply -3). "
            f"Changed:\n{list_paths(paths)}", paths,
        )
    return snap.id


def _merge_commit(repo: pygit2.Repository, start: pygit2.Oid, target: pygit2.Oid, integration_branch: str,
                  branch: str, signature: pygit2.Signature | None, by_hand: str = "") -> pygit2.Oid:
    """A merge commit of ``target`` into ``start`` (on no branch yet).

    Raises:
        MergeConflict: the merge conflicts; nothing was changed.
    """
    index = repo.merge_commits(start, target)
    if index.conflicts is not None:
        files = _file_conflicts(repo, index, DEFAULT_MAX_SIDE_CHARS)
        raise MergeConflict(
            f"merging {integration_branch} into {branch} conflicts; nothing was changed. "
            + (f"To resolve it by hand: {by_hand}. " if by_hand else "") + "Conflicts:\n"
            + list_paths([f.path for f in files]), files,
        )
    sig = signature or default_signature(repo)
    tree = index.write_tree(repo)
    return repo.create_commit(None, sig, sig, f"Merge {integration_branch} into {branch}\n", tree, [start, target])
