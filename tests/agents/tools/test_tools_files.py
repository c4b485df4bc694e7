"""read_file, write_file and edit_file on real files in a temporary workspace."""

from __future__ import annotations

import hashlib
import os
import stat

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from musec.agents.tools import EditFileTool, ReadFileTool, ToolContext, WriteFileTool
from musec.agents.tools.base import ToolInputError
from musec.agents.tools.files import DEFAULT_READ_LIMIT_LINES, MAX_READ_FILE_BYTES, _read_big

pytestmark = pytest.mark.anyio

read_file, write_file, edit_file = ReadFileTool(), WriteFileTool(), EditFileTool()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# read_file ------------------------------------------------------------------------------


async def test_read_numbers_lines_like_cat_n(ctx: ToolContext) -> None:
    (ctx.workspace / "a.txt").write_text("alpha\n\tbeta\ngamma")
    result = await read_file.run({"path": "a.txt"}, ctx)
    assert not result.is_error
    assert result.content == "     1\talpha\n     2\t\tbeta\n     3\tgamma\n"


async def test_read_offset_and_limit_note_truncation(ctx: ToolContext) -> None:
    (ctx.workspace / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    result = await read_file.run({"path": "n.txt", "offset": 3, "limit": 2}, ctx)
    assert result.content.startswith("     3\tline 3\n     4\tline 4\n")
    assert "showed lines 3-4 of 10" in result.content
    assert "offset=5" in result.content
    tail = await read_file.run({"path": "n.txt", "offset": 9}, ctx)
    assert tail.content == "     9\tline 9\n    10\tline 10\n"


async def test_read_default_limit(ctx: ToolContext) -> None:
    total = DEFAULT_READ_LIMIT_LINES + 5
    (ctx.workspace / "big.txt").write_text("x\n" * total)
    result = await read_file.run({"path": "big.txt"}, ctx)
    assert f"of {total}" in result.content
    assert f"offset={DEFAULT_READ_LIMIT_LINES + 1}" in result.content


async def test_read_crlf_bom_and_non_ascii(ctx: ToolContext) -> None:
    (ctx.workspace / "w.txt").write_bytes(b"\xef\xbb\xbfh\xc3\xa9llo\r\nw\xc3\xb6rld\r\n")
    result = await read_file.run({"path": "w.txt"}, ctx)
    assert result.content == "     1\théllo\n     2\twörld\n"


async def test_read_refuses_binary(ctx: ToolContext) -> None:
    (ctx.workspace / "b.bin").write_bytes(b"ELF\0\0\1\2")
    result = await read_file.run({"path": "b.bin"}, ctx)
    assert result.is_error and "binary" in result.content


async def test_a_file_over_the_whole_read_size_is_read_in_parts(ctx: ToolContext) -> None:
    """A file over 2 MiB is streamed: the lines asked for, numbered, and the true count."""
    lines = [f"row {i} " + "x" * (i % 200) for i in range(1, 40_001)]
    (ctx.workspace / "huge.txt").write_text("\n".join(lines) + "\n")
    assert (ctx.workspace / "huge.txt").stat().st_size > MAX_READ_FILE_BYTES
    result = await read_file.run({"path": "huge.txt", "offset": 31_337, "limit": 3}, ctx)
    assert not result.is_error, result.content
    assert result.content == "".join(f"{i:6d}\t{lines[i - 1]}\n" for i in range(31_337, 31_340)) + \
        "[output truncated: showed lines 31337-31339 of 40000; pass offset=31340 to read on]\n"
    first = await read_file.run({"path": "huge.txt"}, ctx)
    assert first.content.startswith("     1\trow 1 x\n") and "of 40000;" in first.content
    past = await read_file.run({"path": "huge.txt", "offset": 40_001}, ctx)
    assert past.is_error and "(40000 lines)" in past.content
    with open(ctx.workspace / "sparse.bin", "wb") as f:
        f.truncate(MAX_READ_FILE_BYTES + 1)
    assert "binary" in (await read_file.run({"path": "sparse.bin"}, ctx)).content


_LINE = st.text(st.characters(blacklist_characters="\n\x00", blacklist_categories=("Cs",)), max_size=12)


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(_LINE, max_size=40), end=st.sampled_from(["", "\n", "\r\n"]), offset=st.integers(1, 45),
       limit=st.integers(1, 50), chunk=st.integers(1, 64))
def test_the_streamed_read_matches_the_whole_read(tmp_path_factory, lines, end, offset, limit, chunk) -> None:
    """Any text, offset, limit and chunk size: the streamed read of big files gives what the
    whole read gives (output or error) for the same file."""
    ws = tmp_path_factory.mktemp("ws")
    path = ws / "f.txt"
    body = end.join(lines) + (end if lines else "")
    path.write_bytes(body.encode())
    ctx = ToolContext(workspace=ws, env={})
    whole = anyio.run(read_file.run, {"path": "f.txt", "offset": offset, "limit": limit}, ctx)
    if body == "":
        return  # an empty file is never over the whole read's size
    try:
        streamed = _read_big(path, "f.txt", offset, limit, chunk=chunk).content
    except ToolInputError as exc:
        assert whole.is_error and str(exc) in whole.content
    else:
        assert streamed == whole.content


