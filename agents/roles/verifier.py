"""``verifier``: runs the project's tests after edits and escalates new failures.

It never holds the main agent back. At the start it copies the workspace
(``baseline.snapshot_tree``) and runs the baseline there, beside the main agent, however
long the suite takes. An edit that comes before the baseline has finished is checked at
once with the tests touching the changed files (``baseline.narrow_test_command``), run both
in the workspace and in the snapshot, so only failures the edits introduced are reported;
the full suite runs again once the baseline is known. Each run is logged (``test_run``),
the status posted on the blackboard (``test_status``, with the failures of the baseline it
is judged against) and the main agent told, by test name, about failures that were not
there before.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from ..core.events import UNSET, AgentMessage, BaselineSnapshot, FileEdited, TestRun
from ..recorder import Recorder
from ..tools.untrusted import mark_untrusted
from .base import BackgroundAgent

DEBOUNCE_S = 0.3
TEST_TIMEOUT_S = 600.0
_BASELINE_DONE = object()  # put in its own inbox beside the edits; never logged
_SNAPSHOT_PREFIX = "musec-baseline-"


class Verifier(BackgroundAgent):
    """Runs the tests after edits and escalates new failures.

    Args:
        recorder, blackboard, workspace: see ``BackgroundAgent``.
        wrap: ``(argv, cwd) -> argv`` running the tests in the sandbox; None runs them bare.

    Attributes:
        known_failing: the failures already known (the baseline's, then the last run's);
            None until the baseline is known.
        baseline_failing: the failures of the session's baseline (before any edit).
        changed: the workspace paths edited in the session.
    """

    role = "verifier"

    def __init__(self, recorder: Recorder, blackboard: Any, workspace: Path,
                 wrap: Callable[[list[str], Path], list[str]] | None = None) -> None:
        super().__init__(recorder, blackboard, workspace)
        self.wrap = wrap
        self.known_failing: set[str] | None = None
        self.baseline_failing: set[str] | None = None
        self.last_run: dict[str, Any] | None = None
        self.pending_edit = False
        self.changed: set[str] = set()
        self.snapshot: Path | None = None
        self._told: set[str] = set()  # escalated from narrowed runs before the baseline was known
        self._full_due = False
        self._seen = 0  # live edits received
        self._checked = 0  # of those, how many a finished check covered
        self._idle = False  # no test command: nothing will ever be checked
        self._progress: anyio.Event | None = None  # made by a waiter (an Event needs a running loop)
        self._preparing = anyio.Lock()  # the session and the role's run() both prepare: one copy
        self._prepared = False

    def on_own_baseline_snapshot(self, event: BaselineSnapshot, *, live: bool) -> None:
        """On resume, the copy a daemon that stopped kept is where the baseline runs.

        The copy is removed with the role, so only a path that ``prepare`` can have made is
        taken (absolute, named ``musec-baseline-*``, a directory): a damaged or empty path in
        the log (``""`` is the working directory) must never be deleted.
        """
        if not live:
            folder = Path(event.path)
            made_here = folder.is_absolute() and folder.name.startswith(_SNAPSHOT_PREFIX)
            self.snapshot = folder if made_here and folder.is_dir() else None

    def on_own_test_run(self, event: TestRun, *, live: bool) -> None:
        """On resume, the last full test run before the restart is the baseline to compare with."""
        if not live and not event.narrowed:
            failing = set(event.failing_tests)
            self.known_failing = failing
            if event.trigger == "baseline":
                self.baseline_failing = set(failing)
            self.last_run = {"passed": event.passed, "failing": sorted(failing), "output_tail": ""}
            self.pending_edit = False

    def on_workspace_edit(self, event: FileEdited, *, live: bool) -> None:
        """Live, to the inbox; on resume, an edit after the last test run (the daemon
        stopped before the run) is tested as soon as the session resumes."""
        super().on_workspace_edit(event, live=live)
        if live:
            self._seen += 1
        else:
            self.changed.add(event.path)
            self.pending_edit = True

    async def settled(self, timeout_s: float) -> bool:
        """Wait until every edit received so far has been checked (debounced and tested),
        at most ``timeout_s`` seconds: the session waits for this before the reviewer judges
        a finished turn, so a quick suite's verdict on the turn's edits is in. ``False``
        when the time ran out (a slow suite's verdict comes later, as a message)."""
        with anyio.move_on_after(timeout_s):
            while self._checked < self._seen and not self._idle:
                if self._progress is None:
                    self._progress = anyio.Event()
                await self._progress.wait()
            return True
        return False

    def _checked_upto(self, seen: int) -> None:
        self._checked = max(self._checked, seen)
        progress, self._progress = self._progress, None
        if progress is not None:
            progress.set()

    async def run(self) -> None:
        """Start the baseline beside the main agent (unless resumed with one), then test
        after each settled edit."""
        from musec.agents.workers import detect_test_command

        command = detect_test_command(self.workspace, None, python="python3")
        if command is None:
            self.state = "idle: no test command found"
            self._idle = True
            self._checked_upto(self._seen)
            self.ready.set()
            async for _ in self._inbox:
                pass
            return
        async with anyio.create_task_group() as tg:
            if self.known_failing is None:
                await self.prepare()
                tg.start_soon(self._baseline, command)
            else:  # a resumed session keeps the last run as its baseline
                self.ready.set()
            await self._watch(command)

    async def prepare(self) -> None:
        """Copy the workspace for the baseline (once; a resumed session has its baseline).

        The session awaits this before its first turn, so no edit can reach the copy; it
        takes the time of a copy of the files (capped, ``baseline.MAX_SNAPSHOT_BYTES``),
        never the time of a test run. The session calls it before its first turn while the
        role's ``run`` (started beside it) calls it too: the second caller waits for the
        first's copy instead of making (and logging) one of its own.
        """
        from .baseline import snapshot_tree

        async with self._preparing:
            if self._prepared or self.snapshot is not None or self.known_failing is not None:
                return
            self._prepared = True  # a copy that could not be made (too big) is not tried again
            folder = Path(tempfile.mkdtemp(prefix=_SNAPSHOT_PREFIX))
            if await anyio.to_thread.run_sync(snapshot_tree, self.workspace, folder):
                self.snapshot = folder
                # Logged, so a session resumed after a crash takes its baseline on the same copy
                # (the workspace holds the edits by then).
                self.record(BaselineSnapshot(path=str(folder)))
            else:
                shutil.rmtree(folder, ignore_errors=True)

    def close(self) -> None:
        """Close the inbox and remove the copy of the workspace (the session has ended)."""
        super().close()
        self._drop_snapshot()

    def _drop_snapshot(self) -> None:
        if self.snapshot is not None:
            shutil.rmtree(self.snapshot, ignore_errors=True)
            self.snapshot = None

    async def _baseline(self, command: Any) -> None:
        """The full suite on the snapshot (in place when none could be taken)."""
        self.state = "baseline"
        failing = await self._run_tests(command, trigger="baseline", cwd=self.snapshot or self.workspace,
                                        post=not self._full_due)
        self.baseline_failing = set(failing)
        self.known_failing = failing | self._told
        self.ready.set()
        try:
            self._send.send_nowait(_BASELINE_DONE)  # the watch loop runs the full check due
        except anyio.WouldBlock:
            self.overflowed = True
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    async def _watch(self, command: Any) -> None:
        if self.pending_edit:
            await self._check(command)
        self.state = "watching" if self.known_failing is not None else "baseline"
        async for event in self._inbox:  # the workspace's edits, and the end of the baseline
            if event is _BASELINE_DONE:
                if self._full_due:
                    await self._check(command)
                continue
            self._note_edit(event)
            await self._settle()
            seen = self._seen
            await self._check(command)
            self._checked_upto(seen)

    def _note_edit(self, event: FileEdited) -> None:
        self.changed.add(event.path)

    async def _check(self, command: Any) -> None:
        """Run the tests and escalate failures that were not there before: the narrowed
        tests while the baseline is unknown, else the whole suite."""
        from .baseline import narrow_test_command

        self.overflowed = False
        self.pending_edit = False
        if self.known_failing is None:
            narrowed = narrow_test_command(command, self.workspace, self.changed)
            self._full_due = True
            if narrowed is not None:
                await self._check_narrowed(narrowed)
            self.state = "baseline"
            return  # the full check runs when the baseline is known
        self._full_due = False
        self.state = "testing"
        failing = await self._run_tests(command, trigger="edit")
        # A failure a narrowed run already told is not told again (the baseline may have
        # ended while that run was telling it); once it passes, it may be told anew.
        self._escalate(sorted(failing - self.known_failing - self._told), command)
        self._told &= failing
        self.known_failing = failing
        self.state = "watching"

    async def _check_narrowed(self, narrowed: Any) -> None:
        """The tests touching the changes, in the workspace and on the snapshot."""
        self.state = "testing (narrowed)"
        failing = await self._run_tests(narrowed, trigger="edit", narrowed=True, post=False)
        before: set[str] = set()
        if self.baseline_failing is not None:  # the full baseline ended meanwhile
            before = set(self.baseline_failing)
        elif failing and self.snapshot is not None:  # were they failing before the edits?
            before = await self._run_tests(narrowed, trigger="baseline", cwd=self.snapshot, narrowed=True, post=False)
        new = sorted(failing - before - self._told)
        self._post(failing, before)
        self._escalate(new, narrowed)
        self._told = (self._told & failing) | set(new)

    def _escalate(self, new: list[str], command: Any) -> None:
        if not new:
            return
        # Test names and output are the repository's text: marked as data, like a tool result.
        names = "\n".join(f"  {n}" for n in new[:20])
        tail = (self.last_run or {}).get("output_tail", "")[-1500:]
        body = (f"New test failures after the latest edits ({len(new)}):\n" + mark_untrusted("tests", names)
                + f"\nCommand: {command}. Output tail:\n" + mark_untrusted("tests", tail))
        self.record(AgentMessage(to="main", from_=self.agent_id, priority="high", body=body))

    async def _settle(self) -> None:
        """Wait until no edit has come for ``DEBOUNCE_S`` (a baseline ending meanwhile is
        seen by the check that follows)."""
        while True:
            with anyio.move_on_after(DEBOUNCE_S) as scope:
                async for event in self._inbox:
                    if isinstance(event, FileEdited):
                        self._note_edit(event)
                        break
            if scope.cancelled_caught:
                return

    def _post(self, failing: set[str], baseline: set[str]) -> None:
        """Post the status on the blackboard, with the failures it is judged against."""
        if self.blackboard is not None:
            self.blackboard.facts["test_status"] = {"passed": not failing, "failing": sorted(failing),
                                                    "baseline_failing": sorted(baseline)}

    async def _run_tests(self, command: Any, *, trigger: str, cwd: Path | None = None, narrowed: bool = False,
                         post: bool = True) -> set[str]:
        from musec.agents.workers import run_tests

        result = await run_tests(command, cwd or self.workspace, timeout_s=TEST_TIMEOUT_S, wrap=self.wrap)
        failing = set(result.failing_tests)
        if result.no_tests_ran:  # nothing was checked: never a pass, never a silent baseline
            failing = {f"{command}: no tests ran"}
        elif not result.passed and not failing:
            failing = {f"{command} (exit status {result.exit_status}{', timed out' if result.timed_out else ''})"}
        if trigger == "edit" or (self.last_run is None and not narrowed):
            self.last_run = {"passed": result.passed, "failing": sorted(failing), "output_tail": result.output[-2000:]}
        if post:
            self._post(failing, failing if trigger == "baseline" else (self.baseline_failing or set()))
        self.record(TestRun(trigger=trigger, command=str(command), passed=result.passed, exit_status=result.exit_status,
                            failing_tests=sorted(failing), duration_s=round(result.duration_s, 3),
                            narrowed=True if narrowed else UNSET))
        return failing

    async def answer(self, question: str) -> str:
        """The last test run's result (whatever the question)."""
        if self.last_run is None:
            return f"verifier: no test run yet ({self.state})"
        run = self.last_run
        if run["passed"]:
            return "verifier: the last test run passed"
        return "verifier: the last test run failed:\n" + "\n".join(f"  {n}" for n in run["failing"][:50])
