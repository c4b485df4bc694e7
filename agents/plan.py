"""Plan mode (issue 14): the plan document, the ``propose_plan`` tool, the planning
profile's exceptions, and a plan's state and progress as folds over the session's events.

While a session plans, its main agent runs under the ``plan`` profile (``approval.py``):
it reads, searches and runs commands with the workspace mounted read-only in the sandbox,
and three layers keep it from changing anything but the plan document:

- the approval layer: ``plan_verdict`` (through ``permissions.Policy.decide``) refuses
  every write but one to the plan document, fan-out and MCP tools;
- the tools: ``write_file``/``edit_file`` refuse any other path while
  ``ToolContext.plan_document`` is set (``tools.paths.writable_path``), and ``bash`` will
  not run a command under a read-only profile without a sandbox;
- the sandbox: the workspace is bound read-only (bubblewrap ``--ro-bind``), /tmp is private.

The plan document lives outside the workspace, under the state directory
(``plans/<session>.md``), so planning leaves the workspace byte for byte as it was. The
model ends planning with ``propose_plan``; the loop then logs ``plan_proposed`` and stops,
and the daemon asks for approval (``daemon/plans.py``).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .core.conversation import ToolSpec
from .core.events import (
    AnyEvent,
    ApprovalModeChanged,
    FileEdited,
    GrillRound,
    PlanApproved,
    PlanProposed,
    PlanStarted,
    ToolFinished,
    ToolStarted,
    UserMessage,
)
from .tools.base import ToolContext, ToolOutput

__all__ = [
    "PLAN_INSTRUCTIONS",
    "PLAN_TOOL",
    "SECTIONS",
    "PlanProgress",
    "ProposePlanTool",
    "missing_sections",
    "parse_plan",
    "plan_sha256",
    "plan_verdict",
    "read_plan_document",
    "render_plan",
    "section_items",
    "write_plan_document",
]

PLAN_TOOL = "propose_plan"

# (input key, heading, what the section holds): the fixed sections, in order.
SECTIONS: tuple[tuple[str, str, str], ...] = (
    ("context", "Context", "why the change is needed: the problem and what is known about it"),
    ("approach", "Approach", "the approach, as numbered steps"),
    ("files_to_change", "Files to change", "the files to change, one per item, with what changes"),
    ("code_to_reuse", "Code to reuse", "existing functions, modules or patterns to reuse"),
    ("risks", "Risks", "what could go wrong, and how each risk is handled"),
    ("verification", "Verification", "the commands that show it works, one per item"),
)
_LISTS = {"files_to_change", "code_to_reuse", "risks", "verification"}

PLAN_INSTRUCTIONS = """[plan mode] You are planning, not changing anything yet. You may read, search and run \
commands to learn (the workspace is mounted read-only; /tmp is private and writable). Writes to the \
workspace, fan-out and MCP tools are refused. When you know enough, end planning by calling \
`propose_plan` with every section: context (why), approach (numbered steps), files_to_change, \
code_to_reuse, risks, verification (commands to run). You may also draft the plan document at \
{path} with write_file/edit_file and call `propose_plan` with no input. The person then approves \
the plan, edits it, or asks for more planning."""


def plan_sha256(text: str) -> str:
    """The SHA-256 hex digest of a plan's UTF-8 text (what ``plan_proposed``/``plan_approved`` name)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _as_items(value: Any) -> list[str]:
    if isinstance(value, str):
        return [line.strip().removeprefix("- ").strip() for line in value.splitlines() if line.strip()]
    if isinstance(value, Sequence):
        return [str(v).strip() for v in value if str(v).strip()]
    return []


