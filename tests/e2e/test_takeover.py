"""A live session whose client went away can be continued (issue 13 case 6).

kill -9 of the interactive client leaves its session live and idle in the daemon. Any
client may take it over: ``musec run --resume`` and ``musec resume`` join it (they are not
refused), and a session with no client and no work ends by itself after the configured
idle time (``[daemon] idle_timeout_s``), logged. A session that a client still follows is
not taken from it.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import BIN, Musec


def _script(tmp_path: Path, turns: list) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


def _wait_for(check, what: str, timeout_s: float = 60) -> object:
    """Poll ``check`` until it returns something true (a bounded wait, not a sleep to sync)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout_s} s")


def _live_status(musec: Musec, sid: str) -> str:
    proc = musec("sessions", "--all", "--json")
    assert proc.returncode == 0, proc.stderr
    return next((s["status"] for s in json.loads(proc.stdout) if s["id"] == sid), "")


def _read_until(proc: subprocess.Popen[bytes], needle: bytes, timeout_s: float = 60) -> bytes:
    assert proc.stdout is not None
    seen = b""
    deadline = time.monotonic() + timeout_s
    while needle not in seen:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"no {needle!r} on stdout in {timeout_s} s; got {seen!r}"
        chunk = os.read(proc.stdout.fileno(), 65536)
        assert chunk, f"stdout closed before {needle!r}; got {seen!r}"
        seen += chunk
    return seen


def _orphan(musec: Musec, cwd: Path, model: str, *options: str, still_live: bool = True) -> str:
    """An interactive session that answered one message, whose client was then killed
    (kill -9): it is live and idle in the daemon with no client. Returns its id."""
    proc = subprocess.Popen([str(BIN / "musec"), "--model", model, "--approval", "auto", *options], cwd=cwd, env=musec.env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"hello\n")
        proc.stdin.flush()
        _read_until(proc, b"first answer")
        sessions = json.loads(musec("sessions", "--all", "--json").stdout)
        assert len(sessions) == 1, sessions
        sid = sessions[0]["id"]
        _wait_for(lambda: _live_status(musec, sid) == "idle", "the session is idle")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
    if still_live:  # (with a short idle timeout it may already have ended)
        assert _live_status(musec, sid) == "idle"  # still live in the daemon, with no client
    return sid


