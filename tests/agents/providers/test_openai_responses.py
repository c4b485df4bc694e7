"""The OpenAI Responses adapter against a real local server replaying the recorded streams."""

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
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSpec,
)
from musec.agents.core.errors import (
    ProviderError,
    ProviderOverloaded,
    ProviderUnreachable,
    QuotaExhausted,
)
from musec.agents.providers import AzureResponsesProvider, RetryPolicy, make_provider

from tests.support.openai_server import (
    FIXTURES,
    Answer,
    check_responses_pairing,
    openai_error,
    replay,
    responses_stream,
)

pytestmark = pytest.mark.anyio

RESPONSES = FIXTURES / "openai_responses"
COMPLETE = ["text_only", "function_call", "reasoning_encrypted"]
WEATHER = ToolSpec(
    "get_weather",
    "Get the current weather for a location.",
    {"type": "object", "properties": {"location": {"type": "string"}}},
)
REQUEST = ModelRequest(
    model="",
    system="Be brief.",
    messages=[Message("user", [TextBlock("Umbrella in Lisbon?")])],
    tools=[WEATHER],
    session_id="sess_0123",
)


def expected(name: str) -> dict[str, Any]:
    return json.loads((RESPONSES / f"{name}.json").read_text(encoding="utf-8"))


def assert_assembles_to(response: ModelResponse, name: str) -> None:
    want = expected(name)
    final = want["response"]
    assert response.text == want["output_text"]
    assert response.provider_ids["response_id"] == final["id"]
    assert response.model == final["model"]
    assert response.stop_reason == final["status"] == "completed"
    calls = [
        {
            "call_id": c.id,
            "name": c.name,
            "arguments": c.raw_input,
            "parsed_arguments": c.input,
        }
        for c in response.tool_calls
    ]
    assert calls == want.get("function_calls", [])
    assert all(c.input_error is None for c in response.tool_calls)
    assert [c.provider_item_id for c in response.tool_calls] == [
        o["id"] for o in final["output"] if o["type"] == "function_call"
    ]
    reasoning = [b.item for b in response.content if isinstance(b, ReasoningBlock)]
    assert reasoning == want.get("reasoning_items", [])
    usage = final["usage"]
    cached = usage["input_tokens_details"]["cached_tokens"]
    assert response.usage.input_tokens + response.usage.cache_read_tokens == usage["input_tokens"]
    assert response.usage.cache_read_tokens == cached
    assert response.usage.output_tokens == usage["output_tokens"]


@pytest.mark.parametrize("name", COMPLETE)
async def test_fixture_assembles_to_expected(name, openai_server, responses_provider, deltas):
    openai_server.enqueue(replay(RESPONSES / f"{name}.sse"))
    response = await responses_provider.complete(REQUEST, deltas)
    assert_assembles_to(response, name)
    assert deltas.text() == expected(name)["output_text"]
    assert response.provider_ids["request_id"].startswith("req_local_")
    [sent] = openai_server.requests
    assert sent.path == "/v1/responses"
    assert sent.headers["authorization"] == "Bearer sk-proj-test-9876543210-SECRET"
    body = sent.body
    assert body["stream"] is True and body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["prompt_cache_key"] == "sess_0123"
    assert body["model"] == "gpt-test" and body["instructions"] == "Be brief."
    assert body["tools"][0]["type"] == "function" and body["tools"][0]["name"] == "get_weather"
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Umbrella in Lisbon?"}],
        }
    ]


async def test_reasoning_summary_streams_as_thinking(openai_server, responses_provider, deltas):
    openai_server.enqueue(replay(RESPONSES / "reasoning_encrypted.sse"))
    response = await responses_provider.complete(REQUEST, deltas)
    [block] = [b for b in response.content if isinstance(b, ReasoningBlock)]
    assert deltas.text("thinking") == block.summary
    assert block.summary.startswith("**Planning weather lookup**")