def render_plan(sections: Mapping[str, Any], title: str = "Plan") -> str:
    """The plan document (Markdown) from its sections.

    Args:
        sections: the section keys of ``SECTIONS`` to text (``context``, ``approach``) or
            to a list of items (the others; a string is split into lines).
        title: the document's first heading.

    Returns:
        ``# TITLE`` then one ``## HEADING`` per section, in the fixed order; list sections
        as ``- item`` lines, verification commands in backquotes.
    """
    out = [f"# {title}", ""]
    for key, heading, _ in SECTIONS:
        out.append(f"## {heading}")
        out.append("")
        if key in _LISTS:
            items = _as_items(sections.get(key))
            if key == "verification":
                items = [i if i.startswith("`") else f"`{i}`" for i in items]
            out.extend(f"- {item}" for item in items) if items else out.append("- (none)")
        else:
            out.append(str(sections.get(key) or "").strip() or "(none)")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


_HEADING = re.compile(r"^##\s+(.+?)\s*#*\s*$")


def parse_plan(text: str) -> dict[str, str]:
    """The sections of a plan document, by key (``SECTIONS``), as their text.

    A section is found by its ``## HEADING`` (case and surrounding spaces ignored); another
    ``## `` heading (``## Decisions`` of a grill) ends it; deeper headings stay inside it.
    """
    by_heading = {heading.lower(): key for key, heading, _ in SECTIONS}
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        m = _HEADING.match(line)
        if m:
            key = by_heading.get(m.group(1).strip().lower())
            current = found.setdefault(key, []) if key is not None else None
            continue
        if current is not None:
            current.append(line)
    return {k: "\n".join(v).strip() for k, v in found.items()}


def missing_sections(text: str) -> list[str]:
    """The headings of the fixed sections ``text`` lacks or leaves empty."""
    parsed = parse_plan(text)
    return [heading for key, heading, _ in SECTIONS if not parsed.get(key, "").strip()]


def section_items(text: str, key: str) -> list[str]:
    """The ``- item`` lines of one section of a plan document (backquotes of a command removed)."""
    items = []
    for line in parse_plan(text).get(key, "").splitlines():
        line = line.strip()
        if line.startswith(("- ", "* ")):
            item = line[2:].strip()
            if item and item != "(none)":
                items.append(item[1:-1] if len(item) > 1 and item[0] == item[-1] == "`" else item)
    return items


# --- the tool --------------------------------------------------------------------------


class ProposePlanTool:
    """``propose_plan``: ends planning with the plan (written to the plan document).

    Given its sections it renders the document (``render_plan``) and writes it; given
    none, it takes the document as the model drafted it, which must hold every section.
    Outside plan mode (no ``ctx.plan_document``) it refuses. Its ``access`` is ``read``:
    it changes nothing in the workspace, and the plan's approval is asked by the daemon.
    """

    name = PLAN_TOOL
    access = "read"

    def __init__(self) -> None:
        props: dict[str, Any] = {}
        for key, _, what in SECTIONS:
            if key in _LISTS:
                props[key] = {"type": "array", "items": {"type": "string"}, "description": what.capitalize() + "."}
            else:
                props[key] = {"type": "string", "description": what.capitalize() + "."}
        self.spec = ToolSpec(
            name=self.name,
            description=(
                "End planning: propose the plan for the person's approval. Give every section "
                "(context, approach, files_to_change, code_to_reuse, risks, verification), or none "
                "to propose the plan document as you wrote it. Only available in plan mode."
            ),
            input_schema={"type": "object", "properties": props},
        )

    def paths(self, input: dict[str, Any]) -> Sequence[str]:
        return []

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        if not ctx.plan_document:
            return ToolOutput("not in plan mode: there is nothing to propose (the person starts planning with /plan)",
                              is_error=True)
        path = Path(ctx.plan_document)
        given = {k: v for k, v in (input or {}).items() if v not in (None, "", [])}
        if given:
            missing = [heading for key, heading, _ in SECTIONS if key not in given]
            if missing:
                return ToolOutput(f"the plan lacks these sections: {', '.join(missing)}; give every section",
                                  is_error=True)
            text = render_plan(given)
            write_plan_document(path, text)
        else:
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                return ToolOutput(f"the plan document {path} has not been written; give the sections to propose_plan",
                                  is_error=True)
            missing = missing_sections(text)
            if missing:
                return ToolOutput(f"the plan document {path} lacks these sections: {', '.join(missing)} "
                                  "(each a '## HEADING')", is_error=True)
        return ToolOutput(f"Plan proposed (sha256 {plan_sha256(text)[:12]}, {path}). Planning is over: stop here "
                          "and wait; the person will approve it, edit it, or ask for more planning.")


