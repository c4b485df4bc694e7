"""Candidates and helpers shared by the kernel-optimisation tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

#: The CPU example's three kinds of candidate (the fourth is the spec's own starting point).
WRONG = "import torch\n\ndef kernel(x, w):\n    return torch.softmax(x @ w, dim=0)  # wrong axis\n"
FORBIDDEN = "import torch\nimport scipy.special\n\ndef kernel(x, w):\n    return torch.from_numpy(scipy.special.softmax((x @ w).numpy(), axis=-1))\n"
FASTER = "import torch\n\ndef kernel(x, w):\n    return torch.softmax(x @ w, dim=-1)\n"



def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def one_commit_repo(path: Path) -> Path:
    """A git repository at ``path`` with one commit on ``main`` (a campaign's workspace)."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README").write_text("kernels\n")
    git(path, "add", "README")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    return path