async def test_reasoning_item_round_trips_byte_exact(openai_server, responses_provider, deltas):
    want = expected("reasoning_encrypted")
    suffix = want["next_turn_request"]["input_suffix"]
    openai_server.enqueue(
        replay(RESPONSES / "reasoning_encrypted.sse"),
        responses_stream([{"type": "message", "text": "Yes, take one."}]),
    )
    first = await responses_provider.complete(REQUEST, deltas)
    [call] = first.tool_calls
    history = [
        *REQUEST.messages,
        Message("assistant", first.content),
        Message("user", [ToolResultBlock(call.id, suffix[-1]["output"])]),
    ]
    second = await responses_provider.complete(
        ModelRequest(
            model="",
            system=REQUEST.system,
            messages=history,
            tools=[WEATHER],
            session_id=REQUEST.session_id,
        ),
        deltas,
    )
    assert second.text == "Yes, take one."
    sent = openai_server.requests[1]
    assert sent.body["input"][-3:] == suffix
    assert sent.body["input"][0] == openai_server.requests[0].body["input"][0]
    for key in ("store", "include"):
        assert sent.body[key] == want["next_turn_request"][key]
    encrypted = suffix[0]["encrypted_content"].encode()
    assert b'"encrypted_content":"' + encrypted + b'"' in sent.raw_body
    assert want["must_not_replay_encrypted_content"].encode() not in sent.raw_body
    # The request repeats the previous one's prefix (cache friendly).
    assert sent.body["tools"] == openai_server.requests[0].body["tools"]
    check_responses_pairing(openai_server.requests)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=st.sampled_from(COMPLETE), cut_fractions=st.lists(st.floats(0, 1), max_size=12))
async def test_any_split_assembles_the_same(openai_server, responses_provider, name, cut_fractions):
    path = RESPONSES / f"{name}.sse"
    size = path.stat().st_size
    openai_server.enqueue(replay(path, cuts=[int(f * size) for f in cut_fractions]))

    async def ignore(delta):
        pass

    assert_assembles_to(await responses_provider.complete(REQUEST, ignore), name)


async def test_crlf_comments_and_utf8_splits(openai_server, responses_provider, deltas):
    text = (RESPONSES / "text_only.sse").read_text(encoding="utf-8")
    text = ": keep-alive\n\n" + text.replace("\n\nevent: ", "\n\n:\n: proxy comment\n\nevent: ")
    data = text.replace("\n", "\r\n").encode()
    cuts = [i + 1 for i in range(len(data)) if data[i : i + 1] == b"\r"]
    cuts += [i + 1 for i in range(len(data)) if data[i] >= 0xC0]  # inside each UTF-8 char
    cuts += [i + 2 for i in range(len(data)) if data[i : i + 5] == b"data:"]
    openai_server.enqueue(
        Answer(
            chunks=tuple(
                data[a:b]
                for a, b in zip([0, *sorted(cuts)], [*sorted(cuts), len(data)], strict=True)
            )
        )
    )
    assert_assembles_to(await responses_provider.complete(REQUEST, deltas), "text_only")


@pytest.mark.parametrize("flat", [False, True])
async def test_failed_stream_raises_retryable_never_a_turn(
    openai_server, responses_provider, deltas, flat
):
    want = expected("failed")
    responses_provider.retry_policy = RetryPolicy(max_attempts=1)
    text = (RESPONSES / "failed.sse").read_text(encoding="utf-8")
    if flat:  # the API reference's flat error event
        nested = json.dumps(want["error_event"], ensure_ascii=False, separators=(",", ":"))
        flat_event = {
            "type": "error",
            "sequence_number": 7,
            **{k: v for k, v in want["error_event"]["error"].items() if k != "type"},
        }
        assert nested in text
        text = text.replace(nested, json.dumps(flat_event, separators=(",", ":")))
    openai_server.enqueue(Answer(chunks=(text.encode(),)))
    with pytest.raises(ProviderOverloaded) as caught:
        await responses_provider.complete(REQUEST, deltas)
    assert caught.value.retryable is want["error"]["retryable"]
    assert want["error"]["code"] in str(caught.value)
    assert "req_7f3c9a0e5b2d4c1a8e6f0b9d3a2c4e1f" in str(caught.value)
    assert deltas.text() == want["partial_output_text"]


