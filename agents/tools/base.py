"""The interface every tool implements, and the context a tool call runs in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import msgspec

from ..core.conversation import ToolSpec
from ..core.faults import NO_FAULTS, Faults

Access = Literal["read", "write", "execute"]


def printable(text: str) -> str:
    """``text`` made encodable as UTF-8: a lone surrogate (a file name's undecodable byte,
    as ``os.fsdecode`` and ``surrogateescape`` give it) becomes ``\\xNN`` for that byte
    (``\\uDXXX`` for a surrogate no byte gives). Tools accept the ``\\xNN`` spelling
    back in paths (``paths.resolve_tool_path``). Text that encodes is returned as is."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    out = []
    for ch in text:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


class FileEdit(msgspec.Struct, frozen=True):
    """One file changed by a tool: logged as a ``file_edited`` event.

    ``before_sha256`` is ``None`` for a new file. ``diff`` is a unified diff (may be
    truncated for huge files).
    """

    path: str
    before_sha256: str | None
    after_sha256: str
    diff: str

    def __post_init__(self) -> None:
        msgspec.structs.force_setattr(self, "path", printable(self.path))
        msgspec.structs.force_setattr(self, "diff", printable(self.diff))


class ToolOutput(msgspec.Struct, frozen=True):
    """What a tool call produced.

    ``content`` is what the model sees. ``full_output`` (bytes) is the untruncated output
    when ``content`` was capped; the caller stores it as a blob. ``produced_bytes`` is how
    many bytes the tool produced in all, when that is more than ``full_output`` holds
    (a command's stream past what is kept in memory; ``None``: ``full_output`` is whole).
    ``whole_lines`` is how many lines the tool's whole result has when ``content`` shows
    only part of it and ``full_output`` does not hold the rest (a file read in a window:
    the file's lines; glob: the files that matched); ``whole_lines_at_least`` when that
    count is a floor (a search stopped early). ``content`` is made
    encodable on creation (``printable``). ``exit_status`` is the
    process exit status for ``bash`` (negative: killed by that signal), else ``None``.
    """

    content: str
    is_error: bool = False
    edits: list[FileEdit] = []
    exit_status: int | None = None
    full_output: bytes | None = None
    timed_out: bool = False
    produced_bytes: int | None = None
    whole_lines: int | None = None
    whole_lines_at_least: bool = False

    def __post_init__(self) -> None:
        # Outside text (file names, command output) must reach the log and the wire
        # encodable: a lone surrogate would end the session when it is written.
        msgspec.structs.force_setattr(self, "content", printable(self.content))


class SandboxPolicy(msgspec.Struct, frozen=True):
    """How commands are isolated.

    ``profile`` is ``workspace-write`` (the workspace writable) or ``read-only`` (the
    workspace mounted read-only, for plan mode and ``--approval read-only``).
    ``mode`` is ``bwrap``, ``seatbelt`` or ``off`` (only when the person chose it).
    ``read_deny`` holds the globs of the ``read`` deny rules (absolute, or relative to
    the workspace); what they match is hidden from commands (``masks.hidden_paths``).
    ``hide``: absolute paths hidden from commands whatever the rules say (musec's
    defaults, ``masks.default_hidden``: credential stores); one holding the workspace is not.
    ``proxy_socket``: the session's network proxy (``daemon/netproxy.py``) when ``net``
    rules open the network for some hosts; with bwrap the network stays unshared and
    commands reach the proxy through ``netbridge``.
    ``read_only``: absolute folders no tool writes even inside the workspace (musec's own
    config and state: a session in ``$HOME`` must not rewrite its permission rules or
    another session's log); a folder that holds the workspace itself (a worker's worktree
    lives under the state folder) protects what is outside the workspace only.
    """

    mode: str = "bwrap"
    profile: str = "workspace-write"
    network: bool = False
    writable_roots: tuple[str, ...] = ()
    read_deny: tuple[str, ...] = ()
    proxy_socket: str = ""
    read_only: tuple[str, ...] = ()
    hide: tuple[str, ...] = ()


class ToolContext(msgspec.Struct):
    """Where and how a tool call runs.

    Attributes:
        workspace: the absolute, symlink-resolved workspace root.
        env: the environment for commands, credentials already removed.
        sandbox: the sandbox policy for ``bash``.
        state_dir: where the tool may keep files (e.g. background process records).
        blob_dir: the daemon's blob store; ``read_file`` and ``grep`` may read a blob in it
            by its path (where a tool result over its budget is kept whole), nothing else.
        default_timeout_s: ``bash`` timeout when the model gives none.
        max_output_bytes: cap on what the model sees of a command's output.
        agent_id: the agent whose call this is.
        blackboard: the session's shared blackboard; file reads go through it when set.
        faults: the crash points of restart-safety tests (``NO_FAULTS`` outside them).
        announce_edit: ``(edit, path, tmp_path) -> None``, called by a file tool from its
            worker thread once the new content is in its temporary file and before the
            rename; it records the intended edit, write-ahead, so that a restart can tell
            whether the write landed (issue 13 case 4). ``None``: nothing is announced.
        plan_document: while the agent plans, the plan document's absolute path: the one
            file ``write_file``/``edit_file`` may write (``common.writable_path``).
        seen: ``{resolved path: SHA-256 hex}`` of each file as this agent last read or wrote
            it with the file tools; ``write_file`` refuses to overwrite a file changed since.
            Kept for the daemon's life (a resumed session starts with none).
    """

    workspace: Path
    env: dict[str, str]
    sandbox: SandboxPolicy = SandboxPolicy()
    state_dir: Path | None = None
    blob_dir: Path | None = None
    default_timeout_s: float = 120.0
    max_output_bytes: int = 30_000
    agent_id: str = "main"
    blackboard: Any = None  # agents.blackboard.Blackboard shared by the session's agents
    faults: Faults = NO_FAULTS
    announce_edit: Any = None  # Callable[[FileEdit, Path, Path], None], set by the agent loop per call
    plan_document: str = ""
    seen: dict[str, str] = msgspec.field(default_factory=dict)


class ToolInputError(ValueError):
    """The tool's input is invalid; the message says what to change."""


class Tool(Protocol):
    """A tool offered to the model.

    ``access`` tells the approval layer what the call does; ``paths(input)`` lists the
    paths a call touches (for approval rules). ``run`` never raises for a bad input or a
    failed command: it returns a ``ToolOutput`` with ``is_error=True`` and a one-line
    message that says what to do.
    """

    name: str
    access: Access
    spec: ToolSpec

    def paths(self, input: dict[str, Any]) -> Sequence[str]: ...

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput: ...


ToolFactory = Callable[[], Tool]
