"""Errors of the agent layer, named by condition."""

from __future__ import annotations


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


class ProviderAuthError(ProviderError):
    """The API key is missing or refused (HTTP 401/403)."""


class ProviderBadRequest(ProviderError):
    """The provider refused the request as malformed (HTTP 400/404/422)."""


class MissingCredentials(ProviderError):
    """No API key for the chosen provider was passed by the client."""


class UnknownModel(AgentError):
    """The model id names no known provider."""


class ScriptError(AgentError):
    """A scripted model's script is invalid or drifted from reality (``expect_result``)."""