async def test_failed_stream_is_retried_without_duplicating_output(
    openai_server, responses_provider, deltas
):
    notices = []
    responses_provider.on_retry = notices.append
    openai_server.enqueue(replay(RESPONSES / "failed.sse"), replay(RESPONSES / "text_only.sse"))
    response = await responses_provider.complete(REQUEST, deltas)
    assert_assembles_to(response, "text_only")
    [notice] = notices
    assert notice.discarded_output_chars == len(expected("failed")["partial_output_text"])
    assert deltas.text()[notice.discarded_output_chars :] == response.text
    assert openai_server.requests[0].raw_body == openai_server.requests[1].raw_body


@pytest.mark.parametrize("flat", [False, True])
async def test_insufficient_quota_midstream_is_not_retried(
    openai_server, responses_provider, deltas, flat
):
    openai_server.enqueue(
        responses_stream(
            [{"type": "message", "text": "partial"}], error="insufficient_quota", flat_error=flat
        ),
        responses_stream([{"type": "message", "text": "never"}]),
    )
    with pytest.raises(QuotaExhausted, match="did not say when it resets") as caught:
        await responses_provider.complete(REQUEST, deltas)
    assert caught.value.retryable is False and caught.value.resets_at is None
    assert len(openai_server.requests) == 1


async def test_http_429_insufficient_quota_vs_rate_limit(openai_server, responses_provider, deltas):
    openai_server.enqueue(
        openai_error(
            429,
            "rate_limit_exceeded",
            "Rate limit reached for gpt-test on tokens per min",
            type_="tokens",
            headers={"retry-after-ms": "5"},
        ),
        openai_error(
            429,
            "insufficient_quota",
            "You exceeded your current quota, please check your plan and billing details.",
            type_="insufficient_quota",
        ),
        responses_stream([{"type": "message", "text": "never"}]),
    )
    notices = []
    responses_provider.on_retry = notices.append
    with pytest.raises(QuotaExhausted, match="HTTP 429: quota exhausted") as caught:
        await responses_provider.complete(REQUEST, deltas)
    assert caught.value.status == 429
    assert [n.error.status for n in notices] == [429]  # only the rate limit was retried
    assert len(openai_server.requests) == 2
    assert "SECRET" not in str(caught.value)


@pytest.mark.parametrize("end", ["finish", "close"])
async def test_interrupted_stream_raises_not_partial(
    openai_server, responses_provider, deltas, end
):
    responses_provider.retry_policy = RetryPolicy(max_attempts=1)
    data = (RESPONSES / "function_call.sse").read_bytes()
    cut = data.index(b"event: response.completed")
    openai_server.enqueue(Answer(chunks=(data[:cut],), end=end))
    with pytest.raises(ProviderUnreachable):
        await responses_provider.complete(REQUEST, deltas)


async def test_malformed_arguments_set_input_error(openai_server, responses_provider, deltas):
    openai_server.enqueue(
        responses_stream(
            [
                {
                    "type": "function_call",
                    "call_id": "call_bad",
                    "name": "bash",
                    "arguments": '{"command": "ls',
                },
                {
                    "type": "function_call",
                    "call_id": "call_list",
                    "name": "bash",
                    "arguments": "[1]",
                },
                {
                    "type": "function_call",
                    "call_id": "call_ok",
                    "name": "todo_write",
                    "arguments": '{"items": []}',
                },
            ]
        )
    )
    bad, listed, ok = (await responses_provider.complete(REQUEST, deltas)).tool_calls
    assert bad.input == {} and "not valid JSON" in (bad.input_error or "")
    assert bad.raw_input == '{"command": "ls'
    assert listed.input == {} and "not an object" in (listed.input_error or "")
    assert ok.input == {"items": []} and ok.input_error is None


async def test_incomplete_response_is_a_turn_with_its_reason(
    openai_server, responses_provider, deltas
):
    openai_server.enqueue(
        responses_stream([{"type": "message", "text": "cut sho"}], incomplete="max_output_tokens")
    )
    response = await responses_provider.complete(REQUEST, deltas)
    assert response.stop_reason == "max_output_tokens" and response.text == "cut sho"


