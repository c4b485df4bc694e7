"""What a plain ``pip install musec`` brings: the tools must work without the test extra."""

from __future__ import annotations

import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_ripgrep_is_a_runtime_dependency_not_only_a_test_extra() -> None:
    # The grep and glob tools run ``rg``; without it a fresh install leaves them unusable
    # (issue 18, item 15). The 14.1.0 wheel carries the binary beside the venv's python.
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert "ripgrep==14.1.0" in project["dependencies"]
    assert not any(dep.startswith("ripgrep") for dep in project["optional-dependencies"]["test"])
