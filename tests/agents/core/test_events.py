"""The event types (agents/core/events.py): the line format, old logs, persistence."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from musec.agents.core import events as ev
from musec.agents.core.events import EVENT_TYPES, Durability, decode_event, line_fields, persistence

from tests.support.events import samples

#: Lines written by musec before the events were typed (commit 4955569, its string
#: ``record(type, **fields)``): one per type and shape, from real sessions (tools, edits,
#: refusals, the three background roles, a fan-out, a crash mid-append and its resume),
#: plus the types those sessions do not reach, appended with the old writer in the field
#: order of their old call sites; then the types main gained before the typed events landed
#: on it (hooks, instructions, skills, MCP servers, net connections, kernel campaigns, the
#: verifier's snapshot, the new ``session_started`` fields), written by main's string
#: recorder (commit 459c69e) with the fields of its call sites; then the goal's events
#: (GoalSet, GoalChecked by the check and by the evaluator, GoalUpdated paused, active
#: and met), from a real stuck-then-resumed goal session. Each keeps its ``h``; they
#: are not one chain. A new event type adds its line here: this test fails until it does.
OLD_LINES = (Path(__file__).parent / "old_lines.jsonl").read_bytes().splitlines()


def _body(line: bytes) -> bytes:
    """A line without its trailing ``"h"`` member (the bytes the chain hashes)."""
    cut = line.rindex(b',"h":"')
    return line[:cut] + b"}"


def test_old_lines_decode_and_encode_again_byte_for_byte() -> None:
    found = set()
    for line in OLD_LINES:
        event = decode_event(line)
        found.add(type(event))
        assert msgspec.json.encode(line_fields(event)) == _body(line), line[:120]
        assert event.seq == json.loads(line)["seq"] and event.agent == json.loads(line)["agent"]
    assert found == set(EVENT_TYPES), set(EVENT_TYPES) - found  # the fixture covers every type


@pytest.mark.parametrize("event", samples(seq=7, ts=1.25, agent="worker:a"), ids=lambda e: ev.event_type(e))
def test_every_type_decodes_from_its_own_line_unchanged(event: ev.AnyEvent) -> None:
    line = msgspec.json.encode(line_fields(event))
    assert decode_event(line) == event
    assert msgspec.json.encode(line_fields(decode_event(line))) == line


def test_the_line_starts_with_seq_ts_agent_type_and_leaves_unset_fields_out() -> None:
    event = ev.UserMessage(text="hi", agent="worker:a", seq=3, ts=1.5)
    assert msgspec.json.encode(line_fields(event)) == b'{"seq":3,"ts":1.5,"agent":"worker:a","type":"user_message","text":"hi"}'
    message = ev.AgentMessage(to="main", from_="verifier", body="b")
    assert list(line_fields(message)) == ["seq", "ts", "agent", "type", "to", "from", "priority", "body"]


def test_a_newer_log_and_an_older_one_still_decode() -> None:
    newer = b'{"seq":0,"ts":1.0,"agent":"main","type":"tool_finished","call_id":"c","a_field_from_the_future":[1]}'
    assert decode_event(newer) == ev.ToolFinished(call_id="c", seq=0, ts=1.0)
    older = b'{"seq":0,"ts":1.0,"agent":"main","type":"model_request","provider":"p","model":"m","digest":"d","messages":1}'
    assert decode_event(older).endpoint == ""  # a field added later has its default
    with pytest.raises(msgspec.ValidationError, match="no_such_type"):
        decode_event(b'{"seq":0,"ts":1.0,"agent":"main","type":"no_such_type"}')


@pytest.mark.parametrize("event", samples(), ids=lambda e: ev.event_type(e))
def test_every_type_has_a_persistence_decision(event: ev.AnyEvent) -> None:
    decided = persistence(event)
    assert isinstance(decided.durability, Durability) and isinstance(decided.to_clients, bool)


def test_what_announces_a_side_effect_is_write_ahead() -> None:
    ahead = {ev.event_type(e) for e in samples() if persistence(e).durability is Durability.WRITE_AHEAD}
    # DESIGN §5 rule 2: a tool starts, an approval is asked and answered, a worktree is made
    # only after its event is on disk; the session's start and end too.
    assert {"tool_started", "approval_requested", "approval_resolved", "worker_spawned", "session_started",
            "session_ended", "user_message", "tool_interrupted"} <= ahead
    assert not {"model_response", "tool_finished", "file_edited", "model_request"} & ahead


class Unlisted(ev.Event, frozen=True, tag="unlisted"):
    """An event type added without a persistence decision."""


def test_a_type_without_a_decision_fails_the_persistence_match() -> None:
    with pytest.raises(AssertionError):
        persistence(Unlisted())  # type: ignore[arg-type]
