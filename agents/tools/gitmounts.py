"""Git inside a worker's sandbox: the mounts a musec worktree needs (fresh-user s5 F3).

A worker's workspace is a linked worktree (``STATE/worktrees/S/W``) whose ``.git`` file
points into the person's repository (``<common git dir>/worktrees/musec+S+W``). With only
the worktree mounted, every ``git`` command failed ("not a git repository") wherever the
repository was not visible (under /tmp, the sandbox's private /tmp hides it).

What the sandbox gives a musec worktree (bubblewrap):

- the common git dir read-only: objects, refs, config, hooks. The person's branches, their
  other worktrees and musec's own refs cannot be moved from a worker;
- the worktree's own gitdir writable (its index, ``index.lock``, ``logs/HEAD``), except
  ``HEAD``, ``commondir``, ``gitdir`` and ``config.worktree``, read-only: a worker cannot
  point its worktree at another branch (musec commits the worker's work on its ``HEAD``)
  or another repository, nor give it config that makes git run a program;
- an object store of its own over ``<common>/objects`` (``<gitdir>/musec-objects``), whose
  ``info/alternates`` names the real objects, mounted read-only at ``OBJECTS_ALIAS``: new
  objects (``git add``, ``git stash create``) go there, nothing can remove the person's.
  musec commits the worker's files itself (``workers.commit_all``), hashing them into the
  real repository, and ignores index entries whose objects it does not have;
- ``<common>/hooks`` replaced by a folder holding only a ``pre-commit`` hook that refuses
  with a message saying musec commits the work (``git commit`` would fail anyway, on the
  read-only refs; ``--no-verify`` gets git's own "Read-only file system" message).

So ``git status``, ``diff``, ``log``, ``show``, ``blame``, ``add``, ``restore``, ``stash
create`` work in a worker; ``commit``, ``branch``, ``tag``, ``checkout`` of another branch,
``stash`` (push) and ``fetch`` do not. Seatbelt (macOS) cannot mount: there the gitdir is
writable, ``_PROTECTED`` are not, and the objects stay read-only, so
``git add`` fails too (git says the object database is not writable).

Other linked worktrees (a person's own, ``git worktree add``) get only the common git dir
made visible read-only, nothing written in it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .paths import is_within

__all__ = ["OBJECTS_ALIAS", "WorktreeGit", "bwrap_git_args", "bwrap_top_args", "seatbelt_git_rules", "worktree_git", "worktree_top"]

OBJECTS_ALIAS = "/tmp/.musec-git-objects"
"""Where the real object store is mounted read-only inside a worker's sandbox (on the
sandbox's private /tmp, so the path exists nowhere else)."""

MUSEC_PREFIX = "musec+"
"""The start of the Git names of musec's worktrees (``workers.worktrees``)."""

PRE_COMMIT = """#!/bin/sh
echo "musec: a worker does not commit. musec commits everything in this worktree on its branch when the worker stops; leave your changes in place (git add is fine)." >&2
exit 1
"""

_PROTECTED = ("HEAD", "commondir", "gitdir", "config.worktree")
"""Read-only in the writable gitdir: where the worktree's branch and repository are named,
and its own config (read when the repository sets ``extensions.worktreeConfig``, as
``git sparse-checkout`` does; a ``core.fsmonitor`` there would run on the host). An empty
``config.worktree`` is made first so that there is a file to protect."""


@dataclass(frozen=True)
class WorktreeGit:
    """The git folders of a linked worktree.

    Attributes:
        gitdir: its own git dir (``<common>/worktrees/<name>``), symlinks resolved.
        common: the repository's common git dir, symlinks resolved.
        musec: whether it is one of musec's worktrees (its Git name starts ``musec+``).
        dotgit: the worktree's ``.git`` file (above the workspace when that is a folder of it).
    """

    gitdir: str
    common: str
    musec: bool
    dotgit: str = ""


