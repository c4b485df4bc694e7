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


async def test_a_cancelled_wait_leaves_no_descriptor_holding_the_lock(tmp_path: Path, anyio_backend) -> None:
    log = EventLog.create(tmp_path / "s.jsonl")
    commit = GroupCommit(log)
    log.append(_call(1), defer_sync=True)
    with anyio.CancelScope() as scope:
        scope.cancel()  # cancelled before its thread starts: the fsync is made anyway
        await commit.durable()
    log.close()
    again, report = EventLog.open(tmp_path / "s.jsonl")  # not held: the session can be resumed
    assert report.events == 1
    again.close()


# --- a live session: every write-ahead event off the loop, held from clients until durable ----

def _close(session) -> None:
    for sub in list(session.subscribers):
        session.detach(sub)
        sub.receive.close()
    session.end()
    session._inputs.close()
    session.log.close()


def _kinds() -> list:
    """Write-ahead events of several kinds, with group-committed ones among them."""
    from musec.agents.core.events import (
        AgentSpawned,
        ApprovalRequested,
        ApprovalResolved,
        ModelRequest,
        NetConnection,
        SessionEnded,
    )

    return [SessionStarted(workspace="/w"), UserMessage(text="fix it"), ModelRequest(model="m"),
            ApprovalRequested(call_id="c1", tool="bash"), ApprovalResolved(call_id="c1", decision="allow"),
            AgentSpawned(agent="scout", role="scout"), _call(1), NetConnection(host="example.org", port=443),
            ModelRequest(model="m"), SessionEnded(exit_reason="finished")]


async def test_the_loop_runs_and_clients_wait_while_write_ahead_events_wait_for_a_slow_fsync(
        tmp_path: Path, anyio_backend) -> None:
    """Each fsync of the log waits (in its thread) until the event loop has run a probe: a
    timer and a round of other tasks. An fsync made on the loop would block the probe and
    be told after 30 s that it never ran."""
    import threading

    from musec.agents.core.faults import Faults
    from musec.daemon.session import Session

    gate_entered, probe_ran = threading.Event(), threading.Event()
    probe_seen: list[bool] = []

    def slow_disk() -> None:
        gate_entered.set()
        probe_seen.append(probe_ran.wait(30))

    path = tmp_path / "s.jsonl"
    session = Session("s", EventLog.create(path, faults=Faults(fsync_gate=slow_disk)), interactive=True,
                      end_when_idle=False)
    sub, upto = session.attach(1, -1)
    assert upto == -1
    for event in _kinds():
        session.record(event)  # written now; no fsync here
    assert path.read_bytes().count(b"\n") == len(_kinds()) and session.log.durable_through == -1
    async with anyio.create_task_group() as tg:
        tg.start_soon(session.durable)
        await anyio.to_thread.run_sync(gate_entered.wait)  # the fsync has begun and waits
        ticks = []
        for n in range(5):
            await anyio.sleep(0.001)  # a timer callback on the loop
            ticks.append(n)
        # Nothing held back has been sent: the first event is not durable yet.
        assert sub.receive.statistics().current_buffer_used == 0
        assert session.attach(2, -1)[1] == -1  # a client attaching now gets no backlog either
        probe_ran.set()
    assert probe_seen == [True] and ticks == list(range(5))
    assert session.log.durable_through == len(_kinds()) - 1 and session.commit.fsyncs == 1
    sent = [sub.receive.receive_nowait() for _ in range(sub.receive.statistics().current_buffer_used)]
    assert [m.seq for m in sent] == list(range(len(_kinds())))  # all, in order, once durable
    _close(session)
    assert verify(path).ok


async def test_a_group_event_after_a_held_one_waits_behind_it(tmp_path: Path, anyio_backend) -> None:
    from musec.agents.core.events import ModelRequest
    from musec.daemon.session import Session

    session = Session("s", EventLog.create(tmp_path / "s.jsonl"), interactive=True, end_when_idle=False)
    sub, _ = session.attach(1, -1)
    session.record(ModelRequest(model="m"))  # group-committed: sent at once
    assert sub.receive.statistics().current_buffer_used == 1
    session.record(UserMessage(text="hi"))  # write-ahead: held
    session.record(ModelRequest(model="m"))  # behind it: held too, so the order holds
    session._broadcast(lambda s: "idle")  # not an event: after them
    assert sub.receive.statistics().current_buffer_used == 1
    await session.durable()
    got = [sub.receive.receive_nowait() for _ in range(4)]
    assert [getattr(m, "seq", m) for m in got] == [0, 1, 2, "idle"]
    _close(session)


async def test_a_failed_fsync_is_raised_to_every_later_effect(tmp_path: Path, anyio_backend) -> None:
    from musec.agents.core.faults import Faults

    def broken_disk() -> None:
        raise OSError(5, "Input/output error")

    log = EventLog.create(tmp_path / "s.jsonl", faults=Faults(fsync_gate=broken_disk))
    commit = GroupCommit(log)
    log.append(UserMessage(text="x"), defer_sync=True)
    for _ in range(2):  # the data the failed fsync covered may be gone whatever a later one says
        with pytest.raises(OSError, match="Input/output"):
            await commit.durable()
    assert log.durable_through == -1
