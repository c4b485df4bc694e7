"""Model providers: pick one from a model id and the credentials the client passed.

Model ids:
    ``anthropic/MODEL``: the Anthropic Messages API (``ANTHROPIC_API_KEY``, optional
    ``ANTHROPIC_BASE_URL``).
    ``scripted:/ABSOLUTE/PATH.json``: the scripted model (DESIGN §8).

The credentials are the environment variables the client sent with its request; the
daemon's own ``os.environ`` is never consulted, so one daemon can serve several users
and credentials never leak from one client to another.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import httpx
from musec.agents.errors import MissingCredentials, ScriptError, UnknownModel

from .anthropic import DEFAULT_BASE_URL, AnthropicProvider
from .base import OnDelta, Provider, TextDelta
from .retry import OnRetry, RetryNotice, RetryPolicy
from .scripted import ScriptedProvider
from .sse import DEFAULT_TIMEOUT

__all__ = [
    "DEFAULT_TIMEOUT",
    "AnthropicProvider",
    "OnDelta",
    "OnRetry",
    "Provider",
    "RetryNotice",
    "RetryPolicy",
    "ScriptedProvider",
    "TextDelta",
    "make_provider",
]

_VALID_FORMS = "anthropic/MODEL or scripted:/ABSOLUTE/PATH.json"


def make_provider(
    model_id: str,
    credentials: Mapping[str, str],
    *,
    agent_id: str = "main",
    http_client: httpx.AsyncClient | None = None,
    retry_policy: RetryPolicy | None = None,
    on_retry: OnRetry | None = None,
    timeout: httpx.Timeout = DEFAULT_TIMEOUT,
) -> Provider:
    """Build the provider named by ``model_id``.

    Args:
        model_id: ``anthropic/MODEL`` or ``scripted:/ABSOLUTE/PATH``.
        credentials: the environment variables the client passed (never ``os.environ``).
        agent_id: the agent the provider answers for (selects a scripted agent's turns).
        http_client: the daemon's shared client; the provider does not close it.
        retry_policy: overrides the default ``RetryPolicy``.
        on_retry: told about every retry (for the event log).
        timeout: per-phase HTTP deadlines; ``read`` is the idle-stream timeout.

    Raises:
        UnknownModel: the id names no known provider.
        MissingCredentials: the provider's API key variable was not passed.
        ScriptError: a scripted path that is relative, missing or not a valid script.
    """
    if model_id.startswith("anthropic/") and model_id != "anthropic/":
        api_key = credentials.get("ANTHROPIC_API_KEY", "")
        if not api_key:
            raise MissingCredentials(
                f"model {model_id} needs an Anthropic API key: set ANTHROPIC_API_KEY"
            )
        return AnthropicProvider(
            model_id.removeprefix("anthropic/"),
            api_key,
            base_url=credentials.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL,
            http_client=http_client,
            timeout=timeout,
            retry_policy=retry_policy,
            on_retry=on_retry,
        )
    if model_id.startswith("scripted:"):
        path = Path(model_id.removeprefix("scripted:"))
        if not path.is_absolute():
            raise ScriptError(f"scripted model path must be absolute, got {str(path)!r}")
        return ScriptedProvider(path, agent_id)
    raise UnknownModel(f"unknown model {model_id!r}: use {_VALID_FORMS}")
