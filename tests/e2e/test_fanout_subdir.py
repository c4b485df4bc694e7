"""A fan-out started from a subdirectory of a repository (user trial F27): the worker's
worktree is of the whole repository, and the worker works in the same subdirectory of it,
as the person's session does; the integration's tests run there, and ``musec apply``
brings its edits to the right files."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import Musec
from tests.e2e.test_fanout import CALC, DOUBLE, TEST_CALC, TEST_DOUBLE


def _repo(tmp_path: Path) -> Path:
    """A repository whose Python package lives in ``pkg/`` (README at the top)."""
    import pygit2

    root = tmp_path / "mono"
    (root / "pkg").mkdir(parents=True)
    (root / "README.md").write_text("a monorepo\n")
    (root / "pkg" / "calc.py").write_text(CALC)
    (root / "pkg" / "test_calc.py").write_text(TEST_CALC)
    (root / ".gitignore").write_text("__pycache__/\n")
    repo = pygit2.init_repository(str(root), initial_head="main")
    repo.index.add_all()
    repo.index.write()
    sig = pygit2.Signature("test", "test@example.invalid")
    repo.create_commit("HEAD", sig, sig, "mono", repo.index.write_tree(), [])
    return root


def test_a_worker_started_from_a_subdirectory_works_there_and_applies_there(musec: Musec, tmp_path: Path) -> None:
    root = _repo(tmp_path)
    worker = [
        [{"tool": "bash", "input": {"command": "pwd; ls"}}],
        [{"expect_result": "/w/pkg"}, {"expect_result": "test_calc.py"},
         {"tool": "write_file", "input": {"path": "double.py", "content": DOUBLE}}],
        [{"tool": "write_file", "input": {"path": "test_double.py", "content": TEST_DOUBLE}}],
        [{"tool": "edit_file", "input": {"path": "calc.py", "old_string": "a + b", "new_string": "b + a"}}],
        [{"tool": "bash", "input": {"command": "python3 -m unittest -q 2>&1; git status --short ."}}],
        [{"expect_result": "Ran 2 tests"}, {"expect_result": "?? double.py"}, {"text": "Added double()."}],
    ]
    script = tmp_path / "sub.json"
    script.write_text(json.dumps({
        "turns": [[{"tool": "spawn_workers", "input": {"tasks": [{"name": "w", "instruction": "add double"}]}}],
                  [{"expect_result": "tests passed"}, {"text": "Fan-out done."}]],
        "agents": {"worker:w": {"turns": worker}},
    }))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json", "go",
                 cwd=root / "pkg")
    sid = json.loads(proc.stdout)["session_id"] if proc.stdout.strip() else ""
    if proc.returncode != 0 and sid:
        print(musec("log", sid, "--json").stdout[-8000:])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    finished = next(e for e in events if e["type"] == "worker_finished")
    assert finished["exit_reason"] == "finished", finished["message"]  # its script's checks held: pwd, ls, tests, git status
    integration = next(e for e in events if e["type"] == "integration")
    assert integration["ok"] and integration["tests_passed"], integration
    assert "Ran 2 tests" in integration["test_output"]  # the package's tests, run in pkg/ of the merged tree

    applied = musec("apply", sid, cwd=root / "pkg")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert (root / "pkg" / "double.py").read_text() == DOUBLE
    assert (root / "pkg" / "calc.py").read_text() == CALC.replace("a + b", "b + a")
    assert not (root / "double.py").exists() and not (root / "calc.py").exists()
    status = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, env=musec.env)
    assert status.stdout == ""
