"""Every view of the log is a fold that decides what to do with every event type.

Each fold is a ``match`` ending in ``assert_never``: an event type that a fold leaves out
falls through to it and raises ``AssertionError`` here (and fails type checking), so a new
type cannot be added without a decision in each view.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from musec.agents.core import events as ev
from musec.agents.goal import GoalState
from musec.agents.history import History
from musec.agents.roles import Reviewer, Scout, Verifier
from musec.agents.workers.state import FanoutState
from musec.daemon.projections import AgentsView, CostsView, Counters, WorkersView
from musec.daemon.resume import ResumeState

from tests.support.events import samples


class _Log:
    """A ``Recorder`` that keeps what the roles record (they record nothing while folding)."""

    id = "s"

    def __init__(self) -> None:
        self.events: list[ev.AnyEvent] = []

    def record(self, event: ev.AnyEvent) -> ev.AnyEvent:
        self.events.append(event)
        return event


FOLDS = ["history", "history of another agent", "goal", "session counters", "resume", "fan-out", "agents view",
         "workers view", "costs view", *(f"{role}, {when}" for role in ("verifier", "scout", "reviewer")
                                           for when in ("live", "on resume"))]


@pytest.fixture
def folds() -> Iterator[dict[str, Callable[[Any], None]]]:
    """Every fold, by name (the roles' folds live and on resume)."""
    roles = {cls.role: cls(_Log(), None, Path("/nonexistent")) for cls in (Verifier, Scout, Reviewer)}
    found: dict[str, Callable[[Any], None]] = {
        "history": History("main").apply,
        "history of another agent": History("worker:a").apply,
        "goal": GoalState().apply,
        "session counters": Counters().apply,
        "resume": ResumeState().apply,
        "fan-out": FanoutState().apply,
        "agents view": AgentsView().apply,
        "workers view": WorkersView().apply,
        "costs view": CostsView().apply,
    }
    for name, role in roles.items():
        found[f"{name}, live"] = role.notify
        found[f"{name}, on resume"] = role.restore
    assert sorted(found) == sorted(FOLDS)
    yield found
    for role in roles.values():
        role.close()


@pytest.mark.parametrize("fold", FOLDS)
@pytest.mark.parametrize("agent", ["main", "worker:a", "verifier"])
def test_every_fold_handles_every_event_type(folds: dict[str, Callable[[Any], None]], fold: str, agent: str) -> None:
    for event in samples(agent=agent):
        folds[fold](event)  # no AssertionError from assert_never


class Unlisted(ev.Event, frozen=True, tag="unlisted"):
    """An event type that no fold lists: what a new type is before each view decides."""


@pytest.mark.parametrize("fold", FOLDS)
def test_a_type_no_fold_lists_reaches_assert_never(folds: dict[str, Callable[[Any], None]], fold: str) -> None:
    with pytest.raises(AssertionError):
        folds[fold](Unlisted())


def test_the_counters_fold_what_the_live_session_and_resume_both_count() -> None:
    counters = Counters()
    for event in [ev.ModelResponse(content=[], usage={"input_tokens": 3, "output_tokens": 2}, cost_usd=0.5),
                  ev.ModelResponse(agent="worker:a", content=[], usage={"input_tokens": 1}, cost_usd=0.25),
                  ev.UserMessage(text="hi", client_msg_id="m1"), ev.UserMessage(text="again"),
                  ev.ToolStarted(call_id="c1", tool="bash"), ev.SkillLoaded(name="release", text="...")]:
        counters.apply(event)
    assert (counters.turns, counters.usage, counters.cost_usd) == (2, {"input_tokens": 4, "output_tokens": 2}, 0.75)
    assert counters.client_msg_ids == {"m1"} and counters.tool_calls == 1
    assert counters.skills_loaded == {"release"}  # a resumed session does not load it again


def test_the_resume_fold_finds_open_calls_and_a_cut_fan_out() -> None:
    state = ResumeState()
    for event in [ev.UserMessage(text="go"), ev.ToolStarted(call_id="a", tool="bash"), ev.ToolFinished(call_id="a"),
                  ev.ToolStarted(call_id="b", tool="spawn_workers"), ev.WorkerSpawned(worker="w1"),
                  ev.WorkerSpawned(worker="w2"), ev.WorkerFinished(worker="w1")]:
        state.apply(event)
    assert list(state.open_calls) == ["b"] and state.in_turn and state.events == 7
    assert [w.worker for w in state.fanout.pending] == ["w1", "w2"] and state.fanout.pending_finished == {"w1"}
    state.apply(ev.Integration(branch="musec/s/integration"))
    state.apply(ev.TurnEnded())
    assert not state.fanout.pending and not state.in_turn and list(state.fanout.spawned) == ["w1", "w2"]
