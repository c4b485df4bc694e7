"""The README says what the product does (issue 18): every command and slash command is
in it, and what it says of the scripted model's ``expect_result`` holds, through the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

from musec.client.args import COMMANDS
from musec.client.slash import BUILTIN

from tests.conftest import REPO_ROOT, Musec

README = (REPO_ROOT / "README.md").read_text()


def test_every_command_and_slash_command_is_in_the_readme() -> None:
    assert [c for c in COMMANDS if not re.search(rf"`musec {c}\b", README)] == []
    assert [c for c in BUILTIN if not re.search(rf"{re.escape(c)}\b", README)] == []
    assert "--allow-home-workspace" in README


def test_expect_result_works_as_the_readme_says(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    assert '{"expect_result": "TEXT"}' in README and "(exit 1)" in README
    script = tmp_path / "s.json"
    turns = [[{"tool": "bash", "input": {"command": "echo hello"}}], [{"expect_result": "hello"},
             {"tool": "bash", "input": {"command": "echo again"}}], [{"expect_result": "goodbye"}, {"text": "never"}]]
    script.write_text(json.dumps({"turns": turns}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "go", cwd=buggy_repo)
    assert proc.returncode == 1, proc.stderr  # the first expectation held, the second did not
    assert "expected the latest tool result (toolu_scripted_1_0) to contain 'goodbye'" in proc.stderr
    assert "again" in proc.stderr.partition("actual:")[2] and "never" not in proc.stdout
