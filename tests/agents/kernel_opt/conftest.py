"""Fixtures for the kernel-optimisation tests: a git workspace and the candidates of the CPU example."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents.kernel_opt.candidates import one_commit_repo


@pytest.fixture
def repo(tmp_path) -> Path:
    """A git repository with one commit on ``main``; the campaign's workspace."""
    return one_commit_repo(tmp_path / "ws")
