"""A headless run stopped for approval says what would let it through, by what asked: the
approval mode (`--approval auto`) or a rule (auto already ran; only `--approval never`
skips rules' asks). It used to say "--approval auto" to a run that had used it."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Musec


def _stop_line(proc) -> str:
    return next(line for line in proc.stderr.splitlines() if "needs approval" in line)


def test_a_stop_asked_by_the_mode_says_approval_auto(musec: Musec, buggy_repo: Path, fix_script: Path) -> None:
    proc = musec("run", "--model", f"scripted:{fix_script}", "--approval", "ask", "go", cwd=buggy_repo)
    assert proc.returncode == 3, proc.stderr
    line = _stop_line(proc)
    assert "approval mode ask asks for it" in line and "--approval auto" in line, line


def test_a_stop_asked_by_a_rule_under_auto_names_the_rule_and_approval_never(musec: Musec, buggy_repo: Path,
                                                                             fix_script: Path) -> None:
    config = musec.home / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[permissions]\nask = ["bash(python3 *)"]\n')
    proc = musec("run", "--model", f"scripted:{fix_script}", "--approval", "auto", "go", cwd=buggy_repo)
    assert proc.returncode == 3, proc.stderr
    line = _stop_line(proc)
    assert "rule ask bash(python3 *)" in line and "--approval never" in line, line
    assert "--approval auto" not in line, line
