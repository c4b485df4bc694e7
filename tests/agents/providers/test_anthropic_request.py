"""Request conversion: what the server receives, and a multi-turn round trip."""

from __future__ import annotations

import json

import pytest
from musec.agents.core.conversation import (
    Message,
    ModelRequest,
    ReasoningBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSpec,
)
from musec.agents.providers.anthropic import build_request_body

from tests.support.anthropic_server import (
    FIXTURES,
    RecordedRequest,
    check_tool_pairing,
    message,
    replay,
)

pytestmark = pytest.mark.anyio

EPHEMERAL = {"type": "ephemeral"}
TOOLS = [
    ToolSpec("get_forecast", "Weather forecast.", {"type": "object", "properties": {}}),
    ToolSpec("bash", "Run a command.", {"type": "object", "properties": {"command": {}}}),
]
SIGNATURE = "EvMCCkYICxgC+/=="  # opaque; must come back byte for byte
ODD_ID = "toolu_01-Odd_ID-ß"


def history() -> list[Message]:
    return [
        Message("user", [TextBlock("Umbrella tomorrow in Lisbon?")]),
        Message(
            "assistant",
            [
                ThinkingBlock("Check the forecast.", SIGNATURE),
                RedactedThinkingBlock("EmwKAhgBEgy3va3pzix/LafPsn4a"),
                ReasoningBlock({"type": "reasoning", "id": "rs_1"}),
                TextBlock(""),
                ToolCallBlock(ODD_ID, "get_forecast", {"city": "Lisbon"}),
            ],
        ),
        Message(
            "user",
            [
                ToolResultBlock(ODD_ID, "rain, 80%"),
                ToolResultBlock("toolu_x", "boom", is_error=True),
            ],
        ),
    ]


def test_blocks_convert_byte_exact_with_cache_breakpoints():
    request = ModelRequest("claude-x", "Be brief.", history(), TOOLS, max_output_tokens=1000)
    body = build_request_body(request, "claude-x")
    assert list(body) == ["model", "max_tokens", "tools", "system", "messages", "stream"]
    assert body["max_tokens"] == 1000 and body["stream"] is True
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}]
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][1] == {
        "name": "bash",
        "description": "Run a command.",
        "input_schema": {"type": "object", "properties": {"command": {}}},
        "cache_control": EPHEMERAL,
    }
    first, assistant, results = body["messages"]
    assert first == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Umbrella tomorrow in Lisbon?", "cache_control": EPHEMERAL}
        ],
    }
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Check the forecast.", "signature": SIGNATURE},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
            {"type": "tool_use", "id": ODD_ID, "name": "get_forecast", "input": {"city": "Lisbon"}},
        ],
    }
    assert results["content"] == [
        {"type": "tool_result", "tool_use_id": ODD_ID, "content": "rain, 80%"},
        {
            "type": "tool_result",
            "tool_use_id": "toolu_x",
            "content": "boom",
            "is_error": True,
            "cache_control": EPHEMERAL,
        },
    ]


def test_empty_system_and_no_tools_are_left_out():
    request = ModelRequest("m", "", [Message("user", [TextBlock("hi")])], [])
    body = build_request_body(request, "m")
    assert "system" not in body and "tools" not in body


def test_breakpoint_skips_thinking_blocks():
    messages = [Message("user", [TextBlock("q"), ThinkingBlock("t", "s")])]
    body = build_request_body(ModelRequest("m", "", messages, []), "m")
    assert body["messages"][0]["content"][0]["cache_control"] == EPHEMERAL
    assert "cache_control" not in body["messages"][0]["content"][1]


async def test_thinking_and_tool_ids_round_trip_through_the_server(server, provider, deltas):
    """Turn 1 streams thinking + tool_use; turn 2 must send both back byte for byte."""
    server.enqueue(
        replay(FIXTURES / "anthropic" / "thinking_tool_use.sse"),
        message([{"type": "text", "text": "Yes, take one."}]),
    )
    messages = [Message("user", [TextBlock("Umbrella tomorrow in Lisbon?")])]
    request = ModelRequest("", "Be brief.", messages, TOOLS)
    first = await provider.complete(request, deltas)
    [call] = first.tool_calls
    messages += [
        Message("assistant", first.content),
        Message("user", [ToolResultBlock(call.id, "rain, 80%")]),
    ]
    second = await provider.complete(ModelRequest("", "Be brief.", messages, TOOLS), deltas)
    assert second.text == "Yes, take one."

    want = json.loads((FIXTURES / "anthropic" / "thinking_tool_use.json").read_text())["message"]
    sent = server.requests[1].body["messages"][1]["content"]
    assert sent == want["content"]  # thinking + signature + tool_use id, byte-exact
    assert (
        server.requests[1].body["messages"][2]["content"][0]["tool_use_id"]
        == want["content"][1]["id"]
    )
    check_tool_pairing(server.requests)
    # The prefix of request 1 is repeated unchanged at the start of request 2 (cache hits).
    assert server.requests[0].body["tools"] == server.requests[1].body["tools"]
    assert server.requests[0].body["system"] == server.requests[1].body["system"]


def test_check_tool_pairing_catches_a_dangling_call():
    def request(messages):
        return RecordedRequest("POST", "/v1/messages", {}, {"messages": messages}, b"")

    call = {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}
    good = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [call]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}],
        },
    ]
    check_tool_pairing([request(good)])
    wrong_id = [
        *good[:2],
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2"}]},
    ]
    with pytest.raises(AssertionError, match="toolu_2"):
        check_tool_pairing([request(wrong_id)])
    with pytest.raises(AssertionError, match="never answered"):
        check_tool_pairing([request(good[:2])])
    with pytest.raises(AssertionError, match="role"):
        check_tool_pairing([request([good[0], good[0]])])
