"""Who cut a turn off, as the model and the transcript are told (fresh-user 23): a
``musec daemon stop`` during a running command was answered to the model as "interrupted
by the person". Each cause is said as it is: the daemon stopped, the session ended by its
client, the person's Ctrl-C."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from musec.daemon import protocol as p

from tests.client.test_run_interrupt import _read_until
from tests.conftest import BIN, Musec


def _long_run(musec: Musec, repo: Path, tmp_path: Path, expect: str) -> subprocess.Popen:
    """``musec run`` of a 60 s command; the script's next turn checks what the model is told."""
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"turns": [[{"tool": "bash", "input": {"command": "sleep 60; echo slept"}}],
                                            [{"expect_result": expect}, {"text": "went on"}]]}))
    return subprocess.Popen([str(BIN / "musec"), "run", "--model", f"scripted:{script}", "--approval", "auto",
                             "--agents", "none", "slow"], cwd=repo, env=musec.env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _events(musec: Musec, sid: str) -> list[dict]:
    return [json.loads(line) for line in musec("log", sid, "--json").stdout.splitlines()]


def test_a_daemon_stop_is_said_to_be_the_daemons_not_the_persons(musec: Musec, buggy_repo: Path,
                                                                  tmp_path: Path) -> None:
    stopped = "the daemon was stopped (`musec daemon stop`) while it ran"
    proc = _long_run(musec, buggy_repo, tmp_path, stopped)
    try:
        sid = _read_until(proc.stderr, b"\n").decode().split()[1]
        _read_until(proc.stdout, b"sleep 60")  # the command runs
        assert musec("daemon", "stop", timeout=60).returncode == 0
        proc.communicate(timeout=60)
    finally:
        proc.kill()
    events = _events(musec, sid)
    cut = [e for e in events if e["type"] == "tool_interrupted"]
    assert [e["reason"] for e in cut] == [stopped]
    assert events[-1]["type"] == "session_ended" and events[-1]["message"] == "the daemon stopped"
    assert "by the person" not in json.dumps(events)
    # The transcript says so, and the model is told so when the turn goes on (its script
    # checks the tool result it is sent).
    assert f"interrupted: {stopped}" in musec("attach", sid).stdout
    went_on = musec("run", "--resume", sid, "--approval", "auto", timeout=120)
    assert went_on.returncode == 0, went_on.stdout + went_on.stderr
    assert "went on" in went_on.stdout


def _until(conn, session_id: str, kind: str) -> dict:
    """Read the session's stream until an event of ``kind``; return it."""
    while True:
        msg = conn.recv(60)
        if isinstance(msg, p.Event) and msg.session_id == session_id:
            ev = json.loads(msg.line)
            if ev["type"] == kind:
                return ev


@pytest.mark.parametrize(("stop", "said"), [
    ("interrupt", "interrupted by the person"),
    ("end", "the person ended the session while it ran"),
])
def test_each_cause_is_said_as_it_is(musec: Musec, connect, buggy_repo: Path, tmp_path: Path, stop: str,
                                     said: str) -> None:
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"turns": [[{"tool": "bash", "input": {"command": "sleep 60"}}],
                                            [{"text": "after"}]]}))
    conn = connect()
    conn.send(p.StartSession(id=conn.next_id(), workspace=str(buggy_repo), model=f"scripted:{script}", task="go",
                             approval="auto", interactive=True, end_when_idle=False, sandbox="auto", agents=[]))
    started = conn.recv(30)
    assert isinstance(started, p.SessionStarted), started
    sid = started.session_id
    _until(conn, sid, "tool_started")
    if stop == "interrupt":
        conn.send(p.Interrupt(id=conn.next_id(), session_id=sid))
    else:
        conn.send(p.EndSession(id=conn.next_id(), session_id=sid))
    assert _until(conn, sid, "tool_interrupted")["reason"] == said
    turn = _until(conn, sid, "turn_ended")
    assert turn["message"] == "the turn was interrupted" + ("" if stop == "interrupt" else f": {said}")
