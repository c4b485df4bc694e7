"""The verifier beside the main agent (issue 20, cases 2 and 3): the baseline runs on a copy
of the workspace while edits are checked with the tests touching them, and the reviewer
holds against a turn only the failures it introduced. Real files, real pytest runs."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from musec.agents.blackboard import Blackboard
from musec.agents.core.events import AgentMessage, AnyEvent, FileEdited, TestRun, UserMessage
from musec.agents.roles import Reviewer, Verifier
from musec.agents.roles.baseline import narrow_test_command, snapshot_tree
from musec.agents.workers.testcmd import TestCommand

from tests.agents.roles.conftest import EventList

pytestmark = pytest.mark.anyio

APP = "def add(a, b):\n    return a + b\n"
TEST_APP = "from app import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"


class Watched(EventList):
    """An ``EventList`` a test can wait on (no sleeps: woken by each event recorded)."""

    def __init__(self) -> None:
        super().__init__()
        self._changed = anyio.Event()

    def record(self, event: AnyEvent) -> AnyEvent:
        event = super().record(event)
        self._changed.set()
        self._changed = anyio.Event()
        return event

    async def wait_for(self, predicate: Any) -> list[AnyEvent]:
        with anyio.fail_after(120):
            while not (found := [e for e in self.events if predicate(e)]):
                await self._changed.wait()
        return found


def _repo(root: Path, **files: str) -> Path:
    root.mkdir()
    (root / "pytest.ini").write_text("[pytest]\n")
    for name, text in files.items():
        (root / name.replace("__", "/")).write_text(text)
    return root


def _edit(path: str, diff: str = "") -> FileEdited:
    return FileEdited(path=path, diff=diff)


@pytest.fixture(autouse=True)
def _pytest_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The verifier runs ``python3 -m pytest``: this interpreter's, which has pytest."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def _verifier(recorder: EventList, board: Blackboard, repo: Path) -> Verifier:
    return Verifier(recorder, board, repo)


async def test_an_edit_is_checked_while_a_slow_baseline_still_runs(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)  # the slow test blocks on it for as long as the test lasts: a suite that never ends
    repo = _repo(tmp_path / "repo", **{"app.py": APP, "test_app.py": TEST_APP,
                                        "test_slow.py": f"def test_slow():\n    open({str(gate)!r}).read()\n"})
    recorder, board = Watched(), Blackboard()
    verifier = _verifier(recorder, board, repo)
    try:
        async with anyio.create_task_group() as tg:
            await verifier.prepare()  # as the session does before the first turn
            assert verifier.snapshot is not None
            tg.start_soon(verifier.supervise)
            (repo / "app.py").write_text(APP.replace("a + b", "a - b"))
            verifier.notify(_edit("app.py"))
            [message] = await recorder.wait_for(lambda e: isinstance(e, AgentMessage))
            runs = recorder.of_type("test_run")
            assert all(isinstance(r, TestRun) and r.narrowed is True for r in runs), runs  # the full baseline has not ended
            after, before = runs  # the failures found in the workspace are looked for in the copy
            assert before.trigger == "baseline" and before.passed and before.command.endswith("test_app.py")
            assert after.trigger == "edit" and after.failing_tests == ["test_app.py::test_add"]
            assert "test_app.py::test_add" in message.body and message.priority == "high"
            assert board.facts["test_status"]["baseline_failing"] == []
            tg.cancel_scope.cancel()
    finally:
        verifier.close()
    assert verifier.snapshot is None  # the copy is removed with the role


async def test_the_reviewer_holds_only_failures_the_turn_introduced(tmp_path: Path) -> None:
    broken = "def test_was_already_broken():\n    assert False\n"
    repo = _repo(tmp_path / "repo", **{"app.py": APP, "test_app.py": TEST_APP, "test_old.py": broken})
    recorder, board = Watched(), Blackboard()
    verifier, reviewer = _verifier(recorder, board, repo), Reviewer(recorder, board, repo)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(verifier.supervise)
            await recorder.wait_for(lambda e: isinstance(e, TestRun) and e.trigger == "baseline")
            reviewer.notify(UserMessage(text="tidy the notes"))
            for path, text, runs in (("notes.txt", "unrelated\n", 2), ("app.py", APP.replace("a + b", "a * b"), 3)):
                (repo / path).write_text(text)
                edit = _edit(path, f"--- a/{path}\n+++ b/{path}\n@@ -0,0 +1 @@\n+{text}")
                verifier.notify(edit)
                reviewer.notify(edit)
                await recorder.wait_for(lambda e, n=runs: len(recorder.of_type("test_run")) >= n)
                if path == "notes.txt":  # the failure of the baseline is not the turn's doing
                    assert board.facts["test_status"]["failing"] == ["test_old.py::test_was_already_broken"]
                    assert await reviewer.review() == []
            findings = await reviewer.review()
            assert findings == ["the verifier's last test run has new failures: test_app.py::test_add"]
            tg.cancel_scope.cancel()
    finally:
        verifier.close()
        reviewer.close()


async def test_the_workspace_is_copied_once_when_the_session_and_the_role_both_prepare(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The session awaits prepare() before its first turn while the role's own run() (started
    # beside it) prepares too: one copy, one baseline_snapshot, no copy left behind.
    import tempfile

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # where the copies are made
    repo = _repo(tmp_path / "repo", **{"app.py": APP, "test_app.py": TEST_APP})
    recorder, board = Watched(), Blackboard()
    verifier = _verifier(recorder, board, repo)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(verifier.prepare)
            tg.start_soon(verifier.prepare)
        assert len(recorder.of_type("baseline_snapshot")) == 1, recorder.events
        assert list(temp.iterdir()) == [verifier.snapshot]
    finally:
        verifier.close()
    assert list(temp.iterdir()) == []


def test_narrowing_picks_the_tests_that_touch_the_changes(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", **{"app.py": APP, "util.py": "", "test_app.py": TEST_APP,
                                        "test_util.py": "import util\n", "test_other.py": "x = 1\n"})
    pytest_cmd = TestCommand(("python3", "-m", "pytest"), "pytest.ini")
    assert narrow_test_command(pytest_cmd, repo, ["app.py"]).argv[-1:] == ("test_app.py",)
    assert narrow_test_command(pytest_cmd, repo, ["test_other.py", "util.py"]).argv[3:] == ("test_other.py", "test_util.py")
    assert narrow_test_command(pytest_cmd, repo, ["README.md"]) is None  # no test touches it
    assert narrow_test_command(TestCommand(("make", "test"), "Makefile"), repo, ["app.py"]) is None


def test_the_snapshot_copies_what_git_would_keep(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", **{"app.py": APP, ".gitignore": "build/\n"})
    (repo / "build").mkdir()
    (repo / "build" / "big.bin").write_bytes(b"x" * 10)
    (repo / "sub").mkdir()
    (repo / "sub" / "run.sh").write_text("#!/bin/sh\n")
    (repo / "sub" / "run.sh").chmod(0o755)
    dest = tmp_path / "copy"
    dest.mkdir()
    assert snapshot_tree(repo, dest)
    assert (dest / "app.py").read_text() == APP and os.access(dest / "sub" / "run.sh", os.X_OK)
    assert not (dest / "build").exists()
