"""A fan-out cut short ends every worker it started (fresh-user F23/F25): the person's
interrupt, or ``musec daemon stop``, in the middle of a fan-out recorded no
``worker_finished`` for the workers it cut off, so ``musec workers``, the status line and
a resumed session showed them running for ever. Each now ends ``interrupted``, saying
why; what it changed stays in its worktree, uncommitted."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from musec.client.status import SessionStatus
from musec.daemon import protocol as p

from tests.client.test_run_interrupt import _read_until
from tests.conftest import BIN, Musec
from tests.e2e.test_fanout import _repo

HALF = "half done\n"


def _script(tmp_path: Path) -> Path:
    """Two workers: ``quick`` writes a file and stops; ``slow`` writes one, then runs a 60 s
    command (where the cut lands)."""
    tasks = [{"name": "quick", "instruction": "write a file"}, {"name": "slow", "instruction": "take long"}]
    script = tmp_path / "cut.json"
    script.write_text(json.dumps({
        "turns": [[{"tool": "spawn_workers", "input": {"tasks": tasks}}], [{"text": "after"}]],
        "agents": {
            "worker:quick": {"turns": [[{"tool": "write_file", "input": {"path": "quick.txt", "content": "quick\n"}}],
                                       [{"text": "wrote it"}]]},
            "worker:slow": {"turns": [[{"tool": "write_file", "input": {"path": "slow.txt", "content": HALF}}],
                                      [{"tool": "bash", "input": {"command": "sleep 60; echo slept"}}],
                                      [{"text": "never"}]]},
        },
    }))
    return script


def _events(musec: Musec, sid: str) -> list[dict]:
    return [json.loads(line) for line in musec("log", sid, "--json").stdout.splitlines()]


def _until(conn, session_id: str, kind: str, agent: str = "") -> dict:
    """Read the session's stream until an event of ``kind`` (of ``agent``, when given)."""
    while True:
        msg = conn.recv(60)
        if isinstance(msg, p.Event) and msg.session_id == session_id:
            ev = json.loads(msg.line)
            if ev["type"] == kind and (not agent or ev["agent"] == agent):
                return ev


def _check_ended(musec: Musec, sid: str, why: str, workers: tuple[str, ...] = ("quick", "slow")) -> dict[str, dict]:
    """Every worker spawned has exactly one ``worker_finished``; ``slow`` was cut off with
    ``why`` and its half-done file is still in its worktree, uncommitted. Returns the
    ``worker_finished`` events by worker."""
    events = _events(musec, sid)
    spawned = [e["worker"] for e in events if e["type"] == "worker_spawned"]
    finished = [e for e in events if e["type"] == "worker_finished"]
    assert sorted(spawned) == sorted(workers)
    assert sorted(e["worker"] for e in finished) == sorted(spawned), finished
    by_worker = {e["worker"]: e for e in finished}
    slow = by_worker["slow"]
    assert slow["exit_reason"] == "interrupted" and why in slow["message"], slow
    assert slow["commit"] is None
    tree = next(Path(e["path"]) for e in events if e["type"] == "worker_spawned" and e["worker"] == "slow")
    assert (tree / "slow.txt").read_text() == HALF  # kept, not committed, not removed
    status = subprocess.run(["git", "status", "--porcelain"], cwd=tree, capture_output=True, text=True, env=musec.env)
    assert "slow.txt" in status.stdout
    # the quick worker either finished (committed) before the cut or was cut off too
    assert by_worker.get("quick", {"exit_reason": "finished"})["exit_reason"] in ("finished", "interrupted")
    # the status line's fold of the log sees no live worker
    line = SessionStatus()
    for ev in events:
        line.fold(ev)
    assert not line.workers, line.workers
    return by_worker


