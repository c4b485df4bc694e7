"""End to end (real daemon, scripted model): what "always" saves is said before the answer
and is narrow for a command that destroys (fresh-user finding 1), and an allow rule for a
command does not let it overwrite a file by redirection (finding 3)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from musec.client import connection
from musec.daemon import protocol as p

from tests.conftest import Musec


def _script(tmp_path: Path, name: str, turns: list) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


def _user_config(musec: Musec, text: str) -> Path:
    path = musec.home / "config" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def conn(musec: Musec, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MUSEC_HOME", str(musec.home))
    monkeypatch.delenv("MUSEC_SOCKET", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    assert musec("daemon", "start").returncode == 0
    c = connection.connect(start=False)
    yield c
    c.close()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    import pygit2

    ws = tmp_path / "ws4"
    (ws / "src").mkdir(parents=True)
    (ws / "build").mkdir()
    (ws / "src" / "important.py").write_text("keep\n")
    (ws / "build" / "out.o").write_text("x\n")
    (ws / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (ws / "test_calc.py").write_text("import calc\n")
    pygit2.init_repository(str(ws))
    return ws


def test_always_on_rm_saves_that_command_and_a_later_rm_is_asked(
    musec: Musec, conn: connection.Connection, workspace: Path, tmp_path: Path,
) -> None:
    config = _user_config(musec, "")
    script = _script(tmp_path, "rm", [[{"tool": "bash", "input": {"command": "rm -rf build"}}],
                                      [{"tool": "bash", "input": {"command": "rm -rf src"}}],
                                      [{"text": "end"}]])
    conn.send(p.StartSession(id=conn.next_id(), workspace=str(workspace), model=script, task="clean the build",
                             approval="ask", interactive=True, end_when_idle=True, sandbox="auto"))
    started = conn.recv(30)
    assert isinstance(started, p.SessionStarted), started
    answers = iter(["always", "deny"])
    events = []
    while True:
        msg = conn.recv(30)
        if isinstance(msg, p.Event):
            ev = json.loads(msg.line)
            events.append(ev)
            if ev["type"] == "approval_requested":
                conn.send(p.ApprovalAnswer(id=conn.next_id(), session_id=started.session_id, call_id=ev["call_id"],
                                           decision=next(answers)))
        elif isinstance(msg, (p.Idle, p.SessionEnded)):
            break
        elif isinstance(msg, p.Error):
            raise AssertionError(msg.message)
    asked = [e for e in events if e["type"] == "approval_requested"]
    # The question carried the rule "always" saves; the second rm was asked about again.
    assert [(e["input"]["command"], e["always"]) for e in asked] == [
        ("rm -rf build", ["bash(rm -rf build)"]), ("rm -rf src", ["bash(rm -rf src)"])]
    resolved = [e for e in events if e["type"] == "approval_resolved"]
    assert resolved[0]["saved_rules"] == ["bash(rm -rf build)"] and resolved[1]["decision"] == "deny"
    assert not (workspace / "build").exists() and (workspace / "src" / "important.py").read_text() == "keep\n"
    saved = tomllib.loads(config.read_text())["workspaces"][str(workspace)]["permissions"]["allow"]
    assert saved == ["bash(rm -rf build)"]


@pytest.mark.parametrize("command, changed", [
    ("echo pwned > calc.py", "calc.py"),
    ("echo ok; ls && echo x >> test_calc.py", "test_calc.py"),
    ("echo ${IFS}x > ifs.txt", "ifs.txt"),
    ("ls -la | tee calc.py", "calc.py"),
])
def test_an_echo_rule_does_not_let_a_headless_run_overwrite_a_file(
    musec: Musec, workspace: Path, tmp_path: Path, command: str, changed: str,
) -> None:
    _user_config(musec, '[permissions]\nallow = ["bash(echo *)", "bash(ls *)"]\n')
    before = {f: (workspace / f).read_bytes() for f in ("calc.py", "test_calc.py")}
    script = _script(tmp_path, "byp", [[{"tool": "bash", "input": {"command": command}}], [{"text": "end"}]])
    proc = musec("run", "--agents", "none", "--model", script, "--output-format", "json", "--approval", "ask", "x",
                 cwd=workspace)
    result = json.loads(proc.stdout.splitlines()[-1])
    assert proc.returncode == 3 and result["exit_reason"] == "needs_approval", (proc.stdout, proc.stderr)
    assert {f: (workspace / f).read_bytes() for f in before} == before and not (workspace / "ifs.txt").exists()
    assert "bash(" in proc.stderr + proc.stdout  # the rule that would allow just this is named

    # With an edit rule for the file, the line runs, as edit_file would.
    _user_config(musec, f'[permissions]\nallow = ["bash(echo *)", "bash(ls *)", "bash(tee *)", "edit({changed})"]\n')
    proc = musec("run", "--agents", "none", "--model", script, "--approval", "ask", "x", cwd=workspace)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert (workspace / changed).exists() and (workspace / changed).read_bytes() != before.get(changed)


# --- the kinds left (session 5): git config on the line, programs that write, hand-written rules --

pytestmark_bwrap = pytest.mark.skipif(not Path("/usr/bin/bwrap").exists(), reason="needs bubblewrap")


def _git(cwd: Path, *args: str) -> str:
    import subprocess

    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def _run(musec: Musec, workspace: Path, tmp_path: Path, name: str, commands: list[tuple[str, str | None]],
         approval: str = "ask"):
    """A headless run of ``commands`` (each with the text its result must hold, or None)."""
    turns: list = []
    for command, expect in commands:
        turns.append([{"tool": "bash", "input": {"command": command}}])
        if expect is not None:
            turns.append([{"expect_result": expect}])
    script = _script(tmp_path, name, [*turns, [{"text": "end"}]])
    proc = musec("run", "--agents", "none", "--model", script, "--output-format", "json", "--approval", approval,
                 "--sandbox", "bwrap", "x", cwd=workspace)
    return proc, json.loads(proc.stdout.splitlines()[-1]) if proc.stdout.strip() else {}


@pytestmark_bwrap
def test_a_git_alias_on_the_line_does_not_push_past_a_deny_rule(musec: Musec, workspace: Path, tmp_path: Path) -> None:
    _git(workspace, "add", "-A")
    _git(workspace, "commit", "-qm", "first")
    _git(workspace, "init", "-q", "--bare", "remote.git")  # inside the workspace: the sandbox lets a push land
    _git(workspace, "remote", "add", "origin", str(workspace / "remote.git"))
    pushes = ["git -c alias.p=push p origin HEAD:refs/heads/main", "git -c 'alias.q=!git push' q origin HEAD:main",
              "find . -maxdepth 0 -exec git push origin HEAD:main \\;"]
    _user_config(musec, '[permissions]\nallow = ["bash(git *)", "bash(find *)"]\ndeny = ["bash(git push *)"]\n')
    proc, result = _run(musec, workspace, tmp_path, "alias", [(c, "forbids it") for c in pushes], approval="auto")
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert _git(workspace / "remote.git", "for-each-ref") == ""
    # The control: without the deny rule the same spelling does push from inside the sandbox.
    _user_config(musec, '[permissions]\nallow = ["bash(git *)"]\n')
    proc, result = _run(musec, workspace, tmp_path, "alias2", [(pushes[0], None)], approval="auto")
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "refs/heads/main" in _git(workspace / "remote.git", "for-each-ref")


@pytestmark_bwrap
@pytest.mark.parametrize("command, rule, lands, asked", [
    ("cp src/important.py .git/hooks/pre-commit", "bash(cp *)", ".git/hooks/pre-commit", True),
    ("cp src/important.py src/copy.py", "bash(cp *)", "src/copy.py", False),
    ("tar xf a.tar", "bash(tar *)", "evil.py", True),
    ("tar xf a.tar -C build", "bash(tar *)", "build/evil.py", False),
    ("tar xf a.tar -C build", "bash(ls *)", "build/evil.py", True),
    ("git checkout -- calc.py", "bash(git status *)", None, True),
    ("sed -n 'w calc.py' test_calc.py", "bash(sed *)", None, True),
])
def test_what_a_hand_written_rule_for_a_writing_program_lets_through(
    musec: Musec, workspace: Path, tmp_path: Path, command: str, rule: str, lands: str | None, asked: bool,
) -> None:
    import tarfile

    (workspace / "evil.src").write_text("x = 1\n")
    with tarfile.open(workspace / "a.tar", "w") as tar:
        tar.add(workspace / "evil.src", arcname="evil.py")
    (workspace / ".git" / "hooks").mkdir(parents=True, exist_ok=True)
    _git(workspace, "add", "calc.py", "test_calc.py")
    _git(workspace, "commit", "-qm", "first")
    (workspace / "calc.py").write_text("changed\n")
    _user_config(musec, f'[permissions]\nallow = ["{rule}"]\n')
    proc, result = _run(musec, workspace, tmp_path, "w", [(command, None)])
    if asked:
        assert proc.returncode == 3 and result["exit_reason"] == "needs_approval", (proc.stdout, proc.stderr)
        assert lands is None or not (workspace / lands).exists()
        assert (workspace / "calc.py").read_text() == "changed\n"
    else:
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        assert lands is not None and (workspace / lands).exists()


def test_a_bad_command_rule_in_the_config_is_one_clear_line(musec: Musec, workspace: Path, tmp_path: Path) -> None:
    config = _user_config(musec, '[permissions]\nallow = ["bash(npm test && rm *)"]\n')
    script = _script(tmp_path, "bad", [[{"text": "end"}]])
    proc = musec("run", "--agents", "none", "--model", script, "x", cwd=workspace)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert str(config) in lines[0] and "bash(npm test), bash(rm *)" in lines[0], lines[0]
