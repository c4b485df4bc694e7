"""A session in ``/`` or the person's home directory (issue 18): every file of theirs would
be in the agent's reach. Headless it is refused in one line naming the flag that allows
it; in a terminal the person is asked (tests/client/test_tmux_session.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Musec


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home directory of the person's own for the client (``$HOME``)."""
    path = tmp_path / "home"
    path.mkdir()
    return path


def _script(tmp_path: Path) -> Path:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"turns": [[{"text": "Done here."}]]}))
    return path


@pytest.mark.parametrize("where", ["home", "root", "workspace-flag", "above-home"])
def test_a_headless_run_in_home_or_root_is_refused(musec: Musec, home: Path, tmp_path: Path, where: str) -> None:
    script = _script(tmp_path)
    cwd, extra = {"home": (home, []), "root": (Path("/"), []),
                  "workspace-flag": (tmp_path, ["--workspace", str(home)]),
                  "above-home": (tmp_path, [])}[where]  # like /home: every user's (fresh user s5 F20)
    proc = musec("run", "--model", f"scripted:{script}", *extra, "go", cwd=cwd, env={"HOME": str(home)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "--allow-home-workspace" in line and any(
        w in line for w in ("is your home directory", "the root directory", "a folder above your home directory")), line
    assert musec.json("sessions", "--all", "--json") == []  # nothing started


def test_a_piped_interactive_session_in_home_is_refused(musec: Musec, home: Path) -> None:
    proc = musec("--model", "anthropic/claude-sonnet-4-6", cwd=home, env={"HOME": str(home)}, input="hello\n")
    assert proc.returncode == 2 and "--allow-home-workspace" in proc.stderr, proc.stderr


def test_the_flag_allows_a_run_in_home(musec: Musec, home: Path, tmp_path: Path) -> None:
    script = _script(tmp_path)
    proc = musec("run", "--model", f"scripted:{script}", "--allow-home-workspace", "--output-format", "json", "go",
                 cwd=home, env={"HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["result"] == "Done here."


def test_a_folder_inside_home_is_not_asked_about(musec: Musec, home: Path, tmp_path: Path) -> None:
    script = _script(tmp_path)
    project = home / "project"
    project.mkdir()
    proc = musec("run", "--model", f"scripted:{script}", "go", cwd=project, env={"HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
