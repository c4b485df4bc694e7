"""What a sandboxed command or a file tool writes into ``.git`` never runs outside the
sandbox (fresh-user trial s5, F18: ``git config core.fsmonitor CMD`` in a bash call, then
``spawn_workers``, ran CMD on the host; hooks planted in ``.git/hooks`` ran on ``musec
apply``). The workspace's git config and hooks are read-only to every tool, and musec's own
git runs with hooks and fsmonitor off. Real git, real bubblewrap, the scripted model."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from musec.agents.workers.repo import run_git

from tests.conftest import Musec

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


@pytest.fixture
def outside():
    path = Path(tempfile.mkdtemp(prefix="outside", dir="/var/tmp"))  # not the sandbox's private /tmp
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@needs_bwrap
def test_tools_cannot_write_git_config_or_hooks(musec: Musec, buggy_repo: Path, tmp_path: Path, outside: Path) -> None:
    config_before = (buggy_repo / ".git" / "config").read_bytes()
    marker = outside / "ESCAPED"
    turns = [
        [{"tool": "bash", "input": {"command": f"git config core.fsmonitor 'touch {marker}; false'; echo rc=$?"}}],
        [{"tool": "bash", "input": {"command": "echo 'touch /x' > .git/hooks/pre-commit; echo rc=$?"}}],
        [{"tool": "write_file", "input": {"path": ".git/hooks/post-checkout", "content": f"#!/bin/sh\ntouch {marker}\n"}}],
        [{"tool": "edit_file", "input": {"path": ".git/config", "old_string": "[core]",
                                         "new_string": f"[core]\n\tfsmonitor = touch {marker}"}}],
        [{"tool": "write_file", "input": {"path": ".git/info/exclude", "content": "*.log\n"}}],  # not control: allowed
        [{"text": "tried"}],
    ]
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": turns}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json", "go",
                 cwd=buggy_repo)
    assert proc.returncode == 0, proc.stderr
    sid = json.loads(proc.stdout)["session_id"]
    events = [json.loads(line) for line in musec("log", sid, "--json").stdout.splitlines()]
    results = [e for e in events if e["type"] == "tool_finished"]
    assert "rc=0" not in results[0]["content"] and "rc=0" not in results[1]["content"], results[:2]
    assert "git's own config and hooks are never written by tools" in results[2]["content"]
    assert "git's own config and hooks are never written by tools" in results[3]["content"]
    assert (buggy_repo / ".git" / "info" / "exclude").read_text() == "*.log\n"
    assert (buggy_repo / ".git" / "config").read_bytes() == config_before
    assert not (buggy_repo / ".git" / "hooks" / "pre-commit").exists()
    assert not (buggy_repo / ".git" / "hooks" / "post-checkout").exists()
    assert not marker.exists()


def test_musecs_own_git_runs_no_hook_and_no_fsmonitor(tmp_path: Path) -> None:
    """A repository whose config already names an fsmonitor and whose hooks folder holds a
    reference-transaction hook (planted before this fix, or by hand): musec's git runs neither."""
    repo = tmp_path / "r"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n")
    _git(repo, "add", "a.txt")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    marker = tmp_path / "ran"
    hook = repo / ".git" / "hooks" / "reference-transaction"
    hook.write_text(f"#!/bin/sh\necho hook >> {marker}\n")
    hook.chmod(0o755)
    _git(repo, "config", "core.fsmonitor", f"echo fsmonitor >> {marker}; false")
    head = _git(repo, "rev-parse", "HEAD").strip()
    assert run_git(repo, "update-ref", "refs/heads/copy", head).returncode == 0
    assert run_git(repo, "read-tree", "-m", "-u", head, head).returncode == 0
    assert run_git(repo, "ls-files", "-t", "-z").returncode == 0
    assert not marker.exists(), marker.read_text()
    _git(repo, "update-ref", "refs/heads/other", head)  # git itself, as the person runs it: the hook runs
    assert "hook" in marker.read_text()
