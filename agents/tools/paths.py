"""Resolving the paths a model gives to tools, and refusing those that lead out.

A tool path is taken relative to the workspace (absolute paths are allowed when they lie
inside an allowed root). The path is resolved with every symlink followed, and the result
must lie inside an allowed root: the workspace, plus ``ctx.sandbox.writable_roots``.
Reads are allowed under the same roots as writes for now (nothing else on the machine).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from .base import ToolContext, printable
from .errors import PathRefused, ToolInputError

__all__ = [
    "allowed_roots",
    "display_path",
    "hidden_inside",
    "is_blob_path",
    "is_within",
    "path_text",
    "resolve_tool_path",
    "unescape_bytes",
    "workspace_gone",
]


def is_within(path: str, root: str) -> bool:
    """Whether ``path`` equals ``root`` or lies below it (both absolute, normalised)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def allowed_roots(ctx: ToolContext) -> list[str]:
    """The symlink-resolved roots a tool may touch: the workspace, then writable roots."""
    roots = [os.path.realpath(ctx.workspace)]
    roots += [os.path.realpath(os.path.expanduser(r)) for r in ctx.sandbox.writable_roots]
    return roots


def resolve_tool_path(raw: object, ctx: ToolContext, *, what: str = "path", read: bool = False) -> Path:
    """Resolve a model-given path against the workspace, refusing escapes.

    Args:
        raw: the path as the model gave it (relative to the workspace, or absolute).
        ctx: the tool context (workspace and sandbox policy).
        what: the input field's name, used in messages.
        read: the tool only reads the path: a blob of ``ctx.blob_dir`` named by its full
            path (``<blob_dir>/<2 hex>/<62 hex>``) is allowed too.

    Returns:
        The absolute path with every symlink resolved (the target may not exist yet).

    Raises:
        ToolInputError: ``raw`` is not a non-empty string.
        PathRefused: the path leads outside the allowed roots, through ``..``, as an
            absolute path, or through a symlink, or the workspace no longer exists; the
            message says which.
    """
    if not isinstance(raw, str) or not raw.strip():
        raise ToolInputError(
            f"`{what}` must be a non-empty string (a path relative to the workspace)"
        )
    if "\0" in raw:
        raise ToolInputError(f"`{what}` contains a NUL byte; give a plain path")
    roots = allowed_roots(ctx)
    workspace = roots[0]
    if not os.path.isdir(workspace):
        raise PathRefused(workspace_gone(workspace))
    raw = _unescape_bytes(raw, workspace)
    raw = _home(raw, ctx, what)
    joined = os.path.join(workspace, raw)  # an absolute raw replaces the workspace
    lexical = os.path.normpath(joined)
    if read and is_blob_path(lexical, ctx):
        return Path(os.path.realpath(lexical))
    if not _within_any(lexical, roots):
        if os.path.isabs(raw):
            raise PathRefused(f"{raw} is outside the workspace {workspace}; use a path inside it")
        raise PathRefused(
            f"{raw} leads outside the workspace {workspace} (through ..); use a path inside it"
        )
    resolved = os.path.realpath(joined)
    if not _within_any(resolved, roots):
        raise PathRefused(
            f"{raw} goes through a symlink leading outside the workspace (to {resolved}); "
            "use a path inside the workspace"
        )
    hidden = next((h for h in _hidden(ctx, roots) if is_within(resolved, h)), None)
    if hidden is not None:
        raise PathRefused(
            f"{raw} is hidden from the agent ({hidden} is a credential store, shell history or musec's "
            "own state, hidden like it is from commands); work with files elsewhere in the workspace"
        )
    return Path(resolved)


def _hidden(ctx: ToolContext, roots: Sequence[str]) -> list[str]:
    """The default hidden paths (``ctx.sandbox.hide``, resolved) that hold none of the
    ``roots``: the file tools refuse what they cover, as the sandbox masks it."""
    out = []
    for path in ctx.sandbox.hide:
        real = os.path.realpath(path)
        if not any(is_within(root, real) for root in roots):
            out.append(real)
    return out


