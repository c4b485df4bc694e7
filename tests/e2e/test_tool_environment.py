"""Tool commands get the environment of the terminal that started (or resumed) the session:
its PATH and its activated venv, not the daemon's, which is whichever shell first started it
(fresh-user trial s5, F24: `mytool: command not found`, tests run with the wrong interpreter).
Real daemon, real bubblewrap (a tool folder outside /tmp, which the sandbox keeps private)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from tests.conftest import Musec


def _run(musec: Musec, repo: Path, tmp_path: Path, env: dict[str, str], *extra: str) -> str:
    script = tmp_path / f"s{len(list(tmp_path.iterdir()))}.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "bash", "input": {"command": "mytool; echo VIRTUAL_ENV=$VIRTUAL_ENV"}}], [{"text": "ok"}]]}))
    proc = musec("run", *extra, "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json",
                 "go", cwd=repo, env=env)
    assert proc.returncode == 0, proc.stderr
    sid = json.loads(proc.stdout)["session_id"]
    events = [json.loads(line) for line in musec("log", sid, "--json").stdout.splitlines()]
    return next(e["content"] for e in events if e["type"] == "tool_finished")


def test_commands_use_the_terminals_path_and_venv(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    tools = Path(tempfile.mkdtemp(prefix="tools", dir="/var/tmp"))
    try:
        (tools / "mytool").write_text("#!/bin/sh\necho MYTOOL-OK\n")
        (tools / "mytool").chmod(0o755)
        first = _run(musec, buggy_repo, tmp_path, {})  # starts the daemon with the plain PATH
        assert "MYTOOL-OK" not in first
        venv = {"PATH": f"{tools}:{musec.env['PATH']}", "VIRTUAL_ENV": str(tools)}
        second = _run(musec, buggy_repo, tmp_path, venv)  # the same daemon, another terminal
        assert "MYTOOL-OK" in second and f"VIRTUAL_ENV={tools}" in second, second
    finally:
        shutil.rmtree(tools, ignore_errors=True)
