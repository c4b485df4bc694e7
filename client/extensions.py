"""What the person and the repository bring to sessions, as the daemon reports it:
``musec mcp list``, the ``extensions`` lines of ``musec doctor`` and of the banner."""

from __future__ import annotations

import argparse
import os

from musec.daemon import protocol as p

from .connection import Connection, connect
from .exitcodes import OK, Exit
from .output import out, out_json, safe


def fetch_report(conn: Connection, workspace: str, *, start_mcp: bool = False) -> p.WorkspaceReport:
    """The daemon's ``WorkspaceReport`` for ``workspace`` (``start_mcp``: list the servers' tools)."""
    from .requests import wire_environment

    msg = p.InspectWorkspace(id=conn.next_id(), workspace=workspace, environment=wire_environment(), start_mcp=start_mcp)
    return conn.request(msg, timeout_s=120 if start_mcp else 30)


def report_lines(report: p.WorkspaceReport) -> list[str]:
    """One line per kind: what is active, and what waits for trust."""
    kinds: dict[str, list[str]] = {}
    for row in report.rows:
        if row.state == "active":
            kinds.setdefault(row.kind, []).append(row.name)
    lines = [f"{kind}: {', '.join(safe(n) for n in names)}" for kind, names in kinds.items()]
    waiting = [safe(r.name) for r in report.rows if r.state != "active"]
    if waiting:
        lines.append(f"waiting for trust ({report.trust}): {', '.join(waiting)}")
    lines += [f"warning: {safe(w)}" for w in report.warnings]
    return lines + shadowed_lines(report)


def shadowed_lines(report: p.WorkspaceReport) -> list[str]:
    """A warning per skill or custom command whose ``/NAME`` a built-in slash command of
    the interactive client answers first (``/model``, ``/help``...): typed, it never
    reaches the command; said once, under the banner (and by ``musec doctor``)."""
    from .slash import BUILTIN

    lines = []
    for row in report.rows:
        name = "/" + row.name.lstrip("/")
        if row.kind in ("skill", "command") and row.state == "active" and name in BUILTIN:
            fix = "rename its directory, or invoke it as $" + name[1:] if row.kind == "skill" else "rename its file"
            lines.append(f"warning: the {row.detail} {'custom command' if row.kind == 'command' else row.kind} {safe(name)} "
                         f"is shadowed by the built-in {safe(name)}: {fix} to use it")
    return lines


def slash_names(report: p.WorkspaceReport) -> set[str]:
    """The ``/NAME`` a session in this workspace answers: skills and custom commands
    (with those a built-in shadows: ``/help`` lists them apart)."""
    return {r.name for r in report.rows if r.kind == "skill" and r.state == "active"} | {
        r.name.lstrip("/") for r in report.rows if r.kind == "command" and r.state == "active"}


def cmd_mcp(args: argparse.Namespace) -> Exit:
    """``musec mcp list [--json]``: each server, its state and its tools."""
    from .requests import resolve_workspace

    report = fetch_report(connect(), resolve_workspace(args.workspace), start_mcp=True)
    if args.json:
        out_json([{"server": s.server, "transport": s.transport, "source": s.source, "state": s.state,
                   "error": s.error, "tools": s.tools} for s in report.mcp])
        return Exit.GOAL_UNMET if any(s.state != "running" for s in report.mcp) else OK  # 1: a server failed
    if not report.mcp:
        out("no MCP servers: add [mcp_servers.NAME] to your config.toml, or .mcp.json to a trusted repository")
    for s in report.mcp:
        error = f" ({safe(s.error)})" if s.error else ""
        out(f"{safe(s.server)}  {s.transport}  {s.source}  {s.state}{error}")
        for tool in s.tools:
            out(f"    mcp__{safe(s.server)}__{safe(tool)}")
    waiting = [r.name for r in report.rows if r.state != "active" and r.name == ".mcp.json"]
    if waiting:
        out("the repository's .mcp.json waits for trust: run musec in it and trust it, or pass --trust")
    return Exit.GOAL_UNMET if any(s.state != "running" for s in report.mcp) else OK  # 1: a server failed
