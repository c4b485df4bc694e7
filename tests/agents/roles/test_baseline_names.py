"""The verifier's baseline copy and test narrowing in a workspace holding a file name that
is not UTF-8 (a new user's run in such a directory ended before turn 0 with
UnicodeDecodeError from ``rg --files``). Real files, real ripgrep."""

from __future__ import annotations

import os
from pathlib import Path

from musec.agents.roles.baseline import is_text, list_files, narrow_test_command, snapshot_tree
from musec.agents.workers.testcmd import TestCommand

BAD = b"bad\xffname.txt"
BAD_TEST = b"test_\xffodd.py"


def _workspace(root: Path) -> Path:
    root.mkdir()
    (root / "app.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "test_app.py").write_text("from app import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n")
    with open(os.path.join(os.fsencode(root), BAD), "wb") as f:
        f.write(b"bytes\xfe\n")
    with open(os.path.join(os.fsencode(root), BAD_TEST), "wb") as f:
        f.write(b"from app import add\n")
    return root


def test_a_name_that_is_not_utf8_is_listed_and_copied_byte_for_byte(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    names = list_files(ws)
    assert os.fsdecode(BAD) in names and "app.py" in names
    dest = tmp_path / "copy"
    dest.mkdir()
    assert snapshot_tree(ws, dest)
    assert BAD in os.listdir(os.fsencode(dest))
    with open(os.path.join(os.fsencode(dest), BAD), "rb") as f:
        assert f.read() == b"bytes\xfe\n"


def test_narrowing_never_names_a_file_that_cannot_be_written_as_text(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    narrowed = narrow_test_command(TestCommand(("python3", "-m", "pytest", "-q"), "pyproject"), ws, ["app.py"])
    assert narrowed is not None
    assert "test_app.py" in narrowed.argv
    assert all(is_text(arg) for arg in narrowed.argv), narrowed.argv
    assert not is_text(os.fsdecode(BAD_TEST))
