"""Every recorded Anthropic stream, replayed by a real local server, assembles as expected."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from musec.agents.core.conversation import (
    Message,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from musec.agents.core.errors import ProviderBadRequest, ProviderOverloaded, ProviderUnreachable
from musec.agents.providers import RetryPolicy

from tests.support.anthropic_server import FIXTURES, Answer, message, replay, replay_chunks

pytestmark = pytest.mark.anyio

ANTHROPIC = FIXTURES / "anthropic"
COMPLETE = ["text_only", "tool_use", "thinking_tool_use", "two_tools"]
REQUEST = ModelRequest(
    model="", system="Be brief.", messages=[Message("user", [TextBlock("hi")])], tools=[]
)


def expected(name: str) -> dict[str, Any]:
    return json.loads((ANTHROPIC / f"{name}.json").read_text(encoding="utf-8"))


def as_api_message(response: ModelResponse) -> dict[str, Any]:
    """Our response in the fields of the API's Message that map onto our model."""
    content = []
    for block in response.content:
        match block:
            case TextBlock(text=text):
                content.append({"type": "text", "text": text})
            case ThinkingBlock(thinking=thinking, signature=signature):
                content.append({"type": "thinking", "thinking": thinking, "signature": signature})
            case ToolCallBlock(id=call_id, name=name, input=tool_input, input_error=None):
                content.append(
                    {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}
                )
            case _:
                raise AssertionError(f"unexpected block {block!r}")
    return {
        "id": response.provider_ids.get("message_id"),
        "model": response.model,
        "content": content,
        "stop_reason": response.stop_reason,
        "usage": {
            "input_tokens": response.usage.input_tokens,
            "output_tokens": response.usage.output_tokens,
            "cache_read_input_tokens": response.usage.cache_read_tokens,
            "cache_creation_input_tokens": response.usage.cache_write_tokens,
        },
    }


def assert_assembles_to(response: ModelResponse, name: str) -> None:
    want = expected(name)["message"]
    got = as_api_message(response)
    assert got["content"] == want["content"]
    assert got["stop_reason"] == want["stop_reason"]
    assert got["id"] == want["id"]
    assert got["model"] == want["model"]
    for key, value in got["usage"].items():
        assert value == want["usage"][key], key


def streamed_text(want: dict[str, Any], kind: str) -> str:
    return "".join(b.get(kind, "") for b in want["message"]["content"] if b["type"] == kind)


@pytest.mark.parametrize("name", COMPLETE)
async def test_fixture_assembles_to_expected(name, server, provider, deltas, api_key):
    server.enqueue(replay(ANTHROPIC / f"{name}.sse"))
    response = await provider.complete(REQUEST, deltas)
    assert_assembles_to(response, name)
    assert response.provider_ids["request_id"].startswith("req_local_")
    assert deltas.text("text") == streamed_text(expected(name), "text")
    assert deltas.text("thinking") == streamed_text(expected(name), "thinking")
    [sent] = server.requests
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == api_key
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["content-type"] == "application/json"
    assert sent.body["stream"] is True
    assert sent.body["model"] == "claude-test"


@pytest.mark.parametrize("name", ["chunks.json", "chunks_lf.json"])
async def test_edge_chunks_assemble_to_tool_use(name, server, provider, deltas):
    server.enqueue(replay_chunks(FIXTURES / "edge" / name))
    response = await provider.complete(REQUEST, deltas)
    assert_assembles_to(response, "tool_use")


async def test_crlf_keepalive_assembles_to_text_only(server, provider, deltas):
    data = (FIXTURES / "edge" / "crlf_keepalive.sse").read_bytes()
    cuts = [i + 1 for i in range(len(data)) if data[i : i + 1] == b"\r"]  # every CR | LF
    server.enqueue(replay(FIXTURES / "edge" / "crlf_keepalive.sse", cuts=cuts))
    response = await provider.complete(REQUEST, deltas)
    assert_assembles_to(response, "text_only")


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    name=st.sampled_from(COMPLETE),
    cut_fractions=st.lists(st.floats(0, 1), max_size=12),
)
async def test_any_split_assembles_the_same(server, provider, name, cut_fractions):
    path = ANTHROPIC / f"{name}.sse"
    size = path.stat().st_size
    server.enqueue(replay(path, cuts=[int(f * size) for f in cut_fractions]))

    async def ignore(delta):
        pass

    assert_assembles_to(await provider.complete(REQUEST, ignore), name)


