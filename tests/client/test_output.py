"""The one sanitiser (issue 18, 13): whatever an event holds, what the client prints has no
terminal control characters, and JSON output decodes to the same values."""

from __future__ import annotations

import io
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from musec.client.output import safe, safe_json
from musec.client.render import Renderer, log_line_summary

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CONTROL = {chr(c) for c in (*range(0, 9), *range(11, 32), 127, *range(0x80, 0xA0))}
KINDS = ["model_response", "tool_started", "tool_finished", "tool_interrupted", "file_edited", "agent_message",
         "agent_failed", "approval_resolved", "approval_requested", "turn_ended", "session_ended", "session_started",
         "user_message", "whatever"]
hostile = st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(sorted(CONTROL)), max_size=40)
values = st.recursive(hostile | st.integers() | st.none() | st.booleans(),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(hostile, inner, max_size=3),
                      max_leaves=8)


@st.composite
def events(draw: st.DrawFn) -> dict:
    ev = draw(st.dictionaries(st.sampled_from(["agent", "tool", "path", "reason", "body", "from", "to", "priority",
                                               "error", "retry_in_s", "decision", "by", "exit_reason", "message",
                                               "text", "model", "workspace", "diff", "content", "exit_status",
                                               "seq", "ts", "is_error"]), hostile, max_size=10))
    ev["type"] = draw(st.sampled_from(KINDS))
    ev["input"] = draw(st.dictionaries(st.sampled_from(["command", "path", "pattern", "x"]), values, max_size=3))
    if draw(st.booleans()):
        ev["content"] = [{"type": "text", "text": draw(hostile)}, {"type": "tool_call", "name": draw(hostile)}]
    return ev


@SETTINGS
@given(events(), hostile)
def test_nothing_printed_from_an_event_holds_a_control_character(ev: dict, delta: str) -> None:
    buf = io.StringIO()
    renderer = Renderer(buf, color=False)
    renderer.delta(delta)
    renderer.event(ev)
    renderer.resynced()
    printed = buf.getvalue() + log_line_summary(ev)
    assert not CONTROL & set(printed), repr(printed)
    assert "\n" not in log_line_summary(ev)


@SETTINGS
@given(hostile)
def test_safe_keeps_text_and_drops_controls(text: str) -> None:
    cleaned = safe(text)
    assert not CONTROL & set(cleaned)
    assert cleaned == "".join(c for c in text if c not in CONTROL)


@SETTINGS
@given(values)
def test_json_output_is_the_same_json_without_raw_controls(value: object) -> None:
    line = json.dumps(value, ensure_ascii=False)
    shown = safe_json(line.encode())
    assert not CONTROL & set(shown)
    assert json.loads(shown) == value


def test_a_workers_streamed_text_keeps_its_name_on_every_line() -> None:
    """A new user saw a worker's final text in `musec run` output without its `[worker:a]`
    prefix: streamed text carried no agent, while logged events did."""
    buf = io.StringIO()
    renderer = Renderer(buf, color=False)
    renderer.live_text = True  # as on a terminal (a pipe gets each message whole)
    renderer.delta("a do", agent="worker:a")
    renderer.delta("ne\nsecond line\n", agent="worker:a")
    renderer.delta("main speaks\n")
    assert buf.getvalue() == "[worker:a] a done\n[worker:a] second line\nmain speaks\n"
