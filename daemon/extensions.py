"""Giving a session's main agent what the person and a trusted repository bring: AGENTS.md
files, skills, custom commands, hooks and MCP servers (``agents.extensions``).

The session runs the lifecycle points and the MCP servers (``Session.run``); this module
only builds them, records nothing and starts nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import protocol as p
from .errors import BadRequest

MCP_PROBE_S = 5.0  # the most ``musec mcp list`` waits for the servers (started all at once)

if TYPE_CHECKING:
    from musec.agents.loop import Agent

    from .session import Session


def attach_extensions(deps: Any, session: Session, req: p.StartSession, agent: Agent, *, prompt_suffix: str = "") -> None:
    """Load the workspace's extensions under its trust (``agent.policy.trust``) and give
    them to ``agent`` and ``session``: the system prompt's instructions and skill catalog,
    the ``skill`` tool, subdirectory instructions, hooks, and an MCP manager (not started).
    ``deps`` is the daemon's ``agent_setup.AgentDeps`` (its ``paths.config`` is read);
    ``prompt_suffix`` what the agent's role adds to the system prompt (a kernel campaign's).

    Raises:
        BadRequest: a config file's ``hooks`` or ``mcp_servers`` is malformed.
    """
    from musec.agents.core.errors import ConfigError
    from musec.agents.extensions import load_extensions
    from musec.agents.instructions import SubdirInstructions
    from musec.agents.prompt import system_prompt
    from musec.agents.skills import SkillTool

    workspace = Path(req.workspace).resolve()
    trust = agent.policy.trust
    try:
        ext = load_extensions(workspace, deps.paths.config, trust=trust)
    except ConfigError as exc:
        raise BadRequest(str(exc)) from exc
    session.extensions = ext
    agent.system_prompt = system_prompt(workspace, ext.instructions_text, ext.skills_catalog) + prompt_suffix
    skill_tool = SkillTool(ext.skills)
    if skill_tool.skills:
        agent.tools[skill_tool.name] = skill_tool
    agent.subdirs = SubdirInstructions(workspace)
    if ext.hooks:
        agent.hooks = session.hooks = _hooks(session, ext.hooks, agent, trust)
        if session.fanout is not None:
            session.fanout.lifecycle = session.lifecycle
    if ext.mcp:
        from musec.agents.mcp import McpManager
        from musec.agents.tools.sandbox import find_bwrap

        # A project's servers run in the session's sandbox, like its hooks (agents.mcp.server).
        session.mcp = McpManager(ext.mcp, workspace=workspace, environment=dict(req.environment),
                                 on_event=session.record, sandbox=agent.ctx.sandbox, bwrap=find_bwrap())
        session.log.redact.add(session.mcp.secret_values())


def _hooks(session: Session, specs: list[Any], agent: Agent, trust: Any) -> Any:
    from musec.agents.hooks import Hooks
    from musec.agents.tools.sandbox import find_bwrap

    def on_ran(result: Any, agent_id: str) -> None:
        session.record(result.event(agent_id))

    verify = trust.still_holds if trust is not None else (lambda: False)
    return Hooks(specs, workspace=agent.ctx.workspace, env=agent.ctx.env, sandbox=agent.ctx.sandbox,
                 session_id=session.id, verify_project=verify, on_ran=on_ran, bwrap=find_bwrap(),
                 durable=session.durable)


def extension_fields(session: Session) -> dict[str, Any]:
    """For ``session_started``: what applies (names, never secrets) and what waits for trust."""
    from musec.agents.hooks import matcher_problem

    ext = session.extensions
    if ext is None:
        return {}
    return {"extensions": {
        "instructions": [f.rel for f in ext.instructions],
        "skills": [{"name": s.name, "scope": s.scope, "model": s.model_invocable} for s in ext.skills],
        "commands": [c.name for c in ext.commands],
        "hooks": [{"event": h.event, "command": h.command, "source": h.source} for h in ext.hooks],
        "mcp": [s.describe() for s in ext.mcp],
        "waiting_for_trust": ext.waiting,
        "warnings": ext.warnings,
        "hook_warnings": [w for w in map(matcher_problem, ext.hooks) if w],
    }}


async def inspect_workspace(config_dir: Path, state_dir: Path, msg: p.InspectWorkspace) -> p.WorkspaceReport:
    """What a session in ``msg.workspace`` would get, for ``musec doctor``, the banner and
    ``musec mcp list``; with ``msg.start_mcp`` the servers are started, listed and stopped.

    Raises:
        BadRequest: the workspace is not a directory, or a config file is malformed.
    """
    import anyio
    from musec.agents.config import load_user_config
    from musec.agents.core.errors import ConfigError
    from musec.agents.extensions import load_extensions
    from musec.agents.mcp import McpManager
    from musec.agents.trust import check_trust

    workspace = Path(msg.workspace).resolve()
    if not workspace.is_dir():
        raise BadRequest(f"workspace {msg.workspace} is not a directory")
    try:
        user = load_user_config(config_dir)
        trust = check_trust(workspace, state_dir, trusted_by_config=user.trusts(workspace))
        ext = load_extensions(workspace, config_dir, trust=trust)
    except ConfigError as exc:
        raise BadRequest(str(exc)) from exc
    servers = [p.McpServerInfo(s.name, s.transport, s.source, "not started") for s in ext.mcp]
    if msg.start_mcp and ext.mcp:
        from musec.agents.tools.sandbox import find_bwrap

        # A project's servers start in the default sandbox (no network), as in a session.
        # All at once, one try each, at most MCP_PROBE_S: a broken server is shown failed, with its stderr's tail.
        manager = McpManager(ext.mcp, workspace=workspace, environment=dict(msg.environment), on_event=lambda event: None,
                             bwrap=find_bwrap(), max_restarts=0)
        async with anyio.create_task_group() as tg:
            await tg.start(manager.run)
            for server in await manager.wait_ready(MCP_PROBE_S):
                tail = server.stderr_tail()
                server.state = "failed"
                server.error = f"no answer within {MCP_PROBE_S:g} s" + (f"; its stderr ends: {tail}" if tail else "")
            servers = [p.McpServerInfo(**row) for row in manager.status()]
            tg.cancel_scope.cancel()
    rows = [p.ExtensionRow(**row) for row in ext.report()]
    return p.WorkspaceReport(id=msg.id, workspace=str(workspace), trust=trust.state, rows=rows, mcp=servers,
                             warnings=ext.warnings)
