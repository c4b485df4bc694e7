"""A reader that goes early is normal: ``musec log ID | head`` (fresh-user s8 H6 wrote two
tracebacks into musecd.log). The daemon notes the client's going in one line, writes no
traceback, and goes on serving; the client exits quietly, like ``git log | head``."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from musec.daemon import protocol as p

from tests.conftest import BIN, Musec

TURNS = 12


def _big_session(musec: Musec, repo: Path, tmp_path: Path) -> str:
    script = tmp_path / "big.json"
    script.write_text(json.dumps({"turns": [[{"tool": "bash", "input": {"command": f"seq {i} 40000"}}]
                                            for i in range(1, TURNS + 1)] + [[{"text": "done"}]]}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json", "go", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["session_id"]


def _daemon_log(musec: Musec) -> str:
    return (musec.home / "state" / "logs" / "musecd.log").read_text()


def _wait_for_goings(musec: Musec, n: int) -> str:
    """The daemon's log once it has noted ``n`` clients gone (or failed on them)."""
    deadline = time.monotonic() + 20
    while True:
        text = _daemon_log(musec)
        if text.count('"client_gone"') + text.count('"connection_failed"') >= n or time.monotonic() > deadline:
            return text
        time.sleep(0.05)


def test_clients_that_close_mid_answer_leave_no_traceback(musec: Musec, buggy_repo: Path, tmp_path: Path,
                                                          connect) -> None:
    sid = _big_session(musec, buggy_repo, tmp_path)
    requests = [lambda i: p.ReadLog(id=i, session_id=sid), lambda i: p.Replay(id=i, session_id=sid),
                lambda i: p.Cost(id=i, session_id=sid), lambda i: p.Attach(id=i, session_id=sid, since_seq=-1),
                lambda i: p.ListSessions(id=i)]
    for make in requests:
        conn = connect()
        conn.send(make(conn.next_id()))
        conn.close()  # before any of the answer is read
    conn = connect()  # one that read the start of a long answer, then went
    conn.send(p.ReadLog(id=conn.next_id(), session_id=sid))
    assert isinstance(conn.recv(timeout_s=30), p.Event)
    conn.close()
    text = _wait_for_goings(musec, len(requests) + 1)
    assert "Traceback" not in text and '"request_failed"' not in text and '"connection_failed"' not in text, text
    # A short answer may be written before its client's close is seen (then it ends as any
    # connection does); the one that went mid-answer is always seen going.
    assert 1 <= text.count('"client_gone"') <= len(requests) + 1, text
    assert musec("log", "verify", sid).returncode == 0  # the daemon serves on


def test_musec_commands_piped_into_head_exit_quietly(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    sid = _big_session(musec, buggy_repo, tmp_path)
    for args in (["log", sid], ["log", sid, "--json"], ["sessions", "--all"], ["sessions", "--json"],
                 ["replay", sid], ["attach", sid], ["cost", sid]):
        proc = subprocess.run(["bash", "-c", 'set -o pipefail; "$@" | head -c 1 >/dev/null; echo "${PIPESTATUS[0]}"', "-",
                               str(BIN / "musec"), *args], capture_output=True, text=True, env=musec.env, cwd=buggy_repo,
                              timeout=60)
        assert proc.stdout.strip() == "0", (args, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr and "Error" not in proc.stderr, (args, proc.stderr)
    assert "Traceback" not in _daemon_log(musec)
