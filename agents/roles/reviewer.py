"""``reviewer``: reads the turn's diff before the main agent ends the task.

It keeps the diffs of the main agent's edits of the current task; when the agent says it
has finished, the session asks it to ``review``, and findings (conflict markers, debugger
calls, new TODOs, a test failing on the blackboard that the task introduced) send the agent
back to work. A failure that was there before (in the verifier's baseline, or when the task
started) is not the task's doing and is not held against it.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import anyio

from ..core.events import FileEdited, Review, UserMessage
from ..core.words import counted
from ..recorder import Recorder
from .base import BackgroundAgent

_FINDINGS = (
    (re.compile(r"^[<>=]{7}( |$)"), "a merge conflict marker"),
    (re.compile(r"\bbreakpoint\(\)|\bpdb\.set_trace\(\)|\bdebugger;"), "a debugger call left in"),
    (re.compile(r"\b(TODO|FIXME|XXX)\b"), "a new TODO/FIXME"),
)


class Reviewer(BackgroundAgent):
    """Reads the turn's diff before the main agent ends the task; can send it back."""

    role = "reviewer"

    def __init__(self, recorder: Recorder, blackboard: Any, workspace: Path) -> None:
        super().__init__(recorder, blackboard, workspace)
        self.diffs: list[tuple[str, str]] = []
        self.reviewed = 0
        self.failing_at_start: set[str] = set()

    def on_person_message(self, event: UserMessage, *, live: bool) -> None:
        """A new task: its diffs start afresh, and what fails now is not its doing."""
        if live:
            self.diffs, self.reviewed = [], 0
            self.failing_at_start = set(self._test_status().get("failing", []))

    def on_workspace_edit(self, event: FileEdited, *, live: bool) -> None:
        """Keep the main agent's diffs as they are recorded (no inbox: nothing may be missed)."""
        if live and event.agent == "main":
            self.diffs.append((event.path, event.diff))

    async def run(self) -> None:
        """Nothing to do between reviews: ``on_workspace_edit`` keeps the diffs."""
        self.state = "watching"
        self.ready.set()
        await anyio.sleep_forever()

    def _test_status(self) -> dict[str, Any]:
        status = self.blackboard.facts.get("test_status") if self.blackboard is not None else None
        return status if isinstance(status, dict) else {}

    def introduced_failures(self) -> list[str]:
        """The failing tests of the verifier's last run that were not failing before: not in
        the baseline that run is judged against, nor failing when the task started."""
        status = self._test_status()
        if status.get("passed", True):
            return []
        before = set(status.get("baseline_failing", [])) | self.failing_at_start
        return [name for name in status.get("failing", []) if name not in before]

    async def review(self) -> list[str]:
        """Findings on the edits made since the last review (empty: nothing to say)."""
        new, self.reviewed = self.diffs[self.reviewed :], len(self.diffs)
        findings = []
        for path, diff in new:
            for line in diff.splitlines():
                if not line.startswith("+") or line.startswith("+++"):
                    continue
                for pattern, what in _FINDINGS:
                    if pattern.search(line[1:]):
                        findings.append(f"{path}: {what}: `{line[1:].strip()[:100]}`")
        introduced = self.introduced_failures()
        if new and introduced:
            findings.append(f"the verifier's last test run has new failures: {', '.join(introduced[:5])}")
        self.state = f"reviewed {counted(len(new), 'edit')}, {counted(len(findings), 'finding')}"
        self.last_activity_at = time.time()
        if findings:
            self.record(Review(edits=len(new), findings=findings))
        return findings[:20]
