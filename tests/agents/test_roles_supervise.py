"""A background role that keeps failing is restarted a few times, reported once, then
stopped (issue 13, case 7: the scout crash-looped forever into the interactive prompt)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from musec.agents.roles.base import MAX_RESTARTS, BackgroundAgent

pytestmark = pytest.mark.anyio


class ListRecorder:
    """A ``Recorder`` that keeps the events in a list (the protocol's whole surface)."""

    id = "s-test"

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def record(self, type: str, *, agent: str = "main", sync: bool = False, **fields: Any) -> dict[str, Any]:
        event = {"type": type, "agent": agent, **fields}
        self.events.append(event)
        return event


class Broken(BackgroundAgent):
    role = "broken"
    first_backoff_s = 0.001

    def __init__(self, recorder: ListRecorder, workspace: Path) -> None:
        super().__init__(recorder, None, workspace)
        self.runs = 0

    async def run(self) -> None:
        self.runs += 1
        raise UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates not allowed")


async def test_a_failing_role_is_reported_once_and_stops(tmp_path: Path) -> None:
    recorder = ListRecorder()
    agent = Broken(recorder, tmp_path)
    with anyio.fail_after(30):
        await agent.supervise()
    agent._send.close()
    agent._inbox.close()
    assert agent.runs == MAX_RESTARTS + 1
    failed = [e for e in recorder.events if e["type"] == "agent_failed"]
    assert len(failed) == 1 and "UnicodeEncodeError" in failed[0]["error"]
    assert agent.state.startswith(f"failed {MAX_RESTARTS + 1} times, stopped")
    assert agent.ready.is_set()
