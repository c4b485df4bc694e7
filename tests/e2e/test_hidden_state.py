"""End to end with a real daemon and real bubblewrap (fresh-user s6 G12, G14, G24): a
command cannot read the person's shell history or musec's state (other sessions' logs),
whichever of the daemon's and the terminal's homes names them; a session cannot start in
a folder musec hides (``~/.ssh``); a workspace whose path is not UTF-8 is refused with one
line, and a non-UTF-8 variable in the terminal's environment does not stop a session."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Musec

KEY = "FAKE-HISTORY-SECRET-7e1b"


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A folder outside /tmp (the sandbox's private /tmp would hide one inside it anyway)."""
    try:
        path = Path(tempfile.mkdtemp(prefix="musec-g12-", dir="/var/tmp")).resolve()
    except OSError:
        pytest.skip("/var/tmp is not writable here")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_commands_cannot_read_history_or_other_sessions(outside_tmp: Path, tmp_path: Path) -> None:
    daemon_home, terminal_home = outside_tmp / "dhome", outside_tmp / "thome"
    for home in (daemon_home, terminal_home):
        (home / ".bash_history").parent.mkdir(parents=True)
        (home / ".bash_history").write_text(f"export TOKEN={KEY}\n")
    musec = Musec(outside_tmp / "mh")
    state = musec.home / "state"
    other = musec.home / "other-state"  # another musec the terminal's XDG_STATE_HOME names
    (other / "musec" / "sessions").mkdir(parents=True)
    (other / "musec" / "sessions" / "x.jsonl").write_text(f'{{"secret": "{KEY}"}}\n')
    proj = outside_tmp / "proj"
    proj.mkdir()
    (proj / "a.txt").write_text("visible\n")
    peek = (f"cat ~/.bash_history {daemon_home}/.bash_history {state}/sessions/*.jsonl "
            f"{other}/musec/sessions/x.jsonl 2>&1 | grep -c . ; ls {state}; cat a.txt; echo PEEKED")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [[{"tool": "bash", "input": {"command": peek}}],
                                            [{"expect_result": "PEEKED"}, {"text": "done"}]]}))
    try:
        first = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json", "go",
                      cwd=proj, env={"HOME": str(daemon_home)})  # starts the daemon with this HOME
        assert first.returncode == 0, first.stderr
        proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json", "go",
                     cwd=proj, env={"HOME": str(terminal_home), "XDG_STATE_HOME": str(other)})
        assert proc.returncode == 0, proc.stderr
        sid = json.loads(proc.stdout)["session_id"]
        events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
        result = next(e["content"] for e in events if e["type"] == "tool_finished")
        assert KEY not in result and "seq" not in result and "sessions" not in result, result
        assert "visible" in result and "PEEKED" in result
    finally:
        musec.stop()


def test_a_workspace_inside_a_hidden_folder_is_refused(musec: Musec, tmp_path: Path) -> None:
    home = tmp_path / "home"
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [[{"text": "done"}]]}))
    for inside in (home / ".ssh" / "work", musec.home / "state" / "sessions"):
        inside.mkdir(parents=True, exist_ok=True)
        proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "go", cwd=inside,
                     env={"HOME": str(home)})
        assert proc.returncode == 2, proc.stdout + proc.stderr
        line, = proc.stderr.strip().splitlines()
        assert "is inside" in line and "hides from the agent" in line and "elsewhere" in line, line
    assert not list((musec.home / "state" / "sessions").glob("*.jsonl"))  # no session was started


def test_a_non_utf8_workspace_is_one_line_and_a_non_utf8_variable_is_harmless(musec: Musec, tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [[{"tool": "bash", "input": {"command": "echo ran"}}], [{"text": "done"}]]}))
    odd = os.fsdecode(bytes(tmp_path) + b"/x\xff")
    os.mkdir(odd)
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "go", cwd=Path(odd))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    line, = proc.stderr.strip().splitlines()
    assert "x\\xff is not valid UTF-8" in line and "rename the folder" in line, line
    proj = tmp_path / "proj"
    proj.mkdir()
    env = {**musec.env, "ODD": os.fsdecode(b"\xfe\xff")}
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "go", cwd=proj, env=env)
    assert proc.returncode == 0, proc.stderr