def hidden_inside(folder: str | os.PathLike[str], ctx: ToolContext) -> list[str]:
    """The default hidden paths that lie inside ``folder`` (absolute, resolved), relative
    to it in POSIX form: what a search from ``folder`` must not go into."""
    base = os.path.realpath(folder)
    return [os.path.relpath(h, base) for h in _hidden(ctx, allowed_roots(ctx))
            if h != base and is_within(h, base) and os.path.lexists(h)]


def workspace_gone(workspace: str | os.PathLike[str]) -> str:
    """The one message for a workspace directory that no longer exists (deleted while the
    session was away): nothing is written there, and no directory is made again in its place."""
    return (f"the workspace {workspace} no longer exists (deleted or moved); nothing was done. "
            "Tell the person; they can restore it or start a session where the work now is")


_ESCAPE = re.compile(r"\\(\\|x[89a-fA-F][0-9a-fA-F])")
_NEEDS_ESCAPE = re.compile(r"[\udc80-\udcff]|\\(\\|x[89a-fA-F][0-9a-fA-F])")


def path_text(name: str) -> str:
    """How a file name is shown, one spelling per name, that ``unescape_bytes`` turns back
    into it: a name that is UTF-8 and holds nothing that reads as an escape is itself; in
    any other, a byte that is not UTF-8 (a ``surrogateescape`` character) is ``\\xNN`` and
    each backslash is doubled. So a file whose name holds the byte 0xFF (``bad\\xffname``)
    and one literally named ``bad\\xffname`` (shown ``bad\\\\xffname``) are both reached by
    the name shown (fresh-user s8 J6: both were shown alike, and one could not be reached)."""
    if not _NEEDS_ESCAPE.search(name):
        return printable(name)
    return printable(name.replace("\\", "\\\\"))


def unescape_bytes(text: str) -> str:
    """The inverse of ``path_text``: ``\\xNN`` (80-FF) becomes the ``surrogateescape``
    character that ``os.fsencode`` turns back into that byte, and ``\\\\`` one backslash;
    any other backslash is left as it is."""
    return _ESCAPE.sub(lambda m: "\\" if m.group(1) == "\\" else chr(0xDC00 + int(m.group(1)[1:], 16)), text)


def _unescape_bytes(raw: str, workspace: str) -> str:
    """A path as ``display_path`` shows it names the file it was shown for
    (``unescape_bytes``); a path with an escape that names nothing, while a file has the
    literal name, is that file (a name written by hand)."""
    if "\\" not in raw:
        return raw
    named = unescape_bytes(raw)
    if named == raw or os.path.lexists(os.path.join(workspace, named)):
        return named
    return raw if os.path.lexists(os.path.join(workspace, raw)) else named


def _home(raw: str, ctx: ToolContext, what: str) -> str:
    """``~`` and ``~/...`` mean the home directory (checked against the roots like any
    absolute path), never a folder named ``~``; ``~user`` is refused."""
    if not raw.startswith("~"):
        return raw
    if raw == "~" or raw.startswith("~/"):
        home = ctx.env.get("HOME") or os.path.expanduser("~")
        return home.rstrip("/") + raw[1:]
    raise PathRefused(
        f"`{what}` {raw} names another user's home directory; give a path inside the workspace "
        "(to name a file called ~..., write ./" + raw + ")"
    )


def display_path(path: Path, ctx: ToolContext) -> str:
    """``path`` relative to the workspace (POSIX form) if inside it, else absolute; bytes
    that are not UTF-8 are shown as ``\\xNN`` (``path_text``)."""
    workspace = os.path.realpath(ctx.workspace)
    text = str(path)
    if text == workspace:
        return "."
    if is_within(text, workspace):
        return path_text(Path(os.path.relpath(text, workspace)).as_posix())
    return path_text(text)


_BLOB_NAME = re.compile(r"[0-9a-f]{2}/[0-9a-f]{62}")


def is_blob_path(path: str, ctx: ToolContext) -> bool:
    """Whether ``path`` (absolute, normalised) names one blob of ``ctx.blob_dir`` by its
    full name, with no symlink on the way (the store writes none)."""
    if ctx.blob_dir is None:
        return False
    root = os.path.realpath(ctx.blob_dir)
    if not is_within(path, root) or os.path.realpath(path) != path:
        return False
    return _BLOB_NAME.fullmatch(os.path.relpath(path, root)) is not None


def _within_any(path: str, roots: Sequence[str]) -> bool:
    return any(is_within(path, root) for root in roots)