@pytest.mark.parametrize(
    ("input", "message"),
    [
        ({}, "`path` is required"),
        ({"path": 5}, "`path` must be a string"),
        ({"path": "missing.txt"}, "does not exist"),
        ({"path": "."}, "is a directory"),
        ({"path": "a.txt", "offset": 0}, "`offset` must be at least 1"),
        ({"path": "a.txt", "offset": "2"}, "`offset` must be a whole number"),
        ({"path": "a.txt", "limit": True}, "`limit` must be a whole number"),
        ({"path": "a.txt", "offset": 99}, "past the end of a.txt (1 line)"),
    ],
)
async def test_read_bad_input_is_a_one_line_error(
    ctx: ToolContext, input: dict, message: str
) -> None:
    (ctx.workspace / "a.txt").write_text("one\n")
    result = await read_file.run(input, ctx)
    assert result.is_error
    assert message in result.content
    assert "\n" not in result.content


async def test_read_empty_file(ctx: ToolContext) -> None:
    (ctx.workspace / "e.txt").write_text("")
    result = await read_file.run({"path": "e.txt"}, ctx)
    assert not result.is_error and "empty" in result.content


async def test_input_that_is_not_an_object(ctx: ToolContext) -> None:
    for tool in (read_file, write_file, edit_file):
        result = await tool.run(["path"], ctx)  # type: ignore[arg-type]
        assert result.is_error and "JSON object" in result.content


# write_file -----------------------------------------------------------------------------


async def test_write_creates_parents_and_reports_the_edit(ctx: ToolContext) -> None:
    result = await write_file.run({"path": "deep/er/new.py", "content": "print('hi')\n"}, ctx)
    assert not result.is_error, result.content
    path = ctx.workspace / "deep" / "er" / "new.py"
    assert path.read_bytes() == b"print('hi')\n"
    [edit] = result.edits
    assert edit.path == "deep/er/new.py"
    assert edit.before_sha256 is None
    assert edit.after_sha256 == sha(b"print('hi')\n")
    assert edit.diff == "--- /dev/null\n+++ b/deep/er/new.py\n@@ -0,0 +1 @@\n+print('hi')\n"
    assert not [p for p in path.parent.iterdir() if p.name != "new.py"]  # no temp files left


async def test_write_overwrite_keeps_permissions(ctx: ToolContext) -> None:
    path = ctx.workspace / "run.sh"
    path.write_text("echo old\n")
    path.chmod(0o750)
    result = await write_file.run({"path": "run.sh", "content": "echo new"}, ctx)
    [edit] = result.edits
    assert edit.before_sha256 == sha(b"echo old\n")
    assert edit.after_sha256 == sha(b"echo new")
    assert "-echo old\n+echo new\n\\ No newline at end of file\n" in edit.diff
    assert stat.S_IMODE(path.stat().st_mode) == 0o750
    assert path.read_text() == "echo new"


async def test_write_through_an_inside_symlink_keeps_the_link(ctx: ToolContext) -> None:
    (ctx.workspace / "real.txt").write_text("a\n")
    (ctx.workspace / "link.txt").symlink_to("real.txt")
    result = await write_file.run({"path": "link.txt", "content": "b\n"}, ctx)
    assert result.edits[0].path == "real.txt"
    assert (ctx.workspace / "link.txt").is_symlink()
    assert (ctx.workspace / "real.txt").read_text() == "b\n"


async def test_write_refused_in_read_only_profile(make_ctx) -> None:
    ctx = make_ctx(profile="read-only")
    for tool, input in [
        (write_file, {"path": "x.txt", "content": "x"}),
        (edit_file, {"path": "x.txt", "old_string": "a", "new_string": "b"}),
    ]:
        result = await tool.run(input, ctx)
        assert result.is_error and "read-only" in result.content
    assert not (ctx.workspace / "x.txt").exists()


async def test_write_onto_a_directory_is_an_error(ctx: ToolContext) -> None:
    (ctx.workspace / "d").mkdir()
    result = await write_file.run({"path": "d", "content": "x"}, ctx)
    assert result.is_error and "directory" in result.content


async def test_write_under_a_file_is_an_os_error_message(ctx: ToolContext) -> None:
    (ctx.workspace / "f").write_text("")
    result = await write_file.run({"path": "f/child.txt", "content": "x"}, ctx)
    assert result.is_error and result.content.startswith("write_file failed:")


# edit_file ------------------------------------------------------------------------------


async def edit(ctx: ToolContext, name: str, old: str, new: str, **extra: object):
    return await edit_file.run({"path": name, "old_string": old, "new_string": new, **extra}, ctx)


