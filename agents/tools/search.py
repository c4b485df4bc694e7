"""The search tools: ``glob`` (file names) and ``grep`` (file contents), both on ripgrep.

ripgrep respects ``.gitignore``, ``.ignore`` and ``.rgignore`` files (here also outside
a git repository: ``--no-require-git``), searches hidden files but never ``.git/``, and
does not follow symlinks. ``glob`` lists the files ripgrep keeps and matches the pattern
in Python (``globmatch``), newest first by modification time (then by name), because
ripgrep's ``--glob`` would bring back ignored files. It is found on ``PATH`` or next to the Python interpreter (the
PyPI ``ripgrep`` wheel installs it into the virtual environment's ``bin``).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.conversation import ToolSpec
from .base import Access, ToolContext, ToolInputError, ToolOutput, printable
from .common import error_output, get_bool, get_str
from .globmatch import compile_glob
from .paths import display_path, hidden_inside, resolve_tool_path
from .procs import run_process_group

__all__ = ["GlobTool", "GrepTool", "find_ripgrep"]

MAX_GLOB_RESULTS = 200
"""``glob`` lists at most this many files."""

MAX_GLOB_SCANNED = 100_000
"""``glob`` stops collecting (and sorting) after this many matching files."""

MAX_GREP_LINE_CHARS = 500
"""ripgrep's ``--max-columns``: longer matching lines are shown as a preview."""

SEARCH_TIMEOUT_S = 60.0

_COMMON_FLAGS = [
    "--hidden",
    "--no-require-git",
    "--glob",
    "!.git",
    "--color",
    "never",
    "--no-config",
    "--no-messages",  # no per-file errors in the output; pattern errors still come
]

_NO_RIPGREP = (
    "ripgrep (rg) is not installed; install it (`apt-get install ripgrep` or "
    "`pip install ripgrep`), or search with a command in bash"
)


def find_ripgrep() -> str | None:
    """The path of ``rg``: on ``PATH`` first, then next to ``sys.executable``; or ``None``."""
    found = shutil.which("rg")
    if found:
        return found
    beside = Path(sys.executable).parent / "rg"
    return str(beside) if os.access(beside, os.X_OK) else None


