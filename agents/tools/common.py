"""Input checking and error mapping shared by the tools."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio.to_thread

from .base import ToolContext, ToolInputError, ToolOutput
from .paths import is_within, resolve_tool_path

__all__ = [
    "GIT_CONTROL",
    "git_control_paths",
    "error_output",
    "get_bool",
    "get_int",
    "get_number",
    "get_str",
    "refuse_if_read_only",
    "run_in_thread",
]


def error_output(message: str) -> ToolOutput:
    """A failed call: ``message`` is shown to the model as the result."""
    return ToolOutput(content=message, is_error=True)


def _check_object(input: object) -> dict[str, Any]:
    if not isinstance(input, dict):
        raise ToolInputError("the tool input must be a JSON object")
    return input


def get_str(
    input: dict[str, Any], key: str, *, required: bool = True, allow_empty: bool = False
) -> str | None:
    """The string field ``key``; ``None`` when absent and not required.

    Raises:
        ToolInputError: missing, not a string, or empty when ``allow_empty`` is false.
    """
    value = _check_object(input).get(key)
    if value is None:
        if required:
            raise ToolInputError(f"`{key}` is required")
        return None
    if not isinstance(value, str):
        raise ToolInputError(f"`{key}` must be a string, not {type(value).__name__}")
    if not allow_empty and not value:
        raise ToolInputError(f"`{key}` must not be empty")
    return value


def get_int(input: dict[str, Any], key: str, *, default: int, minimum: int) -> int:
    """The integer field ``key`` (a whole float such as ``10.0`` is accepted), or ``default``.

    Raises:
        ToolInputError: not a whole number, or below ``minimum``.
    """
    value = _check_object(input).get(key)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolInputError(f"`{key}` must be a whole number, not {value!r}")
    if value < minimum:
        raise ToolInputError(f"`{key}` must be at least {minimum}, not {value}")
    return value


def get_number(
    input: dict[str, Any], key: str, *, default: float, minimum_exclusive: float
) -> float:
    """The numeric field ``key``, or ``default``.

    Raises:
        ToolInputError: not a finite number, or not above ``minimum_exclusive``.
    """
    value = _check_object(input).get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ToolInputError(f"`{key}` must be a number, not {value!r}")
    if value <= minimum_exclusive:
        raise ToolInputError(f"`{key}` must be more than {minimum_exclusive}, not {value}")
    return float(value)


def get_bool(input: dict[str, Any], key: str, *, default: bool) -> bool:
    """The boolean field ``key``, or ``default``.

    Raises:
        ToolInputError: not a boolean.
    """
    value = _check_object(input).get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ToolInputError(f"`{key}` must be true or false, not {value!r}")
    return value


def refuse_if_read_only(ctx: ToolContext, tool: str) -> None:
    """Raise ``ToolInputError`` when the sandbox profile is ``read-only`` (plan mode)."""
    if ctx.sandbox.profile == "read-only":
        raise ToolInputError(
            f"{tool} is not allowed: the workspace is read-only in this mode; describe the change instead"
        )


def writable_path(raw: object, ctx: ToolContext, tool: str) -> Path:
    """The path a write tool may write, resolved (``paths.resolve_tool_path``).

    While the agent plans (``ctx.plan_document`` set), the plan document is the only
    file that may be written, whatever the approval layer said; under the ``read-only``
    profile otherwise, nothing may.

    Raises:
        ToolInputError: a read-only profile, or another file than the plan document.
        PathRefused: the path leads outside the allowed roots.
    """
    if ctx.plan_document:
        target = os.path.realpath(ctx.plan_document)
        given = raw if isinstance(raw, str) else ""
        if given and os.path.realpath(os.path.join(ctx.workspace, os.path.expanduser(given))) == target:
            return Path(target)
        raise ToolInputError(
            f"{tool} is not allowed while planning: only the plan document {ctx.plan_document} may be written; "
            "the workspace is read-only until the plan is approved"
        )
    refuse_if_read_only(ctx, tool)
    path = resolve_tool_path(raw, ctx)
    refuse_if_protected(path, ctx, tool)
    return path


#: What of a repository's ``.git`` folder makes git run programs: its config (``core.fsmonitor``,
#: ``core.hooksPath``, filter drivers, ``core.sshCommand``...) and its hooks. musec runs git
#: itself, outside any sandbox (fan-out, apply), so a command or a file tool must never write
#: them (fresh-user trial s5, F18: a sandboxed ``git config core.fsmonitor CMD`` ran CMD on the host).
GIT_CONTROL = ("config", "config.worktree", "hooks")


def git_control_paths(workspace: Path | str) -> tuple[str, ...]:
    """The files and folders of ``workspace``'s own ``.git`` folder that make git run programs
    (``GIT_CONTROL``), for ``SandboxPolicy.read_only``; ``()`` when ``.git`` is not a folder
    there (a linked worktree's or a submodule's git folder lies outside it: read-only already)."""
    git = os.path.join(os.path.realpath(workspace), ".git")
    if not os.path.isdir(git) or os.path.islink(git):
        return ()
    return tuple(os.path.join(git, name) for name in GIT_CONTROL)


def refuse_if_protected(path: Path, ctx: ToolContext, tool: str) -> None:
    """Raise ``ToolInputError`` when ``path`` (resolved) is in a folder of
    ``ctx.sandbox.read_only`` that does not hold the workspace (musec's own config and
    state; a repository's git config and hooks, ``git_control_paths``)."""
    workspace = os.path.realpath(ctx.workspace)
    for folder in ctx.sandbox.read_only:
        real = os.path.realpath(folder)
        if is_within(str(path), real) and os.path.basename(os.path.dirname(real)) == ".git" \
                and os.path.basename(real) in GIT_CONTROL:
            raise ToolInputError(
                f"{tool} may not write {path}: git's own config and hooks are never written by tools (git runs "
                "what they name, outside the sandbox); change them yourself if you mean to")
        if is_within(str(path), real) and not is_within(workspace, real):
            raise ToolInputError(
                f"{tool} may not write {path}: it is in musec's own {real} (its config and state are never "
                "written by tools); change it yourself if you mean to"
            )


async def run_in_thread(tool: str, fn: Callable[..., ToolOutput], *args: Any) -> ToolOutput:
    """Run a synchronous tool body in a worker thread, mapping expected errors to outputs.

    The thread is not abandoned on cancellation, so a write in progress completes (and
    stays atomic) before the cancellation goes on.

    Returns:
        ``fn``'s output; or an error output for ``ToolInputError`` (its message) and for
        ``OSError`` (the OS's reason and the path).
    """
    try:
        return await anyio.to_thread.run_sync(fn, *args)
    except ToolInputError as exc:
        return error_output(str(exc))
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        return error_output(f"{tool} failed: {exc.strerror or exc}{where}")
