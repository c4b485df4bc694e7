"""The OpenAI-compatible Chat Completions adapter against a real local server."""

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
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSpec,
)
from musec.agents.core.errors import ProviderOverloaded, ProviderUnreachable
from musec.agents.providers import RetryPolicy

from tests.support.openai_server import (
    FIXTURES,
    Answer,
    chat_stream,
    check_chat_pairing,
    replay,
)

pytestmark = pytest.mark.anyio

CHAT = FIXTURES / "openai_chat"
NAMES = ["text_only", "tool_calls", "with_usage"]
REQUEST = ModelRequest(
    model="",
    system="Be brief.",
    messages=[Message("user", [TextBlock("Weather in Paris and Tokyo?")])],
    tools=[ToolSpec("get_weather", "Weather.", {"type": "object"})],
)


def expected(name: str) -> dict[str, Any]:
    return json.loads((CHAT / f"{name}.json").read_text(encoding="utf-8"))


def assert_assembles_to(response: ModelResponse, name: str) -> None:
    want = expected(name)
    completion = want["completion"]
    [choice] = completion["choices"]
    message = choice["message"]
    assert response.text == (message["content"] or "")
    assert response.stop_reason == choice["finish_reason"]
    assert response.provider_ids["completion_id"] == completion["id"]
    assert response.model == completion["model"]
    calls = [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw_input}}
        for c in response.tool_calls
    ]
    assert calls == message.get("tool_calls", [])
    assert [c.input for c in response.tool_calls] == want.get("parsed_arguments", [])
    usage = completion["usage"] or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    assert response.usage.cache_read_tokens == cached
    assert response.usage.input_tokens + cached == usage.get("prompt_tokens", 0)
    assert response.usage.output_tokens == usage.get("completion_tokens", 0)


@pytest.mark.parametrize("name", NAMES)
async def test_fixture_assembles_to_expected(name, openai_server, chat_provider, deltas):
    openai_server.enqueue(replay(CHAT / f"{name}.sse"))
    response = await chat_provider.complete(REQUEST, deltas)
    assert_assembles_to(response, name)
    assert deltas.text() == response.text
    [sent] = openai_server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-proj-test-9876543210-SECRET"
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["model"] == "local-model"
    assert sent.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and Tokyo?"},
    ]
    assert sent.body["tools"][0]["function"]["name"] == "get_weather"


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=st.sampled_from(NAMES), cut_fractions=st.lists(st.floats(0, 1), max_size=12))
async def test_any_split_assembles_the_same(openai_server, chat_provider, name, cut_fractions):
    path = CHAT / f"{name}.sse"
    size = path.stat().st_size
    openai_server.enqueue(replay(path, cuts=[int(f * size) for f in cut_fractions]))

    async def ignore(delta):
        pass

    assert_assembles_to(await chat_provider.complete(REQUEST, ignore), name)


async def test_crlf_comments_and_every_cr_lf_split(openai_server, chat_provider, deltas):
    text = (CHAT / "tool_calls.sse").read_text(encoding="utf-8")
    text = ": ping\n\n" + text.replace("\n\ndata: ", "\n\n: keep-alive\n\ndata:", 3)
    data = text.replace("\n", "\r\n").encode()
    cuts = sorted({i + 1 for i in range(len(data)) if data[i : i + 1] == b"\r"})
    chunks = tuple(data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True))
    openai_server.enqueue(Answer(chunks=chunks))
    assert_assembles_to(await chat_provider.complete(REQUEST, deltas), "tool_calls")


async def test_no_api_key_sends_no_authorization(openai_server, http_client, deltas):
    from musec.agents.providers import make_provider

    provider = make_provider(
        "openai-compat/qwen", {"OPENAI_BASE_URL": openai_server.base_url}, http_client=http_client
    )
    openai_server.enqueue(chat_stream("hi"))
    assert (await provider.complete(REQUEST, deltas)).text == "hi"
    assert "authorization" not in openai_server.requests[0].headers


