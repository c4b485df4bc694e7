"""Fixtures for the kernel-optimisation tests: a git workspace and the candidates of the CPU example."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents.kernel_opt.candidates import git


@pytest.fixture
def repo(tmp_path) -> Path:
    """A git repository with one commit on ``main``; the campaign's workspace."""
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q", "-b", "main")
    (ws / "README").write_text("a project\n")
    git(ws, "add", "README")
    git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    return ws
