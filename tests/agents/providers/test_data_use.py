"""The data-use guard: a trains_on_data model needs the person's opt-in in config.toml."""

from __future__ import annotations

from pathlib import Path

import pytest
from musec.agents.core.errors import ConfigError, TrainingDataRefused
from musec.agents.providers import make_provider
from musec.agents.providers.catalog import load_catalog
from musec.agents.providers.data_use import training_allowed

CREDENTIALS = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}


def test_a_training_tier_is_refused_without_opt_in(tmp_path: Path) -> None:
    (tmp_path / "models.toml").write_text('[models."openai-compat/free"]\ntrains_on_data = true\n')
    catalog = load_catalog(tmp_path)
    with pytest.raises(TrainingDataRefused, match=r"openai-compat/free .*allow_training_data = true"):
        make_provider("openai-compat/free", CREDENTIALS, catalog=catalog)
    made = make_provider("openai-compat/free", CREDENTIALS, catalog=catalog, allow_training_data=True)
    assert made.catalog_id == "openai-compat/free" and made.endpoint == "127.0.0.1:9"
    assert make_provider("openai-compat/other", CREDENTIALS, catalog=catalog).catalog_id == "openai-compat/other"


def test_opt_in_globally_or_per_workspace(tmp_path: Path) -> None:
    work, other = tmp_path / "work", tmp_path / "elsewhere"
    (work / "sub").mkdir(parents=True)
    other.mkdir()
    config = tmp_path / "config"
    config.mkdir()
    assert not training_allowed(config, work) and not training_allowed(None, work)
    (config / "config.toml").write_text(f'[workspaces."{work}"]\nallow_training_data = true\n')
    assert training_allowed(config, work) and training_allowed(config, work / "sub")
    assert not training_allowed(config, other)
    (config / "config.toml").write_text(
        f'allow_training_data = true\n[workspaces."{work / "sub"}"]\nallow_training_data = false\n'
    )
    assert training_allowed(config, other) and training_allowed(config, work)
    assert not training_allowed(config, work / "sub")  # the deepest workspace wins


@pytest.mark.parametrize("text", ['allow_training_data = "yes"\n', "allow_training_data = \n", "workspaces = 1\n"])
def test_a_bad_config_names_the_file(tmp_path: Path, text: str) -> None:
    (tmp_path / "config.toml").write_text(text)
    with pytest.raises(ConfigError, match="config.toml"):
        training_allowed(tmp_path, tmp_path)
