"""A client started in a directory that was deleted meanwhile answers in one line that says
what to do, never with a traceback (a new user's `musec run` and `musec sessions` there
printed a FileNotFoundError traceback)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from tests.conftest import BIN, Musec


@pytest.mark.parametrize("command", ["run", "sessions"])
def test_a_deleted_current_directory_is_a_usage_error(musec: Musec, tmp_path: Path, command: str) -> None:
    script = tmp_path / "script.json"
    script.write_text("[]")
    args = ("run", "--model", f"scripted:{script}", "x") if command == "run" else ("sessions",)
    gone = tmp_path / "gone"
    gone.mkdir()
    line = f"cd {shlex.quote(str(gone))} && rmdir {shlex.quote(str(gone))} && exec {BIN / 'musec'} {shlex.join(args)}"
    proc = subprocess.run(["bash", "-c", line], env=musec.env, capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, proc.stderr
    assert "current directory no longer exists" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
