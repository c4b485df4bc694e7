"""Privacy, retention and damaged logs through the real CLI."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.conftest import Musec


def _run(musec: Musec, repo: Path, tmp_path: Path, turns: list, env: dict | None = None) -> dict:
    script = tmp_path / f"s{time.monotonic_ns()}.json"
    script.write_text(json.dumps({"turns": turns}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json", "go",
                 cwd=repo, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_secrets_never_reach_the_log(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    token = "ghp_" + "T0ken" * 8
    key_shaped = "sk-ant-api03-" + "Q" * 40
    (buggy_repo / "notes.txt").write_text(f"deploy token: {token}\nold key: {key_shaped}\n")
    result = _run(musec, buggy_repo, tmp_path, [[{"tool": "bash", "input": {"command": "cat notes.txt; env"}}],
                                                 [{"text": "read them"}]], env={"GITHUB_TOKEN": token})
    log = Path(musec.home / "state" / "sessions" / f"{result['session_id']}.jsonl").read_bytes()
    assert token.encode() not in log and key_shaped.encode() not in log
    assert b"[REDACTED]" in log
    for path in musec.home.rglob("*"):
        if path.is_file() and not path.is_socket():
            assert token.encode() not in path.read_bytes(), path
    mode = (musec.home / "state" / "sessions" / f"{result['session_id']}.jsonl").stat().st_mode & 0o777
    assert mode == 0o600 and (musec.home / "state" / "sessions").stat().st_mode & 0o777 == 0o700


def test_gc_removes_old_ended_sessions_only(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    old = _run(musec, buggy_repo, tmp_path, [[{"text": "old"}]])["session_id"]
    new = _run(musec, buggy_repo, tmp_path, [[{"text": "new"}]])["session_id"]
    sessions = musec.home / "state" / "sessions"
    # A session's age comes from its log (the last event's ts), not from file times.
    dry = musec("gc", "--older-than", "0s", "--dry-run")
    assert dry.returncode == 0 and old in dry.stdout and new in dry.stdout
    assert (sessions / f"{old}.jsonl").exists()
    assert musec("gc", "--older-than", "30d").stdout.startswith("removed 0 sessions")
    # what else a session leaves under the state folder: its plan document, its campaign's results
    plan, board = musec.home / "state" / "plans" / f"{old}.md", musec.home / "state" / "kernels" / old / "leaderboard.csv"
    for path in (plan, board):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("kept until gc\n")
    done = musec("gc", "--older-than", "0s")
    assert done.returncode == 0 and "removed 2 sessions" in done.stdout
    assert not list(sessions.glob("*.jsonl"))
    assert not plan.exists() and not board.parent.exists()
    assert musec("gc", "--older-than", "soon").returncode == 2


def test_damaged_logs_are_reported_not_hidden(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    sid = _run(musec, buggy_repo, tmp_path, [[{"tool": "bash", "input": {"command": "echo hi"}}], [{"text": "done"}]])["session_id"]
    sessions = musec.home / "state" / "sessions"
    path = sessions / f"{sid}.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[3] = b"\x00" * len(lines[3])
    path.write_bytes(b"\n".join(lines))
    (sessions / "0000000empty-000000.jsonl").write_bytes(b"")

    shown = musec("log", sid)
    assert shown.returncode == 1 and "seq 3 is damaged" in shown.stderr and "Traceback" not in shown.stderr
    assert len(shown.stdout.splitlines()) == 3
    verify = musec("log", "verify", sid)
    assert verify.returncode == 1 and "seq 3" in verify.stdout
    listed = {s["id"]: s["status"] for s in musec.json("sessions", "--all", "--json")}
    assert listed["0000000empty-000000"] == "broken"
    resumed = musec("run", "--resume", sid, "more")
    assert resumed.returncode == 1 and "(seq 3) is damaged" in resumed.stderr and "Traceback" not in resumed.stderr


def test_a_session_whose_workspace_holds_musec_home_cannot_change_it(tmp_path: Path) -> None:
    """A workspace holding MUSEC_HOME (a session in ``$HOME`` with default paths): the model's
    edit of the permission config is refused, its command cannot touch another session's
    log, and both stay as they were (the fresh user's F-6 wrote both)."""
    import shutil
    import tempfile

    ws = Path(tempfile.mkdtemp(prefix="ws", dir="/tmp"))
    runner = Musec(ws / "h")
    try:
        first = _run(runner, ws, tmp_path, [[{"text": "first"}]])["session_id"]
        log = ws / "h" / "state" / "sessions" / f"{first}.jsonl"
        config = ws / "h" / "config" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text('[permissions]\ndeny = ["read(*.secret)"]\n')
        before = log.read_bytes()
        result = _run(runner, ws, tmp_path, [
            [{"tool": "write_file", "input": {"path": "h/config/config.toml", "content": '[permissions]\nallow = ["*"]\n'}}],
            [{"tool": "bash", "input": {"command": f"echo junk >> h/state/sessions/{first}.jsonl; echo ok > mine.txt"}}],
            [{"text": "tried"}]], env={"MUSEC_HOME": str(ws / "h")})
        assert result["exit_reason"] == "finished"
        assert config.read_text() == '[permissions]\ndeny = ["read(*.secret)"]\n' and log.read_bytes() == before
        assert (ws / "mine.txt").read_text() == "ok\n"
        assert runner("log", "verify", first).returncode == 0
    finally:
        runner.stop()
        shutil.rmtree(ws, ignore_errors=True)
