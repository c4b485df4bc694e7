"""Concurrent edits of one file lose nothing (issue 13, case 3: two sessions in one
workspace, 40 edit_file calls each, all 80 reported success and 45 were on disk)."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest
from musec.agents.tools import EditFileTool, ReadFileTool, ToolContext, WriteFileTool
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


async def test_write_file_refuses_to_overwrite_what_changed_since_the_agent_read_it(ctx: ToolContext) -> None:
    """Fresh-user trial s6, G13: the model read a file, the person saved their own change
    in an editor, and the model's whole-file write_file then wiped that change out."""
    path = ctx.workspace / "notes.txt"
    path.write_text("one\n")
    assert not (await ReadFileTool().run({"path": "notes.txt"}, ctx)).is_error
    path.write_text("one\nthe person's line\n")  # saved in an editor meanwhile
    out = await WriteFileTool().run({"path": "notes.txt", "content": "one\nmodel\n"}, ctx)
    assert out.is_error and "changed on disk since you last read it" in out.content
    assert path.read_text() == "one\nthe person's line\n"
    # read again: the write goes through, and the agent's own writes need no new read
    assert not (await ReadFileTool().run({"path": "notes.txt"}, ctx)).is_error
    for content in ("one\nthe person's line\nmodel\n", "two\n"):
        out = await WriteFileTool().run({"path": "notes.txt", "content": content}, ctx)
        assert not out.is_error, out.content
    assert path.read_text() == "two\n"


async def test_write_file_after_an_edit_by_another_agent_or_a_command_is_refused(
        ctx: ToolContext, make_ctx: Callable[..., ToolContext]) -> None:
    path = ctx.workspace / "a.py"
    assert not (await WriteFileTool().run({"path": "a.py", "content": "x = 1\n"}, ctx)).is_error
    other = make_ctx(agent_id="scout")
    edited = await EditFileTool().run({"path": "a.py", "old_string": "x = 1", "new_string": "x = 2"}, other)
    assert not edited.is_error, edited.content
    out = await WriteFileTool().run({"path": "a.py", "content": "x = 3\n"}, ctx)
    assert out.is_error and path.read_text() == "x = 2\n"
    # the other agent's own edit counts as seen by it; a file deleted since is created
    assert not (await WriteFileTool().run({"path": "a.py", "content": "x = 4\n"}, other)).is_error
    path.unlink()
    assert not (await WriteFileTool().run({"path": "a.py", "content": "x = 5\n"}, ctx)).is_error
    assert path.read_text() == "x = 5\n"


async def test_write_file_over_a_file_the_agent_never_read_is_written(ctx: ToolContext) -> None:
    (ctx.workspace / "gen.txt").write_text("old\n")
    out = await WriteFileTool().run({"path": "gen.txt", "content": "new\n"}, ctx)
    assert not out.is_error and (ctx.workspace / "gen.txt").read_text() == "new\n"
