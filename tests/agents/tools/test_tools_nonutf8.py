"""File names and output that are not UTF-8 (issue 13, case 7): every tool shows the
bytes as ``\\xNN``, accepts that spelling back, and never returns text that cannot be
encoded (which ended the session when the log wrote it)."""

from __future__ import annotations

import json
import os

import msgspec
import pytest
from musec.agents.tools import (
    BashTool,
    EditFileTool,
    GlobTool,
    GrepTool,
    ReadFileTool,
    ToolContext,
    ToolOutput,
    WriteFileTool,
)
from musec.agents.tools.base import FileEdit, printable

pytestmark = pytest.mark.anyio

BAD = b"bad\xffname.txt"


def _encodable(output: ToolOutput) -> str:
    output.content.encode("utf-8")
    json.dumps(output.content, ensure_ascii=False).encode("utf-8")
    msgspec.json.encode(output)
    return output.content


@pytest.fixture
def bad_file(ctx: ToolContext) -> bytes:
    path = os.path.join(os.fsencode(ctx.workspace), BAD)
    with open(path, "wb") as f:
        f.write(b"hello \xfe world\n")
    return path


async def test_glob_grep_and_bash_show_the_name_encodable(ctx: ToolContext, bad_file: bytes) -> None:
    listed = _encodable(await GlobTool().run({"pattern": "**"}, ctx))
    assert "bad\\xffname.txt" in listed
    found = _encodable(await GrepTool().run({"pattern": "hello"}, ctx))
    assert found.startswith("bad\\xffname.txt:1:hello \\xfe world")
    shown = _encodable(await BashTool().run({"command": "ls; cat ./bad*"}, ctx))
    assert "bad\\xffname.txt" in shown and "hello \\xfe world" in shown


async def test_the_shown_name_reads_and_edits_the_file(ctx: ToolContext, bad_file: bytes) -> None:
    read = _encodable(await ReadFileTool().run({"path": "bad\\xffname.txt"}, ctx))
    assert "hello" in read
    with open(bad_file, "wb") as f:
        f.write(b"hello world\n")
    edited = await EditFileTool().run(
        {"path": "bad\\xffname.txt", "old_string": "world", "new_string": "there"}, ctx
    )
    assert not edited.is_error and "bad\\xffname.txt" in _encodable(edited)
    assert edited.edits[0].path == "bad\\xffname.txt"
    msgspec.json.encode(edited.edits[0])
    with open(bad_file, "rb") as f:
        assert f.read() == b"hello there\n"
    written = await WriteFileTool().run({"path": "bad\\xffname.txt", "content": "new\n"}, ctx)
    assert not written.is_error and "overwrote" in _encodable(written)
    with open(bad_file, "rb") as f:
        assert f.read() == b"new\n"


async def test_a_literal_backslash_name_is_kept_when_it_exists(ctx: ToolContext) -> None:
    (ctx.workspace / "a\\xffb.txt").write_text("literal\n")
    read = await ReadFileTool().run({"path": "a\\xffb.txt"}, ctx)
    assert "literal" in read.content


def test_outputs_and_edits_are_made_encodable_whoever_builds_them() -> None:
    name = os.fsdecode(BAD)
    assert printable(name) == "bad\\xffname.txt"
    assert printable("lone \ud800 surrogate") == "lone \\ud800 surrogate"
    assert printable("plain é") == "plain é"
    out = ToolOutput(content=f"x {name}")
    assert out.content == "x bad\\xffname.txt"
    edit = FileEdit(path=name, before_sha256=None, after_sha256="0" * 64, diff=f"+++ b/{name}\n")
    assert msgspec.json.decode(msgspec.json.encode(edit))["path"] == "bad\\xffname.txt"
