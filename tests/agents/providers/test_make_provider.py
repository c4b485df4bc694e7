"""Choosing a provider from a model id and the client's credentials."""

from __future__ import annotations

import pytest
from musec.agents.errors import MissingCredentials, ScriptError, UnknownModel
from musec.agents.providers import AnthropicProvider, ScriptedProvider, make_provider


def test_anthropic_with_base_url_from_credentials(api_key):
    provider = make_provider(
        "anthropic/claude-sonnet-4-5",
        {"ANTHROPIC_API_KEY": api_key, "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/proxy/"},
    )
    assert isinstance(provider, AnthropicProvider)
    assert (provider.name, provider.model) == ("anthropic", "claude-sonnet-4-5")
    assert provider.url == "http://127.0.0.1:9/proxy/v1/messages"
    assert api_key not in repr(provider)


def test_default_base_url(api_key):
    provider = make_provider("anthropic/m", {"ANTHROPIC_API_KEY": api_key})
    assert provider.url == "https://api.anthropic.com/v1/messages"


def test_missing_key_names_the_variable_and_ignores_daemon_env(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-the-daemon-env")
    with pytest.raises(MissingCredentials, match="set ANTHROPIC_API_KEY"):
        make_provider("anthropic/claude-sonnet-4-5", {})
    with pytest.raises(MissingCredentials):
        make_provider("anthropic/claude-sonnet-4-5", {"ANTHROPIC_API_KEY": ""})


@pytest.mark.parametrize(
    "model_id", ["gpt-4o", "anthropic/", "openai/gpt-5", "scripted/x.json", ""]
)
def test_unknown_model_lists_valid_forms(model_id):
    with pytest.raises(UnknownModel) as caught:
        make_provider(model_id, {"ANTHROPIC_API_KEY": "k"})
    message = str(caught.value)
    assert "\n" not in message
    assert "anthropic/MODEL" in message and "scripted:" in message


def test_scripted(tmp_path):
    script = tmp_path / "s.json"
    script.write_text('{"turns": []}')
    provider = make_provider(f"scripted:{script}", {}, agent_id="worker:a")
    assert isinstance(provider, ScriptedProvider)
    assert provider.agent_id == "worker:a"


def test_scripted_path_must_be_absolute():
    with pytest.raises(ScriptError, match="absolute"):
        make_provider("scripted:rel/s.json", {})
