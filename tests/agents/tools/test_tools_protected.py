"""musec's own config and state stay read-only to every tool, even inside the workspace
(a session in ``$HOME`` holds them): commands in the sandbox, the file tools, and the
seatbelt profile; a worker whose worktree lives under the state folder still writes it."""

from __future__ import annotations

from pathlib import Path

import pytest
from musec.agents.tools import BashTool, EditFileTool, WriteFileTool
from musec.agents.tools.base import SandboxPolicy
from musec.agents.tools.sandbox import protected_folders, seatbelt_profile

pytestmark = pytest.mark.anyio

RULES = '[permissions]\nask = ["bash"]\n'


@pytest.fixture
def home_ws(workspace: Path) -> tuple[Path, Path]:
    """A workspace holding musec's home: config/config.toml and a session log."""
    config, state = workspace / ".config" / "musec", workspace / ".local" / "state" / "musec"
    config.mkdir(parents=True)
    (config / "config.toml").write_text(RULES)
    (state / "sessions").mkdir(parents=True)
    (state / "sessions" / "other.jsonl").write_text('{"seq":0}\n')
    return config, state


def test_only_folders_inside_a_writable_root_need_protecting(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "elsewhere"
    policy = SandboxPolicy(read_only=(str(ws / "cfg"), str(outside), str(tmp_path)))
    assert protected_folders(policy, [str(ws)]) == [str(ws / "cfg")]  # tmp_path holds ws: nothing inside ws
    assert protected_folders(SandboxPolicy(read_only=(str(ws),)), [str(ws)]) == []


@pytest.mark.parametrize("command", [
    "echo 'allow = [\"*\"]' >> .config/musec/config.toml",
    "echo x >> .local/state/musec/sessions/other.jsonl",
    "rm .local/state/musec/sessions/other.jsonl",
    "touch .local/state/musec/new",
    "(cd .config && mv musec gone)",
])
async def test_commands_cannot_change_musecs_config_or_state(home_ws, make_ctx, command: str) -> None:
    config, state = home_ws
    ctx = make_ctx(read_only=(str(config), str(state)))
    out = await BashTool().run({"command": f"{command}; echo done > ok.txt; cat .config/musec/config.toml"}, ctx)
    assert (config / "config.toml").read_text() == RULES, out.content
    assert (state / "sessions" / "other.jsonl").read_text() == '{"seq":0}\n'
    assert not (state / "new").exists() and (config / "config.toml").exists()
    assert (ctx.workspace / "ok.txt").read_text() == "done\n"  # the rest of the workspace is writable
    assert "ask = " in out.content  # and musec's files stay readable


async def test_without_protection_the_same_command_writes(home_ws, ctx) -> None:
    config, _ = home_ws
    await BashTool().run({"command": "echo more >> .config/musec/config.toml"}, ctx)
    assert (config / "config.toml").read_text() == RULES + "more\n"  # the test above can fail


@pytest.mark.parametrize("tool,input", [
    (WriteFileTool(), {"path": ".config/musec/config.toml", "content": 'allow = ["*"]\n'}),
    (EditFileTool(), {"path": ".config/musec/config.toml", "old_string": "ask", "new_string": "allow"}),
    (WriteFileTool(), {"path": ".local/state/musec/sessions/other.jsonl", "content": "{}\n"}),
])
async def test_file_tools_refuse_musecs_config_and_state(home_ws, make_ctx, tool, input) -> None:
    config, state = home_ws
    out = await tool.run(input, make_ctx(read_only=(str(config), str(state))))
    assert out.is_error and "musec's own" in out.content and "change it yourself" in out.content
    assert (config / "config.toml").read_text() == RULES
    assert (state / "sessions" / "other.jsonl").read_text() == '{"seq":0}\n'


async def test_a_worker_writes_its_worktree_under_the_state_folder(tmp_path: Path, make_ctx) -> None:
    state = tmp_path / "state"
    tree = state / "worktrees" / "s1" / "w1"
    tree.mkdir(parents=True)
    from tests.agents.tools.conftest import _make_ctx

    ctx = _make_ctx(tree.resolve(), read_only=(str(tmp_path / "config"), str(state)))
    out = await WriteFileTool().run({"path": "f.txt", "content": "x\n"}, ctx)
    assert not out.is_error, out.content
    out = await BashTool().run({"command": "echo y > g.txt && cat g.txt"}, ctx)
    assert (tree / "g.txt").read_text() == "y\n", out.content


def test_the_seatbelt_profile_denies_writes_to_protected_folders_last(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    profile = seatbelt_profile(SandboxPolicy(read_only=(str(ws / ".config" / "musec"),)), ws)
    lines = profile.splitlines()
    deny = next(i for i, line in enumerate(lines) if line.startswith("(deny file-write*"))
    allow = next(i for i, line in enumerate(lines) if line.startswith("(allow file-write* (subpath"))
    assert deny > allow and str(ws / ".config" / "musec") in lines[deny]


def test_what_project_trust_covers_is_read_only_to_commands_on_both_sandboxes(workspace: Path) -> None:
    from musec.agents.tools.sandbox import bwrap_argv

    (workspace / ".musec").mkdir()
    args = bwrap_argv(SandboxPolicy(), workspace, {}, ["true"])
    ro = {args[i + 1] for i, a in enumerate(args) if a == "--ro-bind-try"}
    assert {str(workspace / ".musec"), str(workspace / ".mcp.json"), str(workspace / ".agents" / "skills")} <= ro
    profile = seatbelt_profile(SandboxPolicy(), workspace)
    for rel in (".musec", ".mcp.json", ".agents/skills"):  # Seatbelt refuses creating them too
        assert f'(deny file-write* (subpath "{workspace}/{rel}"))' in profile
    assert str(workspace / ".musec") not in seatbelt_profile(SandboxPolicy(profile="read-only"), workspace)
