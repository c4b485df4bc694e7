"""A session resumed after its workspace was deleted: every tool says the workspace no
longer exists, and none makes it again (a new user's `write_file` silently recreated the
deleted directory, and bash blamed bubblewrap for the missing working directory)."""

from __future__ import annotations

import shutil

import pytest
from musec.agents.tools import (
    BashTool,
    EditFileTool,
    GlobTool,
    GrepTool,
    ReadFileTool,
    ToolContext,
    WriteFileTool,
)

pytestmark = pytest.mark.anyio

CALLS = [
    (WriteFileTool(), {"path": "new file.txt", "content": "x"}),
    (EditFileTool(), {"path": "a.txt", "old_string": "a", "new_string": "b"}),
    (ReadFileTool(), {"path": "a.txt"}),
    (BashTool(), {"command": "echo hi > made.txt"}),
    (GlobTool(), {"pattern": "**"}),
    (GrepTool(), {"pattern": "a"}),
]


@pytest.mark.parametrize(("tool", "args"), CALLS, ids=[type(t).__name__ for t, _ in CALLS])
async def test_every_tool_refuses_a_deleted_workspace_and_never_recreates_it(ctx: ToolContext, tool, args) -> None:
    (ctx.workspace / "a.txt").write_text("a\n")
    shutil.rmtree(ctx.workspace)
    out = await tool.run(dict(args), ctx)
    assert out.is_error, out.content
    assert "no longer exists" in out.content, out.content
    assert "bwrap" not in out.content
    assert not ctx.workspace.exists()
