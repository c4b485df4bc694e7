"""Errors of the agent layer, named by condition."""

from __future__ import annotations

from datetime import datetime


class AgentError(Exception):
    """Base of every error raised by ``musec.agents``."""


class ProviderError(AgentError):
    """A model provider failed. ``retryable`` says whether trying again may help."""

    retryable: bool = False

    def __init__(self, message: str, *, status: int | None = None, retry_after_s: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s


class ProviderUnreachable(ProviderError):
    """The provider could not be reached (connection refused, DNS, TLS)."""

    retryable = True


class ProviderOverloaded(ProviderError):
    """HTTP 429/529/5xx or an ``overloaded_error``/``api_error`` event mid-stream."""

    retryable = True


class QuotaExhausted(ProviderError):
    """The account's quota is used up (OpenAI ``insufficient_quota``, an Anthropic spend
    or plan usage limit): waiting seconds cannot help, so it is never retried.

    ``resets_at`` is when the provider said the quota resets (UTC), or ``None`` when it
    did not say; the message says the same in words.
    """

    def __init__(
        self, message: str, *, status: int | None = None, resets_at: datetime | None = None
    ):
        super().__init__(message, status=status)
        self.resets_at = resets_at


class ProviderAuthError(ProviderError):
    """The API key is missing or refused (HTTP 401/403)."""


class ProviderBadRequest(ProviderError):
    """The provider refused the request as malformed (HTTP 400/404/422)."""


class ContextOverflow(ProviderBadRequest):
    """The request is longer than the model's context window (Anthropic "prompt is too
    long", OpenAI ``context_length_exceeded``), answered over HTTP or in the stream.

    One kind for every provider, so the agent loop answers it one way: compact the history
    and try once more. Never retried as is (the same request fails the same way).

    Attributes:
        tokens: the request's size in tokens as the provider counted it, when it said.
        limit: the window (or the input limit) in tokens, when it said.
    """

    def __init__(self, message: str, *, status: int | None = None, tokens: int | None = None, limit: int | None = None):
        super().__init__(message, status=status)
        self.tokens = tokens
        self.limit = limit


class MissingCredentials(ProviderError):
    """No API key for the chosen provider was passed by the client."""


class TrainingDataRefused(AgentError):
    """The model's catalog entry says ``trains_on_data`` and the person has not opted in."""


class ConfigError(AgentError):
    """The person's ``config.toml`` is invalid."""


class UnknownModel(AgentError):
    """The model id names no known provider."""


class ScriptError(AgentError):
    """A scripted model's script is invalid or drifted from reality (``expect_result``)."""


class CatalogError(AgentError):
    """The model catalog (the shipped default or the user's ``models.toml``) is invalid."""
