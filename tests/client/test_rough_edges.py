"""Rough edges of the client found by a new user (issue 18, 10-14), each against a real
daemon through the real ``musec`` command."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, Musec


def _script(tmp_path: Path, turns: list, name: str = "s.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


def _run_json(musec: Musec, cwd: Path, *args: str, input: str | None = None) -> dict:
    proc = musec("run", "--approval", "auto", "--output-format", "json", *args, cwd=cwd, input=input)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# --- 10: sessions and --continue follow the last activity ---------------------------------


def test_sessions_and_continue_follow_the_last_activity(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    model = _script(tmp_path, [[{"text": "ok"}]])
    older = _run_json(musec, buggy_repo, "--model", model, "first")["session_id"]
    newer = _run_json(musec, buggy_repo, "--model", model, "second")["session_id"]
    assert [s["id"] for s in musec.json("sessions", "--json", cwd=buggy_repo)] == [newer, older]
    _run_json(musec, buggy_repo, "--resume", older, "more")  # the older one is now the latest active
    listed = musec.json("sessions", "--json", cwd=buggy_repo)
    assert [s["id"] for s in listed] == [older, newer]
    assert listed[0]["updated_at"] > listed[1]["updated_at"] > listed[1]["started_at"]
    assert _run_json(musec, buggy_repo, "--continue", "again")["session_id"] == older


# --- 13: one sanitiser for everything the client prints ---------------------------------

HOSTILE = "\x1b]0;pwned\x07 \x1b[2J\x9b31m\x7f\x00 \r"
FORBIDDEN = [chr(c) for c in (*range(0, 9), *range(11, 32), 127, *range(0x80, 0xA0))]


def _clean(text: str) -> bool:
    return not any(c in text for c in FORBIDDEN)


def test_log_prints_no_terminal_escapes_or_nul(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    model = _script(tmp_path, [
        [{"text": "model " + HOSTILE}, {"tool": "bash", "input": {"command": "printf 'out \\033[31m red'" + " #" + HOSTILE}}],
        [{"text": "done " + HOSTILE}],
    ])
    result = _run_json(musec, buggy_repo, "--model", model, "-", input="task " + HOSTILE)
    sid = result["session_id"]
    shown = musec("log", sid)
    assert shown.returncode == 0, shown.stderr
    assert "task" in shown.stdout and "model" in shown.stdout and "bash(" in shown.stdout
    assert _clean(shown.stdout), repr(shown.stdout)
    as_json = musec("log", sid, "--json")
    assert as_json.returncode == 0 and _clean(as_json.stdout), repr(as_json.stdout)
    logged = (musec.home / "state" / "sessions" / f"{sid}.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in as_json.stdout.splitlines()] == [json.loads(line) for line in logged]
    assert json.loads(as_json.stdout.splitlines()[1])["text"] == "task " + HOSTILE  # the same value, escaped
    followed = musec("attach", sid)
    assert _clean(followed.stdout + followed.stderr), repr(followed.stdout + followed.stderr)
    listed = musec("sessions")
    assert _clean(listed.stdout)


# --- 14: stdin over the frame limit, needs_approval once, help, README ---------------------


def test_a_task_over_the_frame_limit_is_a_one_line_error(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    model = _script(tmp_path, [[{"text": "ok"}]])
    proc = musec("run", "--model", model, "-", cwd=buggy_repo, input="x" * (17 * 1024 * 1024))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "16 MiB" in proc.stderr and "file" in proc.stderr


def test_headless_needs_approval_is_said_once(musec: Musec, buggy_repo: Path, fix_script: Path) -> None:
    proc = musec("run", "--model", f"scripted:{fix_script}", "--approval", "ask", "go", cwd=buggy_repo)
    assert proc.returncode == 3, proc.stderr
    both = proc.stdout + proc.stderr
    message = next(line for line in proc.stderr.splitlines() if "needs approval" in line).removeprefix("musec: ")
    assert both.count(message) == 1, both


def test_the_task_from_stdin_is_in_the_help(musec: Musec) -> None:
    for args in (("--help",), ("run", "--help")):
        proc = musec(*args)
        assert proc.returncode == 0 and "musec run -" in " ".join(proc.stdout.split()), proc.stdout


def test_the_readme_does_not_call_attach_read_only() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    rows = [line for line in readme.splitlines() if "musec attach" in line]
    assert rows and not any("read-only" in row for row in rows), rows
    assert "musec run -" in readme


# --- 12: a deep MUSEC_HOME ----------------------------------------------------------------


@pytest.fixture
def deep_home(tmp_path: Path) -> Path:
    home = tmp_path / ("d" * 120)
    home.mkdir()
    return home


def test_a_deep_home_gets_a_short_socket(musec: Musec, deep_home: Path) -> None:
    runtime = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    env = {"MUSEC_HOME": str(deep_home), "XDG_RUNTIME_DIR": str(runtime)}
    try:
        proc = musec("sessions", "--all", env=env)
        assert proc.returncode == 0, proc.stderr
        status = json.loads(musec("daemon", "status", "--json", env=env).stdout)
        assert status["socket"].startswith(str(runtime / "musec")) and status["state"].startswith(str(deep_home))
    finally:
        musec("daemon", "stop", env=env)
        shutil.rmtree(runtime, ignore_errors=True)


def test_a_deep_home_without_a_runtime_dir_says_what_to_do(musec: Musec, deep_home: Path) -> None:
    for args in (("sessions",), ("daemon", "run"), ("daemon", "status")):
        proc = musec(*args, env={"MUSEC_HOME": str(deep_home)}, timeout=30)
        assert proc.returncode == 5, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines()
        assert len(lines) == 1 and "MUSEC_SOCKET" in lines[0], (args, proc.stdout, proc.stderr)
        assert "None" not in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr)
    assert not os.path.exists(deep_home / "run" / "musecd.sock")


def test_help_of_every_command_builds(musec: Musec) -> None:
    """The parser builds only the command asked for; each one's help still works."""
    from musec.client.args import COMMANDS

    for name in COMMANDS:
        proc = musec(name, "--help")
        assert proc.returncode == 0 and re.search(rf"usage: musec {name}\b", proc.stdout), (name, proc.stderr)
