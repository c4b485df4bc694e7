"""The sandbox of musec's own test runs (the verifier's, an integration's) hides what the
agents' commands cannot see: read deny rules and the default credential stores (fresh-user
s5 F2); a rule hiding the workspace is a session error, not a silently broken sandbox."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from musec.agents.tools.sandbox import find_bwrap
from musec.daemon import protocol as p
from musec.daemon.agent_setup import sandbox_wrap
from musec.daemon.errors import BadRequest
from musec.daemon.paths import Paths

pytestmark = pytest.mark.skipif(find_bwrap() is None, reason="needs bubblewrap")

KEY = "FAKE-PRIVATE-KEY-77ab"


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``$HOME`` for this test, outside /tmp (the sandbox's private /tmp would hide it)."""
    try:
        path = Path(tempfile.mkdtemp(prefix="musec-home-", dir="/var/tmp")).resolve()
    except OSError:
        pytest.skip("/var/tmp is not writable here")
    (path / ".ssh").mkdir()
    (path / ".ssh" / "id_rsa").write_text(KEY + " ssh\n")
    (path / "vault").mkdir()
    (path / "vault" / "a.txt").write_text(KEY + " vault\n")
    monkeypatch.setenv("HOME", str(path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _paths(tmp_path: Path, config: str) -> Paths:
    paths = Paths({"MUSEC_HOME": str(tmp_path / "mh")})
    paths.config.mkdir(parents=True)
    (paths.config / "config.toml").write_text(config)
    return paths


def _run(argv: list[str], cwd: Path) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr


def test_test_runs_cannot_read_denied_or_default_hidden_files(home: Path, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    paths = _paths(tmp_path, '[permissions]\ndeny = ["read(~/vault/**)"]\n')
    wrap = sandbox_wrap(p.StartSession(id=1, workspace=str(ws), model="m"), paths)
    out = _run(wrap(["sh", "-c", "cat ~/.ssh/id_rsa; cat ~/vault/a.txt; echo ran"], ws), ws)
    assert "ran" in out and KEY not in out, out
    bare = _run(["sh", "-c", "cat ~/.ssh/id_rsa ~/vault/a.txt"], ws)
    assert KEY + " ssh" in bare and KEY + " vault" in bare  # outside the sandbox they are there


def test_a_rule_hiding_the_workspace_is_a_clear_session_error(home: Path, tmp_path: Path) -> None:
    ws = home / "src" / "app"
    ws.mkdir(parents=True)
    paths = _paths(tmp_path, '[permissions]\ndeny = ["read(~/**)"]\n')
    with pytest.raises(BadRequest, match=r"read deny rule read\(.*\) would hide the workspace"):
        sandbox_wrap(p.StartSession(id=1, workspace=str(ws), model="m"), paths)


def test_tilde_rules_hide_under_the_terminal_s_home_too(home: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The fresh user's case: the daemon started with one HOME, the terminal running the
    session has another, and commands get the terminal's (tool_env)."""
    daemon_home = tmp_path / "daemon-home"
    daemon_home.mkdir()
    monkeypatch.setenv("HOME", str(daemon_home))
    ws = tmp_path / "ws"
    ws.mkdir()
    paths = _paths(tmp_path, '[permissions]\ndeny = ["read(~/vault/**)"]\n')
    req = p.StartSession(id=1, workspace=str(ws), model="m", environment={"HOME": str(home), "PATH": "/usr/bin:/bin"})
    wrap = sandbox_wrap(req, paths)
    out = _run(wrap(["sh", "-c", "cat ~/.ssh/id_rsa ~/vault/a.txt; echo home=$HOME"], ws), ws)
    assert f"home={home}" in out and KEY not in out, out
