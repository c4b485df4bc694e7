"""The tool layer while planning: only the plan document may be written, whatever the
approval layer decided; ``propose_plan`` writes it; commands need a sandbox to run
under a read-only profile."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from musec.agents.plan import ProposePlanTool, missing_sections, parse_plan
from musec.agents.tools import BashTool, EditFileTool, ToolContext, WriteFileTool

pytestmark = pytest.mark.anyio

SECTIONS = {"context": "why", "approach": "1. do it", "files_to_change": ["a.py: the fix"],
            "code_to_reuse": ["b.helper"], "risks": ["none"], "verification": ["python3 -m pytest -q"]}


@pytest.fixture
def planning(make_ctx: Callable[..., ToolContext], tmp_path: Path) -> ToolContext:
    plan = tmp_path / "state" / "plans" / "s1.md"
    return make_ctx(profile="read-only", plan_document=str(plan))


async def test_write_tools_refuse_every_path_but_the_plan_document(planning: ToolContext) -> None:
    (planning.workspace / "a.py").write_text("x = 1\n")
    for tool, inp in [
        (WriteFileTool(), {"path": "a.py", "content": "x = 2\n"}),
        (WriteFileTool(), {"path": "new.py", "content": ""}),
        (EditFileTool(), {"path": "a.py", "old_string": "1", "new_string": "2"}),
        (WriteFileTool(), {"path": str(Path(planning.plan_document).parent / "other.md"), "content": "x"}),
    ]:
        out = await tool.run(inp, planning)
        assert out.is_error and "only the plan document" in out.content, out.content
    assert (planning.workspace / "a.py").read_text() == "x = 1\n"
    assert not (planning.workspace / "new.py").exists()

    written = await WriteFileTool().run({"path": planning.plan_document, "content": "# Plan\n## Context\nwhy\n"}, planning)
    assert not written.is_error, written.content
    edited = await EditFileTool().run({"path": planning.plan_document, "old_string": "why", "new_string": "because"},
                                      planning)
    assert not edited.is_error, edited.content
    assert Path(planning.plan_document).read_text() == "# Plan\n## Context\nbecause\n"


async def test_propose_plan_renders_every_section_or_takes_the_drafted_document(planning: ToolContext) -> None:
    tool = ProposePlanTool()
    partial = await tool.run({"context": "why"}, planning)
    assert partial.is_error and "Approach" in partial.content
    undrafted = await tool.run({}, planning)
    assert undrafted.is_error and "has not been written" in undrafted.content

    out = await tool.run(SECTIONS, planning)
    assert not out.is_error and "Plan proposed" in out.content
    text = Path(planning.plan_document).read_text()
    assert missing_sections(text) == [] and parse_plan(text)["verification"] == "- `python3 -m pytest -q`"
    assert (Path(planning.plan_document).stat().st_mode & 0o777) == 0o600

    Path(planning.plan_document).write_text("# Plan\n\n## Context\n\nwhy\n")
    drafted = await tool.run({}, planning)
    assert drafted.is_error and "lacks these sections: Approach, Files to change" in drafted.content


async def test_propose_plan_outside_plan_mode_refuses(ctx: ToolContext) -> None:
    out = await ProposePlanTool().run(SECTIONS, ctx)
    assert out.is_error and "not in plan mode" in out.content


async def test_a_read_only_profile_without_a_sandbox_runs_no_command(make_ctx: Callable[..., ToolContext]) -> None:
    ctx = make_ctx(mode="off", profile="read-only")
    out = await BashTool().run({"command": "touch made"}, ctx)
    assert out.is_error and "nothing keeps a command from writing" in out.content
    assert not (ctx.workspace / "made").exists()
    writable = await BashTool().run({"command": "touch made"}, make_ctx(mode="off"))
    assert not writable.is_error and (ctx.workspace / "made").exists()