def _read_small(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(4096).decode("utf-8", errors="surrogateescape")
    except OSError:
        return None


def _nearest_dotgit(folder: str) -> tuple[str, str] | None:
    """The nearest ``.git`` at or above ``folder`` (git's own discovery), and the folder
    holding it; ``None`` when there is none up to ``/``."""
    while True:
        dotgit = os.path.join(folder, ".git")
        if os.path.lexists(dotgit):
            return dotgit, folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def worktree_git(workspace: Path | str) -> WorktreeGit | None:
    """The git folders of ``workspace`` when it is a linked worktree or a folder inside one
    (a worker started from ``pkg/`` works in ``pkg/`` of its worktree): the nearest
    ``.git`` at or above it is a file ``gitdir: PATH`` and that git dir has a
    ``commondir``; ``None`` otherwise (a plain repository, a submodule, no repository, an
    unreadable or broken link)."""
    found = _nearest_dotgit(os.path.realpath(workspace))
    if found is None:
        return None
    dotgit, ws = found
    if os.path.islink(dotgit) or not os.path.isfile(dotgit):
        return None
    text = _read_small(dotgit)
    if text is None or not text.startswith("gitdir:"):
        return None
    gitdir = os.path.realpath(os.path.join(ws, text[len("gitdir:"):].strip()))
    common_text = _read_small(os.path.join(gitdir, "commondir"))
    if common_text is None or not common_text.strip():
        return None
    common = os.path.realpath(os.path.join(gitdir, common_text.strip()))
    if not os.path.isdir(common) or not os.path.isdir(os.path.join(common, "objects")):
        return None
    return WorktreeGit(gitdir, common, os.path.basename(gitdir).startswith(MUSEC_PREFIX), dotgit)


def _prepare(git: WorktreeGit) -> tuple[str, str]:
    """Make (once) the worker's object store and hook folder in its gitdir; their paths."""
    objects = os.path.join(git.gitdir, "musec-objects")
    info = os.path.join(objects, "info")
    os.makedirs(info, mode=0o755, exist_ok=True)
    alternates = os.path.join(info, "alternates")
    if _read_small(alternates) != OBJECTS_ALIAS + "\n":
        Path(alternates).write_text(OBJECTS_ALIAS + "\n", encoding="utf-8")
    config = os.path.join(git.gitdir, "config.worktree")
    if not os.path.lexists(config):
        Path(config).touch(mode=0o644)
    hooks = os.path.join(git.gitdir, "musec-hooks")
    os.makedirs(hooks, mode=0o755, exist_ok=True)
    hook = os.path.join(hooks, "pre-commit")
    if _read_small(hook) != PRE_COMMIT:
        Path(hook).write_text(PRE_COMMIT, encoding="utf-8")
    os.chmod(hook, 0o755)
    return objects, hooks


def bwrap_top_args(workspace: Path | str) -> list[str]:
    """When ``workspace`` is a folder inside a linked worktree (a worker started from
    ``pkg/`` works in ``pkg/`` of its worktree), the worktree's top read-only, so that git
    finds its ``.git`` file from the workspace: under a private ``/tmp`` the top would be
    hidden, and git does not look across the mount it would then meet. To come before the
    workspace's own bind. ``[]`` otherwise."""
    top = worktree_top(workspace)
    return [] if top is None or top == os.path.realpath(workspace) else ["--ro-bind", top, top]


def worktree_top(workspace: Path | str) -> str | None:
    """The top folder (resolved) of the linked worktree ``workspace`` is, or lies in; ``None``
    when it is not in one. A sandbox keeps it visible (not masked, even inside a hidden
    folder such as the state folder), as git needs its ``.git`` file."""
    git = worktree_git(workspace)
    return os.path.dirname(git.dotgit) if git is not None and git.dotgit else None


def bwrap_git_args(workspace: Path | str, writable: list[str], *, write: bool = True) -> list[str]:
    """The bubblewrap arguments that make git work in ``workspace`` when it is a linked
    worktree (see the module's docstring); ``[]`` when it is not, or when its gitdir lies
    in a writable root already. ``write=False`` (the ``read-only`` profile): the common
    git dir visible, nothing writable. To come after the workspace and writable-root binds
    and before the masks.

    Raises:
        OSError: the worker's object store or hook folder cannot be made in its gitdir.
    """
    git = worktree_git(workspace)
    if git is None or any(is_within(git.gitdir, root) for root in writable):
        return []
    args = ["--ro-bind", git.common, git.common]
    if not git.musec or not write:
        return args
    objects, hooks = _prepare(git)
    real_objects = os.path.join(git.common, "objects")
    args += ["--ro-bind", real_objects, OBJECTS_ALIAS]
    args += ["--bind", git.gitdir, git.gitdir]
    for name in _PROTECTED:
        path = os.path.join(git.gitdir, name)
        if os.path.isfile(path):
            args += ["--ro-bind", path, path]
    args += ["--bind", objects, real_objects]
    if os.path.isdir(os.path.join(git.common, "hooks")):
        args += ["--ro-bind", hooks, os.path.join(git.common, "hooks")]
    return args


def seatbelt_git_rules(workspace: Path | str, writable: list[str], quote: Callable[[str], str]) -> list[str]:
    """SBPL rules for a musec worktree (its gitdir writable but ``_PROTECTED``); ``quote``
    turns a path into an SBPL string. ``[]`` when not one."""
    git = worktree_git(workspace)
    if git is None or not git.musec or any(is_within(git.gitdir, root) for root in writable):
        return []
    rules = [f"(allow file-write* (subpath {quote(git.gitdir)}))"]
    literals = " ".join(f"(literal {quote(os.path.join(git.gitdir, n))})" for n in _PROTECTED)
    rules.append(f"(deny file-write* {literals})")
    return rules
