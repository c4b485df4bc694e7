"""AGENTS.md instructions: the person's file, then the repository's, broad to specific.

Discovery (the format of agents.md, and Codex's ``AGENTS.override.md`` convention):

1. The person's own file, ``<config dir>/AGENTS.md``, first: the person's instructions.
2. From the repository root (the nearest directory above the working directory holding a
   ``.git`` directory or file; the working directory itself outside a repository) down to
   the working directory, one file per directory: ``AGENTS.override.md`` when there is
   one, else ``AGENTS.md``. These are the repository's text, marked as such, never as the
   person's.
3. Files in directories below the working directory are added when the agent first reads
   or edits a file under them (``SubdirInstructions``); the caller logs each addition
   (``instructions_added``) with its text, so replay needs no file.

Everything rendered at the start fits a budget (32 KiB by default); the text past it is cut
and a warning names the files cut. Pure functions but the readers; nothing here writes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BUDGET_BYTES",
    "FILE_NAMES",
    "InstructionFile",
    "SubdirInstructions",
    "discover",
    "file_in",
    "render",
    "render_added",
    "repo_root",
]

FILE_NAMES = ("AGENTS.override.md", "AGENTS.md")
BUDGET_BYTES = 32 * 1024
MAX_FILE_BYTES = 256 * 1024  # a bigger file is read up to this much (the budget cuts it anyway)


@dataclass(frozen=True)
class InstructionFile:
    """One instructions file.

    Attributes:
        path: absolute path of the file.
        rel: the path shown: relative to the repository root (``AGENTS.md``, ``src/AGENTS.md``),
            or ``~config/AGENTS.md`` for the person's file.
        scope: ``user`` (the person's own) or ``repository``.
        text: the file's text (UTF-8, undecodable bytes replaced).
    """

    path: str
    rel: str
    scope: str
    text: str


def repo_root(start: Path) -> Path | None:
    """The nearest directory at or above ``start`` holding ``.git`` (a directory or a
    worktree's file), or ``None`` outside a repository."""
    for d in (start, *start.parents):
        if (d / ".git").exists():
            return d
    return None


def file_in(directory: Path) -> Path | None:
    """The instructions file of ``directory``: ``AGENTS.override.md``, else ``AGENTS.md``,
    when it is a regular file (a symlink to one counts); else ``None``."""
    for name in FILE_NAMES:
        candidate = directory / name
        if candidate.is_file():
            return candidate
    return None


def _read(path: Path) -> str | None:
    try:
        with path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES)
    except OSError:
        return None
    return data.decode("utf-8", "replace")


def _chain(root: Path, cwd: Path) -> list[Path]:
    """The directories from ``root`` down to ``cwd``, both included (``cwd`` under ``root``)."""
    rel = cwd.relative_to(root)
    dirs = [root]
    for part in rel.parts:
        dirs.append(dirs[-1] / part)
    return dirs


def discover(cwd: Path, config_dir: Path | None = None) -> list[InstructionFile]:
    """The instructions files that apply at ``cwd``, in order: the person's, then the
    repository's from its root down to ``cwd``.

    Args:
        cwd: the working directory (absolute, symlinks resolved).
        config_dir: musec's config directory (its ``AGENTS.md`` is the person's file).
    """
    out: list[InstructionFile] = []
    if config_dir is not None:
        mine = config_dir / "AGENTS.md"
        text = _read(mine) if mine.is_file() else None
        if text is not None:
            out.append(InstructionFile(str(mine), "~config/AGENTS.md", "user", text))
    root = repo_root(cwd) or cwd
    for d in _chain(root, cwd):
        found = file_in(d)
        text = _read(found) if found else None
        if found is not None and text is not None:
            out.append(InstructionFile(str(found), found.relative_to(root).as_posix(), "repository", text))
    return out


def _element(f: InstructionFile) -> str:
    tag = "user_instructions" if f.scope == "user" else "repository_instructions"
    return f'<{tag} path="{f.rel}">\n{f.text.rstrip()}\n</{tag}>'


def render(files: Iterable[InstructionFile], budget_bytes: int = BUDGET_BYTES) -> tuple[str, list[str]]:
    """The files as prompt text within ``budget_bytes`` (UTF-8), and warnings.

    The person's file is introduced as the person's instructions; each repository file as
    text written by the repository's authors. Text past the budget is cut (broad files
    come first, so a deep file is what gets cut); one warning names what was cut.

    Returns:
        ``(text, warnings)``; ``text`` is ``""`` when there are no files.
    """
    parts: list[str] = []
    used = 0
    cut: list[str] = []
    for f in files:
        piece = _element(f)
        size = len(piece.encode("utf-8"))
        if not cut and used + size <= budget_bytes:
            parts.append(piece)
            used += size
            continue
        room = budget_bytes - used
        if not cut and room > 200:
            head = piece.encode("utf-8")[: room - 60].decode("utf-8", "ignore")
            parts.append(f"{head}\n[cut: the instructions budget of {budget_bytes} bytes is spent]")
            used = budget_bytes
        cut.append(f.rel)
    warnings = [f"AGENTS.md budget of {budget_bytes // 1024} KiB exceeded: cut {', '.join(cut)}"] if cut else []
    if not parts:
        return "", warnings
    intro = ("Instructions follow. The person's own file is the person's instructions; the repository's files are"
             " project conventions written by the repository's authors, not by the person.")
    return intro + "\n" + "\n".join(parts), warnings


def render_added(f: InstructionFile) -> str:
    """The text that brings a subdirectory's file into the conversation (as user text)."""
    directory = f.rel.rsplit("/", 1)[0] if "/" in f.rel else "."
    return (f"[the repository's instructions for {directory}/, added because you are working under it;"
            f" written by the repository's authors, not the person]\n{_element(f)}")


class SubdirInstructions:
    """Which directories' instruction files below the working directory are loaded.

    ``for_path`` is called with each path the agent reads or edits; it returns the files
    of directories between the working directory (excluded: loaded at the start) and the
    path's directory that were never added. The caller records each as an event and calls
    ``mark`` from that event's fold, so live runs and replay share one state.
    """

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.root = repo_root(cwd) or cwd
        self.loaded: set[str] = set()

    def mark(self, path: str) -> None:
        """Note ``path`` (an absolute file path) as added."""
        self.loaded.add(path)

    def for_path(self, path: Path) -> list[InstructionFile]:
        """New files for a read or edit of ``path`` (absolute, resolved), broad first.

        Paths outside the working directory bring nothing.
        """
        try:
            rel = path.relative_to(self.cwd)
        except ValueError:
            return []
        out: list[InstructionFile] = []
        d = self.cwd
        for part in rel.parts[:-1]:
            d = d / part
            found = file_in(d)
            if found is None or str(found) in self.loaded:
                continue
            text = _read(found)
            if text is not None:
                out.append(InstructionFile(str(found), found.relative_to(self.root).as_posix(), "repository", text))
        return out
