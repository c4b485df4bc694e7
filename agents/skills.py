"""Skills in the agentskills.io format: discovery, the catalog, and the ``skill`` tool.

A skill is a directory holding ``SKILL.md``: YAML front matter with ``name`` (1-64
characters: lowercase letters, digits and single hyphens, not at either end; equal to the
directory's name) and ``description`` (1-1024 characters), optionally ``allowed-tools``
(space-separated), ``disable-model-invocation`` (only the person invokes it, as
``/NAME``), ``license``, ``compatibility``, ``metadata``; then the body (instructions).
Beside it may be ``scripts/``, ``references/`` and ``assets/``; the model runs scripts with
``bash`` in the sandbox like any command. Source: https://agentskills.io/specification.

Scopes, in precedence order (the first of a name wins, so a repository cannot shadow the
person's skill): user (``<config dir>/skills/``, ``~/.agents/skills/``), then project
(``.musec/skills/``, ``.agents/skills/``) and only in a trusted workspace. Built-ins
(``/plan``, ``/grill``, ``/goal``) are listed with them but have no body here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .core.conversation import ToolSpec
from .frontmatter import FrontMatterError, split

__all__ = [
    "BUILTINS",
    "Skill",
    "SkillError",
    "SkillTool",
    "catalog",
    "catalog_budget_chars",
    "discover_skills",
    "load_skill",
    "skill_dirs",
]

NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_SKILL_BYTES = 256 * 1024
MAX_SKILLS = 200

BUILTINS: dict[str, str] = {
    "plan": "Plan mode: read-only; turns the task into a plan the person approves before any change.",
    "grill": "The critic questions the current approach round by round before work goes on.",
    "goal": "Work toward a goal with a success check until it passes or the budget is spent.",
}


class SkillError(ValueError):
    """A ``SKILL.md`` is malformed; the message names the file and what to fix."""


@dataclass(frozen=True)
class Skill:
    """One skill.

    Attributes:
        name: its name (``/NAME`` and the ``skill`` tool's input).
        description: what it does and when to use it (the catalog shows it).
        path: absolute path of ``SKILL.md`` (``""`` for a built-in).
        scope: ``user``, ``project`` or ``builtin``.
        body: the instructions after the front matter.
        allowed_tools: the tools the skill names in ``allowed-tools``.
        model_invocable: ``False`` when ``disable-model-invocation`` is set.
    """

    name: str
    description: str
    path: str
    scope: str
    body: str = ""
    allowed_tools: tuple[str, ...] = ()
    model_invocable: bool = True

    @property
    def directory(self) -> str:
        return str(Path(self.path).parent) if self.path else ""

    def loaded_text(self, arguments: str = "") -> str:
        """What the model receives when the skill is loaded: where it lives, its body, and
        the person's arguments when invoked as ``/NAME args``."""
        origin = "the person's" if self.scope == "user" else "the repository's (trusted)"
        head = (f'<skill name="{self.name}" scope="{self.scope}" dir="{self.directory}">\n'
                f"[{origin} skill {self.name}; its scripts/, references/ and assets/ are under {self.directory}; "
                "run scripts with bash]\n")
        args = f"\n[arguments: {arguments}]" if arguments.strip() else ""
        return f"{head}{self.body.rstrip()}{args}\n</skill>"


def load_skill(path: Path, scope: str) -> Skill:
    """Parse ``path`` (a ``SKILL.md``).

    Raises:
        SkillError: unreadable, too big, bad front matter, or a missing/invalid ``name``
            or ``description``.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SkillError(f"{path} cannot be read ({exc.strerror or exc})") from exc
    if len(data) > MAX_SKILL_BYTES:
        raise SkillError(f"{path} is over {MAX_SKILL_BYTES // 1024} KiB; move detail into references/")
    try:
        meta, body = split(data.decode("utf-8", "replace"))
    except FrontMatterError as exc:
        raise SkillError(f"{path}: {exc}") from None
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not name:
        raise SkillError(f"{path}: the front matter needs `name: {path.parent.name}`")
    if len(name) > MAX_NAME or not NAME.fullmatch(name):
        raise SkillError(f"{path}: name {name!r} must be 1-{MAX_NAME} lowercase letters, digits and single hyphens")
    if name != path.parent.name:
        raise SkillError(f"{path}: name {name!r} must match its directory {path.parent.name!r}")
    if not isinstance(description, str) or not description.strip():
        raise SkillError(f"{path}: the front matter needs `description:` (what it does and when to use it)")
    tools = meta.get("allowed-tools", "")
    allowed = tuple(str(t) for t in tools) if isinstance(tools, list) else tuple(str(tools).split())
    return Skill(name, description.strip()[:MAX_DESCRIPTION], str(path), scope, body, allowed,
                 meta.get("disable-model-invocation") is not True)


def skill_dirs(config_dir: Path | None, home: Path | None, workspace: Path | None, trusted: bool) -> list[tuple[Path, str]]:
    """The directories skills are found in, in precedence order, with their scope.
    Project directories only when ``trusted``."""
    out: list[tuple[Path, str]] = []
    if config_dir is not None:
        out.append((config_dir / "skills", "user"))
    if home is not None:
        out.append((home / ".agents" / "skills", "user"))
    if workspace is not None and trusted:
        out += [(workspace / ".musec" / "skills", "project"), (workspace / ".agents" / "skills", "project")]
    return out


def discover_skills(dirs: Sequence[tuple[Path, str]]) -> tuple[list[Skill], list[str]]:
    """Every skill under ``dirs`` (see ``skill_dirs``), and one problem line per skipped one.

    A name found twice keeps its first (higher-precedence) skill; built-in names are
    reserved. Returns skills sorted by name.
    """
    found: dict[str, Skill] = {}
    problems: list[str] = []
    for root, scope in dirs:
        if not root.is_dir():
            continue
        for sub in sorted(root.iterdir()):
            md = sub / "SKILL.md"
            if not md.is_file():
                continue
            try:
                skill = load_skill(md, scope)
            except SkillError as exc:
                problems.append(str(exc))
                continue
            if skill.name in BUILTINS:
                problems.append(f"{md}: {skill.name!r} is a built-in command; rename the skill")
            elif skill.name in found:
                problems.append(f"{md}: skill {skill.name!r} is already defined by {found[skill.name].path}; ignored")
            elif len(found) < MAX_SKILLS:
                found[skill.name] = skill
    return sorted(found.values(), key=lambda s: s.name), problems


def catalog_budget_chars(context_window_tokens: int | None) -> int:
    """About 1% of the context window, in characters (4 per token), at least 2000."""
    return max(2000, (context_window_tokens or 200_000) * 4 // 100)


def catalog(skills: Sequence[Skill], budget_chars: int) -> tuple[str, list[str]]:
    """The system prompt's list of model-invocable skills within ``budget_chars``.

    Descriptions are shortened to fit first (to 100 characters); skills that still do not
    fit are left out, named in the warning.

    Returns:
        ``(text, warnings)``; ``text`` is ``""`` when no skill is listed.
    """
    listed = [s for s in skills if s.model_invocable and s.scope != "builtin"]
    if not listed:
        return "", []
    head = ("Skills you can load with the `skill` tool when a task matches (the person's and, if trusted, the"
            " repository's):\n")

    def lines(limit: int | None) -> list[str]:
        return [f"- {s.name}: {' '.join(s.description.split())[:limit]}" for s in listed]

    body = lines(None)
    if len(head) + sum(len(x) + 1 for x in body) > budget_chars:
        body = lines(100)
    kept: list[str] = []
    used = len(head)
    for line in body:
        if used + len(line) + 1 > budget_chars:
            break
        kept.append(line)
        used += len(line) + 1
    dropped = [s.name for s in listed[len(kept):]]
    warnings = [f"skill catalog over its {budget_chars}-character budget: left out {', '.join(dropped)}"] if dropped else []
    return (head + "\n".join(kept)) if kept else "", warnings


class SkillTool:
    """The ``skill`` tool: loads a listed skill's instructions into the conversation.

    Its ``name`` input is an enum of the model-invocable skills, so a model cannot ask for
    one that is not listed (a provider that enforces schemas refuses it; this tool refuses
    it too).
    """

    name = "skill"
    access = "read"

    def __init__(self, skills: Sequence[Skill]) -> None:
        self.skills = {s.name: s for s in skills if s.model_invocable and s.scope != "builtin"}
        self.spec = ToolSpec(
            name=self.name,
            description=("Load a skill's instructions (listed in the system prompt) when the task matches it; "
                         "they stay in the conversation. Run its scripts with bash."),
            input_schema={
                "type": "object",
                "properties": {
                    "name": {"type": "string", "enum": sorted(self.skills), "description": "the skill to load"},
                    "arguments": {"type": "string", "description": "optional arguments for the skill"},
                },
                "required": ["name"],
                "additionalProperties": False,
            },
        )

    def paths(self, input: dict[str, Any]) -> list[str]:
        return []

    async def run(self, input: dict[str, Any], ctx: Any) -> Any:
        from .tools.base import ToolOutput

        skill = self.skills.get(str(input.get("name", "")))
        if skill is None:
            names = ", ".join(sorted(self.skills)) or "(none)"
            return ToolOutput(content=f"unknown skill {input.get('name')!r}; the skills are: {names}", is_error=True)
        return ToolOutput(content=skill.loaded_text(str(input.get("arguments", ""))))