def write_plan_document(path: Path | str, text: str) -> None:
    """Write the plan document (its folder 0700, the file 0600: it lives in the state directory)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def read_plan_document(path: str) -> str:
    """The plan document's text ('' when it cannot be read)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


# --- the profile's exceptions ----------------------------------------------------------


def plan_verdict(tool: str, access: str, paths: Sequence[tuple[str, str | None]],
                 plan_document: str) -> tuple[str, str] | None:
    """What the ``plan`` profile decides about a call before any rule: writes only to the
    plan document, no fan-out, no MCP tools (a server acts outside the sandbox).

    Args:
        tool: the tool's name; access: its access (read/write/execute).
        paths: the call's ``(absolute path, relative path)`` pairs, symlinks resolved.
        plan_document: the plan document's absolute path.

    Returns:
        ``(decision, reason)``: ``allow`` for a write to the plan document, ``deny`` with
        the reason for what the profile forbids; ``None`` when it has nothing to add
        (reads, and commands: they run with the workspace read-only).
    """
    if tool in ("write_file", "edit_file"):
        target = os.path.realpath(plan_document) if plan_document else ""
        if target and paths and all(a == target for a, _ in paths):
            return "allow", "the plan document"
        return "deny", f"plan mode: only the plan document ({plan_document}) may be written"
    if tool == "spawn_workers":
        return "deny", "plan mode: fan-out is off while planning"
    if tool.startswith("mcp__"):
        return "deny", "plan mode: MCP tools act outside the sandbox"
    if access == "write":
        return "deny", "plan mode: nothing may be changed while planning"
    return None


# --- progress ----------------------------------------------------------------------------


@dataclass
class PlanProgress:
    """An approved plan's progress: a fold over the events after its approval.

    ``files`` maps each file of "Files to change" to whether it was edited since; ``checks``
    maps each verification command to ``None`` (not run yet) or its last exit status.
    """

    text: str
    files: dict[str, bool] = field(default_factory=dict)
    checks: dict[str, int | None] = field(default_factory=dict)
    _commands: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, text: str) -> PlanProgress:
        files = {_file_of(item): False for item in section_items(text, "files_to_change")}
        files.pop("", None)
        return cls(text, files, {c: None for c in section_items(text, "verification")})

    def apply(self, event: AnyEvent) -> None:
        """Fold one event of the session after the approval (edits and commands matter)."""
        if isinstance(event, FileEdited):
            for name in self.files:
                if event.path == name or event.path.endswith("/" + name):
                    self.files[name] = True
        elif isinstance(event, ToolStarted) and event.tool == "bash":
            command = str(event.input.get("command", "")).strip()
            if command in self.checks:
                self._commands[event.call_id] = command
        elif isinstance(event, ToolFinished) and event.call_id in self._commands:
            status = event.exit_status
            self.checks[self._commands.pop(event.call_id)] = status if isinstance(status, int) else 1

    def summary(self) -> str:
        """One line: ``files 1/2 · checks 0/1 passed``."""
        edited = sum(self.files.values())
        passed = sum(1 for s in self.checks.values() if s == 0)
        return f"files {edited}/{len(self.files)} · checks {passed}/{len(self.checks)} passed"


def _file_of(item: str) -> str:
    """The path an item of "Files to change" names: its first word, backquotes removed."""
    word = item.strip().split(" ", 1)[0].strip("`*:,;")
    return word


# --- the session's plan: a fold over its events -----------------------------------------


