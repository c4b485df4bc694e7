"""``History.wall_s``: the working time ``--max-wall`` limits, folded from the events' ``ts``."""

from __future__ import annotations

from musec.agents.core import events as ev
from musec.agents.history import History


def _fold(*events: ev.Event) -> History:
    history = History("main")
    for event in events:
        history.apply(event)
    return history


def test_counts_from_the_message_to_now_while_a_turn_runs() -> None:
    h = _fold(ev.SessionStarted(ts=100.0), ev.UserMessage(ts=105.0, text="go"), ev.ModelRequest(ts=106.0))
    assert h.wall_s(now=112.5) == 7.5


def test_idle_time_between_turns_and_before_a_message_does_not_count() -> None:
    h = _fold(ev.UserMessage(ts=0.0, text="one"), ev.TurnEnded(ts=30.0),
              ev.ModelRequest(ts=500.0, agent="scout"))  # a background agent's event while idle
    assert h.wall_s(now=1000.0) == 30.0
    h.apply(ev.UserMessage(ts=2000.0, text="two"))
    assert h.wall_s(now=2004.0) == 4.0  # per message, like --max-turns


def test_the_daemon_downtime_before_a_resume_does_not_count() -> None:
    h = _fold(ev.UserMessage(ts=0.0, text="go"), ev.ToolStarted(ts=10.0, call_id="c", tool="bash"),
              # killed here; resumed an hour later, the turn goes on
              ev.SessionResumed(ts=3610.0), ev.ModelRequest(ts=3611.0))
    assert h.wall_s(now=3615.0) == 15.0


def test_another_agents_message_does_not_start_the_clock() -> None:
    h = _fold(ev.UserMessage(ts=5.0, agent="scout", text="where?"))
    assert h.wall_s(now=50.0) == 0.0
