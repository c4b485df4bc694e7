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