def _search_env() -> dict[str, str]:
    """A minimal environment for ripgrep (no ``RIPGREP_CONFIG_PATH``, no credentials)."""
    return {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL")}


def _excluded(cwd: str | os.PathLike[str], ctx: ToolContext) -> list[str]:
    """ripgrep globs keeping a search run in ``cwd`` out of the default hidden paths inside
    it (``paths.hidden_inside``: a session in ``$HOME`` holds ``~/.ssh``)."""
    out: list[str] = []
    for rel in hidden_inside(cwd, ctx):
        out += ["--glob", "!/" + re.sub(r"([*?\[\]{}\\!])", r"\\\1", rel)]
    return out


def _path_list(input: dict[str, Any]) -> Sequence[str]:
    path = input.get("path") if isinstance(input, dict) else None
    return [path] if isinstance(path, str) else ["."]


def _rg_failure(exit_status: int | None, output: bytes, errors: bytes) -> str | None:
    """ripgrep's error as one line, or ``None`` when it did not fail.

    With ``--no-messages`` ripgrep reports only a bad pattern or glob on stderr; status 2
    with results means that some files could not be read, which is not a failure.
    """
    if exit_status in (0, 1) or (exit_status == 2 and output and not errors.strip()):
        return None
    lines = [ln.strip() for ln in errors.decode("utf-8", "replace").splitlines() if ln.strip()]
    return (
        " ".join(ln.removeprefix("rg: ") for ln in lines)[:500]
        or f"ripgrep exited with status {exit_status}"
    )


class GlobTool:
    """``glob {pattern, path?}``: files whose path matches a glob, newest first."""

    name = "glob"
    access: Access = "read"
    spec = ToolSpec(
        name="glob",
        description=(
            "Find files by name with a glob pattern: `*.py` matches file names at any depth, "
            "`src/**/*.ts` matches paths relative to `path`, `*` stays within one directory, "
            "`**` crosses directories, `{a,b}` gives alternatives. Returns "
            "paths relative to the workspace, most recently modified first, at most "
            f"{MAX_GLOB_RESULTS}. Files ignored by .gitignore and the .git directory are skipped."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Glob pattern, e.g. `**/*.py`."},
                "path": {
                    "type": "string",
                    "description": "Directory to search, relative to the workspace (default: the workspace).",
                },
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
    )

    def paths(self, input: dict[str, Any]) -> Sequence[str]:
        return _path_list(input)

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        try:
            pattern = get_str(input, "pattern")
            base = resolve_tool_path(get_str(input, "path", required=False) or ".", ctx)
        except ToolInputError as exc:
            return error_output(str(exc))
        if not base.is_dir():
            return error_output(
                f"{display_path(base, ctx)} is not a directory; give a directory as path"
            )
        try:
            matcher = compile_glob(pattern)
        except ValueError as exc:
            return error_output(f"{exc}; give a pattern such as `**/*.py`")
        rg = find_ripgrep()
        if rg is None:
            return error_output(_NO_RIPGREP)
        chunks: list[bytes] = []
        count = 0

        def sink(chunk: bytes) -> bool:
            nonlocal count
            chunks.append(chunk)
            count += chunk.count(b"\0")
            return count < MAX_GLOB_SCANNED

        # every file ripgrep does not ignore; the pattern is matched here (see globmatch)
        argv = [rg, "--files", "--null", *_COMMON_FLAGS, *_excluded(base, ctx)]
        errors = bytearray()
        done = await run_process_group(
            argv,
            cwd=base,
            env=_search_env(),
            timeout_s=SEARCH_TIMEOUT_S,
            sink=sink,
            stderr_sink=errors.extend,
        )
        raw = b"".join(chunks)
        if done.timed_out:
            return error_output(f"glob timed out after {SEARCH_TIMEOUT_S:.0f} s; narrow the path")
        failure = (
            _rg_failure(done.exit_status, raw, bytes(errors)) if count < MAX_GLOB_SCANNED else None
        )
        if failure:
            return error_output(f"glob failed: {failure}")
        listed = [n.decode("utf-8", "surrogateescape") for n in raw.split(b"\0") if n][
            :MAX_GLOB_SCANNED
        ]
        names = [n for n in listed if matcher.fullmatch(n)]
        if not names:
            return ToolOutput(content=f"no files match {pattern!r} under {display_path(base, ctx)}")
        stamped = []
        for name in names:
            full = base / name
            try:
                mtime_ns = full.lstat().st_mtime_ns
            except OSError:
                continue
            stamped.append((-mtime_ns, display_path(full, ctx)))
        stamped.sort()
        shown = [name for _, name in stamped[:MAX_GLOB_RESULTS]]
        out = "\n".join(shown) + "\n"
        if len(stamped) > len(shown):
            out += f"[showed the {len(shown)} newest of {len(stamped)} files; narrow the pattern or path]\n"
        stopped = len(listed) >= MAX_GLOB_SCANNED
        if stopped:
            out += f"[stopped looking after {MAX_GLOB_SCANNED} files; give a narrower path]\n"
        if stopped or len(stamped) > len(shown):  # the model sees part: the terminal says of how many
            return ToolOutput(content=out, whole_lines=len(stamped), whole_lines_at_least=stopped)
        return ToolOutput(content=out)


class GrepTool:
    """``grep {pattern, path?, glob?, ignore_case?}``: matching lines, via ripgrep."""

    name = "grep"
    access: Access = "read"
    spec = ToolSpec(
        name="grep",
        description=(
            "Search file contents with a regular expression (ripgrep / Rust regex syntax). "
            "Returns matching lines as `path:line:text`, paths relative to the workspace. "
            "Narrow with path (a directory or file) and glob (e.g. `*.py`). Files ignored by "
            ".gitignore are skipped. Output is capped; no matches is not an error."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression to search for."},
                "path": {
                    "type": "string",
                    "description": "File or directory to search, relative to the workspace (default: the workspace).",
                },
                "glob": {
                    "type": "string",
                    "description": "Only search files matching this glob, e.g. `*.py`.",
                },
                "ignore_case": {
                    "type": "boolean",
                    "description": "Match case-insensitively (default false).",
                },
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
    )

    def paths(self, input: dict[str, Any]) -> Sequence[str]:
        return _path_list(input)

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        try:
            pattern = get_str(input, "pattern")
            target = resolve_tool_path(get_str(input, "path", required=False) or ".", ctx, read=True)
            file_glob = get_str(input, "glob", required=False)
            ignore_case = get_bool(input, "ignore_case", default=False)
        except ToolInputError as exc:
            return error_output(str(exc))
        if not target.exists():
            return error_output(f"{display_path(target, ctx)} does not exist; find files with glob")
        rg = find_ripgrep()
        if rg is None:
            return error_output(_NO_RIPGREP)
        argv = [rg, "--line-number", "--no-heading", "--with-filename", *_COMMON_FLAGS, *_excluded(ctx.workspace, ctx)]
        argv += ["--max-columns", str(MAX_GREP_LINE_CHARS), "--max-columns-preview"]
        if ignore_case:
            argv.append("--ignore-case")
        if file_glob and "/" not in file_glob.rstrip("/"):
            # a file-name glob as a file type: unlike --glob, it keeps the ignore rules
            argv += ["--type-add", f"musec:{file_glob}", "--type", "musec"]
        elif file_glob:
            argv += ["--glob", file_glob]
        argv += ["--regexp", pattern]
        shown = display_path(target, ctx)
        if shown != ".":
            argv += ["--", shown]
        cap = ctx.max_output_bytes
        chunks: list[bytes] = []
        size = 0

        def sink(chunk: bytes) -> bool:
            nonlocal size
            chunks.append(chunk)
            size += len(chunk)
            return size <= cap

        errors = bytearray()
        done = await run_process_group(
            argv,
            cwd=ctx.workspace,
            env=_search_env(),
            timeout_s=SEARCH_TIMEOUT_S,
            sink=sink,
            stderr_sink=errors.extend,
        )
        raw = b"".join(chunks)
        if done.timed_out:
            return error_output(
                f"grep timed out after {SEARCH_TIMEOUT_S:.0f} s; narrow the path or glob"
            )
        if size > cap:
            cut = raw[:cap]
            cut = cut[: cut.rfind(b"\n") + 1] or cut
            text = printable(cut.decode("utf-8", "surrogateescape"))
            return ToolOutput(
                content=text
                + f"[output capped at {cap} bytes; narrow the pattern, path or glob]\n",
                whole_lines=raw.count(b"\n"),  # the matching lines read before stopping: a floor
                whole_lines_at_least=True,
            )
        failure = _rg_failure(done.exit_status, raw, bytes(errors))
        if failure:
            return error_output(f"grep failed: {failure}")
        if not raw:
            return ToolOutput(content=f"no matches for {pattern!r}")
        return ToolOutput(content=printable(raw.decode("utf-8", "surrogateescape")))
