"""An ended session leaves nothing behind in the daemon (issue 19): a resumed session's
history, as large as its log, is freed when the session ends, not at some later full
collection, and nothing in the daemon (host, index, handlers, caches) keeps the session.

The daemon runs from this file's code with one observer around ``SessionHost._run_session``
(weak references only): when a session ends it notes whether the session's history is
already gone; when the next session starts (its client has had the end, so the request
that sent it is done), whether anything of the ended one survives a full collection."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Musec

OBSERVED_DAEMON = """
import gc, json, sys, weakref
import musec.daemon.host as host

run = host.SessionHost._run_session
ended = []

async def observed(self, session, task, resume_turn=False):
    gc.collect()
    for refs, seen in ended:
        seen.update({name + "_alive_after_gc": ref() is not None for name, ref in refs.items()})
        with open(sys.argv[1], "a") as out:
            out.write(json.dumps(seen) + "\\n")
    ended.clear()
    agent = session.agent
    refs = {"session": weakref.ref(session), "agent": weakref.ref(agent), "history": weakref.ref(agent.history)}
    del agent
    await run(self, session, task, resume_turn)
    ended.append((refs, {"history_gone_before_gc": refs["history"]() is None}))

host.SessionHost._run_session = observed
from musec.daemon.server import run_daemon
raise SystemExit(run_daemon())
"""


@pytest.fixture
def observed(musec: Musec) -> Iterator[Path]:
    out = musec.home / "ended.jsonl"
    log = musec.home / "daemon.stderr"
    with log.open("wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", OBSERVED_DAEMON, str(out)], env=musec.env, cwd="/",
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                start_new_session=True)
    for _ in range(600):  # until it answers
        if musec("daemon", "status", "--json").returncode == 0:
            break
        assert proc.poll() is None, log.read_text()
    else:
        pytest.fail("the daemon did not start")
    yield out
    proc.kill()
    proc.wait()


def test_an_ended_session_is_freed(musec: Musec, observed: Path, buggy_repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [[{"tool": "read_file", "input": {"path": "pager.py"}}], [{"text": "done"}],
                                            [{"text": "again"}]]}))
    first = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json", "go",
                  cwd=buggy_repo)
    assert first.returncode == 0, first.stderr
    sid = json.loads(first.stdout)["session_id"]
    resumed = musec("run", "--resume", sid, "--output-format", "json", "once more", cwd=buggy_repo)
    assert resumed.returncode == 0, resumed.stderr
    third = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "hello", cwd=buggy_repo)
    assert third.returncode == 0, third.stderr  # its start looks at the two that ended
    seen = [json.loads(line) for line in observed.read_text().splitlines()]
    assert len(seen) == 2  # the new session and the resumed one
    for ended in seen:
        assert ended == {"history_gone_before_gc": True, "session_alive_after_gc": False,
                         "agent_alive_after_gc": False, "history_alive_after_gc": False}, ended
