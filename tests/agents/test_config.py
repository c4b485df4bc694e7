"""The user's and a project's config.toml: loading rules, clear errors, the TOML emitter and
"always allow" written into the person's file without losing what they wrote."""

from __future__ import annotations

import datetime
import math
import stat
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from musec.agents.config import (
    ConfigError,
    add_workspace_rules,
    dumps,
    load_project_rules,
    load_user_config,
)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_user_config_rules_workspaces_and_trust(tmp_path: Path) -> None:
    ws = tmp_path / "repo"
    (ws / "sub").mkdir(parents=True)
    _write(tmp_path / "cfg" / "config.toml", f"""
allow_training_data = false          # another module's key: ignored here
trusted_workspaces = ["{tmp_path}/trusted"]

[permissions]
allow = ["bash(pytest *)"]
deny = ["read(~/.ssh/**)"]

[workspaces."{ws}"]
allow_training_data = true

[workspaces."{ws}".permissions]
allow = ["edit(src/**)"]

[workspaces."/elsewhere".permissions]
allow = ["bash"]
""")
    config = load_user_config(tmp_path / "cfg", home="/home/u")
    assert [r.text for r in config.rules_for(ws)] == ["bash(pytest *)", "read(~/.ssh/**)", "edit(src/**)"]
    assert [r.text for r in config.rules_for(ws / "sub")][-1] == "edit(src/**)"  # and below
    assert [r.text for r in config.rules_for(tmp_path)] == ["bash(pytest *)", "read(~/.ssh/**)"]
    assert config.trusts(tmp_path / "trusted") and not config.trusts(ws)
    assert all(r.source == "user" for r in config.rules)
    assert load_user_config(tmp_path / "missing").rules == []


def test_project_rules_are_marked_project(tmp_path: Path) -> None:
    _write(tmp_path / ".musec" / "config.toml", '[permissions]\nask = ["bash(git push *)"]\n')
    rules = load_project_rules(tmp_path)
    assert [(r.text, r.action, r.source) for r in rules] == [("bash(git push *)", "ask", "project")]
    assert load_project_rules(tmp_path / "none") == []


@pytest.mark.parametrize("text, says", [
    ("[permissions\n", "is not valid TOML"),
    ('[permissions]\nallow = "bash(ls)"\n', 'permissions].allow must be a list of rules, like allow = ["bash(pytest *)"]'),
    ('[permissions]\nalow = ["bash(ls)"]\n', "unknown key 'alow'; use allow, ask and deny"),
    ('[permissions]\ndeny = ["bash(ls)", "edit(src/**"]\n', "[permissions].deny[1]: rule 'edit(src/**' is malformed"),
    ('permissions = 3\n', "must be a table"),
    ('trusted_workspaces = "/x"\n', "trusted_workspaces must be a list of paths"),
    ('[workspaces."rel/path".permissions]\nallow = []\n', "is not an absolute path"),
    ('[context]\ntool_output_tokens = -5\n', "[context].tool_output_tokens must be 0 or more, got -5"),
    ('[context]\nclear_at = 3\n', "[context].clear_at must be between 0.0 and 1.0, got 3"),
    # a rule in the wrong place would be ignored without a word (fresh user s5 F7)
    ('deny = ["bash(curl *)"]\n', "the top level has unknown key 'deny' (nothing reads it); permission rules go in a "
                                   "[permissions] table: [permissions] deny = [...]"),
    ('[permission]\ndeny = ["bash(curl *)"]\n', "unknown key 'permission' (nothing reads it); did you mean 'permissions'?"),
    ('[workspaces."/w"]\ndeny = ["bash(curl *)"]\n', '[workspaces."/w"] has unknown key \'deny\' (nothing reads it); '
                                                     'permission rules go in a [workspaces."/w".permissions] table'),
    ('bogus_key = 1\n', "the top level has unknown key 'bogus_key'"),
    ('[context]\ncompact_at = 0.8\n', "[context] has unknown key 'compact_at'"),
    # the README names compact_model (fresh-user s8 K10): where it goes is said
    ('compact_model = "anthropic/claude-haiku-4-5"\n', "the top level has unknown key 'compact_model' (nothing reads it); "
                                                      'it is set per model in models.toml beside this file: [models."ID"] compact_model = ...'),
    ('[context]\ncompact_model = "x"\n', "[context] has unknown key 'compact_model' (nothing reads it); it is set per model in "
                                          "models.toml"),
    ('[daemon]\nidle_timeout = 5\n', "[daemon] has unknown key 'idle_timeout' (nothing reads it); did you mean 'idle_timeout_s'?"),
    ('context = "big"\n', "[context] must be a table"),
    # the fan-out's limits (user trial F16): positive seconds, a typo named
    ('[workers]\ntest_timeout_s = 0\n', "[workers] test_timeout_s must be a positive number of seconds, like "
                                          "test_timeout_s = 600; got 0"),
    ('[workers]\ntime_limit_s = -1\n', "[workers] time_limit_s must be a positive number of seconds"),
    ('[workers]\ntime_limit_s = "1h"\n', "time_limit_s = 900; got '1h'"),
    ('[workers]\ntime_limit_s = true\n', "[workers] time_limit_s must be a positive number"),
    ('[workers]\ntest_timeout_s = inf\n', "[workers] test_timeout_s must be a positive number"),
    ('[workers]\ntest_timeout_s = nan\n', "[workers] test_timeout_s must be a positive number"),
    ('[workers]\ntest_timeout = 5\n', "[workers] has unknown key 'test_timeout' (nothing reads it); did you mean "
                                        "'test_timeout_s'?"),
    ('workers = 3\n', "workers must be a table"),
])
def test_malformed_config_is_one_line_naming_the_file_and_the_fix(tmp_path: Path, text: str, says: str) -> None:
    path = _write(tmp_path / "config.toml", text)
    with pytest.raises(ConfigError) as info:
        load_user_config(tmp_path)
    message = str(info.value)
    assert message.startswith(str(path)) and says in message and "\n" not in message


