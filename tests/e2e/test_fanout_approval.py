"""A fan-out's workers work under the session's approval mode as it is now (fresh-user s8
J5): after `/approval auto`, live or restored by a resume, every worker command still asked
("asked by the approval mode"), because the workers were built with the mode the session
started in; a headless resume then stopped on the first worker command."""

from __future__ import annotations

import json
from pathlib import Path

from musec.daemon import protocol as p

from tests.conftest import Musec
from tests.e2e.test_fanout import _repo


def _worker(name: str) -> dict:
    return {"turns": [[{"tool": "bash", "input": {"command": f"echo hi > {name}.txt"}}], [{"text": "made it"}]]}


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "modes.json"
    script.write_text(json.dumps({
        "turns": [[{"text": "ready"}],
                  [{"tool": "spawn_workers", "input": {"tasks": [{"name": "w1", "instruction": "make a file"}]}}],
                  [{"expect_result": "worker w1: finished, committed"}, {"text": "first fan-out done"}],
                  [{"tool": "spawn_workers", "input": {"tasks": [{"name": "w2", "instruction": "make a file"}]}}],
                  [{"expect_result": "worker w2: finished, committed"}, {"text": "second fan-out done"}]],
        "agents": {"worker:w1": _worker("w1"), "worker:w2": _worker("w2")},
    }))
    return script


def _until_turn_ended(conn, sid: str) -> list[dict]:
    """The session's events up to its next ``turn_ended``."""
    seen = []
    while True:
        msg = conn.recv(60)
        if isinstance(msg, p.Event) and msg.session_id == sid:
            seen.append(json.loads(msg.line))
            assert seen[-1]["type"] != "approval_requested", f"the worker was asked: {seen[-1]}"
            if seen[-1]["type"] == "turn_ended":
                return seen


def test_workers_follow_the_approval_switch_live_and_after_a_resume(musec: Musec, connect, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    script = _script(tmp_path)
    conn = connect()
    conn.send(p.StartSession(id=conn.next_id(), workspace=str(repo), model=f"scripted:{script}", task="hello",
                             approval="ask", interactive=True, end_when_idle=False, sandbox="auto", agents=[]))
    started = conn.recv(30)
    assert isinstance(started, p.SessionStarted), started
    sid = started.session_id
    _until_turn_ended(conn, sid)
    conn.send(p.SetApproval(id=conn.next_id(), session_id=sid, approval="auto"))  # `/approval auto`
    conn.send(p.UserInput(id=conn.next_id(), session_id=sid, text="split it"))
    events = _until_turn_ended(conn, sid)
    assert events[-1]["exit_reason"] == "finished", events[-1]
    finished = next(e for e in events if e["type"] == "worker_finished")
    assert finished["worker"] == "w1" and finished["exit_reason"] == "finished" and finished["commit"], finished
    conn.send(p.EndSession(id=conn.next_id(), session_id=sid))
    while not isinstance(msg := conn.recv(30), p.SessionEnded):
        assert not isinstance(msg, p.Error), msg

    # Resumed headless with no --approval: the switch holds, for the main agent and its workers.
    proc = musec("run", "--resume", sid, "split it again", cwd=repo, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    assert not [e for e in events if e["type"] == "approval_requested"]
    second = [e for e in events if e["type"] == "worker_finished" and e["worker"] == "w2"]
    assert second and second[0]["exit_reason"] == "finished" and second[0]["commit"], second