@dataclass
class PlanState:
    """Where a session's plan stands, folded from its events (``plan_started``,
    ``plan_proposed``, ``plan_approved``, and ``user_message``: feedback while planning).

    Attributes:
        planning: the main agent is in plan mode (from ``plan_started`` to ``plan_approved``).
        only: ``musec run --plan``: the plan is the run's result; nothing is carried out.
        path: the plan document.
        proposed: the latest proposed plan's text while it waits for an answer ('' if none).
        approved: the approved plan's text ('' until one is); ``approved_sha256``, ``approved_by``.
        approval: the approval mode the agent works in after the approval.
        proposals: plans proposed in all (they name the approval calls: ``plan-N``).
        grill_rounds: ``grill_round`` events in all (they name the grill's questions: ``grill-N``).
    """

    planning: bool = False
    only: bool = False
    path: str = ""
    proposed: str = ""
    approved: str = ""
    approved_sha256: str = ""
    approved_by: str = ""
    approval: str = ""
    proposals: int = 0
    grill_rounds: int = 0

    def apply(self, event: AnyEvent) -> None:
        """Fold one event of the session (the plan's events, and the main agent's messages)."""
        if isinstance(event, GrillRound):
            self.grill_rounds += 1
        if event.agent != "main":
            return
        if isinstance(event, PlanStarted):
            self.planning, self.only, self.path, self.proposed = True, event.only, event.path, ""
        elif isinstance(event, PlanProposed):
            self.proposed = event.text
            self.proposals += 1
        elif isinstance(event, PlanApproved):
            self.planning, self.proposed = False, ""
            self.approved, self.approved_sha256 = event.text, event.sha256
            self.approved_by, self.approval = event.by, event.approval
        elif isinstance(event, UserMessage) and self.planning:
            self.proposed = ""  # feedback: the planning goes on
        elif isinstance(event, ApprovalModeChanged) and self.planning and event.previous == "plan":
            self.planning, self.proposed = False, ""  # /approval MODE left plan mode: the plan is dropped

    @property
    def awaiting_approval(self) -> bool:
        """A proposed plan waits for the person's answer."""
        return self.planning and bool(self.proposed)


def enter_plan_mode(agent: Any, path: str) -> None:
    """Put ``agent`` (``loop.Agent``) under the ``plan`` profile with ``path`` as its plan
    document: the approval mode, the tools' plan document, the sandbox's read-only
    workspace, and caches sent to the private /tmp."""
    import msgspec

    agent.approval_mode = "plan"
    agent.policy.plan_document = path
    agent.ctx.plan_document = path
    agent.ctx.sandbox = msgspec.structs.replace(agent.ctx.sandbox, profile="read-only")
    agent.ctx.env = {**agent.ctx.env, "PYTHONDONTWRITEBYTECODE": "1", "XDG_CACHE_HOME": "/tmp/.cache"}


def leave_plan_mode(agent: Any, approval: str) -> None:
    """Take ``agent`` out of plan mode into the approval mode ``approval``."""
    import msgspec

    from .approval import sandbox_profile

    agent.approval_mode = approval
    agent.policy.plan_document = ""
    agent.ctx.plan_document = ""
    agent.ctx.sandbox = msgspec.structs.replace(agent.ctx.sandbox, profile=sandbox_profile(approval))


def approved_message(event: PlanApproved) -> str:
    """The text a ``plan_approved`` event gives the agent (a fold input: deterministic).
    It holds the approved plan whole: it is what compaction keeps verbatim (pinned)."""
    text, sha, mode = event.text, event.sha256[:12], event.approval
    if event.action == "fresh":
        return ("[a fresh start: this is the plan the person approved; carry it out now, then run its verification "
                f"commands (approval mode {mode})]\n\n{text}")
    head = (f"[the person approved the plan (sha256 {sha}); the workspace is writable now (approval mode {mode}): "
            "carry out the plan, then run its verification commands]")
    if event.action == "edit":
        head += "\nThe person edited the plan before approving it."
    return f"{head}\nThe approved plan:\n\n{text}"


def planning_message(event: PlanStarted) -> str:
    """The text a ``plan_started`` event gives the agent."""
    return PLAN_INSTRUCTIONS.format(path=event.path)