def test_every_key_the_readme_shows_is_known(tmp_path: Path) -> None:
    _write(tmp_path / "config.toml", """
trusted_workspaces = []
allow_training_data = false
[permissions]
deny = ["bash(curl *)"]
[workspaces."/w"]
allow_training_data = true
[workspaces."/w".permissions]
allow = ["bash(make *)"]
[daemon]
idle_timeout_s = 1800
[context]
tool_output_tokens = 1
clear_at = 0.6
keep_tool_results = 8
[workers]
time_limit_s = 900
test_timeout_s = 600
[[hooks.PreToolUse]]
command = "true"
[mcp_servers.x]
command = "true"
""")
    assert [r.text for r in load_user_config(tmp_path).rules_for(Path("/w"))] == ["bash(curl *)", "bash(make *)"]


def test_a_project_config_key_nothing_reads_is_refused(tmp_path: Path) -> None:
    _write(tmp_path / ".musec" / "config.toml", '[permisions]\nask = ["bash(git push *)"]\n')
    with pytest.raises(ConfigError, match="did you mean 'permissions'"):
        load_project_rules(tmp_path)


def test_context_table_sets_the_tool_output_budget(tmp_path: Path) -> None:
    assert load_user_config(tmp_path).context.tool_output_tokens == 10_000
    _write(tmp_path / "config.toml", "[context]\ntool_output_tokens = 2000\nclear_at = 0.5\nkeep_tool_results = 3\n")
    context = load_user_config(tmp_path).context
    assert (context.tool_output_tokens, context.clear_at, context.keep_tool_results) == (2000, 0.5, 3)


def test_workers_table_sets_the_fan_out_limits(tmp_path: Path) -> None:
    workers = load_user_config(tmp_path).workers
    assert (workers.time_limit_s, workers.test_timeout_s) == (900.0, 600.0)
    _write(tmp_path / "config.toml", "[workers]\ntime_limit_s = 1800\ntest_timeout_s = 2.5\n")
    workers = load_user_config(tmp_path).workers
    assert (workers.time_limit_s, workers.test_timeout_s) == (1800.0, 2.5)


# --- the emitter -------------------------------------------------------------------------

KEYS = st.text(max_size=8)
SCALARS = (st.text(max_size=12) | st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.booleans()
           | st.floats(allow_nan=False) | st.datetimes() | st.dates())
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
                      max_leaves=10)


