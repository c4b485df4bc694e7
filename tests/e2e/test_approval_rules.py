"""End to end: approval rules from the user's and a trusted project's config, workspace
trust, and "always allow" saved for later sessions, through the real CLI and daemon."""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path

import pytest
from musec.client import connection
from musec.daemon import protocol as p

from tests.conftest import BUGGY, FIXED, Musec, run_library_tests

TESTS = "python3 -m unittest -q 2>&1"


def _script(tmp_path: Path, name: str, turns: list) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


def _run_tests_script(tmp_path: Path) -> str:
    return _script(tmp_path, "tests", [[{"tool": "bash", "input": {"command": TESTS}}],
                                       [{"expect_result": "FAILED"}, {"text": "The tests fail."}]])


def _user_config(musec: Musec, text: str) -> Path:
    path = musec.home / "config" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _run(musec: Musec, repo: Path, script: str, *args: str) -> tuple[int, dict, list[dict], str]:
    proc = musec("run", "--model", script, "--output-format", "json", *args, "go", cwd=repo)
    result = json.loads(proc.stdout.splitlines()[-1])
    log = musec("log", result["session_id"], "--json")
    events = [json.loads(line) for line in log.stdout.splitlines()]
    return proc.returncode, result, events, proc.stderr


def _project_config(repo: Path, text: str) -> Path:
    path = repo / ".musec" / "config.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_user_allow_rules_let_a_headless_ask_run_through(musec: Musec, buggy_repo: Path, fix_script: Path) -> None:
    _user_config(musec, '[permissions]\nallow = ["bash(python3 *)", "edit(pager.py)"]\n')
    code, result, events, _ = _run(musec, buggy_repo, f"scripted:{fix_script}", "--approval", "ask")
    assert code == 0, result
    assert run_library_tests(buggy_repo).returncode == 0
    assert not [e for e in events if e["type"] == "approval_requested"]
    started = [(e["tool"], e["rule"], e["source"]) for e in events if e["type"] == "tool_started"]
    assert started == [("bash", "bash(python3 *)", "user"), ("read_file", "", "mode"),
                       ("edit_file", "edit(pager.py)", "user"), ("bash", "bash(python3 *)", "user")]
    assert {"rule": "bash(python3 *)", "action": "allow", "source": "user"} in events[0]["rules"]