def test_an_interrupt_mid_fan_out_ends_its_workers(musec: Musec, connect, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    conn = connect()
    conn.send(p.StartSession(id=conn.next_id(), workspace=str(repo), model=f"scripted:{_script(tmp_path)}", task="go",
                             approval="auto", interactive=True, end_when_idle=False, sandbox="auto", agents=[]))
    started = conn.recv(30)
    assert isinstance(started, p.SessionStarted), started
    sid = started.session_id
    _until(conn, sid, "tool_started", agent="worker:slow")  # its write_file
    call = _until(conn, sid, "tool_started", agent="worker:slow")
    assert call["tool"] == "bash"
    conn.send(p.Interrupt(id=conn.next_id(), session_id=sid))
    assert _until(conn, sid, "turn_ended")["exit_reason"] == "interrupted"
    _check_ended(musec, sid, "interrupted by the person")
    cut = [e for e in _events(musec, sid) if e["type"] == "tool_interrupted"]
    assert {(e["agent"], e["tool"]) for e in cut} == {("main", "spawn_workers"), ("worker:slow", "bash")}, cut
    # The session is still live: `musec workers` shows no worker running.
    workers = {w["name"]: w for w in musec.json("workers", sid, "--json")["workers"]}
    assert workers["slow"]["state"] == "interrupted", workers
    assert "running" not in {w["state"] for w in workers.values()}, workers


def test_a_daemon_stop_mid_fan_out_ends_its_workers(musec: Musec, connect, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    proc = subprocess.Popen([str(BIN / "musec"), "run", "--model", f"scripted:{_script(tmp_path)}", "--approval", "auto",
                             "--agents", "none", "--output-format", "stream-json", "go"], cwd=repo, env=musec.env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _read_until(proc.stdout, b"sleep 60")  # the slow worker's command runs
        sid = musec.json("sessions", "--all", "--json")[0]["id"]
        assert musec("daemon", "stop", timeout=60).returncode == 0
        proc.communicate(timeout=60)
    finally:
        proc.kill()
    stopped = "the daemon was stopped (`musec daemon stop`) while it ran"
    _check_ended(musec, sid, stopped)
    events = _events(musec, sid)
    assert events[-1]["type"] == "session_ended"
    # Reopened (a new daemon), the session is live and idle: no worker shows as running,
    # and none of the work is lost.
    assert musec("daemon", "start").returncode == 0
    conn = connect()
    conn.send(p.ResumeSession(id=conn.next_id(), session_id=sid, interactive=True, end_when_idle=False))
    assert isinstance(conn.recv(30), p.SessionStarted)
    while not isinstance(msg := conn.recv(60), p.Idle):
        assert not isinstance(msg, p.Error), msg
    workers = {w["name"]: w for w in musec.json("workers", sid, "--json")["workers"]}
    assert workers["slow"]["state"] == "interrupted", workers
    assert "running" not in {w["state"] for w in workers.values()}, workers
    assert musec("log", "verify", sid).returncode == 0


def test_a_crash_in_a_resumed_fan_out_is_settled_on_the_next_resume(musec: Musec, connect, tmp_path: Path) -> None:
    """A crash mid fan-out is gone on with on resume (its ``spawn_workers`` call is open);
    a second crash in that resumed fan-out left a worker with no end at all: the call had
    been answered, so nothing went on with it, and the live session showed it running."""
    musec("daemon", "stop", timeout=30)  # this test's daemons are started by its runs, crash point armed
    repo = _repo(tmp_path)
    tasks = [{"name": "slow", "instruction": "take long"}]
    script = tmp_path / "twice.json"
    script.write_text(json.dumps({
        "turns": [[{"tool": "spawn_workers", "input": {"tasks": tasks}}], [{"text": "after"}]],
        "agents": {"worker:slow": {"turns": [
            [{"tool": "write_file", "input": {"path": "slow.txt", "content": HALF}}],
            [{"tool": "bash", "input": {"command": "echo started; sleep 60"}}],
            [{"tool": "bash", "input": {"command": "echo again; sleep 60"}}],
            [{"text": "never"}]]}},
    }))
    crash = {"MUSEC_CRASH_AT": "during_tool"}
    first = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--agents", "none", "go", cwd=repo, env=crash)
    assert first.returncode == 5, first.stdout + first.stderr
    sid = first.stderr.split("musec run --resume ")[1].split("`")[0]
    again = musec("run", "--resume", sid, cwd=repo, env=crash)  # the fan-out goes on, and crashes again
    assert again.returncode == 5, again.stdout + again.stderr
    events = _events(musec, sid)
    assert "again" in json.dumps([e for e in events if e["type"] == "tool_started" and e["agent"] == "worker:slow"])
    assert not [e for e in events if e["type"] == "worker_finished"]
    assert musec("daemon", "start").returncode == 0
    conn = connect()
    conn.send(p.ResumeSession(id=conn.next_id(), session_id=sid, interactive=True, end_when_idle=False, approval="auto"))
    assert isinstance(conn.recv(30), p.SessionStarted)
    while not isinstance(msg := conn.recv(60), p.Idle):
        assert not isinstance(msg, p.Error), msg
    workers = {w["name"]: w for w in musec.json("workers", sid, "--json")["workers"]}
    assert workers["slow"]["state"] == "interrupted", workers
    _check_ended(musec, sid, "the daemon stopped while it ran", workers=("slow",))
    assert musec("log", "verify", sid).returncode == 0
    assert musec.json("replay", sid, "--json")["ok"]


def test_ctrl_c_stops_a_fan_out_a_resume_goes_on_with(musec: Musec, tmp_path: Path) -> None:
    """A resume goes on with a fan-out a crash cut off before anything else; Ctrl-C of
    ``musec run --resume`` could not stop it (it ran outside any turn), so the workers ran on."""
    repo = _repo(tmp_path)
    script = tmp_path / "crash.json"
    script.write_text(json.dumps({
        "turns": [[{"tool": "spawn_workers", "input": {"tasks": [{"name": "slow", "instruction": "take long"}]}}],
                  [{"text": "after"}]],
        "agents": {"worker:slow": {"turns": [
            [{"tool": "write_file", "input": {"path": "slow.txt", "content": HALF}}],
            [{"tool": "bash", "input": {"command": "echo started; sleep 60"}}],
            [{"tool": "bash", "input": {"command": "echo again; sleep 60"}}],
            [{"text": "never"}]]}},
    }))
    crashed = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--agents", "none", "go", cwd=repo,
                    env={"MUSEC_CRASH_AT": "during_tool"})
    assert crashed.returncode == 5, crashed.stdout + crashed.stderr
    sid = crashed.stderr.split("musec run --resume ")[1].split("`")[0]
    proc = subprocess.Popen([str(BIN / "musec"), "run", "--resume", sid, "--output-format", "stream-json"], cwd=repo,
                            env=musec.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _read_until(proc.stdout, b"echo again; sleep 60")  # the resumed worker's command runs
        proc.send_signal(signal.SIGINT)
        out, errors = proc.communicate(timeout=40)
    finally:
        proc.kill()
    assert proc.returncode == 130, out.decode() + errors.decode()
    _check_ended(musec, sid, "interrupted by the person", workers=("slow",))
    events = _events(musec, sid)
    assert not [e for e in events if e["type"] == "integration"]
    assert [e["exit_reason"] for e in events if e["type"] == "turn_ended"] == ["interrupted"]
    assert musec("log", "verify", sid).returncode == 0


def test_a_worker_whose_work_cannot_be_committed_still_ends(musec: Musec, tmp_path: Path) -> None:
    """A worker that leaves a conflict in its index cannot be committed: that error left the
    fan-out and every worker after it with no ``worker_finished``; it now ends in error,
    its work kept in its worktree, and the others are committed and integrated."""
    repo = _repo(tmp_path)
    conflict = ('b=$(git rev-parse HEAD:calc.py) && printf "100644 $b 1\\tx.py\\n100644 $b 2\\tx.py\\n100644 $b 3\\tx.py\\n"'
                ' | git update-index --index-info && git ls-files -u')
    tasks = [{"name": "tangled", "instruction": "leave a conflict"}, {"name": "quick", "instruction": "write a file"}]
    script = tmp_path / "tangled.json"
    script.write_text(json.dumps({
        "turns": [[{"tool": "spawn_workers", "input": {"tasks": tasks}}],
                  [{"expect_result": "worker tangled: error"}, {"text": "after"}]],
        "agents": {
            "worker:tangled": {"turns": [[{"tool": "write_file", "input": {"path": "slow.txt", "content": HALF}}],
                                         [{"tool": "bash", "input": {"command": conflict}}],
                                         [{"expect_result": "x.py"}, {"text": "tangled"}]]},
            "worker:quick": {"turns": [[{"tool": "write_file", "input": {"path": "quick.txt", "content": "quick\n"}}],
                                       [{"text": "wrote it"}]]},
        },
    }))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--agents", "none",
                 "--output-format", "json", "go", cwd=repo, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sid = json.loads(proc.stdout)["session_id"]
    events = _events(musec, sid)
    finished = {e["worker"]: e for e in events if e["type"] == "worker_finished"}
    assert finished["tangled"]["exit_reason"] == "error" and "could not be committed" in finished["tangled"]["message"]
    assert finished["quick"]["exit_reason"] == "finished" and finished["quick"]["commit"]
    assert any(e["type"] == "integration" for e in events)
    tree = next(Path(e["path"]) for e in events if e["type"] == "worker_spawned" and e["worker"] == "tangled")
    assert (tree / "slow.txt").read_text() == HALF
