"""Path resolution: workspace-relative paths, and escapes refused after resolving symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from musec.agents.tools import PathRefused, ToolContext, ToolInputError, default_tools
from musec.agents.tools.paths import display_path, resolve_tool_path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("top secret\n")
    return out.resolve()


def test_relative_path_resolves_inside(ctx: ToolContext) -> None:
    assert resolve_tool_path("src/a.py", ctx) == ctx.workspace / "src" / "a.py"
    assert resolve_tool_path("./src/../b.py", ctx) == ctx.workspace / "b.py"
    assert resolve_tool_path(".", ctx) == ctx.workspace


def test_absolute_path_inside_is_allowed(ctx: ToolContext) -> None:
    assert resolve_tool_path(str(ctx.workspace / "x"), ctx) == ctx.workspace / "x"


def test_dotdot_escape_is_refused(ctx: ToolContext, outside: Path) -> None:
    with pytest.raises(PathRefused, match=r"leads outside the workspace .*through \.\."):
        resolve_tool_path("../outside/secret.txt", ctx)
    with pytest.raises(PathRefused):
        resolve_tool_path("a/../../outside", ctx)


def test_absolute_path_outside_is_refused(ctx: ToolContext) -> None:
    with pytest.raises(PathRefused, match=r"^/etc/passwd is outside the workspace"):
        resolve_tool_path("/etc/passwd", ctx)


def test_workspace_prefix_sibling_is_refused(ctx: ToolContext) -> None:
    sibling = Path(str(ctx.workspace) + "-other")
    sibling.mkdir()
    with pytest.raises(PathRefused):
        resolve_tool_path(str(sibling / "f"), ctx)


@pytest.mark.parametrize("link_target", ["dir", "file", "dangling"])
def test_symlink_leading_out_is_refused(ctx: ToolContext, outside: Path, link_target: str) -> None:
    target = {"dir": outside, "file": outside / "secret.txt", "dangling": outside / "nope"}[
        link_target
    ]
    (ctx.workspace / "link").symlink_to(target)
    name = "link/secret.txt" if link_target == "dir" else "link"
    with pytest.raises(PathRefused, match="symlink leading outside the workspace"):
        resolve_tool_path(name, ctx)


def test_symlink_inside_the_workspace_resolves_to_its_target(ctx: ToolContext) -> None:
    (ctx.workspace / "real").mkdir()
    (ctx.workspace / "alias").symlink_to("real")
    assert resolve_tool_path("alias/f.txt", ctx) == ctx.workspace / "real" / "f.txt"


def test_writable_roots_are_allowed(make_ctx, outside: Path) -> None:
    ctx = make_ctx(writable_roots=(str(outside),))
    assert resolve_tool_path(str(outside / "secret.txt"), ctx) == outside / "secret.txt"


@pytest.mark.parametrize("raw", ["", "   ", None, 3, "a\0b"])
def test_bad_path_values_are_input_errors(ctx: ToolContext, raw: object) -> None:
    with pytest.raises(ToolInputError):
        resolve_tool_path(raw, ctx)


def test_display_path(ctx: ToolContext) -> None:
    assert display_path(ctx.workspace / "a" / "b.txt", ctx) == "a/b.txt"
    assert display_path(ctx.workspace, ctx) == "."
    assert display_path(Path("/opt/x"), ctx) == "/opt/x"


@pytest.mark.anyio
@pytest.mark.parametrize("tool_name", ["read_file", "write_file", "edit_file", "glob", "grep"])
@pytest.mark.parametrize("path_kind", ["dotdot", "absolute", "symlink"])
async def test_every_path_tool_refuses_escapes(
    ctx: ToolContext, outside: Path, tool_name: str, path_kind: str
) -> None:
    (ctx.workspace / "out").symlink_to(outside)
    path = {
        "dotdot": "../outside/secret.txt",
        "absolute": str(outside / "secret.txt"),
        "symlink": "out/secret.txt",
    }[path_kind]
    before = sorted(os.listdir(outside)), (outside / "secret.txt").read_bytes()
    tool = next(t for t in default_tools() if t.name == tool_name)
    input = {
        "read_file": {"path": path},
        "write_file": {"path": path, "content": "pwned\n"},
        "edit_file": {"path": path, "old_string": "top", "new_string": "pwned"},
        "glob": {"pattern": "*", "path": path},
        "grep": {"pattern": "secret", "path": path},
    }[tool_name]
    result = await tool.run(input, ctx)
    assert result.is_error
    assert "outside the workspace" in result.content
    assert "\n" not in result.content
    assert (sorted(os.listdir(outside)), (outside / "secret.txt").read_bytes()) == before


def test_a_blob_is_readable_by_its_full_path_and_nothing_else_of_the_store(ctx: ToolContext, tmp_path: Path) -> None:
    """Where a tool result over its budget is kept whole: read_file and grep may read it."""
    import hashlib

    import msgspec
    from musec.agents.tools import GrepTool, ReadFileTool
    from musec.daemon.blobs import BlobStore

    store = BlobStore(tmp_path / "blobs")
    data = "".join(f"row {i}\n" for i in range(500)).encode()
    digest = store.put(data)
    other = tmp_path / "blobs" / "notes.txt"
    other.write_text("not a blob\n")
    ctx = msgspec.structs.replace(ctx, blob_dir=tmp_path / "blobs")
    blob = str(store.path(digest))
    assert resolve_tool_path(blob, ctx, read=True) == Path(blob)
    with pytest.raises(PathRefused):
        resolve_tool_path(blob, ctx)  # a write is never let out of the workspace
    for refused in (str(other), str(tmp_path / "blobs"), str(store.path(digest)) + "x"):
        with pytest.raises(PathRefused):
            resolve_tool_path(refused, ctx, read=True)
    link = tmp_path / "blobs" / digest[:2] / ("0" * 62)
    link.symlink_to(other)
    with pytest.raises(PathRefused):
        resolve_tool_path(str(link), ctx, read=True)
    assert hashlib.sha256(data).hexdigest() == digest

    import anyio

    async def both() -> tuple[str, str]:
        read = await ReadFileTool().run({"path": blob, "offset": 400, "limit": 2}, ctx)
        found = await GrepTool().run({"pattern": "row 47[0-9]$", "path": blob}, ctx)
        return read.content, found.content

    read, found = anyio.run(both)
    assert read.startswith("   400\trow 399\n   401\trow 400\n")
    assert found.count("\n") == 10 and "row 475" in found
