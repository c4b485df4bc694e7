"""Each adapter reads an answer's body to its end, so the next call reuses the connection
(a new TCP and TLS handshake every turn otherwise), and never waits long for a server that
keeps the body open after the answer's last event."""

from __future__ import annotations

import time

import httpx
import pytest
from musec.agents.core.conversation import Message, ModelRequest, TextBlock
from musec.agents.providers import make_provider

from tests.support.anthropic_server import Answer, AnthropicServer, message
from tests.support.openai_server import OpenAIServer, chat_stream, responses_stream

pytestmark = pytest.mark.anyio

REQUEST = ModelRequest(model="", system="Be brief.", messages=[Message("user", [TextBlock("hi")])], tools=[])

KINDS = {
    "anthropic": (AnthropicServer, "anthropic/claude-test", "ANTHROPIC",
                  lambda: message([{"type": "text", "text": "hello"}])),
    "openai-responses": (OpenAIServer, "openai/gpt-test", "OPENAI",
                         lambda: responses_stream([{"type": "message", "text": "hello"}])),
    "openai-chat": (OpenAIServer, "openai-compat/local-model", "OPENAI", lambda: chat_stream("hello")),
}


def _provider(kind: str, server, client: httpx.AsyncClient, retries):
    _, model, prefix, _ = KINDS[kind]
    credentials = {f"{prefix}_API_KEY": "sk-test-not-a-key", f"{prefix}_BASE_URL": server.base_url}
    return make_provider(model, credentials, http_client=client, retry_policy=retries)


@pytest.mark.parametrize("kind", list(KINDS))
async def test_the_next_call_reuses_the_connection(kind: str, fast_retries, deltas) -> None:
    server_class, _, _, answer = KINDS[kind]
    with server_class() as server:
        server.enqueue(answer(), answer(), answer())
        async with httpx.AsyncClient() as client:
            provider = _provider(kind, server, client, fast_retries)
            for _ in range(3):
                response = await provider.complete(REQUEST, deltas)
                assert response.text == "hello"
        assert len(server.requests) == 3
        assert server.connections == 1


@pytest.mark.parametrize("kind", list(KINDS))
async def test_a_body_kept_open_after_the_answer_is_not_waited_for(kind: str, fast_retries, deltas) -> None:
    server_class, _, _, answer = KINDS[kind]
    with server_class() as server:
        hanging = [Answer(chunks=answer().chunks, end="hang") for _ in range(3)]
        server.enqueue(*hanging)
        timeout = httpx.Timeout(connect=10, read=60, write=10, pool=10)
        async with httpx.AsyncClient(timeout=timeout) as client:
            provider = _provider(kind, server, client, fast_retries)
            provider.timeout = timeout
            began = time.monotonic()
            for _ in range(3):
                response = await provider.complete(REQUEST, deltas)
                assert response.text == "hello"
            # Waiting for the end of each body would take the 60 s read timeout each time.
            assert time.monotonic() - began < 30
        assert server.connections == 3  # each connection given up, none reused mid-body
