"""Model providers: pick one from a model id and the credentials the client passed.

Model ids (DESIGN §3), or an alias from the catalog:
    ``anthropic/MODEL``: the Anthropic Messages API (``ANTHROPIC_API_KEY``, optional
    ``ANTHROPIC_BASE_URL``).
    ``openai/MODEL``: the OpenAI Responses API (``OPENAI_API_KEY``, optional
    ``OPENAI_BASE_URL``).
    ``azure/DEPLOYMENT``: the Responses API on Azure OpenAI (``AZURE_OPENAI_ENDPOINT``,
    ``AZURE_OPENAI_API_KEY``, optional ``AZURE_OPENAI_API_VERSION``).
    ``openai-compat/MODEL``: an OpenAI-compatible Chat Completions server (vLLM,
    llama.cpp, Ollama) at the catalog entry's ``base_url`` or ``OPENAI_BASE_URL``;
    ``OPENAI_API_KEY`` is sent when passed.
    ``scripted:/ABSOLUTE/PATH.json``: the scripted model (DESIGN §8).

The credentials are the environment variables the client sent with its request; the
daemon's own ``os.environ`` is never consulted, so one daemon can serve several users
and credentials never leak from one client to another.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import httpx
from musec.agents.core.errors import (
    MissingCredentials,
    ScriptError,
    TrainingDataRefused,
    UnknownModel,
)

from .anthropic import DEFAULT_BASE_URL as ANTHROPIC_BASE_URL
from .anthropic import AnthropicProvider
from .base import OnDelta, Provider, TextDelta
from .catalog import Catalog, CatalogEntry
from .http import StreamingHTTPProvider
from .openai_chat import OpenAIChatProvider
from .openai_responses import DEFAULT_BASE_URL as OPENAI_BASE_URL
from .openai_responses import AzureResponsesProvider, OpenAIResponsesProvider
from .ratelimit import OnRateLimited, RateLimitRegistry, RateLimitWait
from .retry import OnRetry, RetryNotice, RetryPolicy
from .scripted import ScriptedProvider
from .sse import DEFAULT_TIMEOUT

__all__ = [
    "DEFAULT_TIMEOUT",
    "AnthropicProvider",
    "AzureResponsesProvider",
    "OnDelta",
    "OnRetry",
    "OpenAIChatProvider",
    "OpenAIResponsesProvider",
    "Provider",
    "RateLimitRegistry",
    "RateLimitWait",
    "RetryNotice",
    "RetryPolicy",
    "ScriptedProvider",
    "TextDelta",
    "make_provider",
]

_VALID_FORMS = (
    "anthropic/MODEL, openai/MODEL, azure/DEPLOYMENT, openai-compat/MODEL, "
    "a catalog alias or scripted:/ABSOLUTE/PATH.json"
)


def make_provider(
    model_id: str,
    credentials: Mapping[str, str],
    *,
    agent_id: str = "main",
    http_client: httpx.AsyncClient | None = None,
    retry_policy: RetryPolicy | None = None,
    on_retry: OnRetry | None = None,
    timeout: httpx.Timeout = DEFAULT_TIMEOUT,
    catalog: Catalog | None = None,
    limiter: RateLimitRegistry | None = None,
    on_rate_limited: OnRateLimited | None = None,
    allow_training_data: bool = False,
) -> Provider:
    """Build the provider named by ``model_id``.

    Args:
        model_id: ``PROVIDER/MODEL`` (see the module docstring), a catalog alias, or
            ``scripted:/ABSOLUTE/PATH``.
        credentials: the environment variables the client passed (never ``os.environ``).
        agent_id: the agent the provider answers for (selects a scripted agent's turns).
        http_client: the daemon's shared client; the provider does not close it.
        retry_policy: overrides the default ``RetryPolicy``.
        on_retry: told about every retry (for the event log).
        timeout: per-phase HTTP deadlines; ``read`` is the idle-stream timeout.
        catalog: resolves aliases and supplies a model's ``base_url``, which wins over
            the ``*_BASE_URL`` variable; without it only full ids are understood.
        limiter: the daemon's registry of shared rate limiters; the provider waits on
            its credential's limiter (with the catalog's limits) before each attempt.
        on_rate_limited: told before each such wait (for the event log).
        allow_training_data: the person opted in to models whose catalog entry says
            ``trains_on_data``; without it such a model is refused.

    Raises:
        UnknownModel: the id names no known provider.
        TrainingDataRefused: the model may train on prompts and the person did not
            opt in.
        MissingCredentials: the provider's API key variable was not passed.
        ScriptError: a scripted path that is relative, missing or not a valid script.
    """
    if model_id.startswith("scripted:"):
        path = Path(model_id.removeprefix("scripted:"))
        if not path.is_absolute():
            raise ScriptError(f"scripted model path must be absolute, got {str(path)!r}")
        return ScriptedProvider(path, agent_id)
    entry = catalog.resolve(model_id) if catalog is not None else _bare_entry(model_id)
    if not entry.model:
        raise UnknownModel(f"unknown model {model_id!r}: use {_VALID_FORMS}")
    if entry.trains_on_data and not allow_training_data:
        raise TrainingDataRefused(
            f"model {entry.id} is marked trains_on_data (its provider may train on your "
            "prompts); to use it, set allow_training_data = true in the musec config.toml"
        )
    common = {
        "http_client": http_client,
        "timeout": timeout,
        "retry_policy": retry_policy,
        "on_retry": on_retry,
    }
    provider = _http_provider(entry, model_id, credentials, common)
    provider.catalog_id = entry.id
    if limiter is not None:
        # The catalog's limits bind only where the person configured them (their tier);
        # otherwise the limiter learns them from the headers and 429s.
        rl = entry.rate_limits
        limits = {
            "requests": rl.requests_per_minute,
            "input_tokens": rl.input_tokens_per_minute,
            "output_tokens": rl.output_tokens_per_minute,
            "tokens": rl.tokens_per_minute,
        } if rl.configured else {}
        provider.limiter = limiter.limiter_for(
            provider.name, provider.base_url, provider._api_key, limits
        )
        provider.on_rate_limited = on_rate_limited
    return provider


def _http_provider(
    entry: CatalogEntry, model_id: str, credentials: Mapping[str, str], common: dict
) -> StreamingHTTPProvider:
    match entry.provider:
        case "anthropic":
            return AnthropicProvider(
                entry.model,
                _required(credentials, "ANTHROPIC_API_KEY", model_id, "an Anthropic API key"),
                base_url=entry.base_url
                or credentials.get("ANTHROPIC_BASE_URL")
                or ANTHROPIC_BASE_URL,
                **common,
            )
        case "openai":
            return OpenAIResponsesProvider(
                entry.model,
                _required(credentials, "OPENAI_API_KEY", model_id, "an OpenAI API key"),
                base_url=entry.base_url or credentials.get("OPENAI_BASE_URL") or OPENAI_BASE_URL,
                **common,
            )
        case "azure":
            endpoint = entry.base_url or _required(
                credentials, "AZURE_OPENAI_ENDPOINT", model_id, "an Azure OpenAI endpoint"
            )
            return AzureResponsesProvider(
                entry.model,
                _required(credentials, "AZURE_OPENAI_API_KEY", model_id, "an Azure OpenAI key"),
                endpoint=endpoint,
                api_version=credentials.get("AZURE_OPENAI_API_VERSION") or None,
                **common,
            )
        case "openai-compat":
            base_url = entry.base_url or credentials.get("OPENAI_BASE_URL")
            if not base_url:
                raise MissingCredentials(
                    f"model {model_id} needs a server URL: set OPENAI_BASE_URL or give the "
                    "model a base_url in models.toml"
                )
            return OpenAIChatProvider(
                entry.model,
                base_url=base_url,
                api_key=credentials.get("OPENAI_API_KEY", ""),
                **common,
            )
        case _:
            raise UnknownModel(f"unknown model {model_id!r}: use {_VALID_FORMS}")


def _bare_entry(model_id: str) -> CatalogEntry:
    provider, _, model = model_id.partition("/")
    return CatalogEntry(id=model_id, provider=provider, model=model)


def _required(credentials: Mapping[str, str], name: str, model_id: str, what: str) -> str:
    value = credentials.get(name, "")
    if not value:
        raise MissingCredentials(f"model {model_id} needs {what}: set {name}")
    return value
