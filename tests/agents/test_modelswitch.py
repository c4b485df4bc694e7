"""The history converted for a new model (agents/modelswitch.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from musec.agents.core.conversation import (
    Message,
    ReasoningBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from musec.agents.modelswitch import OPAQUE_BLOCKS, convert_history


def test_opaque_reasoning_is_dropped_whole_and_tool_call_ids_are_kept():
    call = ToolCallBlock("toolu_01A", "bash", {"command": "ls"})
    messages = [
        Message("user", [TextBlock("task")]),
        Message("assistant", [ThinkingBlock("let me look", "sig=="), TextBlock("looking"), call]),
        Message("user", [ToolResultBlock("toolu_01A", "a.py")]),
        Message("assistant", [ReasoningBlock({"type": "reasoning", "encrypted_content": "gAAA"}), TextBlock("done")]),
    ]
    out, dropped = convert_history(messages)
    assert dropped == 2
    assert out[1] == Message("assistant", [TextBlock("looking"), call])
    assert out[2] is messages[2] and out[0] is messages[0]
    assert out[3] == Message("assistant", [TextBlock("done")])
    assert messages[1].content[0] == ThinkingBlock("let me look", "sig==")  # the input is not changed


def test_an_assistant_message_of_reasoning_alone_goes_and_its_neighbours_join():
    messages = [
        Message("user", [TextBlock("one")]),
        Message("assistant", [RedactedThinkingBlock("opaque")]),
        Message("user", [TextBlock("two")]),
        Message("assistant", [TextBlock("ok")]),
    ]
    out, dropped = convert_history(messages)
    assert dropped == 1
    assert out == [Message("user", [TextBlock("one"), TextBlock("two")]), Message("assistant", [TextBlock("ok")])]


def test_a_history_without_opaque_blocks_is_kept_as_it_is():
    messages = [Message("user", [TextBlock("a")]), Message("assistant", [TextBlock("b")])]
    out, dropped = convert_history(messages)
    assert dropped == 0 and out == messages and all(a is b for a, b in zip(out, messages, strict=True))


BLOCKS = st.sampled_from([TextBlock("t"), ThinkingBlock("th", "s"), RedactedThinkingBlock("r"),
                          ReasoningBlock({"id": "rs_1"}), ToolCallBlock("c", "bash", {})])


@given(st.lists(st.lists(BLOCKS, min_size=1, max_size=4), min_size=1, max_size=12))
def test_roles_still_alternate_from_user_and_nothing_opaque_is_left(assistant_turns):
    messages: list[Message] = []
    for n, blocks in enumerate(assistant_turns):
        messages.append(Message("user", [TextBlock(f"u{n}")]))
        messages.append(Message("assistant", blocks))
    out, dropped = convert_history(messages)
    assert [m.role for m in out] == ["user", "assistant"] * (len(out) // 2) + ["user"] * (len(out) % 2)
    assert not any(isinstance(b, OPAQUE_BLOCKS) for m in out for b in m.content)
    assert dropped == sum(isinstance(b, OPAQUE_BLOCKS) for m in messages for b in m.content)
    assert [b for m in out for b in m.content] == [b for m in messages for b in m.content if not isinstance(b, OPAQUE_BLOCKS)]