async def test_tool_round_trip_sends_tool_messages(openai_server, chat_provider, deltas):
    openai_server.enqueue(
        chat_stream(
            "Checking both.",
            [
                {"id": "call_a", "name": "get_weather", "arguments": '{"location": "Paris"}'},
                {"id": "call_b", "name": "get_weather", "arguments": '{"location": "Tokyo"}'},
            ],
            cached_tokens=20,
        ),
        chat_stream("Rain in both."),
    )
    first = await chat_provider.complete(REQUEST, deltas)
    assert [c.input for c in first.tool_calls] == [{"location": "Paris"}, {"location": "Tokyo"}]
    assert (first.usage.input_tokens, first.usage.cache_read_tokens) == (30, 20)
    history = [
        *REQUEST.messages,
        Message("assistant", [ReasoningBlock({"type": "reasoning"}), *first.content]),
        Message("user", [ToolResultBlock("call_a", "rain"), ToolResultBlock("call_b", "rain")]),
    ]
    second = await chat_provider.complete(
        ModelRequest("", REQUEST.system, history, REQUEST.tools), deltas
    )
    assert second.text == "Rain in both."
    messages = openai_server.requests[1].body["messages"]
    assert messages[2] == {
        "role": "assistant",
        "content": "Checking both.",
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
            },
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"location": "Tokyo"}'},
            },
        ],
    }
    assert messages[3:] == [
        {"role": "tool", "tool_call_id": "call_a", "content": "rain"},
        {"role": "tool", "tool_call_id": "call_b", "content": "rain"},
    ]
    check_chat_pairing(openai_server.requests)


async def test_malformed_arguments_set_input_error(openai_server, chat_provider, deltas):
    openai_server.enqueue(
        chat_stream(
            None,
            [
                {"id": "call_bad", "name": "bash", "arguments": '{"command": "ls'},
                {"id": "call_empty", "name": "todo_write", "arguments": ""},
            ],
            finish_reason="length",
        )
    )
    response = await chat_provider.complete(REQUEST, deltas)
    bad, empty = response.tool_calls
    assert bad.input == {} and "not valid JSON" in (bad.input_error or "")
    assert empty.input == {} and empty.input_error is None
    assert response.stop_reason == "length"


@pytest.mark.parametrize("end", ["finish", "close"])
async def test_interrupted_stream_raises_not_partial(openai_server, chat_provider, deltas, end):
    chat_provider.retry_policy = RetryPolicy(max_attempts=1)
    data = (CHAT / "tool_calls.sse").read_bytes()
    cut = data.index(b'"finish_reason":"tool_calls"')
    cut = data.rindex(b"data: ", 0, cut)
    openai_server.enqueue(Answer(chunks=(data[:cut],), end=end))
    with pytest.raises(ProviderUnreachable):
        await chat_provider.complete(REQUEST, deltas)


async def test_usage_chunk_is_read_after_finish_reason(openai_server, chat_provider, deltas):
    openai_server.enqueue(replay(CHAT / "with_usage.sse"))
    response = await chat_provider.complete(REQUEST, deltas)
    assert response.usage.cache_read_tokens == 1152 and response.usage.output_tokens == 8


async def test_error_chunk_midstream_is_retried(openai_server, chat_provider, deltas):
    notices = []
    chat_provider.on_retry = notices.append
    openai_server.enqueue(chat_stream("partial", error="server_error"), chat_stream("whole"))
    response = await chat_provider.complete(REQUEST, deltas)
    assert response.text == "whole"
    [notice] = notices
    assert isinstance(notice.error, ProviderOverloaded)
    assert notice.discarded_output_chars == len("partial")


def test_request_conversion():
    from musec.agents.providers.openai_chat import build_request_body

    history = [
        Message("user", [TextBlock("go")]),
        Message("assistant", [ToolCallBlock("c1", "bash", {"command": "ls"})]),
        Message("user", [ToolResultBlock("c1", "a.txt"), TextBlock("and now?")]),
    ]
    body = build_request_body(ModelRequest("m", "", history, [], max_output_tokens=99), "m")
    assert body["max_tokens"] == 99
    assert body["messages"] == [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command":"ls"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {"role": "user", "content": "and now?"},
    ]


def test_text_blocks_of_one_user_message_are_separate_paragraphs():
    # A person's message and each file its @mentions attached are blocks of one user turn;
    # Chat Completions takes one string, so they must not run into each other.
    from musec.agents.providers.openai_chat import build_request_body

    history = [Message("user", [TextBlock("explain @a.py"), TextBlock('<untrusted-data id="x" source="attached file a.py">')])]
    body = build_request_body(ModelRequest("m", "", history, [], max_output_tokens=9), "m")
    assert body["messages"] == [{"role": "user", "content": 'explain @a.py\n\n<untrusted-data id="x" source="attached file a.py">'}]
