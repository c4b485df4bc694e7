"""A large log is verified in a child process (daemon/verifier.py, issue 19): its report
is the in-process ``verify``'s, for an intact, a damaged and a torn log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from musec.agents.core.events import SessionStarted, ToolStarted
from musec.daemon.eventlog import EventLog, verify
from musec.daemon.verifier import verify_off_process


def _log(path: Path, n: int = 6) -> bytes:
    elog = EventLog.create(path)
    try:
        elog.append(SessionStarted(workspace="/w", model="m"))
        for i in range(1, n):
            elog.append(ToolStarted(call_id=f"c{i}", input={"n": i}))
    finally:
        elog.close()
    return path.read_bytes()


@pytest.mark.parametrize("damage", ["none", "flipped", "torn", "empty"])
def test_the_child_reports_what_verify_reports(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "s.jsonl"
    data = _log(path)
    if damage == "flipped":
        path.write_bytes(data.replace(b'"c3"', b'"c4"', 1))
    elif damage == "torn":
        path.write_bytes(data + b'{"seq":6,')
    elif damage == "empty":
        path.write_bytes(b"")
    here = verify(path)
    child = subprocess.run([sys.executable, "-m", "musec.daemon.verifier", str(path)], capture_output=True, text=True,
                           check=True)
    assert json.loads(child.stdout) == {"events": here.events, "last_h": here.last_h, "torn_bytes": here.torn_bytes,
                                        "problems": here.problems}
    assert verify_off_process(path, child_from_bytes=0) == here
    assert here.ok == (damage == "none")
