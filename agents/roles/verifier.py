"""``verifier``: runs the project's tests after edits and escalates new failures.

After edits in the workspace (debounced), it runs the project's test command in the
sandbox, logs each run (``test_run``), posts the status on the blackboard
(``test_status``) and tells the main agent, by test name, about failures that were not
there before.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from ..history import mark_untrusted
from ..recorder import Recorder
from .base import BackgroundAgent, is_workspace_edit

DEBOUNCE_S = 0.3
TEST_TIMEOUT_S = 600.0


class Verifier(BackgroundAgent):
    """Runs the tests after edits and escalates new failures.

    Args:
        recorder, blackboard, workspace: see ``BackgroundAgent``.
        wrap: ``(argv, cwd) -> argv`` running the tests in the sandbox; None runs them bare.
    """

    role = "verifier"

    def __init__(self, recorder: Recorder, blackboard: Any, workspace: Path,
                 wrap: Callable[[list[str], Path], list[str]] | None = None) -> None:
        super().__init__(recorder, blackboard, workspace)
        self.wrap = wrap
        self.known_failing: set[str] | None = None
        self.last_run: dict[str, Any] | None = None
        self.pending_edit = False

    def restore(self, event: dict[str, Any]) -> None:
        """The last test run before a restart is the baseline to compare with; an edit
        after it (the daemon stopped before the run) is tested as soon as it resumes."""
        if event.get("type") == "test_run" and event.get("agent") == self.agent_id:
            self.known_failing = set(event.get("failing_tests", []))
            self.last_run = {"passed": event.get("passed"), "failing": list(event.get("failing_tests", [])), "output_tail": ""}
            self.pending_edit = False
        elif is_workspace_edit(event):
            self.pending_edit = True

    async def run(self) -> None:
        """Take the baseline (unless resumed with one), then test after each settled edit."""
        from musec.agents.workers import detect_test_command

        command = detect_test_command(self.workspace, None, python="python3")
        if command is None:
            self.state = "idle: no test command found"
            self.ready.set()
            async for _ in self._inbox:
                pass
            return
        if self.known_failing is None:  # a resumed session keeps the last run as its baseline
            self.state = "baseline"
            self.known_failing = await self._run_tests(command, trigger="baseline")
        self.ready.set()
        if self.pending_edit:
            await self._check(command)
        self.state = "watching"
        async for event in self._inbox:
            if not is_workspace_edit(event) and not self.overflowed:
                continue
            await self._settle()
            await self._check(command)

    async def _check(self, command: Any) -> None:
        """Run the tests and escalate failures that were not there before."""
        self.overflowed = False
        self.pending_edit = False
        self.state = "testing"
        failing = await self._run_tests(command, trigger="edit")
        new = sorted(failing - (self.known_failing or set()))
        if new:
            # Test names and output are the repository's text: marked as data, like a tool result.
            names = "\n".join(f"  {n}" for n in new[:20])
            tail = (self.last_run or {}).get("output_tail", "")[-1500:]
            body = (f"New test failures after the latest edits ({len(new)}):\n" + mark_untrusted("tests", names)
                    + f"\nCommand: {command}. Output tail:\n" + mark_untrusted("tests", tail))
            self.record("agent_message", to="main", **{"from": self.agent_id}, priority="high", body=body, sync=True)
        self.known_failing = failing
        self.state = "watching"

    async def _settle(self) -> None:
        """Wait until no edit has come for ``DEBOUNCE_S``."""
        while True:
            with anyio.move_on_after(DEBOUNCE_S) as scope:
                async for event in self._inbox:
                    if is_workspace_edit(event):
                        break
            if scope.cancelled_caught:
                return

    async def _run_tests(self, command: Any, *, trigger: str) -> set[str]:
        from musec.agents.workers import run_tests

        result = await run_tests(command, self.workspace, timeout_s=TEST_TIMEOUT_S, wrap=self.wrap)
        failing = set(result.failing_tests)
        if not result.passed and not failing:
            failing = {f"{command} (exit status {result.exit_status}{', timed out' if result.timed_out else ''})"}
        self.last_run = {"passed": result.passed, "failing": sorted(failing), "output_tail": result.output[-2000:]}
        if self.blackboard is not None:
            self.blackboard.facts["test_status"] = {"passed": result.passed, "failing": sorted(failing)}
        self.record("test_run", trigger=trigger, command=str(command), passed=result.passed, exit_status=result.exit_status,
                    failing_tests=sorted(failing), duration_s=round(result.duration_s, 3))
        return failing

    async def answer(self, question: str) -> str:
        """The last test run's result (whatever the question)."""
        if self.last_run is None:
            return f"verifier: no test run yet ({self.state})"
        run = self.last_run
        if run["passed"]:
            return "verifier: the last test run passed"
        return "verifier: the last test run failed:\n" + "\n".join(f"  {n}" for n in run["failing"][:50])