def test_request_conversion_round_trip():
    from musec.agents.providers.openai_responses import build_request_body

    reasoning = {"id": "rs_1", "type": "reasoning", "encrypted_content": "enc", "summary": []}
    history = [
        Message("user", [TextBlock("a"), TextBlock("b")]),
        Message(
            "assistant",
            [
                ThinkingBlock("anthropic only", "sig"),
                ReasoningBlock(reasoning),
                TextBlock("calling"),
                ToolCallBlock(
                    "call_1",
                    "bash",
                    {"command": "ls"},
                    provider_item_id="fc_1",
                    raw_input='{"command":  "ls"}',
                ),
                ToolCallBlock("toolu_2", "read_file", {"path": "x"}),
            ],
        ),
        Message(
            "user", [ToolResultBlock("call_1", "out"), ToolResultBlock("toolu_2", "err", True)]
        ),
    ]
    body = build_request_body(ModelRequest("m", "", history, []), "m")
    assert "instructions" not in body and "tools" not in body and "prompt_cache_key" not in body
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}],
        },
        reasoning,
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "calling"}],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "status": "completed",
            "arguments": '{"command":  "ls"}',
            "call_id": "call_1",
            "name": "bash",
        },
        {
            "type": "function_call",
            "status": "completed",
            "arguments": '{"path":"x"}',
            "call_id": "toolu_2",
            "name": "read_file",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "out"},
        {"type": "function_call_output", "call_id": "toolu_2", "output": "err"},
    ]


@pytest.mark.parametrize(
    ("endpoint_suffix", "version", "path", "query"),
    [
        ("", None, "/openai/responses", "api-version=2025-04-01-preview"),
        ("/", "2025-03-01-preview", "/openai/responses", "api-version=2025-03-01-preview"),
        ("/openai/v1", None, "/openai/v1/responses", ""),
    ],
)
async def test_azure_deployment_url_version_and_key(
    openai_server, http_client, deltas, endpoint_suffix, version, path, query
):
    credentials = {
        "AZURE_OPENAI_ENDPOINT": openai_server.endpoint + endpoint_suffix,
        "AZURE_OPENAI_API_KEY": "azure-key-SECRET-123",
        "OPENAI_API_KEY": "must-not-be-sent",
    }
    if version:
        credentials["AZURE_OPENAI_API_VERSION"] = version
    provider = make_provider(
        "azure/my-gpt5-deployment",
        credentials,
        http_client=http_client,
        retry_policy=RetryPolicy(max_attempts=1),
    )
    assert isinstance(provider, AzureResponsesProvider) and provider.name == "azure"
    assert "SECRET" not in repr(provider)
    openai_server.enqueue(replay(RESPONSES / "text_only.sse"))
    assert_assembles_to(await provider.complete(REQUEST, deltas), "text_only")
    [sent] = openai_server.requests
    assert sent.path == path + (f"?{query}" if query else "")
    assert sent.headers["api-key"] == "azure-key-SECRET-123"
    assert "authorization" not in sent.headers
    assert sent.body["model"] == "my-gpt5-deployment" and sent.body["store"] is False


async def test_unknown_events_are_tolerated(openai_server, responses_provider, deltas):
    text = (RESPONSES / "function_call.sse").read_text(encoding="utf-8")
    extra = (
        'event: response.future_event\ndata: {"type":"response.future_event","x":1}\n\n'
        'event: response.output_item.added\ndata: {"type":"response.output_item.added",'
        '"output_index":5,"item":{"id":"ws_1","type":"web_search_call","status":"completed"}}\n\n'
    )
    text = text.replace("event: response.completed", extra + "event: response.completed")
    openai_server.enqueue(Answer(chunks=(text.encode(),)))
    assert_assembles_to(await responses_provider.complete(REQUEST, deltas), "function_call")


async def test_error_chunk_with_bad_request_code_is_not_retried(
    openai_server, responses_provider, deltas
):
    openai_server.enqueue(
        responses_stream([], error="context_length_exceeded"),
        responses_stream([{"type": "message", "text": "never"}]),
    )
    with pytest.raises(ProviderError, match="context_length_exceeded") as caught:
        await responses_provider.complete(REQUEST, deltas)
    assert not caught.value.retryable and len(openai_server.requests) == 1
