"""Resuming a session whose workspace was deleted is refused in one line that says so (a
new user's resume ran on: bash blamed bubblewrap, write_file made the directory again, and
the run said "finished")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import Musec


def test_resume_refuses_a_session_whose_workspace_is_gone(musec: Musec, tmp_path: Path) -> None:
    ws = tmp_path / "gone"
    ws.mkdir()
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [[{"text": "hello"}], [{"tool": "write_file", "input": {"path": "new.txt", "content": "x"}}], [{"text": "done"}]]}))
    first = musec("run", "--model", f"scripted:{script}", "--output-format", "json", "hi", cwd=ws)
    assert first.returncode == 0, first.stderr
    sid = json.loads(first.stdout)["session_id"]
    shutil.rmtree(ws)
    proc = musec("run", "--resume", sid, "--approval", "auto", "again", cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert f"the workspace {ws} of session {sid} no longer exists" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not ws.exists()
