"""Every client loop follows a session to its end (issue 20 case 1): a client that falls
behind is cut off with ``Resync``, re-attaches from the last seq it read, and exits with
the session's exit code; a daemon that dies exits 5 at once. All against a real daemon."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import BIN, Musec
from tests.support.anthropic_server import Answer, AnthropicServer, message

BLOCKS = 2000  # one 14 KB answer as 2000 streamed pieces: far past a client's 512-message buffer


def _burst() -> list[dict]:
    return [{"text": f"{i:06d} "} for i in range(BLOCKS)]


def _script(tmp_path: Path, turns: list) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


def _cut_offs(musec: Musec) -> int:
    log = musec.home / "state" / "logs" / "musecd.log"
    return sum(1 for line in log.read_text().splitlines() if '"client_cut_off"' in line)


def test_a_long_burst_of_text_ends_the_run(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    proc = musec("run", "--model", _script(tmp_path, [_burst()]), "--approval", "auto", "go",
                 cwd=buggy_repo, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert _cut_offs(musec) >= 1  # the run really fell behind and was cut off
    assert "fell behind" in proc.stdout
    assert f"{BLOCKS - 1:06d}" in proc.stdout  # the whole answer is shown, from the log


def test_stream_json_after_a_cut_off_has_no_gap_and_no_duplicate(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    proc = musec("run", "--model", _script(tmp_path, [_burst()]), "--approval", "auto",
                 "--output-format", "stream-json", "go", cwd=buggy_repo, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    events, result = lines[:-1], lines[-1]
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert events[-1]["type"] == "session_ended"
    assert result["type"] == "result" and result["exit_code"] == 0 and result["exit_reason"] == "finished"
    assert _cut_offs(musec) >= 1


def _start(musec: Musec, cwd: Path, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """``musec run ARGS`` in the background; returns it and its session id (from stderr)."""
    proc = subprocess.Popen([str(BIN / "musec"), "run", *args], cwd=cwd, env={**musec.env, **(env or {})},
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    first = proc.stderr.readline().decode()
    assert first.startswith("session "), first + proc.stderr.read().decode()
    return proc, first.split()[1]


def test_a_stopped_client_ends_with_the_session(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    wait_for_go = "while [ ! -e go ]; do sleep 0.05; done; echo started"
    model = _script(tmp_path, [[{"tool": "bash", "input": {"command": wait_for_go}}], _burst()])
    proc, sid = _start(musec, buggy_repo, "--model", model, "--approval", "auto", "go")
    try:
        proc.send_signal(signal.SIGSTOP)  # Ctrl-Z, before the answer starts
        (buggy_repo / "go").write_text("")
        # Another terminal follows the session to its end while this one is stopped.
        watcher = musec("attach", sid, "--output-format", "stream-json", timeout=60)
        assert watcher.returncode == 0, watcher.stderr
        assert json.loads(watcher.stdout.splitlines()[-1])["type"] == "session_ended"
        ended_at = time.monotonic()
        proc.send_signal(signal.SIGCONT)
        out, err = proc.communicate(timeout=60)
        waited_s = time.monotonic() - ended_at
    finally:
        proc.kill()
    assert proc.returncode == 0, err.decode()
    assert _cut_offs(musec) >= 1
    assert f"{BLOCKS - 1:06d}" in out.decode()
    assert waited_s < 30, waited_s  # within seconds of the session's end, not blocked on the socket


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


def test_a_daemon_killed_mid_answer_exits_5_at_once(musec: Musec, buggy_repo: Path) -> None:
    half = message([{"type": "text", "text": "Looking at the pager now, then the tests."}])
    with AnthropicServer() as server:
        server.enqueue(Answer(chunks=half.chunks[:4], end="hang"))  # the first half of the text, then silence
        proc, sid = _start(musec, buggy_repo, "--model", "anthropic/claude-sonnet-4-6", "--approval", "auto", "go",
                           env={"ANTHROPIC_API_KEY": "test-key-not-real", "ANTHROPIC_BASE_URL": server.base_url})
        try:
            # mid-answer: the request is in and its first half sent (a pipe shows no text
            # before the message is complete, so the server says when)
            deadline = time.monotonic() + 60
            while not server.requests and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.requests
            pid = musec.daemon_pid()
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            killed_at = time.monotonic()
            _, err = proc.communicate(timeout=30)
            waited_s = time.monotonic() - killed_at
        finally:
            proc.kill()
    assert proc.returncode == 5, err.decode()
    assert f"musec run --resume {sid}" in err.decode()
    assert waited_s < 10, waited_s


def test_the_interactive_client_sees_each_turn_end_after_a_cut_off(
    musec: Musec, buggy_repo: Path, tmp_path: Path, monkeypatch, capsys,
) -> None:
    """The interactive loop (``TurnFollower``) after a cut-off: a turn whose ``Idle`` went
    to the cut-off subscription still ends, and the next turn is followed as usual."""
    from musec.client import connection
    from musec.client.interactive import TurnFollower
    from musec.client.render import Renderer
    from musec.daemon import protocol as p

    monkeypatch.setenv("MUSEC_HOME", str(musec.home))
    monkeypatch.delenv("MUSEC_SOCKET", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    assert musec("daemon", "start").returncode == 0
    conn = connection.connect(start=False)
    try:
        req = p.StartSession(id=conn.next_id(), workspace=str(buggy_repo), model=_script(tmp_path, [_burst(), _burst()]),
                             task="go", approval="auto", interactive=True, end_when_idle=False, sandbox="off")
        conn.send(req)
        follower = TurnFollower(conn, req.id, Renderer(color=False))
        sid = follower.follow()
        assert sid and follower.stream.resyncs >= 1
        conn.send(p.UserInput(id=conn.next_id(), session_id=sid, text="again"))
        assert follower.follow() == sid
        shown = capsys.readouterr().out
        assert shown.count(f"{BLOCKS - 1:06d}") == 2  # both answers shown whole
        conn.request(p.EndSession(id=conn.next_id(), session_id=sid))
    finally:
        conn.close()