async def test_edit_replaces_a_unique_string(ctx: ToolContext) -> None:
    path = ctx.workspace / "m.py"
    path.write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    result = await edit(ctx, "m.py", "return 2", "return 3")
    assert not result.is_error, result.content
    assert path.read_text() == "def f():\n    return 1\n\ndef g():\n    return 3\n"
    assert "line 5" in result.content and "     5\t    return 3" in result.content
    [e] = result.edits
    assert e.diff.startswith("--- a/m.py\n+++ b/m.py\n")
    assert "-    return 2\n+    return 3\n" in e.diff


async def test_edit_not_unique_gives_count_and_lines(ctx: ToolContext) -> None:
    path = ctx.workspace / "m.py"
    path.write_text("x = 1\ny = 2\nx = 1\nz = 3\nx = 1\n")
    before = path.read_bytes()
    result = await edit(ctx, "m.py", "x = 1", "x = 9")
    assert result.is_error
    assert "occurs 3 times" in result.content and "lines 1, 3, 5" in result.content
    assert "replace_all" in result.content
    assert path.read_bytes() == before


async def test_edit_replace_all(ctx: ToolContext) -> None:
    path = ctx.workspace / "m.py"
    path.write_text("x = 1\ny = 2\nx = 1\n")
    result = await edit(ctx, "m.py", "x = 1", "x = 9", replace_all=True)
    assert "replaced 2 occurrences (lines 1, 3)" in result.content
    assert path.read_text() == "x = 9\ny = 2\nx = 9\n"


async def test_edit_no_match_shows_closest_lines(ctx: ToolContext) -> None:
    path = ctx.workspace / "m.py"
    path.write_text("import os\n\ndef compute(a, b):\n    total = a + b\n    return total\n")
    before = path.read_bytes()
    result = await edit(ctx, "m.py", "def compute(a, b):\n    total = a+b\n", "X")
    assert result.is_error
    assert result.content.splitlines()[0].startswith("old_string was not found in m.py")
    assert "lines 3-4" in result.content
    assert "     4\t    total = a + b" in result.content
    assert path.read_bytes() == before


async def test_edit_no_match_with_nothing_close(ctx: ToolContext) -> None:
    (ctx.workspace / "m.txt").write_text("aaaa\n")
    result = await edit(ctx, "m.txt", "zzzzzzzzzzzzzz", "y")
    assert result.is_error and "read the file with read_file" in result.content


async def test_edit_keeps_crlf_when_strings_use_lf(ctx: ToolContext) -> None:
    path = ctx.workspace / "w.txt"
    path.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    result = await edit(ctx, "w.txt", "two\nthree", "2\n2.5\nthree")
    assert not result.is_error, result.content
    assert path.read_bytes() == b"one\r\n2\r\n2.5\r\nthree\r\n"


async def test_edit_keeps_bom_tabs_non_ascii_and_missing_final_newline(ctx: ToolContext) -> None:
    path = ctx.workspace / "u.txt"
    path.write_bytes(b"\xef\xbb\xbf\tcaf\xc3\xa9 = 1\n\tna\xc3\xafve = 2")
    result = await edit(ctx, "u.txt", "naïve = 2", "naïve = 3 ✓")
    assert not result.is_error, result.content
    assert path.read_bytes() == "\ufeff\tcafé = 1\n\tnaïve = 3 ✓".encode()


async def test_edit_lf_file_with_crlf_strings(ctx: ToolContext) -> None:
    path = ctx.workspace / "l.txt"
    path.write_bytes(b"a\nb\nc\n")
    result = await edit(ctx, "l.txt", "a\r\nb", "a\r\nB")
    assert not result.is_error, result.content
    assert path.read_bytes() == b"a\nB\nc\n"


@pytest.mark.parametrize(
    ("content", "input", "message"),
    [
        (b"ab\0cd", {"old_string": "ab", "new_string": "x"}, "binary"),
        (b"caf\xe9\n", {"old_string": "caf", "new_string": "x"}, "not valid UTF-8"),
        (b"abc\n", {"old_string": "", "new_string": "x"}, "use write_file"),
        (b"abc\n", {"old_string": "abc", "new_string": "abc"}, "the same"),
        (b"abc\r\n", {"old_string": "abc\n", "new_string": "abc\r\n"}, "changes nothing"),
        (b"abc\n", {"old_string": "abc"}, "`new_string` is required"),
        (b"abc\n", {"old_string": "abc", "new_string": "x", "replace_all": "yes"}, "true or false"),
    ],
)
async def test_failed_edit_leaves_the_file_byte_identical(
    ctx: ToolContext, content: bytes, input: dict, message: str
) -> None:
    path = ctx.workspace / "f.txt"
    path.write_bytes(content)
    mtime_ns = path.stat().st_mtime_ns
    result = await edit_file.run({"path": "f.txt", **input}, ctx)
    assert result.is_error and message in result.content, result.content
    assert path.read_bytes() == content
    assert path.stat().st_mtime_ns == mtime_ns
    assert os.listdir(ctx.workspace) == ["f.txt"]


async def test_edit_missing_file(ctx: ToolContext) -> None:
    result = await edit(ctx, "nope.txt", "a", "b")
    assert result.is_error and "write_file" in result.content
