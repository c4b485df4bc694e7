"""Fixtures for the provider tests: backends, the local Anthropic server, a client."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

_REPO_ROOT = str(Path(__file__).resolve().parents[3])
if _REPO_ROOT not in sys.path:  # so `tests.support` imports under any pytest import mode
    sys.path.insert(0, _REPO_ROOT)

from musec.agents.providers import RetryPolicy, make_provider  # noqa: E402
from musec.agents.providers.anthropic import AnthropicProvider  # noqa: E402
from musec.agents.providers.openai_chat import OpenAIChatProvider  # noqa: E402
from musec.agents.providers.openai_responses import OpenAIResponsesProvider  # noqa: E402

from tests.support.anthropic_server import AnthropicServer  # noqa: E402
from tests.support.openai_server import OpenAIServer  # noqa: E402

#: Never a real key; tests assert it never shows up in messages or reprs.
API_KEY = "sk-ant-" + "test-0123456789-SECRET"
OPENAI_KEY = "sk-proj-test-9876543210-SECRET"

#: Retries in milliseconds, so the retry tests stay fast.
FAST_RETRIES = RetryPolicy(
    max_attempts=3, base_delay_s=0.001, max_delay_s=0.005, max_retry_after_s=0.02
)


@pytest.fixture(
    params=[
        pytest.param("asyncio", id="asyncio"),
        pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer() as srv:
        yield srv


@pytest.fixture
async def http_client(anyio_backend: object) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


@pytest.fixture
def provider(server: AnthropicServer, http_client: httpx.AsyncClient) -> AnthropicProvider:
    made = make_provider(
        "anthropic/claude-test",
        {"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": server.base_url},
        http_client=http_client,
        retry_policy=FAST_RETRIES,
    )
    assert isinstance(made, AnthropicProvider)
    return made


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


@pytest.fixture
def responses_provider(
    openai_server: OpenAIServer, http_client: httpx.AsyncClient
) -> OpenAIResponsesProvider:
    made = make_provider(
        "openai/gpt-test",
        {"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": openai_server.base_url},
        http_client=http_client,
        retry_policy=FAST_RETRIES,
    )
    assert isinstance(made, OpenAIResponsesProvider)
    return made


@pytest.fixture
def chat_provider(
    openai_server: OpenAIServer, http_client: httpx.AsyncClient
) -> OpenAIChatProvider:
    made = make_provider(
        "openai-compat/local-model",
        {"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": openai_server.base_url},
        http_client=http_client,
        retry_policy=FAST_RETRIES,
    )
    assert isinstance(made, OpenAIChatProvider)
    return made


@pytest.fixture
def api_key() -> str:
    return API_KEY


@pytest.fixture
def fast_retries() -> RetryPolicy:
    return FAST_RETRIES


class Deltas:
    """An ``on_delta`` that records what it was sent."""

    def __init__(self) -> None:
        self.items: list = []

    async def __call__(self, delta: object) -> None:
        self.items.append(delta)

    def text(self, kind: str = "text") -> str:
        return "".join(d.text for d in self.items if d.kind == kind)


@pytest.fixture
def deltas() -> Deltas:
    return Deltas()
