"""Two sessions in one workspace (issue 13, case 3): each makes 40 edit_file calls on one
file at the same time; every edit lands, and the later session is told of the other."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import BIN, Musec

EDITS = 40


def _script(path: Path, name: str, first: dict) -> Path:
    turns = [[first]]
    turns += [[{"tool": "edit_file", "input": {"path": "shared.txt", "old_string": f"{name}{i} = 0",
                                                "new_string": f"{name}{i} = 1"}}] for i in range(EDITS)]
    turns.append([{"text": "done"}])
    path.write_text(json.dumps({"turns": turns}))
    return path


def test_two_sessions_editing_one_file_lose_nothing(musec: Musec, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "shared.txt").write_text("".join(f"{n}{i} = 0\n" for n in "ab" for i in range(EDITS)))
    # a waits until b has started, so both are live at once and their edits interleave.
    wait = {"tool": "bash", "input": {"command": "for i in $(seq 600); do [ -e b-started ] && exit 0; sleep 0.1; done; exit 1"}}
    mark = {"tool": "write_file", "input": {"path": "b-started", "content": "yes\n"}}
    a_script, b_script = _script(tmp_path / "a.json", "a", wait), _script(tmp_path / "b.json", "b", mark)
    assert musec("daemon", "start").returncode == 0
    args = ["run", "--approval", "auto", "--max-turns", str(EDITS + 5), "--output-format", "json", "edit"]
    a = subprocess.Popen([str(BIN / "musec"), *args[:1], "--model",
                         f"scripted:{a_script}", *args[1:]], cwd=ws, env=musec.env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        b = musec(*args[:1], "--model", f"scripted:{b_script}", *args[1:], cwd=ws, timeout=120)
        a_out, a_err = a.communicate(timeout=120)
    finally:
        a.kill()
    assert a.returncode == 0, a_err
    assert b.returncode == 0, b.stderr
    text = (ws / "shared.txt").read_text()
    assert text.count("= 1\n") == 2 * EDITS and "= 0" not in text
    b_sid = json.loads(b.stdout)["session_id"]
    a_sid = json.loads(a_out)["session_id"]
    told = {}
    for sid, other in ((a_sid, b_sid), (b_sid, a_sid)):
        events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
        told[sid] = [e["body"] for e in events if e["type"] == "agent_message" and e.get("from") == "daemon"]
        assert all(other in body and "Another musec session is live" in body for body in told[sid])
    assert len(told[a_sid]) + len(told[b_sid]) == 1  # whichever started second was told
    for sid in (a_sid, b_sid):
        assert musec("log", "verify", sid).returncode == 0
