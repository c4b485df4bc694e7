"""A request over the model's window is one error kind, ``ContextOverflow``, from every
provider and in every form (HTTP answer, stream event), and is never retried as is."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from musec.agents.core.conversation import Message, ModelRequest, TextBlock
from musec.agents.core.errors import ContextOverflow, ProviderBadRequest, ProviderOverloaded
from musec.agents.providers.overflow import overflow_error

from tests.support.anthropic_server import AnthropicServer, error_response, message
from tests.support.openai_server import OpenAIServer, openai_error, responses_stream

pytestmark = pytest.mark.anyio

REQUEST = ModelRequest(model="", system="", messages=[Message("user", [TextBlock("x" * 4000)])], tools=[])


async def test_anthropic_http_prompt_too_long(server, provider, deltas):
    server.enqueue(error_response(400, "invalid_request_error", "prompt is too long: 208786 tokens > 200000 maximum"))
    with pytest.raises(ContextOverflow) as caught:
        await provider.complete(REQUEST, deltas)
    assert (caught.value.tokens, caught.value.limit, caught.value.status) == (208786, 200000, 400)
    assert isinstance(caught.value, ProviderBadRequest)
    assert len(server.requests) == 1  # never retried as is


async def test_anthropic_in_stream_prompt_too_long(server, provider, deltas):
    server.enqueue(message([], error="invalid_request_error", error_message="prompt is too long: 5 tokens > 4 maximum"))
    with pytest.raises(ContextOverflow) as caught:
        await provider.complete(REQUEST, deltas)
    assert caught.value.status is None and caught.value.limit == 4
    assert len(server.requests) == 1


async def test_anthropic_other_bad_request_is_not_overflow(server, provider, deltas):
    server.enqueue(error_response(400, "invalid_request_error", "messages: roles must alternate"))
    with pytest.raises(ProviderBadRequest) as caught:
        await provider.complete(REQUEST, deltas)
    assert not isinstance(caught.value, ContextOverflow)


@pytest.mark.parametrize("in_stream", [False, True])
async def test_windowed_servers_answer_overflow(in_stream, http_client, deltas):
    """The test servers' window option answers in the provider's own form."""
    from musec.agents.providers import make_provider

    with AnthropicServer(window_tokens=100, overflow_in_stream=in_stream) as server:
        provider = make_provider("anthropic/claude-test", {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": server.base_url},
                                 http_client=http_client)
        with pytest.raises(ContextOverflow) as caught:
            await provider.complete(REQUEST, deltas)
        assert caught.value.limit == 100 and caught.value.tokens == server.tokens[0] > 100
        assert server.refused == 1
    with OpenAIServer(window_tokens=100, overflow_in_stream=in_stream) as oserver:
        provider = make_provider("openai/gpt-test", {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": oserver.base_url},
                                 http_client=http_client)
        with pytest.raises(ContextOverflow):
            await provider.complete(REQUEST, deltas)
        assert oserver.refused == 1 and len(oserver.requests) == 1


async def test_openai_http_context_length_exceeded(openai_server, responses_provider, deltas):
    openai_server.enqueue(openai_error(400, "context_length_exceeded", "Your input exceeds the context window of this model.",
                                       type_="invalid_request_error"))
    with pytest.raises(ContextOverflow):
        await responses_provider.complete(REQUEST, deltas)
    assert len(openai_server.requests) == 1


async def test_openai_in_stream_context_length_exceeded(openai_server, responses_provider, deltas):
    openai_server.enqueue(responses_stream([], error="context_length_exceeded"))
    with pytest.raises(ContextOverflow):
        await responses_provider.complete(REQUEST, deltas)
    assert len(openai_server.requests) == 1


async def test_chat_completions_maximum_context_length(openai_server, chat_provider, deltas):
    text = ("This model's maximum context length is 32768 tokens. However, your messages resulted in 40001 tokens. "
            "Please reduce the length of the messages.")
    openai_server.enqueue(openai_error(400, None, text, type_="BadRequestError"))
    with pytest.raises(ContextOverflow) as caught:
        await chat_provider.complete(REQUEST, deltas)
    assert (caught.value.tokens, caught.value.limit) == (40001, 32768)


async def test_rate_limit_wording_about_tokens_is_not_overflow(server, provider, deltas, fast_retries):
    server.enqueue(*[error_response(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit; "
                                    "maximum context length is irrelevant here")] * 3)
    with pytest.raises(ProviderOverloaded):
        await provider.complete(REQUEST, deltas)


@given(st.text(max_size=200), st.sampled_from([None, 400, 413, 422, 429, 500]))
def test_classifier_never_raises_and_only_for_refused_requests(text, status):
    found = overflow_error("p", status, {"type": "invalid_request_error", "message": text})
    if status in (429, 500):
        assert found is None
    if found is not None:
        assert isinstance(found, ContextOverflow)
