"""Fixtures for the worker tests: real git repositories built with pygit2, no user config.

The user's git configuration is ignored twice: for the git program (``GIT_CONFIG_GLOBAL``,
``GIT_CONFIG_NOSYSTEM``, used only to cross-check) and for libgit2 (its global, XDG and
system search paths point at an empty folder).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

import pygit2
import pytest
from pygit2.enums import ConfigLevel

SIG = pygit2.Signature("Test Person", "person@example.invalid", 1_700_000_000, 0)
SID = "18f0c0ffee-abc123"


@pytest.fixture(
    params=[
        pytest.param("asyncio", id="asyncio"),
        pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param


@pytest.fixture(autouse=True)
def no_user_git_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    empty = tmp_path_factory.mktemp("gitconfig")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_NAME", SIG.name)
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", SIG.email)
    monkeypatch.setenv("GIT_COMMITTER_NAME", SIG.name)
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", SIG.email)
    levels = (ConfigLevel.GLOBAL, ConfigLevel.XDG, ConfigLevel.SYSTEM)
    saved = {level: pygit2.settings.search_path[level] for level in levels}
    for level in levels:
        pygit2.settings.search_path[level] = str(empty)
    yield
    for level, value in saved.items():
        pygit2.settings.search_path[level] = value


def write_files(root: Path, files: Mapping[str, str | None]) -> None:
    """Write (or, for ``None``, delete) files under ``root``."""
    for name, text in files.items():
        path = root / name
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


def commit_files(root: Path, files: Mapping[str, str | None], message: str = "change") -> str:
    """Write ``files`` in the working tree at ``root`` and commit everything on HEAD."""
    write_files(root, files)
    repo = pygit2.Repository(str(root))
    repo.index.add_all()
    repo.index.write()
    parents = [] if repo.head_is_unborn else [repo.head.target]
    return str(repo.create_commit("HEAD", SIG, SIG, message, repo.index.write_tree(), parents))


def make_repo(root: Path, files: Mapping[str, str]) -> Path:
    """A new repository at ``root`` with one commit holding ``files``, on branch main."""
    root.mkdir(parents=True)
    pygit2.init_repository(str(root), initial_head="main")
    commit_files(root, files, "initial")
    return root


def git(root: Path, *args: str) -> str:
    """The git program's output (cross-checks only)."""
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def hash_working_copy(root: Path) -> dict[str, str]:
    """SHA-256 of every file of the working tree plus .git/index, .git/HEAD and the ref
    HEAD points to; ``.git`` may be a file (a worktree), then its git dir is hashed."""
    repo = pygit2.Repository(str(root))
    hashes = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not (Path(dirpath) == root and d == ".git")]
        for name in filenames:
            path = Path(dirpath) / name
            hashes[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    gitdir = Path(repo.path)
    for name in ("index", "HEAD"):
        if (gitdir / name).exists():
            hashes[f"<gitdir>/{name}"] = hashlib.sha256((gitdir / name).read_bytes()).hexdigest()
    if not repo.head_is_unborn:
        hashes["<head>"] = f"{repo.head.name} {repo.head.target}"
    hashes["<stashes>"] = str(len(repo.listall_stashes()))
    return hashes
