"""Keeping the best candidate: one commit per improvement on the campaign's branch (pygit2).

The commit is written straight into the repository's object database and the branch ref is
moved; the working tree, the index and the person's checked-out branch are not touched. The
first commit's parent is ``HEAD`` (when the repository has one), so the branch shows the
candidate's history on top of the person's work.
"""

from __future__ import annotations

from pathlib import Path

import pygit2

SIGNATURE = ("musec kernel-opt", "kernel-opt@musec.invalid")


def branch_name(campaign: str) -> str:
    """The branch improvements of a campaign go to: ``musec/kernel-opt/<campaign>``."""
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in campaign)
    return f"musec/kernel-opt/{safe}"


def commit_candidate(repo_dir: Path, branch: str, rel_path: str, source: str, message: str) -> str:
    """Commit ``source`` as ``rel_path`` on ``branch``; return the commit id (hex).

    Args:
        repo_dir: a folder inside a git repository (the campaign's workspace).
        branch: the branch to move (created on first use).
        rel_path: the candidate's path relative to ``repo_dir``.
        source: the candidate's text.
        message: the commit message (first line: what improved, by how much).

    Raises:
        pygit2.GitError: not a repository, or the object database cannot be written.
    """
    found = pygit2.discover_repository(str(repo_dir))
    if found is None:
        raise pygit2.GitError(f"{repo_dir} is not inside a git repository")
    repo = pygit2.Repository(found)
    root = Path(repo.workdir).resolve()
    path_in_repo = (Path(repo_dir).resolve() / rel_path).relative_to(root).as_posix()
    ref_name = f"refs/heads/{branch}"
    parent = None
    if ref_name in repo.references:
        parent = repo.references[ref_name].peel(pygit2.Commit)
    elif not repo.head_is_unborn:
        parent = repo.head.peel(pygit2.Commit)
    index = pygit2.Index()
    if parent is not None:
        index.read_tree(parent.tree)
    blob = repo.create_blob(source.encode())
    index.add(pygit2.IndexEntry(path_in_repo, blob, pygit2.enums.FileMode.BLOB))
    tree = index.write_tree(repo)
    sig = pygit2.Signature(*SIGNATURE)
    parents = [parent.id] if parent is not None else []
    oid = repo.create_commit(None, sig, sig, message, tree, parents)
    repo.references.create(ref_name, oid, force=True)
    return str(oid)
