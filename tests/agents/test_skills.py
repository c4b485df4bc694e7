"""Skills (agentskills.io SKILL.md), custom commands, and the front matter they share."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from musec.agents.commands import discover_commands, expand, mentions, parse_invocation
from musec.agents.frontmatter import FrontMatterError, split
from musec.agents.skills import (
    SkillError,
    SkillTool,
    catalog,
    catalog_budget_chars,
    discover_skills,
    load_skill,
    skill_dirs,
)
from musec.agents.tools.base import ToolContext


def write_skill(root: Path, name: str, description: str = "does a thing", body: str = "Do it.\n", extra: str = "") -> Path:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}")
    return d


def test_front_matter_subset() -> None:
    text = """---
name: pdf-tools
description: >
  Fill PDF forms
  and merge files.
allowed-tools: Bash(python:*) Read
disable-model-invocation: true
license: 'Apache-2.0'
tags: [a, "b c"]
steps:
  - one
  - two
metadata:
  author: someone
  version: "1.0"
notes: |
  line one
  line two
---
# Body
"""
    meta, body = split(text)
    assert meta == {
        "name": "pdf-tools", "description": "Fill PDF forms and merge files.",
        "allowed-tools": "Bash(python:*) Read", "disable-model-invocation": True, "license": "Apache-2.0",
        "tags": ["a", "b c"], "steps": ["one", "two"], "metadata": {"author": "someone", "version": "1.0"},
        "notes": "line one\nline two",
    }
    assert body == "# Body\n"
    assert split("no front matter\n") == ({}, "no front matter\n")
    with pytest.raises(FrontMatterError, match="never closed"):
        split("---\nname: x\n")
    with pytest.raises(FrontMatterError, match="line 2"):
        split("---\nthis is not a mapping\n---\n")


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.from_regex(r"[a-z][a-z0-9_-]{0,12}", fullmatch=True),
                       st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=40), max_size=6),
       st.text(max_size=200))
def test_front_matter_round_trips_quoted_strings(meta: dict[str, str], body: str) -> None:
    head = "".join(f"{k}: {json.dumps(v, ensure_ascii=False)}\n" for k, v in meta.items())
    got_meta, got_body = split(f"---\n{head}---\n{body.lstrip(chr(10))}")
    assert got_meta == meta
    assert got_body == body.lstrip("\n")


def test_skill_validation(tmp_path: Path) -> None:
    good = write_skill(tmp_path, "deploy-app", extra="allowed-tools: bash read_file\n")
    skill = load_skill(good / "SKILL.md", "project")
    assert (skill.name, skill.allowed_tools, skill.model_invocable) == ("deploy-app", ("bash", "read_file"), True)
    bad = write_skill(tmp_path, "Bad_Name")
    with pytest.raises(SkillError, match="lowercase"):
        load_skill(bad / "SKILL.md", "user")
    other = tmp_path / "other"
    other.mkdir()
    (other / "SKILL.md").write_text("---\nname: elsewhere\ndescription: x\n---\n")
    with pytest.raises(SkillError, match="must match its directory"):
        load_skill(other / "SKILL.md", "user")
    nodesc = tmp_path / "nodesc"
    nodesc.mkdir()
    (nodesc / "SKILL.md").write_text("---\nname: nodesc\n---\n")
    with pytest.raises(SkillError, match="description"):
        load_skill(nodesc / "SKILL.md", "user")


def test_discovery_scopes_precedence_and_trust(tmp_path: Path) -> None:
    config, home, ws = tmp_path / "cfg", tmp_path / "home", tmp_path / "ws"
    write_skill(config / "skills", "review", "the person's review")
    write_skill(ws / ".musec" / "skills", "review", "the repository's review")
    write_skill(ws / ".agents" / "skills", "release", "cut a release")
    write_skill(home / ".agents" / "skills", "plan", "shadowing a built-in")
    write_skill(ws / ".musec" / "skills", "manual-only", extra="disable-model-invocation: true\n")

    untrusted, _ = discover_skills(skill_dirs(config, home, ws, trusted=False))
    assert [s.name for s in untrusted] == ["review"]
    skills, problems = discover_skills(skill_dirs(config, home, ws, trusted=True))
    assert [(s.name, s.scope) for s in skills] == [("manual-only", "project"), ("release", "project"), ("review", "user")]
    assert skills[2].description == "the person's review"
    assert any("built-in" in p for p in problems) and any("already defined" in p for p in problems)

    text, warnings = catalog(skills, catalog_budget_chars(200_000))
    assert "- release: cut a release" in text and "- review: the person's review" in text
    assert "manual-only" not in text and warnings == []


def test_catalog_budget_shortens_then_drops(tmp_path: Path) -> None:
    for n in range(30):
        write_skill(tmp_path, f"s{n:02d}", "word " * 150)
    skills, _ = discover_skills([(tmp_path, "user")])
    text, warnings = catalog(skills, 2000)
    assert len(text) <= 2000
    assert "left out" in warnings[0] and "s29" in warnings[0]
    assert catalog_budget_chars(1_000_000) == 40_000


def test_skill_tool_enum_and_body(tmp_path: Path) -> None:
    d = write_skill(tmp_path, "lint", body="Run scripts/lint.sh\n")
    skills, _ = discover_skills([(tmp_path, "project")])
    tool = SkillTool(skills)
    assert tool.spec.input_schema["properties"]["name"]["enum"] == ["lint"]
    ctx = ToolContext(workspace=tmp_path, env={})
    out = anyio.run(tool.run, {"name": "lint", "arguments": "--fix"}, ctx)
    assert not out.is_error and "Run scripts/lint.sh" in out.content and str(d) in out.content and "--fix" in out.content
    out = anyio.run(tool.run, {"name": "nope"}, ctx)
    assert out.is_error and "the skills are: lint" in out.content


def test_commands_discovery_and_expansion(tmp_path: Path) -> None:
    user, project = tmp_path / "u", tmp_path / "p"
    user.mkdir()
    project.mkdir()
    (user / "fix.md").write_text("---\ndescription: fix an issue\n---\nFix issue $ARGUMENTS, then run $1 tests.\n")
    (project / "fix.md").write_text("project fix\n")
    (project / "ship.md").write_text("Ship it.\n")
    (project / "bad name.md").write_text("x\n")
    commands, problems = discover_commands([(user, "user"), (project, "project")])
    assert [(c.name, c.scope) for c in commands] == [("fix", "user"), ("ship", "project")]
    assert len(problems) == 2
    assert expand(commands[0], "42 unit") == "Fix issue 42 unit, then run 42 tests.\n"
    assert expand(commands[1], "now") == "Ship it.\n\nnow"
    assert expand(commands[1], "") == "Ship it."
    assert parse_invocation("/fix 42", ["fix"]).arguments == "42"
    assert parse_invocation("/fix", ["fix"]).arguments == ""
    assert parse_invocation("/other 1", ["fix"]) is None and parse_invocation("fix it", ["fix"]) is None
    assert mentions("use $lint then $deploy, and $lint again; cost $5", ["lint", "deploy"]) == ["lint", "deploy"]
