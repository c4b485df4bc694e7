"""Workspace trust (DESIGN §11): a project's own config, hooks, skills, commands and MCP
servers apply only once the person trusts what they hold.

What trust covers (the *manifest*): ``.musec/config.toml`` (project config: permission
rules and hooks), every file under ``.musec/hooks/`` (commands musec will run at lifecycle
points), every file under ``.musec/skills/`` and ``.agents/skills/`` (``SKILL.md`` and what
it brings), every file under ``.musec/commands/`` (custom slash commands) and ``.mcp.json``
(MCP servers musec would start). Trust is recorded in
``<state dir>/trust.json`` (0600) against a sha256 over the manifest (paths, executable
bits, symlink targets, contents); when any of it changes the workspace is untrusted again
until the person trusts the new content. A workspace listed in the person's
``trusted_workspaces`` is trusted whatever it holds. A run is never trusted implicitly:
headless runs need ``--trust``, a matching record or that config entry. What a session
runs is what was trusted: callers keep the manifest's hashes (``TrustStatus.items``) and
check a file against them before running it (``TrustStatus.unchanged``).

Trust covers exactly the files of the manifest, nothing they name: a script elsewhere in
the repository that a hook or an ``.mcp.json`` server runs (``python3 scripts/x.py``) is not
hashed, so a change to it asks nothing again. Reading command lines to find the files they
run could never be exact (interpreters, imports, ``-m`` modules, shell expansion), so the
prompt says so plainly instead, and what those commands run is confined the same way
whatever it holds: project hooks and project MCP servers always run in the session's
sandbox (``agents.hooks``, ``agents.mcp.server``), like the agent's own ``bash`` calls.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Item", "TrustStatus", "TrustStore", "check_trust", "content_hash", "project_items", "trust_covers"]

TRUST_FILE = "trust.json"
MAX_ITEMS = 2000


@dataclass(frozen=True)
class Item:
    """One file trust covers: ``path`` relative to the workspace; ``kind`` is ``config``,
    ``hook`` or ``skill``; ``executable`` when it can run as a program (a hook always
    can, through its interpreter); ``link`` the symlink's target, if it is one."""

    path: str
    kind: str
    sha256: str
    executable: bool = False
    link: str = ""

    def describe(self) -> str:
        what = {"config": "project config: permission rules and hooks", "hook": "hook: runs as a command",
                "skill": "skill: instructions and files for the model",
                "command": "custom command: a prompt for /NAME", "mcp": "MCP servers: started as commands, in the sandbox"}[self.kind]
        extra = " (executable)" if self.executable and self.kind != "hook" else ""
        link = f" -> {_shown(self.link)}" if self.link else ""
        return f"{_shown(self.path)}{link} ({what}){extra}"


def _shown(name: str) -> str:
    """A file name as one line of plain text (control characters escaped)."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in name)


def _file_item(workspace: Path, path: Path, kind: str) -> Item:
    rel = path.relative_to(workspace).as_posix()
    link = os.readlink(path) if path.is_symlink() else ""
    digest = hashlib.sha256()
    executable = False
    try:
        st = path.stat()
        executable = bool(st.st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
        if stat.S_ISREG(st.st_mode):
            with path.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
        else:
            digest.update(b"<not a regular file>")
    except OSError as exc:
        digest.update(f"<unreadable: {exc.strerror}>".encode())
    return Item(rel, kind, digest.hexdigest(), executable or kind == "hook", link)


def _walk(workspace: Path, root: Path, kind: str, out: list[Item]) -> None:
    if root.is_symlink() or not root.is_dir():
        if root.is_symlink() or root.exists():
            out.append(_file_item(workspace, root, kind))
        return
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        base = Path(dirpath)
        # Symlinked directories are not walked into: each is an item of its own.
        names = sorted([*filenames, *(d for d in dirnames if (base / d).is_symlink())])
        for name in names:
            out.append(_file_item(workspace, base / name, kind))
            if len(out) > MAX_ITEMS:
                return


COVERED_FILES = (".musec/config.toml", ".mcp.json")
COVERED_FOLDERS = (".musec/hooks", ".musec/skills", ".musec/commands", ".agents/skills")


def trust_covers(rel: str) -> bool:
    """Whether the path ``rel`` (relative to the workspace, POSIX) is one trust covers, or a
    folder holding some (``.musec``): what an agent writes there would run, or be trusted
    next time, as the person's (the tools ask first even in ``auto``)."""
    rel = rel.strip("/")
    if rel in (".", ""):
        return False
    return any(rel == c or c.startswith(rel + "/") for c in COVERED_FILES + COVERED_FOLDERS) or any(
        rel.startswith(c + "/") for c in COVERED_FOLDERS)


