"""Ctrl-C on a headless `musec run` (fresh-user finding F-9): the first interrupts the turn
and the session then ends; the second stops waiting for that, and says so. Its old hint
("Ctrl-C again to leave it running") promised a session left running that was in fact
interrupted. Real daemon, real signals; the session's end is held back by a SessionEnd hook
waiting for a file, so the second Ctrl-C surely comes before it."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import BIN, Musec


def _read_until(stream: object, needle: bytes, timeout_s: float = 60) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout_s
    fd = stream.fileno()  # type: ignore[attr-defined]
    while needle not in seen:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"no {needle!r} in {timeout_s} s; got {seen!r}"
        chunk = os.read(fd, 65536)
        assert chunk, f"closed before {needle!r}; got {seen!r}"
        seen += chunk
    return seen


def _slow_run(musec: Musec, repo: Path, tmp_path: Path, hook: str, gate: Path) -> subprocess.Popen:
    """``musec run`` of a 60 s command, with a ``hook`` (SessionStart or SessionEnd) that
    waits until ``gate`` exists."""
    config = musec.home / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(
        f'[[hooks.{hook}]]\ncommand = "while [ ! -e {gate} ]; do sleep 0.05; done"\nsandbox = false\n')
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"turns": [[{"tool": "bash", "input": {"command": "sleep 60; echo slept"}}],
                                            [{"text": "never"}]]}))
    return subprocess.Popen([str(BIN / "musec"), "run", "--model", f"scripted:{script}", "--approval", "auto",
                             "--agents", "none", "slow"], cwd=repo, env=musec.env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_the_second_ctrl_c_stops_waiting_and_the_session_ends_interrupted(
        musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    proc = _slow_run(musec, buggy_repo, tmp_path, "SessionEnd", gate)
    try:
        first = _read_until(proc.stderr, b"\n").decode()
        assert first.startswith("session "), first
        sid = first.split()[1]
        _read_until(proc.stdout, b"sleep 60")  # the tool runs
        proc.send_signal(signal.SIGINT)
        said = _read_until(proc.stderr, b"Ctrl-C again: stop waiting for it").decode()
        assert "interrupting the turn; the session then ends" in said
        assert "leave it running" not in said
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=30)
        assert proc.returncode == 130, rest.decode()
        assert f"not waiting; the daemon ends session {sid} once its turn has stopped" in rest.decode()
    finally:
        gate.write_text("")
        proc.kill()
    # The session was interrupted, not left running: it ends so once the hook lets it.
    follow = musec("attach", sid, "--output-format", "stream-json", timeout=60)
    events = [json.loads(line) for line in follow.stdout.splitlines()]
    assert events[-1]["type"] == "session_ended" and events[-1]["exit_reason"] == "interrupted", events[-1]
    assert [e["type"] for e in events].count("tool_interrupted") == 1


def test_a_ctrl_c_before_the_first_turn_interrupts_it(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    """The Ctrl-C comes while the session starts (a SessionStart hook holds it back): the
    daemon had no turn to cancel and dropped the interrupt, so the task then ran in full."""
    gate = tmp_path / "gate"
    proc = _slow_run(musec, buggy_repo, tmp_path, "SessionStart", gate)
    try:
        first = _read_until(proc.stderr, b"\n").decode()
        assert first.startswith("session "), first
        sid = first.split()[1]
        proc.send_signal(signal.SIGINT)  # the session exists; its first turn has not begun
        _read_until(proc.stderr, b"interrupting the turn")
        gate.write_text("")
        _, rest = proc.communicate(timeout=60)
    finally:
        gate.write_text("")
        proc.kill()
    assert proc.returncode == 130, rest.decode()
    events = [json.loads(line) for line in musec("log", sid, "--json").stdout.splitlines()]
    # The turn was cancelled as it began: the command never ran to its end (it would take 60 s).
    assert not [e for e in events if e["type"] == "tool_finished"]
    assert events[-1]["type"] == "session_ended" and events[-1]["exit_reason"] == "interrupted"


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_or_sighup_interrupts_the_runs_turn_and_exits_128_plus_the_signal(
        musec: Musec, buggy_repo: Path, tmp_path: Path, signum: int, code: int) -> None:
    """Fresh-user G16: SIGTERM (a CI job cancelled, `timeout`) or SIGHUP (the terminal closed)
    killed the client alone; the daemon went on running the turn and its command."""
    gate = tmp_path / "gate"
    gate.write_text("")  # the hook lets everything through at once
    proc = _slow_run(musec, buggy_repo, tmp_path, "SessionEnd", gate)
    try:
        first = _read_until(proc.stderr, b"\n").decode()
        sid = first.split()[1]
        _read_until(proc.stdout, b"sleep 60")  # the tool runs
        proc.send_signal(signum)
        _, rest = proc.communicate(timeout=30)
    finally:
        proc.kill()
    name = signal.Signals(signum).name
    assert proc.returncode == code, (proc.returncode, rest.decode())
    said = [line for line in rest.decode().splitlines() if line.strip()]
    assert said == [f"musec: {name}: the turn of session {sid} was interrupted and the session ends "
                    f"(`musec log {sid}` shows it)"], said
    follow = musec("attach", sid, "--output-format", "stream-json", timeout=60)
    events = [json.loads(line) for line in follow.stdout.splitlines()]
    assert events[-1]["type"] == "session_ended" and events[-1]["exit_reason"] == "interrupted", events[-1]
    assert [e["type"] for e in events].count("tool_interrupted") == 1


def test_a_reader_that_leaves_the_pipe_interrupts_the_runs_turn(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    # fresh-user s8 K9: `musec run --output-format stream-json ... | head -1` exited 0 at once
    # while the agent worked on unwatched in auto mode (a write of nothing to a pipe whose
    # reader left succeeds, so the output was not seen gone). Text and json runs into a pipe
    # write only complete messages, so they see the reader gone at their next write.
    output_format = "stream-json"
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"turns": [[{"text": "working on it\n"}, {"tool": "bash", "input": {"command": "sleep 30"}}],
                                            [{"text": "done"}]]}))
    line = (f"{BIN / 'musec'} run --model scripted:{script} --approval auto --output-format {output_format} go "
            "| head -c 1 >/dev/null; echo status=${PIPESTATUS[0]}")
    proc = subprocess.run(["bash", "-c", line], env=musec.env, cwd=buggy_repo, capture_output=True, text=True,
                          timeout=60)
    assert "status=129" in proc.stdout, proc.stdout + proc.stderr
    sid = musec.json("sessions", "--json", cwd=buggy_repo)[0]["id"]
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    ended = [e for e in events if e["type"] == "turn_ended"]
    assert ended and ended[-1]["exit_reason"] == "interrupted" and not any(e["type"] == "tool_finished" and "sleep" in
                                                                      str(e.get("content")) for e in events)
