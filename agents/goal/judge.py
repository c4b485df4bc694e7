"""The pieces of a judgment: the workspace's state, the check command, the verdict.

``workspace_state`` hashes what git sees of the workspace (HEAD, and every changed or
untracked file with its bytes), so "no change for N turns" is a comparison of hashes, and
describes it (status and diff) for the evaluator. ``run_check`` runs the goal's check in
the sandbox the agent's commands use (the ``bash`` tool's). ``parse_verdict`` reads the
evaluator's JSON answer; ``blocker_of_check`` names a failing check's output so that the
same failure is recognised again (digits, such as timings, ignored).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

__all__ = ["CHECK_OUTPUT_CHARS", "Verdict", "WorkspaceState", "blocker_of_check", "parse_verdict", "run_check",
           "workspace_state"]

#: The end of a check's output kept in the log and shown to the agent and the evaluator.
CHECK_OUTPUT_CHARS = 4000
#: The longest diff shown to the evaluator (its head).
DIFF_CHARS = 20_000
CHECK_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class WorkspaceState:
    """``digest``: a hash of the workspace as git sees it ("" outside a repository);
    ``text``: its status and diff against HEAD, for the evaluator."""

    digest: str
    text: str


def workspace_state(workspace: Path) -> WorkspaceState:
    """The workspace's state: HEAD, and each changed or untracked (not ignored) file."""
    import pygit2

    found = pygit2.discover_repository(str(workspace))
    if not found:
        return WorkspaceState("", "(not a git repository: no status or diff)")
    try:
        repo = pygit2.Repository(found)
        head = "" if repo.head_is_unborn else str(repo.head.target)
        status = repo.status(untracked_files="all")
    except pygit2.GitError as exc:
        return WorkspaceState("", f"(git could not read the repository: {exc})")
    root = Path(repo.workdir or workspace)
    h = hashlib.sha256(head.encode())
    lines = []
    for path, flags in sorted(status.items()):
        if flags & pygit2.GIT_STATUS_IGNORED:
            continue
        file = root / path
        data = file.read_bytes() if file.is_file() and not file.is_symlink() else b""
        h.update(f"\0{path}\0{flags}\0{hashlib.sha256(data).hexdigest()}".encode())
        lines.append(f"{_flag(flags)} {path}")
    diff = ""
    if head:
        try:
            diff = repo.diff(repo.head.peel(pygit2.Commit).tree, None).patch or ""
        except pygit2.GitError:  # pragma: no cover - a broken object database
            diff = ""
    if len(diff) > DIFF_CHARS:
        diff = diff[:DIFF_CHARS] + f"\n[... the diff goes on: {len(diff) - DIFF_CHARS} more characters]"
    text = f"HEAD {head or '(no commit)'}\n" + ("git status:\n" + "\n".join(lines) if lines else "no changes against HEAD")
    if diff:
        text += "\n\ndiff against HEAD (tracked files):\n" + diff
    return WorkspaceState(h.hexdigest(), text)


def _flag(flags: int) -> str:
    import pygit2

    if flags & pygit2.GIT_STATUS_WT_NEW:
        return "??"
    if flags & (pygit2.GIT_STATUS_WT_DELETED | pygit2.GIT_STATUS_INDEX_DELETED):
        return " D"
    return " M"


async def run_check(command: str, ctx: Any) -> tuple[int | None, str]:
    """Run the goal's check command like the agent's ``bash`` calls (its sandbox, its
    workspace), with no bytecode written; return its exit status (``None`` when it could
    not run) and the end of its output."""
    from ..tools.bash import BashTool

    env = {**ctx.env, "PYTHONDONTWRITEBYTECODE": "1"}
    run_ctx = msgspec.structs.replace(ctx, env=env, max_output_bytes=CHECK_OUTPUT_CHARS * 2)
    output = await BashTool().run({"command": command, "timeout_s": CHECK_TIMEOUT_S}, run_ctx)
    text = output.content
    if len(text) > CHECK_OUTPUT_CHARS:
        text = "[...]\n" + text[-CHECK_OUTPUT_CHARS:]
    return output.exit_status, text


def blocker_of_check(command: str, exit_status: int | None, output: str) -> str:
    """A name for a failing check: the same failure (up to digits) gets the same name."""
    norm = re.sub(r"\d+", "N", " ".join(output.split()))
    digest = hashlib.sha256((command + "\0" + norm).encode()).hexdigest()[:16]
    return f"check {exit_status}:{digest}"


@dataclass(frozen=True)
class Verdict:
    """The evaluator's judgment: ``verdict`` is ``met``, ``not_met`` or ``impossible``."""

    verdict: str
    reason: str
    blocker: str = ""
    summary: str = ""


_VERDICTS = ("met", "not_met", "impossible")


def parse_verdict(text: str) -> Verdict:
    """The verdict in the evaluator's answer: its last JSON object with a known
    ``verdict``. An answer without one is ``not_met`` (a goal is never met by default)."""
    for match in reversed(list(re.finditer(r"\{", text))):
        try:
            data, _ = json.JSONDecoder().raw_decode(text[match.start():])
        except ValueError:
            continue
        if isinstance(data, dict) and str(data.get("verdict", "")).strip().lower().replace(" ", "_") in _VERDICTS:
            verdict = str(data["verdict"]).strip().lower().replace(" ", "_")
            blocker = " ".join(str(data.get("blocker") or "").lower().split())
            return Verdict(verdict, str(data.get("reason") or "").strip(), blocker, str(data.get("summary") or "").strip())
    return Verdict("not_met", "the evaluator's answer held no verdict, so the goal is not confirmed as met; "
                   "make sure the condition holds and say how it can be seen", "no verdict")
