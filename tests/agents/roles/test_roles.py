"""The background roles in-process: each takes a Recorder and the blackboard, never a
session, so they are driven here with an in-memory recorder and real files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from musec.agents.blackboard import Blackboard
from musec.agents.core.events import (
    AgentFailed,
    AnyEvent,
    FileEdited,
    TestRun,
    ToolStarted,
    UserMessage,
)
from musec.agents.roles import ROLES, BackgroundAgent, Reviewer, Scout, Verifier, make_roles
from musec.agents.roles.base import MAX_RESTARTS

pytestmark = pytest.mark.anyio


@pytest.fixture
def closing() -> Any:
    """Close every role a test made (their inboxes are memory streams)."""
    made: list[BackgroundAgent] = []
    yield made.append
    for role in made:
        role.close()


def _edit(path: str, added: list[str], agent: str = "main") -> FileEdited:
    diff = f"--- a/{path}\n+++ b/{path}\n@@ -1 +1,{len(added)} @@\n" + "".join(f"+{line}\n" for line in added)
    return FileEdited(agent=agent, path=path, diff=diff)


async def test_reviewer_finds_what_the_turn_added_and_only_once(recorder, closing, tmp_path: Path) -> None:
    board = Blackboard()
    reviewer = Reviewer(recorder, board, tmp_path)
    closing(reviewer)
    reviewer.notify(UserMessage(text="fix it"))
    reviewer.notify(_edit("app.py", ["x = 1  # TODO tidy", "breakpoint()", "y = 2"]))
    reviewer.notify(_edit("other.py", ["# TODO in a worker's tree"], agent="worker:a"))  # not the main agent's
    findings = await reviewer.review()
    assert findings == ["app.py: a new TODO/FIXME: `x = 1  # TODO tidy`", "app.py: a debugger call left in: `breakpoint()`"]
    [review] = recorder.of_type("review")
    assert review.agent == "reviewer" and review.edits == 1 and review.findings == findings
    assert await reviewer.review() == []  # nothing new since
    assert len(recorder.of_type("review")) == 1

    board.facts["test_status"] = {"passed": False, "failing": ["tests/test_app.py::test_x"]}
    reviewer.notify(_edit("app.py", ["z = 3"]))
    assert await reviewer.review() == ["the verifier's last test run has new failures: tests/test_app.py::test_x"]
    reviewer.notify(UserMessage(text="next task"))  # a new task starts clean
    assert reviewer.diffs == [] and await reviewer.review() == []


async def test_scout_maps_the_repository_and_answers_from_the_map(recorder, closing, tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "widgets.py").write_text("class Widget:\n    pass\n\n\nasync def find_widget(name):\n    return name\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_widgets.py").write_text("def test_find():\n    pass\n")
    (tmp_path / "README.md").write_text("widgets\n")
    # bytecode the test runs left (no .gitignore here): neither files of the map nor tests
    (tmp_path / "tests" / "__pycache__").mkdir()
    (tmp_path / "tests" / "__pycache__" / "test_widgets.cpython-311.pyc").write_bytes(b"\x00bytecode")
    (tmp_path / "stray.pyc").write_bytes(b"\x00")
    board = Blackboard()
    scout = Scout(recorder, board, tmp_path)
    closing(scout)
    scout.answer_wait_s = 0.0  # not started: nothing to wait for
    assert (await scout.answer("where?")).startswith("scout: the repository map is not ready yet")
    async with anyio.create_task_group() as tg:
        tg.start_soon(scout.supervise)
        with anyio.fail_after(30):
            await scout.ready.wait()
        tg.cancel_scope.cancel()
    [repo_map] = recorder.of_type("repo_map")
    assert repo_map.agent == "scout" and repo_map.files == 3 and repo_map.python_symbols == 3
    assert repo_map.test_files == ["tests/test_widgets.py"]
    answer = await scout.answer("Where is find_widget defined?")
    assert "pkg/widgets.py: async def find_widget" not in answer  # the map keeps ``def``/``class`` and the name
    assert "pkg/widgets.py: def find_widget" in answer and "tests in: tests/test_widgets.py" in answer
    assert board.disk_reads == 2  # its reads went through the blackboard, to share with the other agents


async def test_verifier_picks_up_from_the_log_of_a_resumed_session(recorder, closing, tmp_path: Path) -> None:
    verifier = Verifier(recorder, Blackboard(), tmp_path)
    closing(verifier)
    assert (await verifier.answer("status?")) == "verifier: no test run yet (starting)"
    verifier.restore(TestRun(agent="verifier", passed=False, failing_tests=["t::a", "t::b"]))
    assert verifier.known_failing == {"t::a", "t::b"} and not verifier.pending_edit
    verifier.restore(_edit("app.py", ["x"], agent="worker:w"))  # in a worktree: not the workspace
    assert not verifier.pending_edit
    verifier.restore(_edit("app.py", ["x"]))  # the daemon stopped before the run after this edit
    assert verifier.pending_edit
    assert await verifier.answer("status?") == "verifier: the last test run failed:\n  t::a\n  t::b"


async def test_a_failing_role_is_reported_and_restarted(recorder, closing, tmp_path: Path) -> None:
    class Flaky(BackgroundAgent):
        role = "flaky"
        runs = 0

        async def run(self) -> None:
            self.runs += 1
            if self.runs == 1:
                raise RuntimeError("boom")
            self.ready.set()

    role = Flaky(recorder, None, tmp_path)
    closing(role)
    with anyio.fail_after(30):
        await role.supervise()
    assert role.runs == 2 and role.ready.is_set()
    [failed] = recorder.of_type("agent_failed")
    assert failed == AgentFailed(seq=0, agent="flaky", role="flaky", error="RuntimeError: boom", retry_in_s=1.0)


async def test_a_role_that_keeps_failing_is_reported_once_and_stops(recorder, closing, tmp_path: Path) -> None:
    """Issue 13, case 7: the scout crash-looped forever, printing each failure."""

    class Broken(BackgroundAgent):
        role = "broken"
        first_backoff_s = 0.001
        runs = 0

        async def run(self) -> None:
            self.runs += 1
            raise UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates not allowed")

    role = Broken(recorder, None, tmp_path)
    closing(role)
    with anyio.fail_after(30):
        await role.supervise()
    assert role.runs == MAX_RESTARTS + 1 and role.ready.is_set()
    [failed] = recorder.of_type("agent_failed")
    assert "UnicodeEncodeError" in failed.error
    assert role.state.startswith(f"failed {MAX_RESTARTS + 1} times, stopped")


async def test_a_failure_a_narrowed_run_told_is_not_told_again(recorder, closing, tmp_path: Path) -> None:
    """The baseline may end while a narrowed run is telling a new failure (a loaded
    machine): the full check after it must not tell the same failure a second time."""
    from musec.agents.workers import detect_test_command

    (tmp_path / "test_pager.py").write_text("def test_first_page():\n    assert False\n")
    verifier = Verifier(recorder, None, tmp_path)
    closing(verifier)
    command = detect_test_command(tmp_path, None, python="python3")
    verifier.known_failing, verifier._told = set(), {"test_pager.py::test_first_page"}
    with anyio.fail_after(120):
        await verifier._check(command)
    assert recorder.of_type("agent_message") == [] and verifier.known_failing == {"test_pager.py::test_first_page"}
    (tmp_path / "test_pager.py").write_text("def test_first_page():\n    assert True\n")
    with anyio.fail_after(120):
        await verifier._check(command)
    assert verifier._told == set()  # it passes now: broken again later, it is told anew


async def test_the_verifier_runs_plain_pytest_functions_with_pytest(recorder, closing, tmp_path: Path) -> None:
    """Issue 13, case 10: plain pytest functions and no pytest configuration; unittest ran
    0 of them and the verifier recorded a failing repository as green."""
    (tmp_path / "pager.py").write_text("def page(items, number, size):\n    return items[number * size:][:size]\n")
    (tmp_path / "test_pager.py").write_text(
        "from pager import page\n\n\ndef test_first_page():\n    assert page(list(range(10)), 1, 3) == [0, 1, 2]\n")
    done = anyio.Event()
    record = recorder.record

    def watch(event: AnyEvent) -> AnyEvent:
        event = record(event)
        if isinstance(event, TestRun) and event.trigger == "baseline":
            done.set()
        return event

    recorder.record = watch
    verifier = Verifier(recorder, None, tmp_path)
    closing(verifier)
    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(verifier.run)
            await done.wait()
            tg.cancel_scope.cancel()
    [baseline] = [e for e in recorder.of_type("test_run") if e.trigger == "baseline"]
    assert "pytest" in baseline.command and baseline.passed is False
    assert baseline.failing_tests == ["test_pager.py::test_first_page"]


async def test_a_full_inbox_is_noted_not_blocking(recorder, closing, tmp_path: Path) -> None:
    from musec.agents.roles.base import INBOX_EVENTS

    verifier = Verifier(recorder, None, tmp_path)
    closing(verifier)
    for n in range(INBOX_EVENTS):
        verifier.notify(ToolStarted(call_id=f"c{n}"))  # only the workspace's edits go to the inbox
    assert not verifier.overflowed
    for n in range(INBOX_EVENTS + 5):
        verifier.notify(_edit(f"f{n}.py", ["x"]))
    assert verifier.overflowed
    verifier.notify(TestRun(agent="verifier"))  # its own events never come back to it


def test_make_roles_builds_each_named_role_on_the_recorder(recorder, closing, tmp_path: Path) -> None:
    roles = make_roles(recorder, None, tmp_path, list(ROLES), wrap=None)
    for role in roles.values():
        closing(role)
    assert list(roles) == list(ROLES)
    assert [type(r) for r in roles.values()] == [Verifier, Scout, Reviewer]
    assert all(r.recorder is recorder and r.agent_id == name for name, r in roles.items())


def test_a_snapshot_path_from_the_log_is_taken_only_if_the_verifier_made_it(recorder, tmp_path: Path) -> None:
    # The copy is deleted when the role closes: an empty or foreign path in a (damaged) log
    # must never become it ("" is the working directory).
    from musec.agents.core.events import BaselineSnapshot

    made = tmp_path / "musec-baseline-abc"
    made.mkdir()
    for path, taken in (("", None), (".", None), (str(tmp_path), None), ("musec-baseline-abc", None), (str(made), made)):
        verifier = Verifier(recorder, None, tmp_path)
        verifier.restore(BaselineSnapshot(agent="verifier", path=path))
        assert verifier.snapshot == taken, path
        verifier.snapshot = None  # this test keeps its folders
        verifier.close()
    assert made.is_dir() and tmp_path.is_dir()