def _events(musec: Musec, sid: str) -> list[dict]:
    proc = musec("log", sid, "--json")
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_run_resume_takes_over_a_session_whose_client_was_killed(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    model = _script(tmp_path, [[{"text": "first answer"}], [{"text": "second answer"}]])
    sid = _orphan(musec, buggy_repo, model)
    resumed = musec("run", "--resume", sid, "--output-format", "json", "go on", cwd=buggy_repo)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    out = json.loads(resumed.stdout)
    assert out["session_id"] == sid and out["result"] == "second answer" and out["exit_reason"] == "finished"
    events = _events(musec, sid)
    assert [e["text"] for e in events if e["type"] == "user_message"] == ["hello", "go on"]
    assert events[-1]["type"] == "session_ended"
    assert musec("log", "verify", sid).returncode == 0
    assert sid not in json.loads(musec("daemon", "status", "--json").stdout)["sessions"]


def test_a_headless_take_over_with_nothing_pending_is_refused_and_leaves_the_session(
        musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    """Fresh-user finding F-3 for a live session: a headless take-over with no message and
    nothing pending is refused (exit 2, one line); the session stays live and idle (it was
    ended ``finished`` before)."""
    sid = _orphan(musec, buggy_repo, _script(tmp_path, [[{"text": "first answer"}]]))
    refused = musec("run", "--resume", sid, cwd=buggy_repo)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "nothing pending" in refused.stderr
    assert _live_status(musec, sid) == "idle" and _events(musec, sid)[-1]["type"] == "turn_ended"


def test_a_headless_take_over_with_no_message_goes_on_with_a_stopped_turn(
        musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    model = _script(tmp_path, [[{"text": "first answer"}, {"tool": "bash", "input": {"command": "echo hi"}}],
                               [{"expect_result": "hi"}, {"text": "went on"}]])
    sid = _orphan(musec, buggy_repo, model, "--max-turns", "1")
    assert [e["exit_reason"] for e in _events(musec, sid) if e["type"] == "turn_ended"] == ["max_turns"]
    resumed = musec("run", "--resume", sid, "--output-format", "json", cwd=buggy_repo)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert json.loads(resumed.stdout)["result"] == "went on"
    assert [e.get("continues") for e in _events(musec, sid) if e["type"] == "session_resumed"] == ["max_turns"]


def test_a_session_with_no_client_and_no_work_ends_after_the_idle_timeout(
    musec: Musec, buggy_repo: Path, tmp_path: Path,
) -> None:
    config = musec.home / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("[daemon]\nidle_timeout_s = 1\n")
    sid = _orphan(musec, buggy_repo, _script(tmp_path, [[{"text": "first answer"}]]), still_live=False)
    _wait_for(lambda: sid not in json.loads(musec("daemon", "status", "--json").stdout)["sessions"],
              "the session with no client ends")
    end = _events(musec, sid)[-1]
    assert end["type"] == "session_ended" and end["exit_reason"] == "finished"
    assert "no client" in end["message"] and "idle_timeout_s" in end["message"]
    daemon_log = (musec.home / "state" / "logs" / "musecd.log").read_text()
    assert '"session_idle_ended"' in daemon_log
    assert musec("log", "verify", sid).returncode == 0


def test_a_session_a_client_follows_is_not_ended_or_taken(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    config = musec.home / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("[daemon]\nidle_timeout_s = 1\n")
    model = _script(tmp_path, [[{"text": "first answer"}]])
    proc = subprocess.Popen([str(BIN / "musec"), "--model", model, "--approval", "auto"], cwd=buggy_repo, env=musec.env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"hello\n")
        proc.stdin.flush()
        _read_until(proc, b"first answer")
        sid = json.loads(musec("sessions", "--all", "--json").stdout)[0]["id"]
        _wait_for(lambda: _live_status(musec, sid) == "idle", "the session is idle")
        again = musec("run", "--resume", sid, "more", cwd=buggy_repo)
        assert again.returncode == 2, again.stdout + again.stderr
        assert "is live in this daemon" in again.stderr and f"musec attach {sid}" in again.stderr
        # Its client is there: a few idle timeouts later it is still live (a bounded check:
        # the timeout is 1 s, the refused resume above took longer than that on any machine).
        time.sleep(2)
        assert _live_status(musec, sid) == "idle"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


def test_a_take_over_with_a_new_approval_mode_answers_the_approval_left_waiting(
    musec: Musec, buggy_repo: Path, tmp_path: Path,
) -> None:
    from tests.conftest import BUGGY, FIXED, LIBRARY

    edit = {"tool": "edit_file", "input": {"path": "pager.py", "old_string": BUGGY, "new_string": FIXED}}
    model = _script(tmp_path, [[edit], [{"expect_result": "edited pager.py"}, {"text": "Fixed."}]])
    proc = subprocess.Popen([str(BIN / "musec"), "--model", model, "--approval", "ask"], cwd=buggy_repo, env=musec.env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"fix it\n")
        proc.stdin.flush()
        _read_until(proc, b"Allow edit_file")  # the client asks; its person never answers
        sid = json.loads(musec("sessions", "--all", "--json").stdout)[0]["id"]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
    assert (buggy_repo / "pager.py").read_text() == LIBRARY["pager.py"]
    resumed = musec("run", "--resume", sid, "--approval", "auto", "--output-format", "json", cwd=buggy_repo)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert json.loads(resumed.stdout)["result"] == "Fixed."
    assert (buggy_repo / "pager.py").read_text() == LIBRARY["pager.py"].replace(BUGGY, FIXED)
    resolved = [e for e in _events(musec, sid) if e["type"] == "approval_resolved"]
    assert [(e["decision"], e["by"]) for e in resolved] == [("allow", "approval mode auto")]
