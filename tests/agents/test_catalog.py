"""The model catalog: shipped defaults merged with the user's models.toml."""

from __future__ import annotations

import pytest
from musec.agents.core.conversation import Usage
from musec.agents.core.errors import CatalogError
from musec.agents.providers.catalog import CatalogEntry, Prices, load_catalog


def test_default_catalog_has_aliases_prices_and_limits():
    catalog = load_catalog(None)
    sonnet = catalog.resolve("sonnet")
    assert (sonnet.id, sonnet.provider, sonnet.model) == (
        "anthropic/claude-sonnet-4-6",
        "anthropic",
        "claude-sonnet-4-6",
    )
    assert sonnet.prices == Prices(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)
    assert sonnet.context_window_tokens == 200_000 and sonnet.max_output_tokens == 64_000
    assert sonnet.rate_limits.requests_per_minute == 50
    assert sonnet.trains_on_data is False and "sonnet" in sonnet.aliases
    ids = {e.id for e in catalog.entries()}
    assert {
        "openai/gpt-5",
        "openai/gpt-4.1",
        "anthropic/claude-haiku-4-5",
        "anthropic/claude-opus-4-6",
    } <= ids
    for entry in catalog.entries():
        assert entry.prices is not None and entry.prices.output > entry.prices.input > 0
        assert entry.context_window_tokens and entry.max_output_tokens
        assert catalog.resolve(entry.id) is entry


def test_cost_usd_charges_each_token_kind():
    sonnet = load_catalog(None).resolve("anthropic/claude-sonnet-4-6")
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=100_000,
        cache_read_tokens=2_000_000,
        cache_write_tokens=400_000,
    )
    assert sonnet.cost_usd(usage) == pytest.approx(3.0 + 1.5 + 0.6 + 1.5)
    gpt = load_catalog(None).resolve("openai/gpt-5")
    assert gpt.cost_usd(Usage(input_tokens=800, cache_read_tokens=200, output_tokens=50)) == (
        pytest.approx((800 * 1.25 + 200 * 0.125 + 50 * 10.0) / 1e6)
    )


def test_unknown_ids_pass_through_without_prices():
    catalog = load_catalog(None)
    entry = catalog.resolve("openai-compat/Qwen/Qwen3-Coder")
    assert entry == CatalogEntry(
        id="openai-compat/Qwen/Qwen3-Coder", provider="openai-compat", model="Qwen/Qwen3-Coder"
    )
    assert entry.cost_usd(Usage(input_tokens=10**6, output_tokens=10**6)) == 0.0
    assert catalog.resolve("scripted:/tmp/s.json").provider == "scripted"


def test_user_models_toml_merges_field_by_field(tmp_path):
    (tmp_path / "models.toml").write_text(
        """
[aliases]
sonnet = "anthropic/claude-sonnet-4-5"
local = "openai-compat/llama"

[models."anthropic/claude-sonnet-4-5"]
requests_per_minute = 4000
input_tokens_per_minute = 2_000_000

[models."openai-compat/llama"]
base_url = "http://127.0.0.1:8080/v1"
input_usd_per_mtok = 0
output_usd_per_mtok = 0

[models."cheap/trainer"]
provider = "openai-compat"
model = "cheap-1"
input_usd_per_mtok = 0.01
output_usd_per_mtok = 0.02
trains_on_data = true
""",
        encoding="utf-8",
    )
    catalog = load_catalog(tmp_path)
    sonnet = catalog.resolve("sonnet")
    assert sonnet.id == "anthropic/claude-sonnet-4-5"
    assert sonnet.rate_limits.requests_per_minute == 4000
    assert sonnet.prices is not None and sonnet.prices.input == 3.0  # kept from the default
    local = catalog.resolve("local")
    assert local.base_url == "http://127.0.0.1:8080/v1" and local.prices == Prices(0.0, 0.0)
    trainer = catalog.resolve("cheap/trainer")
    assert (trainer.provider, trainer.model, trainer.trains_on_data) == (
        "openai-compat",
        "cheap-1",
        True,
    )
    assert load_catalog(None).resolve("sonnet").id == "anthropic/claude-sonnet-4-6"


def test_compaction_settings_per_model(tmp_path):
    (tmp_path / "models.toml").write_text(
        '[models."anthropic/claude-test"]\ncontext_window_tokens = 200_000\ncompact_at = 0.5\n'
        'compact_model = "anthropic/claude-haiku-4-5"\n', encoding="utf-8")
    entry = load_catalog(tmp_path).resolve("anthropic/claude-test")
    assert (entry.context_window_tokens, entry.compact_at, entry.compact_model) == (200_000, 0.5, "anthropic/claude-haiku-4-5")
    default = load_catalog(tmp_path).resolve("sonnet")
    assert default.compact_at is None and default.compact_model is None


def test_missing_user_file_is_fine(tmp_path):
    assert load_catalog(tmp_path / "nowhere").resolve("haiku").model == "claude-haiku-4-5"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[models.x\n", "not valid TOML"),
        ('[models."a/b"]\ncolour = 1\n', "unknown keys"),
        ('[models."a/b"]\ninput_usd_per_mtok = "3"\n', "input_usd_per_mtok must be"),
        ('[models."a/b"]\ncontext_window_tokens = -1\n', "context_window_tokens must be"),
        ('[models."a/b"]\ninput_usd_per_mtok = 1\n', "needs both"),
        ('[models."a/b"]\ntrains_on_data = "no"\n', "trains_on_data must be"),
        ('[models."a/b"]\ncompact_at = 1.5\n', "compact_at must be a share"),
        ('[models."a/b"]\ncompact_at = 0\n', "compact_at must be a share"),
        ("[aliases]\nx = 1\n", "aliases"),
        ("[other]\n", "unknown top-level"),
    ],
)
def test_invalid_user_catalog_names_file_and_key(tmp_path, text, match):
    (tmp_path / "models.toml").write_text(text, encoding="utf-8")
    with pytest.raises(CatalogError, match=match) as caught:
        load_catalog(tmp_path)
    assert "models.toml" in str(caught.value)


def test_alias_loop_is_an_error(tmp_path):
    (tmp_path / "models.toml").write_text('[aliases]\na = "b"\nb = "a"\n', encoding="utf-8")
    with pytest.raises(CatalogError, match="loops"):
        load_catalog(tmp_path).resolve("a")