def test_an_allow_rule_does_not_cover_a_chained_command(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    _user_config(musec, '[permissions]\nallow = ["bash(python3 *)"]\n')
    script = _script(tmp_path, "chain", [[{"tool": "bash", "input": {"command": f"{TESTS}; touch pwned"}}], [{"text": "x"}]])
    code, result, events, _ = _run(musec, buggy_repo, script, "--approval", "ask")
    assert code == 3 and result["exit_reason"] == "needs_approval"
    asked = next(e for e in events if e["type"] == "approval_requested")
    assert asked["source"] == "mode" and not (buggy_repo / "pwned").exists()


def test_a_deny_rule_refuses_in_auto_mode_and_the_log_names_it(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    _user_config(musec, '[permissions]\ndeny = ["edit(*.py)"]\n')
    script = _script(tmp_path, "edit", [
        [{"tool": "edit_file", "input": {"path": "pager.py", "old_string": BUGGY, "new_string": FIXED}}],
        [{"expect_result": "deny edit(*.py)"}, {"text": "The edit was refused."}],
    ])
    code, result, events, _ = _run(musec, buggy_repo, script, "--approval", "auto")
    assert code == 0, result
    assert BUGGY in (buggy_repo / "pager.py").read_text()
    refused = next(e for e in events if e["type"] == "tool_finished")
    assert refused["is_error"] and refused["rule"] == "edit(*.py)" and refused["source"] == "user"
    assert "config.toml" in refused["content"]
    assert not [e for e in events if e["type"] in ("tool_started", "file_edited")]


def test_a_malformed_rule_is_a_one_line_usage_error(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    path = _user_config(musec, '[permissions]\nallow = ["bash(pytest *"]\n')
    proc = musec("run", "--model", _run_tests_script(tmp_path), "go", cwd=buggy_repo)
    assert proc.returncode == 2
    message = proc.stderr.strip().splitlines()[0]
    assert str(path) in message and "allow[0]" in message and "bash(pytest *)" in message


def test_project_rules_apply_only_once_trusted_and_again_after_a_change(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    config = _project_config(buggy_repo, '[permissions]\nallow = ["bash(python3 *)"]\n')
    script = _run_tests_script(tmp_path)

    code, result, events, stderr = _run(musec, buggy_repo, script, "--approval", "ask")
    assert code == 3 and result["exit_reason"] == "needs_approval"
    assert events[0]["trust"]["state"] == "untrusted" and events[0]["rules"] == []
    assert "ignoring .musec/config.toml" in stderr and "--trust" in stderr

    code, result, events, _ = _run(musec, buggy_repo, script, "--approval", "ask", "--trust")
    assert code == 0, result
    assert events[0]["trust"]["state"] == "trusted" and events[0]["trust"]["by"] == "--trust"
    ran = next(e for e in events if e["type"] == "tool_started")
    assert (ran["rule"], ran["source"]) == ("bash(python3 *)", "project")
    record = musec.home / "state" / "trust.json"
    assert stat.S_IMODE(record.stat().st_mode) == 0o600

    # Trusted as it is: a later headless run needs no flag.
    code, result, events, _ = _run(musec, buggy_repo, script, "--approval", "ask")
    assert code == 0 and events[0]["trust"]["by"] == "record"

    # Changed (a hook appears): not trusted until the person says so again.
    hook = buggy_repo / ".musec" / "hooks" / "pre_tool.sh"
    hook.parent.mkdir()
    hook.write_text("#!/bin/sh\necho hi\n")
    code, result, events, stderr = _run(musec, buggy_repo, script, "--approval", "ask")
    assert code == 3 and events[0]["trust"]["state"] == "changed"
    assert {i["path"] for i in events[0]["trust"]["items"]} == {".musec/config.toml", ".musec/hooks/pre_tool.sh"}
    assert "changed" in stderr

    config.write_text('[permissions]\nallow = ["bash(python3 *)"]\n# edited\n')
    _user_config(musec, f"trusted_workspaces = [{json.dumps(str(buggy_repo))}]\n")
    code, result, events, _ = _run(musec, buggy_repo, script, "--approval", "ask")
    assert code == 0 and events[0]["trust"]["by"] == "config"


@pytest.fixture
def conn(musec: Musec, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MUSEC_HOME", str(musec.home))
    monkeypatch.delenv("MUSEC_SOCKET", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    assert musec("daemon", "start").returncode == 0
    c = connection.connect(start=False)
    yield c
    c.close()


def _events_until_idle(c: connection.Connection, session_id: str, answer: str | None = None) -> list[dict]:
    out = []
    while True:
        msg = c.recv(30)
        if isinstance(msg, p.Event):
            ev = json.loads(msg.line)
            out.append(ev)
            if ev["type"] == "approval_requested" and answer:
                c.send(p.ApprovalAnswer(id=c.next_id(), session_id=session_id, call_id=ev["call_id"], decision=answer))
        elif isinstance(msg, (p.Idle, p.SessionEnded)):
            return out
        elif isinstance(msg, p.Error):
            raise AssertionError(msg.message)


def test_always_allow_is_saved_for_the_workspace_and_used_later(
    musec: Musec, conn: connection.Connection, buggy_repo: Path, tmp_path: Path,
) -> None:
    comment = "# my settings\n[permissions]\ndeny = [\"read(~/.ssh/**)\"]\n"
    config = _user_config(musec, comment)
    script = _script(tmp_path, "twice", [
        [{"tool": "bash", "input": {"command": TESTS}}],
        [{"expect_result": "FAILED"}, {"tool": "bash", "input": {"command": "python3 -m unittest -v 2>&1"}}],
        [{"expect_result": "FAILED"}, {"text": "done"}],
    ])
    req = p.StartSession(id=conn.next_id(), workspace=str(buggy_repo), model=script, task="go", approval="ask",
                         interactive=True, end_when_idle=True, sandbox="auto")
    conn.send(req)
    started = conn.recv(30)
    assert isinstance(started, p.SessionStarted), started
    events = _events_until_idle(conn, started.session_id, answer="always")
    asked = [e for e in events if e["type"] == "approval_requested"]
    assert len(asked) == 1  # the second python3 call went through on the saved rule
    assert asked[0]["always"] == ["bash(python3 -m unittest *)"]  # said before the answer
    resolved = next(e for e in events if e["type"] == "approval_resolved")
    assert resolved["decision"] == "always" and resolved["saved_rules"] == ["bash(python3 -m unittest *)"]
    assert resolved["saved_to"] == str(config) and resolved["by"]
    second = [e for e in events if e["type"] == "tool_started"][1]
    assert (second["rule"], second["source"]) == ("bash(python3 -m unittest *)", "user")
    text = config.read_text()
    assert text.startswith(comment)  # the person's text is kept
    assert tomllib.loads(text)["workspaces"][str(buggy_repo)]["permissions"]["allow"] == ["bash(python3 -m unittest *)"]

    code, result, events, _ = _run(musec, buggy_repo, _run_tests_script(tmp_path), "--approval", "ask")
    assert code == 0, result


def test_interactive_start_asks_for_trust_listing_the_hooks(
    musec: Musec, conn: connection.Connection, buggy_repo: Path, tmp_path: Path,
) -> None:
    _project_config(buggy_repo, '[permissions]\nallow = ["bash(python3 *)"]\n')
    hook = buggy_repo / ".musec" / "hooks" / "session_start"
    hook.parent.mkdir()
    hook.write_text("#!/bin/sh\ntrue\n")
    os.chmod(hook, 0o755)
    skill = buggy_repo / ".musec" / "skills" / "release" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("# Release\n")
    req = p.StartSession(id=conn.next_id(), workspace=str(buggy_repo), model=_run_tests_script(tmp_path), task="go",
                         approval="ask", interactive=True, end_when_idle=True, sandbox="auto", ask_trust=True)
    conn.send(req)
    refused = conn.recv(30)
    assert isinstance(refused, p.Error) and refused.code == "trust_required", refused
    assert ".musec/hooks/session_start (hook: runs as a command)" in refused.message
    assert ".musec/skills/release/SKILL.md" in refused.message and ".musec/config.toml" in refused.message
    assert musec("sessions", "--json", cwd=buggy_repo).stdout.strip() == "[]"  # nothing was started

    conn.send(p.StartSession(id=conn.next_id(), workspace=str(buggy_repo), model=req.model, task="go", approval="ask",
                             interactive=True, end_when_idle=True, sandbox="auto", trust=True))
    started = conn.recv(30)
    assert isinstance(started, p.SessionStarted), started
    events = _events_until_idle(conn, started.session_id)
    assert not [e for e in events if e["type"] == "approval_requested"]
    assert events[0]["trust"]["state"] == "trusted"
