"""What the command sandbox hides: the paths ``read`` deny rules cover, and musec's defaults.

A command sees the whole root filesystem read-only (DESIGN §11), so a secret outside the
workspace is out of a command's reach only when the sandbox masks it: bubblewrap mounts an
empty tmpfs over a hidden folder and ``/dev/null`` over a hidden file, Seatbelt denies
``file-read*`` on them (``sandbox.bwrap_argv``, ``sandbox.seatbelt_profile``).

Two sources, both resolved at each call (so what exists then is what is hidden):

- the globs of the ``read`` deny rules (``SandboxPolicy.read_deny``): a fixed leading part
  (``~/.ssh`` of ``~/.ssh/**``, a literal path) is hidden whole; a pattern with wildcards
  is expanded by walking the folder before its first wildcard, at most ``MAX_HIDE_SCAN``
  entries. Every other name of a covered file in the workspace (a hard link) is hidden too.
  A rule that would hide the workspace itself is refused (``HidesWorkspace``).
- musec's defaults (``DEFAULT_HIDDEN``, ``SandboxPolicy.hide``): credential stores and
  shell histories in the home folder, musec's own ``config.toml`` and its state folder
  (every session's log and blobs). A default inside the workspace is hidden too (a session
  in ``$HOME``); one that holds the workspace or musec's own code and Python (a worker's
  worktree lies in the state folder) is hidden all but the way down to them: everything
  else in it is masked. An ``allow`` rule ``read(~/.aws/**)`` (any ``read`` allow glob
  covering the whole folder) keeps that one visible (``default_hidden``).

What no mask can hide: a file a wildcard pattern matches only after the call has started
(a command creating it), and anything under a folder with more than ``MAX_HIDE_SCAN``
entries to look at (the command is refused rather than run unmasked).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from .errors import SandboxUnavailable
from .globmatch import compile_glob
from .paths import is_within

__all__ = [
    "CREDENTIAL_STORES",
    "DEFAULT_HIDDEN",
    "SHELL_HISTORIES",
    "MAX_HIDE_SCAN",
    "HidesWorkspace",
    "default_hidden",
    "hidden_paths",
    "hidden_store_holding",
    "musec_runtime",
]

MAX_HIDE_SCAN = 200_000
"""``hidden_paths`` looks at no more than this many entries to find what a rule covers."""

CREDENTIAL_STORES = (
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.config/gcloud",
    "~/.config/gh",
    "~/.kube",
    "~/.docker/config.json",
    "~/.netrc",
    "~/.git-credentials",
    "~/.config/git/credentials",
    "~/.pypirc",
    "~/.npmrc",
    "~/.cargo/credentials.toml",
    "~/.password-store",
    "~/.local/share/keyrings",
    "~/.local/share/python_keyring",
    "~/Library/Keychains",
)
"""Credential stores hidden from commands unless an ``allow`` read rule names them: SSH and
GnuPG keys, cloud and cluster credentials (AWS, Azure, gcloud, kubectl), the GitHub CLI's
token, registry tokens (docker, PyPI, npm, cargo), git's and netrc's stored passwords,
``pass``, and the system keyrings musec's own keys may live in (Secret Service, the
``keyrings.alt`` file backend, the macOS Keychain)."""

SHELL_HISTORIES = (
    "~/.bash_history",
    "~/.zsh_history",
    "~/.zhistory",
    "~/.histfile",
    "~/.sh_history",
    "~/.local/share/fish/fish_history",
    "~/.config/fish/fish_history",
    "~/.local/share/atuin",
    "~/.config/nushell/history.txt",
    "~/.config/nushell/history.sqlite3",
    "~/.python_history",
    "~/.node_repl_history",
    "~/.psql_history",
    "~/.mysql_history",
    "~/.sqlite_history",
    "~/.rediscli_history",
    "~/.irb_history",
)
"""Command histories (shells, atuin, REPLs, database clients): what a person typed,
tokens and passwords on command lines included."""

DEFAULT_HIDDEN = CREDENTIAL_STORES + SHELL_HISTORIES
"""Everything under the home folder hidden from commands by default."""

_GLOB_CHARS = set("*?[{")


class HidesWorkspace(SandboxUnavailable):
    """A ``read`` deny rule covers the workspace itself (or a folder holding it).

    Attributes:
        pattern: the rule's glob (home expanded).
        path: what it matched that holds the workspace.
    """

    def __init__(self, pattern: str, path: str, workspace: str) -> None:
        super().__init__(
            f"the read deny rule read({pattern}) would hide the workspace {workspace} from "
            f"commands (it covers {path}); narrow the rule to what must stay unread "
            "(e.g. read(~/.ssh/**)) or remove it from config.toml"
        )
        self.pattern = pattern
        self.path = path


def _expand_home(path: str, home: str) -> str:
    return home.rstrip("/") + path[1:] if path == "~" or path.startswith("~/") else path


def default_hidden(home: str | None, config_dir: str | None, allowed: Sequence[str] = (),
                   state_dir: str | None = None, extra: Sequence[str] = ()) -> tuple[str, ...]:
    """musec's default hidden paths for a person: ``DEFAULT_HIDDEN`` under ``home``,
    ``config_dir/config.toml`` (where MCP servers' settings may hold tokens), ``state_dir``
    (every session's event log and blobs) and ``extra`` (a ``$HISTFILE``), minus those an
    ``allowed`` glob covers whole (``~/.aws/**``, ``~/.aws/``, ``~/.aws``).

    Args:
        home: the home folder ``~`` stands for (absolute); ``None``: none of
            ``DEFAULT_HIDDEN``.
        config_dir: musec's config folder, or ``None``.
        allowed: the globs of the ``read`` allow rules (``~`` expanded here too; relative
            ones, which are about the workspace, are ignored).
        state_dir: musec's state folder, or ``None``.
        extra: more absolute paths (relative ones are ignored).

    Returns:
        Absolute paths (not resolved; they may not exist).
    """
    paths = [_expand_home(p, home) for p in DEFAULT_HIDDEN] if home else []
    if config_dir:
        paths.append(os.path.join(config_dir, "config.toml"))
    if state_dir:
        paths.append(state_dir)
    paths += [p for p in extra if p.startswith("/")]
    globs = []
    for raw in allowed:
        pattern = _expand_home(raw, home) if home else raw
        if pattern.startswith("/"):
            try:
                globs.append(compile_glob(pattern))
            except ValueError:
                continue
    kept = []
    for path in paths:
        rel = path.lstrip("/")
        if not any(g.fullmatch(rel) or g.fullmatch(rel + "/*probe*") for g in globs):
            kept.append(path)
    return tuple(dict.fromkeys(kept))


def _walk(top: str, budget: list[int]) -> Iterator[tuple[str, bool]]:
    """``(path, is_dir)`` below ``top`` (symlinks not followed), spending ``budget``."""
    for root, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d != ".git" or root != top]
        for name, is_dir in [(d, True) for d in dirs] + [(f, False) for f in files]:
            budget[0] -= 1
            if budget[0] < 0:
                raise SandboxUnavailable(
                    f"too many files under {top} to apply the read deny rules to commands; "
                    "write the rules with a fixed leading folder (e.g. read(secret/**))"
                )
            yield os.path.join(root, name), is_dir


def _rule_matches(pattern: str, workspace: str, budget: list[int]) -> set[str]:
    full = pattern if pattern.startswith("/") else os.path.join(workspace, pattern)
    parts = full.split("/")
    fixed = next((i for i, part in enumerate(parts) if _GLOB_CHARS & set(part)), len(parts))
    prefix = "/".join(parts[:fixed]) or "/"
    rest = "/".join(parts[fixed:])
    if not os.path.lexists(prefix):
        return set()
    if rest in ("", "**"):
        return {prefix}
    regex = compile_glob(rest)
    return {path for path, _ in _walk(prefix, budget) if regex.fullmatch(os.path.relpath(path, prefix))}


def hidden_paths(
    patterns: Sequence[str], workspace: Path | str, hide: Sequence[str] = (), keep: Sequence[str] = ()
) -> list[tuple[str, bool]]:
    """What to mask, as ``(real path, is_dir)``, outermost only (nothing listed lies inside
    a listed folder).

    Covered: what the ``read`` deny globs ``patterns`` match (symlinks resolved) and every
    other name in the workspace of a covered file (hard links: the same device and inode),
    so that no spelling reaches them; and the existing paths of ``hide`` (musec's
    defaults), inside the workspace too; of one that holds the workspace or musec's runtime
    (``musec_runtime``), everything but the way down to them.

    Args:
        patterns: the deny globs, absolute (``~`` already expanded) or relative to the
            workspace (``SandboxPolicy.read_deny``).
        workspace: the workspace (or worktree) root.
        hide: absolute paths hidden by default (``SandboxPolicy.hide``).
        keep: more folders (resolved) no default may hide: the writable roots.

    Raises:
        HidesWorkspace: a glob covers the workspace or a folder holding it.
        SandboxUnavailable: a glob would need more than ``MAX_HIDE_SCAN`` entries looked at.
    """
    ws = os.path.realpath(workspace)
    budget = [MAX_HIDE_SCAN]
    found: set[str] = set()
    for pattern in patterns:
        for path in _rule_matches(pattern, ws, budget):
            real = os.path.realpath(path)
            if is_within(ws, real):
                raise HidesWorkspace(pattern, real, ws)
            found.add(real)
    linked: set[tuple[int, int]] = set()
    for path in found:
        members = [(path, False)] if not os.path.isdir(path) else _walk(path, budget)
        for member, is_dir in members:
            st = os.lstat(member)
            if not is_dir and st.st_nlink > 1:
                linked.add((st.st_dev, st.st_ino))
    if linked:
        for path, is_dir in _walk(ws, budget):
            if not is_dir:
                st = os.lstat(path)
                if (st.st_dev, st.st_ino) in linked:
                    found.add(path)
    keep = [ws, *keep, *musec_runtime()]
    for path in hide:
        if os.path.lexists(path):
            real = os.path.realpath(path)
            if not os.path.lexists(real):
                continue
            holds = [k for k in keep if is_within(k, real)]
            found.update(_around(real, holds, budget) if holds else [real])
    dirs = [p for p in found if os.path.isdir(p)]
    covered = [p for p in found if any(p != d and is_within(p, d) for d in dirs)]
    return sorted((p, os.path.isdir(p)) for p in found - set(covered) if os.path.lexists(p))


def _around(top: str, keep: Sequence[str], budget: list[int]) -> set[str]:
    """What of folder ``top`` lies off the way down to the ``keep`` paths (inside it):
    each entry of ``top`` that is not one of them and holds none, and likewise inside each
    entry that holds one."""
    if top in keep:
        return set()
    out: set[str] = set()
    try:
        names = sorted(os.listdir(top))
    except OSError:
        return out
    for name in names:
        budget[0] -= 1
        if budget[0] < 0:
            raise SandboxUnavailable(f"too many files under {top} to hide all but the workspace in it")
        path = os.path.join(top, name)
        holds = [k for k in keep if is_within(k, path)]
        if not holds:
            out.add(path)
        elif os.path.isdir(path) and not os.path.islink(path):
            out |= _around(path, holds, budget)
    return out


def musec_runtime() -> list[str]:
    """musec's own code (the folder holding ``agents/``) and Python (``sys.prefix``,
    ``sys.base_prefix``), symlinks resolved: what runs musec in a sandbox, never hidden."""
    import sys

    code = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return list(dict.fromkeys(os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, code)))


def hidden_store_holding(workspace: str, hide: Sequence[str]) -> str:
    """The folder of ``hide`` (musec's defaults: credential stores, its state folder) that
    holds ``workspace`` (resolved), or ``""``: a session there would see what the masks are
    for, so it is refused when it starts."""
    ws = os.path.realpath(workspace)
    for path in hide:
        real = os.path.realpath(path)
        if is_within(ws, real) and os.path.isdir(real):
            return real
    return ""
