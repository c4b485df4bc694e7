"""A small git repository for tests outside the worker suite (built with pygit2, no user config)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pygit2

CALC = {"calc.py": "def add(a, b):\n    return a + b\n"}


def one_commit_repo(path: Path, files: Mapping[str, str] = CALC, message: str = "calc") -> Path:
    """A new repository at ``path`` whose branch ``main`` has one commit holding ``files``."""
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).write_text(text)
    repo = pygit2.init_repository(str(path), initial_head="main")
    repo.index.add_all()
    repo.index.write()
    sig = pygit2.Signature("t", "t@example.invalid")
    repo.create_commit("HEAD", sig, sig, message, repo.index.write_tree(), [])
    return path