async def test_overloaded_midstream_without_retries_raises(server, provider, deltas):
    provider.retry_policy = RetryPolicy(max_attempts=1)
    server.enqueue(replay(ANTHROPIC / "overloaded_error.sse"))
    with pytest.raises(ProviderOverloaded, match="overloaded_error"):
        await provider.complete(REQUEST, deltas)
    assert deltas.text() == streamed_text(expected("overloaded_error"), "text")


async def test_overloaded_midstream_is_retried_without_duplicating_output(server, provider, deltas):
    notices = []
    provider.on_retry = notices.append
    server.enqueue(replay(ANTHROPIC / "overloaded_error.sse"), replay(ANTHROPIC / "text_only.sse"))
    response = await provider.complete(REQUEST, deltas)
    assert_assembles_to(response, "text_only")
    assert response.text == "Hello! 👋 How can I help you today?"
    partial = streamed_text(expected("overloaded_error"), "text")
    [notice] = notices
    assert isinstance(notice.error, ProviderOverloaded)
    assert notice.attempt == 1
    assert notice.discarded_output_chars == len(partial)
    # What a live view keeps after dropping the discarded characters is the answer, once.
    assert deltas.text()[notice.discarded_output_chars :] == response.text
    assert len(server.requests) == 2
    assert server.requests[0].raw_body == server.requests[1].raw_body


@pytest.mark.parametrize("end", ["finish", "close"])
async def test_interrupted_stream_raises_not_partial(server, provider, deltas, end):
    provider.retry_policy = RetryPolicy(max_attempts=1)
    data = (ANTHROPIC / "tool_use.sse").read_bytes()
    cut = data.index(b"event: message_delta")
    server.enqueue(Answer(chunks=(data[:cut],), end=end))
    with pytest.raises(ProviderUnreachable):
        await provider.complete(REQUEST, deltas)


async def test_interrupted_stream_is_retried(server, provider, deltas):
    data = (ANTHROPIC / "text_only.sse").read_bytes()
    cut = data.index(b"event: content_block_stop")
    server.enqueue(replay(ANTHROPIC / "text_only.sse", cuts=[cut], end="close"))
    server.enqueue(replay(ANTHROPIC / "text_only.sse"))
    response = await provider.complete(REQUEST, deltas)
    assert_assembles_to(response, "text_only")


async def test_unknown_events_and_fields_are_tolerated(server, provider, deltas):
    text = (ANTHROPIC / "two_tools.sse").read_text(encoding="utf-8")
    extra = (
        'event: future_event\ndata: {"type":"future_event","x":1}\n\n'
        'event: content_block_start\ndata: {"type":"content_block_start","index":9,'
        '"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}\n\n'
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        '"delta":{"type":"citations_delta","citation":{}}}\n\n'
    )
    text = text.replace("event: message_delta", extra + "event: message_delta")
    text = text.replace('"name":"get_weather"', '"name":"get_weather","caller":{"type":"direct"}')
    server.enqueue(Answer(chunks=(text.encode(),)))
    response = await provider.complete(REQUEST, deltas)
    assert_assembles_to(response, "two_tools")


async def test_malformed_tool_json_sets_input_error(server, provider, deltas):
    server.enqueue(
        message(
            [
                {"type": "text", "text": "Running it."},
                {
                    "type": "tool_use",
                    "id": "toolu_bad",
                    "name": "bash",
                    "partial_json": '{"command": "ls',
                },
                {"type": "tool_use", "id": "toolu_list", "name": "bash", "partial_json": "[1, 2]"},
                {"type": "tool_use", "id": "toolu_none", "name": "todo_write", "partial_json": ""},
            ],
            stop_reason="max_tokens",
        )
    )
    response = await provider.complete(REQUEST, deltas)
    bad, listed, empty = response.tool_calls
    assert (bad.id, bad.name, bad.input) == ("toolu_bad", "bash", {})
    assert bad.input_error and "not valid JSON" in bad.input_error
    assert listed.input == {} and "not an object" in (listed.input_error or "")
    assert empty.input == {} and empty.input_error is None
    assert response.stop_reason == "max_tokens"


@pytest.mark.parametrize(
    ("kind", "retried"),
    [("api_error", True), ("overloaded_error", True), ("invalid_request_error", False)],
)
async def test_error_events_are_mapped_by_type(server, provider, deltas, kind, retried):
    partial = message([{"type": "text", "text": "partial answer"}], error=kind)
    server.enqueue(partial, message([{"type": "text", "text": "whole answer"}]))
    if retried:
        assert (await provider.complete(REQUEST, deltas)).text == "whole answer"
    else:
        with pytest.raises(ProviderBadRequest, match=kind):
            await provider.complete(REQUEST, deltas)
    assert len(server.requests) == (2 if retried else 1)
