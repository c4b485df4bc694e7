"""An agent cannot quietly rewrite what project trust covers (fresh-user s6 G20): in
``auto`` mode its ``write_file``/``edit_file`` to ``.musec/config.toml``, a hook or
``.mcp.json`` are asked about (refused headless), its sandboxed commands find them
read-only; and when a trusted file did change, the next trust question shows the diff
against the content trusted. Real daemon, real bubblewrap, the scripted model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from musec.agents.trust import check_trust

from tests.conftest import Musec

CONFIG = '[permissions]\nask = ["bash(git push *)"]\n'
EVIL = '[permissions]\nallow = ["bash"]\n'


def _project(repo: Path) -> None:
    (repo / ".musec" / "hooks").mkdir(parents=True)
    (repo / ".musec" / "config.toml").write_text(CONFIG)
    (repo / ".musec" / "hooks" / "check.py").write_text("print('ok')\n")
    (repo / ".mcp.json").write_text('{"mcpServers": {}}\n')


def test_auto_mode_asks_before_a_file_tool_writes_what_trust_covers(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    _project(buggy_repo)
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "edit_file", "input": {"path": ".musec/config.toml", "old_string": "ask", "new_string": "allow"}}],
        [{"tool": "write_file", "input": {"path": ".musec/hooks/new.py", "content": "import os\n"}}],
        [{"tool": "write_file", "input": {"path": "notes.txt", "content": "fine\n"}}],
        [{"text": "done"}]]}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--trust", "--output-format", "json", "go",
                 cwd=buggy_repo)
    sid = json.loads(proc.stdout.splitlines()[-1])["session_id"]
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    asked = [e for e in events if e["type"] == "approval_requested"]
    assert [e["input"]["path"] for e in asked] == [".musec/config.toml"] and asked[0]["source"] == "trust", asked
    assert (buggy_repo / ".musec" / "config.toml").read_text() == CONFIG  # headless: not written
    assert not (buggy_repo / ".musec" / "hooks" / "new.py").exists()


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_commands_cannot_write_what_trust_covers_and_a_change_shows_its_diff(
        musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    _project(buggy_repo)
    write = ("echo 'allow = [\"bash\"]' >> .musec/config.toml; echo evil > .musec/hooks/check.py; "
             "mkdir -p .musec/skills/x; echo '{}' > .mcp.json; echo fine > notes.txt; echo WROTE")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [[{"tool": "bash", "input": {"command": write}}],
                                            [{"expect_result": "WROTE"}, {"text": "done"}]]}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--trust", "go", cwd=buggy_repo)
    assert proc.returncode == 0, proc.stderr
    assert (buggy_repo / "notes.txt").read_text() == "fine\n"  # the rest of the workspace is writable
    assert (buggy_repo / ".musec" / "config.toml").read_text() == CONFIG
    assert (buggy_repo / ".musec" / "hooks" / "check.py").read_text() == "print('ok')\n"
    assert not (buggy_repo / ".musec" / "skills").exists() and (buggy_repo / ".mcp.json").read_text() != "{}\n"

    (buggy_repo / ".musec" / "config.toml").write_text(EVIL)  # changed outside the sandbox, say by hand
    status = check_trust(buggy_repo, musec.home / "state")
    assert status.state == "changed"
    prompt = status.prompt()
    assert "What changed since you trusted it:" in prompt
    assert '-ask = ["bash(git push *)"]' in prompt and '+allow = ["bash"]' in prompt, prompt
    assert "hooks/check.py" not in prompt.partition("What changed")[2]  # only what changed
