"""The compaction module's pure parts: cut points, the summarising request, the head."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from musec.agents.compaction import (
    HEAD_MARK,
    SUMMARY_MARK,
    CompactionPolicy,
    ContextGauge,
    Pinned,
    cut_oldest,
    cut_point,
    fit_people,
    render_head,
    summary_request,
)
from musec.agents.core.conversation import (
    Message,
    ModelRequest,
    ReasoningBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
)


def _conversation(turns: list[tuple[int, int]]) -> list[Message]:
    """A task, then per turn: an assistant message with ``calls`` calls (a thinking block
    first), then the user message answering them with results of ``size`` characters."""
    messages = [Message("user", [TextBlock("the task")])]
    n = 0
    for calls, size in turns:
        ids = [f"call_{n + k}" for k in range(max(calls, 1))]
        n += len(ids)
        messages.append(Message("assistant", [ThinkingBlock("hm", "sig"), ReasoningBlock({"id": "rs"}),
                                              *[ToolCallBlock(i, "read_file", {"path": "a"}) for i in ids]]))
        messages.append(Message("user", [ToolResultBlock(i, "x" * size) for i in ids]))
    return messages


def _pairs_intact(messages: list[Message]) -> None:
    for i, m in enumerate(messages):
        assert m.role == ("user" if i % 2 == 0 else "assistant"), i
        if m.role == "assistant":
            calls = {b.id for b in m.content if isinstance(b, ToolCallBlock)}
            answered = {b.call_id for b in messages[i + 1].content if isinstance(b, ToolResultBlock)} if i + 1 < len(messages) else set()
            assert calls == answered, (i, calls, answered)
        elif i > 0:
            results = {b.call_id for b in m.content if isinstance(b, ToolResultBlock)}
            calls = {b.id for b in messages[i - 1].content if isinstance(b, ToolCallBlock)}
            assert results <= calls


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), st.integers(0, 3000)), min_size=1, max_size=30), st.integers(0, 20_000))
def test_cut_never_splits_a_call_from_its_result(turns, keep_tokens):
    messages = _conversation(turns)
    gauge = ContextGauge()
    k = cut_point(messages, keep_tokens, gauge)
    assert k is not None
    kept = messages[k:]
    assert k == len(messages) or messages[k].role == "assistant"
    compacted = [Message("user", [TextBlock(HEAD_MARK)]), *kept]
    _pairs_intact(compacted)
    # the kept part fits, and no earlier cut would also fit
    assert sum(gauge.tokens(m) for m in kept) <= keep_tokens or k == len(messages)
    # whole messages only: thinking and reasoning blocks are kept or dropped with their message
    for m in kept:
        assert m in messages


def test_nothing_to_summarise():
    gauge = ContextGauge()
    assert cut_point([], 100, gauge) is None
    calls_in_flight = _conversation([(1, 10)])[:-1]
    assert cut_point(calls_in_flight, 100, gauge) is None
    head_only = [Message("user", [TextBlock(HEAD_MARK + " summary")]), *_conversation([(1, 10)])[1:]]
    assert cut_point(head_only, 10_000, gauge) is None


def test_gauge_calibrates_from_usage():
    gauge = ContextGauge()
    request = ModelRequest("m", "sys", _conversation([(1, 4000)]), [])
    before = gauge.tokens(request)
    gauge.observe(request, Usage(input_tokens=100, cache_read_tokens=900))
    assert gauge.tokens(request) in (1000, 1001)
    assert before > 1000


def test_summary_request_keeps_the_prefix_and_asks_last():
    messages = _conversation([(1, 100)] * 5)
    request = ModelRequest("m", "sys", messages, [], session_id="s")
    asked, cut = summary_request(request, "the parser", CompactionPolicy(window_tokens=200_000), 200_000, ContextGauge())
    assert cut == 0
    assert asked.messages[:-1] == messages[:-1] and asked.system == "sys" and asked.session_id == "s"
    last = asked.messages[-1]
    assert last.content[:-1] == messages[-1].content
    assert last.content[-1].text.startswith(SUMMARY_MARK) and "the parser" in last.content[-1].text


def test_summary_request_over_the_window_cuts_the_oldest():
    messages = _conversation([(1, 4000)] * 40)
    gauge = ContextGauge()
    policy = CompactionPolicy(window_tokens=20_000, summary_output_tokens=1000)
    asked, cut = summary_request(ModelRequest("m", "", messages, []), "", policy, 20_000, gauge)
    assert cut > 0
    assert gauge.tokens(asked) <= policy.summary_input_tokens(20_000) + 50
    assert "were cut" in asked.messages[0].content[0].text
    _pairs_intact(asked.messages[:-1] + [Message("user", [b for b in asked.messages[-1].content if isinstance(b, ToolResultBlock)])])


def test_cut_oldest_leaves_small_histories():
    messages = _conversation([(1, 10)])
    assert cut_oldest(messages, 1, ContextGauge()) == (messages, 0)


def test_head_holds_people_and_pins_verbatim():
    pinned = [Pinned("person", "fix the parser\n  exactly", 0), Pinned("instructions", "<agents-md>sub</agents-md>", 3),
              Pinned("person", "also the docs", 9)]
    head = render_head("## Goal and plan\nfix", pinned, cut_messages=4)
    assert head.startswith(HEAD_MARK)
    assert "fix the parser\n  exactly" in head and "also the docs" in head and "<agents-md>sub</agents-md>" in head
    assert head.index("fix the parser") < head.index("also the docs")
    assert "4 of the oldest messages were cut" in head
    assert "No summary" in render_head("", [])


def test_the_gauge_calibrates_from_the_last_reported_request():
    gauge = ContextGauge()
    assert gauge.tokens_per_byte == ContextGauge.DEFAULT_TOKENS_PER_BYTE
    first = ModelRequest(model="m", system="s", messages=_conversation([(1, 100)]), tools=[])
    second = ModelRequest(model="m", system="s", messages=_conversation([(1, 100), (2, 4000)]), tools=[])
    gauge.observe(first, Usage(input_tokens=10, cache_read_tokens=5))
    gauge.observe(second, Usage(input_tokens=400, cache_write_tokens=100))
    gauge.observe(first, Usage(output_tokens=9))  # no input tokens: no calibration
    size = len(msgspec.json.encode(second))
    assert gauge.tokens_per_byte == 500 / size
    assert gauge.tokens(second) == int(size * 500 / size) + 1
    gauge.observe(first, Usage(input_tokens=30))
    assert gauge.tokens_per_byte == 30 / len(msgspec.json.encode(first))


def test_fit_people_cuts_only_the_long_messages_to_their_head_and_tail() -> None:
    """Fresh-user s8 K4: three huge pastes kept verbatim kept a session over its window."""
    short = "fix the failing test in pager.py"
    huge = ["HEAD-%d " % n + "x" * 300_000 + " TAIL-%d" % n for n in range(3)]
    fitted = fit_people([short, *huge, "and now?"], 30_000)
    assert fitted[0] == short and fitted[-1] == "and now?"
    assert sum(len(t) for t in fitted) < 31_000
    for n, text in enumerate(fitted[1:4]):
        assert text.startswith(f"HEAD-{n} ") and text.endswith(f" TAIL-{n}")
        assert "characters of this message cut by compaction (it was 300014 characters" in text
    assert fit_people([short, "y" * 100], 30_000) == [short, "y" * 100]  # all fit: all verbatim
    wide = fit_people(["界" * 50_000], 30_000)[0]  # three bytes a character: a third as many kept
    assert len(wide.encode()) < 31_000
