"""Choosing a provider from a model id and the client's credentials."""

from __future__ import annotations

import pytest
from musec.agents.core.errors import MissingCredentials, ScriptError, UnknownModel
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
    "model_id", ["gpt-4o", "anthropic/", "openai/", "scripted/x.json", "bedrock/claude", ""]
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


def test_openai_responses_from_credentials():
    from musec.agents.providers import OpenAIResponsesProvider

    provider = make_provider("openai/gpt-5.1", {"OPENAI_API_KEY": "sk-openai-SECRET"})
    assert isinstance(provider, OpenAIResponsesProvider)
    assert (provider.name, provider.model) == ("openai", "gpt-5.1")
    assert provider.url == "https://api.openai.com/v1/responses"
    assert "SECRET" not in repr(provider)
    proxied = make_provider(
        "openai/gpt-5", {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1/"}
    )
    assert proxied.url == "http://127.0.0.1:9/v1/responses"


@pytest.mark.parametrize(
    ("model_id", "credentials", "variable"),
    [
        ("openai/gpt-5", {"ANTHROPIC_API_KEY": "k"}, "OPENAI_API_KEY"),
        ("azure/dep", {"AZURE_OPENAI_API_KEY": "k"}, "AZURE_OPENAI_ENDPOINT"),
        (
            "azure/dep",
            {"AZURE_OPENAI_ENDPOINT": "https://x.openai.azure.com"},
            "AZURE_OPENAI_API_KEY",
        ),
        ("openai-compat/qwen", {"OPENAI_API_KEY": "k"}, "OPENAI_BASE_URL"),
    ],
)
def test_missing_settings_name_the_variable(model_id, credentials, variable):
    with pytest.raises(MissingCredentials, match=variable):
        make_provider(model_id, credentials)


def test_azure_url():
    from musec.agents.providers import AzureResponsesProvider

    provider = make_provider(
        "azure/prod-gpt5",
        {"AZURE_OPENAI_ENDPOINT": "https://res.openai.azure.com/", "AZURE_OPENAI_API_KEY": "k"},
    )
    assert isinstance(provider, AzureResponsesProvider)
    assert provider.model == "prod-gpt5"
    assert provider.url == (
        "https://res.openai.azure.com/openai/responses?api-version=2025-04-01-preview"
    )


def test_catalog_resolves_aliases_and_base_url(tmp_path):
    from musec.agents.providers import OpenAIChatProvider
    from musec.agents.providers.catalog import load_catalog

    (tmp_path / "models.toml").write_text(
        '[aliases]\nqwen = "openai-compat/Qwen/Qwen3-Coder"\n'
        '[models."openai-compat/Qwen/Qwen3-Coder"]\nbase_url = "http://127.0.0.1:8000/v1"\n'
    )
    catalog = load_catalog(tmp_path)
    sonnet = make_provider("sonnet", {"ANTHROPIC_API_KEY": "k"}, catalog=catalog)
    assert isinstance(sonnet, AnthropicProvider) and sonnet.model == "claude-sonnet-4-6"
    local = make_provider("qwen", {"OPENAI_BASE_URL": "http://elsewhere:1/v1"}, catalog=catalog)
    assert isinstance(local, OpenAIChatProvider) and local.model == "Qwen/Qwen3-Coder"
    assert local.url == "http://127.0.0.1:8000/v1/chat/completions"
    with pytest.raises(UnknownModel):
        make_provider("no-such-alias", {}, catalog=catalog)
