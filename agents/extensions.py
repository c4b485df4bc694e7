"""What a person and a repository bring to a session: instructions, skills, commands, hooks
and MCP servers, gathered in one place under the workspace's trust.

``load_extensions`` is the composition point the daemon calls when it builds a session,
``musec doctor`` and the banner report from the same result (``report``). The project's
skills, commands, hooks and MCP servers are read only when the workspace is trusted for
its exact content (``trust.py``); AGENTS.md files are plain instructions and always read,
marked as the repository's text. Nothing here runs anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .commands import Command, discover_commands
from .config import load_toml, project_config_path
from .core.errors import ConfigError
from .hooks import HookSpec, matcher_problem, parse_hooks
from .instructions import BUDGET_BYTES, InstructionFile, discover, render
from .mcp.config import ServerSpec, load_project_servers, parse_servers
from .skills import BUILTINS, Skill, catalog, catalog_budget_chars, discover_skills, skill_dirs
from .trust import TrustStatus

__all__ = ["Extensions", "load_extensions"]


@dataclass
class Extensions:
    """Everything found for one workspace.

    Attributes:
        instructions: the AGENTS.md files read at the start, in order.
        instructions_text: their rendered text for the system prompt.
        skills: the person's skills and, when trusted, the project's.
        commands: custom commands likewise.
        hooks: the person's hooks first, then the trusted project's.
        mcp: MCP servers likewise.
        waiting: project files present but not applied because trust is missing (paths).
        warnings: budgets exceeded, malformed files skipped (one line each).
    """

    instructions: list[InstructionFile] = field(default_factory=list)
    instructions_text: str = ""
    skills: list[Skill] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    hooks: list[HookSpec] = field(default_factory=list)
    mcp: list[ServerSpec] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skills_catalog: str = ""

    def skill(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name), None)

    def command(self, name: str) -> Command | None:
        return next((c for c in self.commands if c.name == name), None)

    def slash_names(self) -> list[str]:
        """Names ``/NAME`` invokes: built-ins, skills and custom commands."""
        return sorted({*BUILTINS, *(s.name for s in self.skills), *(c.name for c in self.commands)})

    def report(self) -> list[dict[str, Any]]:
        """One row per thing found: ``{"kind", "name", "state", "detail"}`` where ``state`` is
        ``active`` or ``waiting for trust`` (for ``musec doctor`` and the banner)."""
        rows = [{"kind": "instructions", "name": f.rel, "state": "active", "detail": f.scope} for f in self.instructions]
        rows += [{"kind": "skill", "name": s.name, "state": "active", "detail": s.scope} for s in self.skills]
        rows += [{"kind": "command", "name": f"/{c.name}", "state": "active", "detail": c.scope} for c in self.commands]
        rows += [{"kind": "hook", "name": f"{h.event} {h.command}", "state": "active", "detail": h.source} for h in self.hooks]
        rows += [{"kind": "mcp", "name": s.name, "state": "active", "detail": s.describe()} for s in self.mcp]
        rows += [{"kind": "project file", "name": w, "state": "waiting for trust", "detail": ""} for w in self.waiting]
        return rows


def _user_parts(config_dir: Path) -> tuple[list[HookSpec], list[ServerSpec]]:
    path = config_dir / "config.toml"
    data = load_toml(path)
    return (parse_hooks(data.get("hooks"), source="user", origin=str(path)),
            parse_servers(data.get("mcp_servers"), source="user", origin=str(path)))


def _project_parts(workspace: Path) -> tuple[list[HookSpec], list[ServerSpec]]:
    path = project_config_path(workspace)
    data = load_toml(path)
    if "mcp_servers" in data:
        raise ConfigError(f"{path}: put a project's MCP servers in {workspace / '.mcp.json'} (mcpServers)")
    return parse_hooks(data.get("hooks"), source="project", origin=str(path)), load_project_servers(workspace)


def load_extensions(workspace: Path, config_dir: Path, *, trust: TrustStatus | None, home: Path | None = None,
                    context_window_tokens: int | None = None, instructions_budget_bytes: int = BUDGET_BYTES) -> Extensions:
    """Gather the extensions of a session in ``workspace`` (absolute, resolved).

    Args:
        config_dir: musec's config directory (the person's AGENTS.md, skills/, commands/,
            config.toml with ``[hooks]`` and ``[mcp_servers]``).
        trust: the workspace's trust; the project's parts apply only when it is trusted.
        home: the home directory (``~/.agents/skills``); default ``Path.home()``.
        context_window_tokens: the model's context window (sizes the skill catalog).

    Raises:
        ConfigError: a config file's ``hooks`` or ``mcp_servers`` is malformed (the
            message names the file); a malformed skill or command is skipped with a warning.
    """
    trusted = trust is not None and trust.trusted
    ext = Extensions()
    ext.instructions = discover(workspace, config_dir)
    ext.instructions_text, warnings = render(ext.instructions, instructions_budget_bytes)
    ext.warnings += warnings
    ext.skills, problems = discover_skills(skill_dirs(config_dir, home or Path.home(), workspace, trusted))
    ext.warnings += problems
    ext.skills_catalog, warnings = catalog(ext.skills, catalog_budget_chars(context_window_tokens))
    ext.warnings += warnings
    command_dirs = [(config_dir / "commands", "user")] + ([(workspace / ".musec" / "commands", "project")] if trusted else [])
    ext.commands, problems = discover_commands(command_dirs)
    ext.warnings += problems
    for c in [c for c in ext.commands if c.name in BUILTINS or ext.skill(c.name) is not None]:  # said, not dropped silently
        by = f"the built-in /{c.name}" if c.name in BUILTINS else f"the skill {c.name}"
        ext.warnings.append(f"{c.path}: custom command /{c.name} is shadowed by {by}; rename the file to use it")
    ext.commands = [c for c in ext.commands if c.name not in BUILTINS and ext.skill(c.name) is None]
    ext.hooks, ext.mcp = _user_parts(config_dir)
    if trusted:
        hooks, mcp = _project_parts(workspace)
        ext.hooks += hooks
        ext.mcp += [s for s in mcp if s.name not in {u.name for u in ext.mcp}]
    elif trust is not None and trust.needs_trust:
        ext.waiting = [i.path for i in trust.items]
    ext.warnings += [w for w in map(matcher_problem, ext.hooks) if w]  # a guard that never fires is said
    return ext
