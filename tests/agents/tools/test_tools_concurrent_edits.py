"""Concurrent edits of one file lose nothing (issue 13, case 3: two sessions in one
workspace, 40 edit_file calls each, all 80 reported success and 45 were on disk)."""

from __future__ import annotations

import anyio
import pytest
from musec.agents.tools import EditFileTool, ToolContext
from musec.agents.tools.base import ToolInputError
from musec.agents.tools.files import _unchanged_since_read

pytestmark = pytest.mark.anyio


async def test_concurrent_edits_of_one_file_all_land(ctx: ToolContext) -> None:
    sessions, edits = 4, 40
    path = ctx.workspace / "shared.txt"
    path.write_text("".join(f"s{s}e{e} = 0\n" for s in range(sessions) for e in range(edits)))
    results: list[bool] = []

    async def session(s: int) -> None:
        tool = EditFileTool()
        for e in range(edits):
            out = await tool.run({"path": "shared.txt", "old_string": f"s{s}e{e} = 0", "new_string": f"s{s}e{e} = 1"}, ctx)
            results.append(not out.is_error)

    async with anyio.create_task_group() as tg:
        for s in range(sessions):
            tg.start_soon(session, s)
    assert all(results) and len(results) == sessions * edits
    text = path.read_text()
    assert text.count("= 1\n") == sessions * edits and "= 0" not in text


def test_a_change_by_another_process_between_read_and_write_is_refused(ctx: ToolContext) -> None:
    path = ctx.workspace / "f.txt"
    path.write_text("one\n")
    _unchanged_since_read(path, b"one\n", "f.txt")
    path.write_text("two\n")  # an editor wrote it after the tool read it
    with pytest.raises(ToolInputError, match="changed on disk while this edit was being made"):
        _unchanged_since_read(path, b"one\n", "f.txt")
