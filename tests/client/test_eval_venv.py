"""Harbor's venv for `musec eval` (fresh-user finding F-10): every install says so before
it starts (it was silent for minutes when it ran a second time), and a venv musec made that
an interrupted first run left without Harbor is made again, not filled in place; a venv the
person gave is filled, never removed. Real venvs and real pip, kept off the network
(``PIP_NO_INDEX``), so each install fails fast where Harbor's would download 470 MB."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from musec.client.errors import SetupFailed
from musec.client.evaluate import MADE_BY_MUSEC, ensure_venv, find_python312

PYTHON = find_python312()
needs_python312 = pytest.mark.skipif(PYTHON is None, reason="Harbor's venv needs a Python >= 3.12")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    monkeypatch.setenv("MUSEC_HOME", str(tmp_path / "home"))


def _bare_venv(path: Path) -> None:
    """A venv with no pip (quick to make): what a first run killed during its install leaves."""
    assert PYTHON is not None
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)


@needs_python312
def test_a_half_made_venv_of_musec_is_made_again_and_the_install_is_announced(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    venv = tmp_path / "harbor-venv"
    _bare_venv(venv)
    (venv / MADE_BY_MUSEC).write_text("")
    (venv / "left-over").write_text("from the interrupted run")
    with pytest.raises(SetupFailed):
        ensure_venv(venv)
    said = capsys.readouterr().err
    assert "is incomplete (an earlier install stopped part-way); making it again" in said, said
    assert "creating Harbor's venv" in said
    assert "musec: installing Harbor" in said and "470 MB" in said
    assert not venv.exists()  # the failed install leaves nothing half-made behind


@needs_python312
def test_a_venv_the_person_gave_is_filled_not_removed_and_the_install_is_announced(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    venv = tmp_path / "my-venv"
    _bare_venv(venv)
    (venv / "mine").write_text("keep")
    with pytest.raises(SetupFailed):
        ensure_venv(venv)
    said = capsys.readouterr().err
    assert "incomplete" not in said and "creating" not in said
    assert "musec: installing Harbor" in said and str(venv) in said, said
    assert (venv / "mine").read_text() == "keep"
    shutil.rmtree(venv)


@pytest.mark.parametrize(("argv", "says"), [
    (["/nonexistent/tasks", "--model", "scripted:x.json"], "/nonexistent/tasks: no such task folder"),
    (["evals-typo", "--model", "scripted:x.json"], "not a Harbor dataset NAME@VERSION"),
    (["{tasks}", "--model", "scripted:{tasks}/missing.json"], "no such script file"),
    (["{tasks}", "--model", "scripted:{tasks}/solve.json", "--ak", "bogus"], "--ak takes KEY=VALUE, got 'bogus'"),
    (["{tasks}", "--model", "scripted:{tasks}/solve.json", "--ae", "=x"], "--ae takes KEY=VALUE"),
    (["{tasks}/solve.json", "--model", "scripted:{tasks}/solve.json"], "is not a folder"),
    (["{tasks}", "--model", "m", "-k", "0"], "-k and -n must be at least 1"),
])
def test_wrong_arguments_are_refused_before_any_venv_is_made(argv: list[str], says: str, tmp_path: Path,
                                                               musec) -> None:
    """Before, a missing task folder or a bad --ak began a 470 MB Harbor install first and
    said nothing for minutes (fresh user s5 F10)."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "solve.json").write_text("[]")
    venv = tmp_path / "harbor-venv"
    proc = musec("eval", *[a.replace("{tasks}", str(tasks)) for a in argv], "--harbor-venv", str(venv), cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and says in lines[0], proc.stderr
    assert not venv.exists()
