"""``musec doctor`` looks for ripgrep where the tools do: a venv that is not activated (the
README's quick start never activates it) still has the wheel's ``rg`` beside its Python."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import BIN, Musec


def test_doctor_finds_the_ripgrep_beside_the_python_off_path(musec: Musec, tmp_path: Path) -> None:
    empty = tmp_path / "empty-path"
    empty.mkdir()
    proc = musec("doctor", env={"PATH": str(empty)})
    line = next(x for x in proc.stdout.splitlines() if "ripgrep" in x)
    assert "missing" not in line and str(BIN / "rg") in line, proc.stdout


def test_a_warning_is_never_marked_with_the_check(musec: Musec) -> None:
    # F19 (fresh-user trial s5): `✓ extensions  warning: ...` read as all well
    commands = musec.home / "config" / "commands"
    commands.mkdir(parents=True)
    (commands / "model.md").write_text("switch the model to $ARGUMENTS\n")
    proc = musec("doctor")
    lines = proc.stdout.splitlines()
    assert not [x for x in lines if x.startswith("✓") and ("warning" in x or "not found" in x or "no provider key" in x)], proc.stdout
    shadowed = next(x for x in lines if "/model is shadowed" in x)
    assert shadowed.startswith("! extensions") and "rename its file" in shadowed, proc.stdout
    assert next(x for x in lines if " credentials " in x).startswith("! credentials"), proc.stdout  # no key set here
    assert proc.returncode == 0 or any(x.startswith("✗") for x in lines), proc.stdout  # a warning fails nothing


def test_doctor_leaves_no_daemon_running_that_it_started(musec: Musec) -> None:
    # fresh-user s8 K13: doctor said "not running" and left a daemon it had started to list extensions
    assert musec.daemon_pid() is None
    proc = musec("doctor")
    lines = proc.stdout.splitlines()
    assert any(x.startswith("✓ daemon") and "not running" in x for x in lines), proc.stdout
    assert "✓ extensions   (listed by a daemon started for this check and stopped again)" in lines, proc.stdout
    assert musec.daemon_pid() is None, proc.stdout
    musec("daemon", "start")
    pid = musec.daemon_pid()
    proc = musec("doctor")
    assert musec.daemon_pid() == pid and "stopped again" not in proc.stdout, proc.stdout  # one it found runs on
