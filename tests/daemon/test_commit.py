"""Group commit (daemon/commit.py, issue 19 part 4): write-ahead fsyncs off the event loop,
one fsync for the events that arrive together, on a real log file, on asyncio and uvloop."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from musec.agents.core.events import SessionStarted, ToolStarted, UserMessage
from musec.daemon.commit import GroupCommit
from musec.daemon.eventlog import EventLog, verify

pytestmark = pytest.mark.anyio


@pytest.fixture(params=[pytest.param("asyncio", id="asyncio"),
                        pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop")])
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param


def _call(n: int) -> ToolStarted:
    return ToolStarted(call_id=f"c{n}", tool="bash", input={"command": "true"})


async def test_a_deferred_tool_start_is_durable_once_awaited(tmp_path: Path, anyio_backend) -> None:
    log = EventLog.create(tmp_path / "s.jsonl")
    commit = GroupCommit(log)
    log.append(SessionStarted(workspace="/w"))  # write-ahead, fsynced in append
    assert log.durable_through == 0
    event, _ = log.append(_call(1), defer_sync=True)
    assert log.durable_through == 0 < event.seq  # written, not yet fsynced
    await commit.durable()
    assert log.durable_through == event.seq and commit.fsyncs == 1
    await commit.durable()  # nothing new: no fsync
    assert commit.fsyncs == 1
    log.close()
    assert verify(tmp_path / "s.jsonl").ok


async def test_events_that_arrive_together_share_an_fsync(tmp_path: Path, anyio_backend) -> None:
    log = EventLog.create(tmp_path / "s.jsonl")
    commit = GroupCommit(log)
    log.append(SessionStarted(workspace="/w"))
    durable_when_returned: list[bool] = []

    async def call(n: int) -> None:
        event, _ = log.append(_call(n), defer_sync=True)
        await commit.durable()
        durable_when_returned.append(log.durable_through >= event.seq)

    async with anyio.create_task_group() as tg:
        for n in range(10):
            tg.start_soon(call, n)
    assert durable_when_returned == [True] * 10
    # The first call's fsync ran alone; the nine that came meanwhile shared the next.
    assert commit.fsyncs == 2
    log.close()


async def test_an_inline_write_ahead_fsync_counts_for_the_group(tmp_path: Path, anyio_backend) -> None:
    log = EventLog.create(tmp_path / "s.jsonl")
    commit = GroupCommit(log)
    log.append(_call(1), defer_sync=True)
    log.append(UserMessage(text="next"))  # write-ahead, not deferred: fsyncs all before it too
    await commit.durable()
    assert commit.fsyncs == 0 and log.durable_through == 1
    log.close()


async def test_closing_the_log_during_an_fsync_is_safe(tmp_path: Path, anyio_backend) -> None:
    log = EventLog.create(tmp_path / "s.jsonl")
    commit = GroupCommit(log)
    log.append(_call(1), defer_sync=True)
    async with anyio.create_task_group() as tg:
        tg.start_soon(commit.durable)
        await anyio.lowlevel.checkpoint()  # the fsync's thread has its own descriptor
        log.close()
    assert log.durable_through == 0 and verify(tmp_path / "s.jsonl").ok