def project_items(workspace: Path) -> list[Item]:
    """What trust covers in ``workspace``, sorted by path; ``[]`` when there is nothing."""
    musec = workspace / ".musec"
    out: list[Item] = []
    for single, kind in ((musec / "config.toml", "config"), (workspace / ".mcp.json", "mcp")):
        if single.exists() or single.is_symlink():
            out.append(_file_item(workspace, single, kind))
    if musec.is_dir():
        _walk(workspace, musec / "hooks", "hook", out)
        _walk(workspace, musec / "skills", "skill", out)
        _walk(workspace, musec / "commands", "command", out)
    if (workspace / ".agents").is_dir():
        _walk(workspace, workspace / ".agents" / "skills", "skill", out)
    return sorted(out, key=lambda i: i.path)


def content_hash(items: list[Item]) -> str:
    """sha256 over the manifest; ``""`` when there is nothing to trust."""
    if not items:
        return ""
    h = hashlib.sha256(b"musec-trust-v1\n")
    for i in items:
        h.update(json.dumps([i.path, i.kind, i.sha256, i.executable, i.link]).encode() + b"\n")
    return h.hexdigest()


class TrustStore:
    """``<state dir>/trust.json``: ``{"workspaces": {path: {"sha256", "trusted_at", "files"}}}``."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / TRUST_FILE

    def load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text("utf-8"))
        except FileNotFoundError:
            return {"version": 1, "workspaces": {}}
        except (OSError, ValueError):
            # A damaged record trusts nothing; the next trust rewrites it.
            return {"version": 1, "workspaces": {}}
        if not isinstance(data, dict) or not isinstance(data.get("workspaces"), dict):
            return {"version": 1, "workspaces": {}}
        return data

    def trusted_hash(self, workspace: Path) -> str:
        entry = self.load()["workspaces"].get(str(workspace))
        return entry.get("sha256", "") if isinstance(entry, dict) else ""

    def trusted_contents(self, workspace: Path) -> dict[str, str] | None:
        """The text of each file as it was trusted (``None``: a record from before musec
        kept it, or none); a file too big or not text is ``""`` there (``_trusted_text``)."""
        entry = self.load()["workspaces"].get(str(workspace))
        contents = entry.get("contents") if isinstance(entry, dict) else None
        if not isinstance(contents, dict):
            return None
        return {str(k): v for k, v in contents.items() if isinstance(v, str)}

    def record(self, workspace: Path, sha256: str, items: list[Item]) -> None:
        """Trust ``workspace`` as it is now (atomic write, 0600), keeping each file's text,
        so that the next question can show what changed since (``TrustStatus.changes``)."""
        data = self.load()
        data["workspaces"][str(workspace)] = {
            "sha256": sha256, "trusted_at": time.time(), "files": [i.path for i in items],
            "contents": {i.path: _trusted_text(workspace / i.path, i) for i in items},
        }
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".trust.", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


@dataclass(frozen=True)
class TrustStatus:
    """The trust check's result.

    ``state``: ``none`` (nothing to trust), ``trusted``, ``untrusted`` (never trusted)
    or ``changed`` (trusted once, changed since). ``by``: ``--trust``, ``record`` or
    ``config`` when trusted. ``items``: the manifest. ``changes``: when ``changed``, a
    unified diff (lines) of the files against what was trusted.
    """

    workspace: str
    state: str
    sha256: str = ""
    by: str = ""
    items: list[Item] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)

    @property
    def trusted(self) -> bool:
        return self.state == "trusted"

    def unchanged(self, path: Path) -> bool:
        """Whether ``path`` (a file of the manifest) still holds the content trusted: what
        runs must be what the person trusted, not what the file says now."""
        try:
            rel = Path(os.path.abspath(path)).relative_to(Path(self.workspace)).as_posix()
        except ValueError:
            return False
        for item in self.items:
            if item.path == rel:
                return _file_item(Path(self.workspace), Path(self.workspace) / rel, item.kind) == item
        return False

    def still_holds(self, kinds: frozenset[str] = frozenset({"config", "hook"})) -> bool:
        """Whether the workspace is trusted and its files of ``kinds`` are exactly those
        trusted (none added, removed or changed): checked before each project hook runs."""
        if not self.trusted:
            return False
        if self.by == "config":  # the person trusts this workspace whatever it holds
            return True
        now = [i for i in project_items(Path(self.workspace)) if i.kind in kinds]
        return now == [i for i in self.items if i.kind in kinds]

    @property
    def needs_trust(self) -> bool:
        return self.state in ("untrusted", "changed")

    def prompt(self) -> str:
        """One line for the person: what is untrusted and everything that would apply."""
        why = "changed since you trusted it" if self.state == "changed" else "not trusted"
        listing = "; ".join(i.describe() for i in self.items)
        text = (f"workspace {self.workspace} is {why}; trusting it applies: {listing}. Trust covers these files "
                f"only, not the scripts they run from elsewhere in the repository (those run in the sandbox, and "
                f"can change without a new question)")
        if self.changes:  # what changed since the person trusted it (an agent may have written it: s6 G20)
            text += "\nWhat changed since you trusted it:\n" + "\n".join(self.changes)
        return text

    def note(self) -> str:
        """One line for a headless run whose project files are ignored ("" when none are)."""
        if not self.needs_trust:
            return ""
        why = "changed since it was trusted" if self.state == "changed" else "not trusted"
        files = ", ".join(i.path for i in self.items)
        return f"workspace {why}: ignoring {files}; pass --trust to apply them"

    def fields(self) -> dict[str, Any]:
        """For the ``session_started`` event."""
        return {"state": self.state, "by": self.by, "sha256": self.sha256,
                "items": [{"path": i.path, "kind": i.kind, "executable": i.executable, "sha256": i.sha256}
                          for i in self.items]}


MAX_KEPT_BYTES = 256 * 1024
"""A trusted file larger than this is kept by its hash only (its change shown without a diff)."""


def _trusted_text(path: Path, item: Item) -> str:
    """What is kept of a trusted file: its text, a symlink's target, or ``""`` (too big,
    not text, unreadable)."""
    if item.link:
        return f"-> {item.link}\n"
    try:
        data = path.read_bytes()[: MAX_KEPT_BYTES + 1]
    except OSError:
        return ""
    if len(data) > MAX_KEPT_BYTES or b"\0" in data:
        return ""
    return data.decode("utf-8", "replace")


MAX_DIFF_LINES = 200


def _changes(workspace: Path, items: list[Item], trusted: dict[str, str] | None) -> list[str]:
    """A unified diff of each file trust covers against its trusted text, control
    characters escaped (a file's bytes must not drive the terminal); at most
    ``MAX_DIFF_LINES`` lines."""
    import difflib

    if trusted is None:
        return ["(the files trusted before were not kept, so what changed cannot be shown; read them before trusting)"]
    now = {i.path: _trusted_text(workspace / i.path, i) for i in items}
    out: list[str] = []
    for path in sorted(set(now) | set(trusted)):
        before, after = trusted.get(path), now.get(path)
        if before == after:
            continue
        if before == "" or after == "":
            out.append(f"{_shown(path)}: changed (too big or not text to show)")
            continue
        out += difflib.unified_diff((before or "").splitlines(), (after or "").splitlines(),
                                    "/dev/null" if before is None else f"a/{path}",
                                    "/dev/null" if after is None else f"b/{path}", lineterm="")
    shown = ["".join(c if c.isprintable() or c == "\t" else f"\\x{ord(c):02x}" for c in line) for line in out]
    if len(shown) > MAX_DIFF_LINES:
        shown = shown[:MAX_DIFF_LINES] + [f"[{len(shown) - MAX_DIFF_LINES} more lines of changes; read the files]"]
    return shown


def check_trust(workspace: Path, state_dir: Path, *, trust_now: bool = False, trusted_by_config: bool = False) -> TrustStatus:
    """Whether ``workspace``'s project files apply; ``trust_now`` (the person said so, e.g.
    ``--trust``) records trust for the content as it is now.

    Raises:
        OSError: ``trust_now`` and the record cannot be written.
    """
    workspace = workspace.resolve()
    items = project_items(workspace)
    digest = content_hash(items)
    if not items:
        return TrustStatus(str(workspace), "none")
    if trust_now:
        TrustStore(state_dir).record(workspace, digest, items)
        return TrustStatus(str(workspace), "trusted", digest, "--trust", items)
    if trusted_by_config:
        return TrustStatus(str(workspace), "trusted", digest, "config", items)
    store = TrustStore(state_dir)
    recorded = store.trusted_hash(workspace)
    if recorded == digest:
        return TrustStatus(str(workspace), "trusted", digest, "record", items)
    if not recorded:
        return TrustStatus(str(workspace), "untrusted", digest, "", items)
    return TrustStatus(str(workspace), "changed", digest, "", items,
                       _changes(workspace, items, store.trusted_contents(workspace)))
