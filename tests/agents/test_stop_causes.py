"""Who cut an agent's calls off, as the model is told (in process, the scripted model): the
person by default, a limit of the agent's own (``Agent.limits``: a fan-out worker's time
limit, which said "interrupted by the person"), or the cause the daemon gives
(``stop_cause``: it stopped, the session was ended)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from musec.agents.core import events as ev

from tests.agents.test_loop import anyio_backend, make_run  # noqa: F401 - the fixtures

pytestmark = pytest.mark.anyio

TWO_CALLS = [[{"tool": "bash", "input": {"command": "sleep 60"}}, {"tool": "bash", "input": {"command": "echo later"}}],
             [{"text": "never"}]]


async def _cut_at_the_first_call(run: Any, how: str) -> list[ev.AnyEvent]:
    """Run until the first call starts, then cancel as ``how`` says; the events logged."""
    started = anyio.Event()
    record = run.agent.record

    def watch(event: ev.AnyEvent) -> ev.AnyEvent:
        if isinstance(event, ev.ToolStarted):
            started.set()
        return record(event)

    run.agent.record = watch
    run.record(ev.UserMessage(text="go"))
    with anyio.CancelScope() as outer:
        async with anyio.create_task_group() as tg:
            async def work() -> None:
                with anyio.CancelScope() as own:
                    if how == "limit":
                        run.agent.limits.append((own, "the worker's time limit (900 s) passed"))
                    await run.agent.run()

            tg.start_soon(work)
            await started.wait()
            if how == "limit":
                run.agent.limits[0][0].cancel()
            else:
                run.agent.stop_cause = "the daemon was stopped (`musec daemon stop`) while it ran" if how == "daemon" else ""
                outer.cancel()
    return run.events()


@pytest.mark.parametrize(("how", "reason", "not_run"), [
    ("person", "interrupted by the person", "not run: the person interrupted the turn"),
    ("limit", "stopped: the worker's time limit (900 s) passed", "not run: the worker's time limit (900 s) passed"),
    ("daemon", "the daemon was stopped (`musec daemon stop`) while it ran",
     "not run: the daemon was stopped (`musec daemon stop`) while it ran"),
])
async def test_the_model_is_told_who_cut_the_calls_off(make_run: Any, how: str, reason: str,  # noqa: F811
                                                      not_run: str) -> None:
    run = make_run(TWO_CALLS)
    events = await _cut_at_the_first_call(run, how)
    assert [e.reason for e in events if isinstance(e, ev.ToolInterrupted)] == [reason]
    assert [e.content for e in events if isinstance(e, ev.ToolFinished)] == [not_run]