@given(st.dictionaries(KEYS, VALUES, max_size=5))
@settings(max_examples=300, deadline=None)
def test_dumps_reads_back_equal(data: dict) -> None:
    assert tomllib.loads(dumps(data)) == data


def test_dumps_special_values() -> None:
    text = dumps({"a": math.inf, "b": -math.inf, "c": "tab\tquote\"back\\slash\x01\x7f",
                  "t": datetime.time(7, 32, 0, 999), "empty": {}, "x": {"y": {"z": 1}}})
    back = tomllib.loads(text)
    assert back["a"] == math.inf and back["b"] == -math.inf and back["c"] == "tab\tquote\"back\\slash\x01\x7f"
    assert back["empty"] == {} and back["x"]["y"]["z"] == 1 and back["t"] == datetime.time(7, 32, 0, 999)
    assert math.isnan(tomllib.loads(dumps({"n": math.nan}))["n"])


# --- "always allow" ------------------------------------------------------------------------


def _allow(path: Path, ws: str) -> list[str]:
    return tomllib.loads(path.read_text())["workspaces"][ws]["permissions"]["allow"]


def test_a_new_config_file_is_private(tmp_path: Path) -> None:
    path = add_workspace_rules(tmp_path / "cfg", Path("/w"), ["bash(make *)"])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert _allow(path, "/w") == ["bash(make *)"]


def test_rules_are_added_in_place_keeping_the_persons_text(tmp_path: Path) -> None:
    mine = '# my config\nmodel = "sonnet"  # default\n\n[permissions]\ndeny = ["bash(curl *)"]  # no network\n'
    path = _write(tmp_path / "config.toml", mine)
    add_workspace_rules(tmp_path, Path("/w x"), ["bash(make *)"])
    add_workspace_rules(tmp_path, Path("/w x"), ["bash(make *)", "edit(src/**)"])
    add_workspace_rules(tmp_path, Path("/other"), ["read"])
    text = path.read_text()
    assert text.startswith(mine) and text.count("[workspaces.") == 2
    assert _allow(path, "/w x") == ["bash(make *)", "edit(src/**)"]
    assert _allow(path, "/other") == ["read"]
    assert tomllib.loads(text)["permissions"]["deny"] == ["bash(curl *)"]


def test_an_existing_table_gets_its_list_or_a_new_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "config.toml", '[workspaces."/w".permissions]\n# keep me\ndeny = ["read"]\n\n[other]\nk = 1\n')
    add_workspace_rules(tmp_path, Path("/w"), ["bash(make *)"])
    text = path.read_text()
    assert "# keep me" in text and _allow(path, "/w") == ["bash(make *)"]
    assert tomllib.loads(text)["workspaces"]["/w"]["permissions"]["deny"] == ["read"]
    assert tomllib.loads(text)["other"] == {"k": 1}


def test_a_layout_that_cannot_be_edited_in_place_is_written_again(tmp_path: Path) -> None:
    path = _write(tmp_path / "config.toml",
                  'workspaces = { "/w" = { permissions = { allow = [\n  "read",\n] } } }\n')
    add_workspace_rules(tmp_path, Path("/w"), ["bash(make *)"])
    assert _allow(path, "/w") == ["read", "bash(make *)"]
    _write(tmp_path / "bad" / "config.toml", "workspaces = 3\n")
    with pytest.raises(ConfigError):
        add_workspace_rules(tmp_path / "bad", Path("/w"), ["read"])


def test_the_readmes_compact_model_block_is_a_models_toml_that_takes(tmp_path: Path) -> None:
    # fresh-user s8 K10: the README named `compact_model` and no file took it
    import re

    from musec.agents.providers.catalog import load_catalog

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    block = next(b for b in re.findall(r"```toml\n(.*?)```", readme, re.S) if "compact_model" in b)
    _write(tmp_path / "models.toml", block)
    entry = load_catalog(tmp_path).resolve("opus")
    assert (entry.compact_model, entry.compact_at) == ("anthropic/claude-haiku-4-5", 0.8)
    assert "`CONFIG/models.toml`" in readme and "`compact_model`'s" in readme
