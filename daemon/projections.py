"""Views of a session rebuilt from its log (the log is the index, DESIGN §5 rule 7):
its agents, its fan-out workers, its costs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import protocol as p

if TYPE_CHECKING:
    from .index import SessionIndex


def list_workers(index: SessionIndex, session_id: str, request_id: int) -> p.Workers:
    """A session's workers, from its log (the source of truth) and the branches' commits."""
    from musec.agents.workers import WorkerError, worker_states

    from .eventlog import iter_events

    sid = index.resolve_id(session_id)
    spawned: dict[str, dict[str, Any]] = {}
    finished: dict[str, dict[str, Any]] = {}
    usage: dict[str, list[float]] = {}
    workspace, integration, base = "", "", ""
    for ev in iter_events(index.log_path(sid)):
        kind = ev.get("type")
        if kind == "session_started":
            workspace = ev.get("workspace", "")
        elif kind == "worker_spawned":
            spawned[ev["worker"]] = ev
            base = ev.get("base_commit", base)
        elif kind == "worker_finished":
            finished[ev["worker"]] = ev
        elif kind == "integration":
            integration = f"{ev.get('branch')} at {str(ev.get('head'))[:12]}: " + (
                "ok" if ev.get("ok") else f"{len(ev.get('conflicts') or [])} conflict(s), tests "
                + ("passed" if ev.get("tests_passed") else "FAILED" if ev.get("tests_passed") is False else "not run"))
        elif kind == "model_response" and str(ev.get("agent", "")).startswith("worker:"):
            u = usage.setdefault(ev["agent"].removeprefix("worker:"), [0, 0, 0.0])
            u[0] += int((ev.get("usage") or {}).get("input_tokens", 0))
            u[1] += int((ev.get("usage") or {}).get("output_tokens", 0))
            u[2] += float(ev.get("cost_usd", 0.0))
    commits: dict[str, int] = {}
    if spawned and workspace:
        try:
            commits = {w.worker: w.commits for w in worker_states(workspace, sid, base)}
        except (WorkerError, OSError):
            commits = {}
    out = []
    for name, ev in spawned.items():
        state = finished[name].get("exit_reason", "finished") if name in finished else (
            "running" if sid in index.live else "interrupted")
        u = usage.get(name, [0, 0, 0.0])
        out.append(p.WorkerInfo(name=name, branch=ev.get("branch", ""), state=state, commits=commits.get(name, 0),
                                path=ev.get("path", ""), input_tokens=int(u[0]), output_tokens=int(u[1]),
                                cost_usd=round(u[2], 8), instruction=ev.get("instruction", "")[:200]))
    return p.Workers(id=request_id, session_id=sid, workers=out, integration=integration)


def list_agents(index: SessionIndex, session_id: str, request_id: int) -> Any:
    """Every agent of a session with its role, state, last activity, tokens and cost,
    from the log (and, for a live session, the background agents' own state)."""
    from .eventlog import iter_events

    sid = index.resolve_id(session_id)
    live = index.live.get(sid)
    seen: dict[str, dict[str, Any]] = {}
    roles: dict[str, str] = {"main": "main"}
    ended = False
    for ev in iter_events(index.log_path(sid)):
        agent = str(ev.get("agent", "main"))
        info = seen.setdefault(agent, {"tokens_in": 0, "tokens_out": 0, "cost": 0.0, "events": 0, "last": 0.0, "state": ""})
        info["events"] += 1
        info["last"] = float(ev.get("ts", 0.0))
        kind = ev.get("type")
        if kind == "session_started":
            for role in ev.get("background", []):
                roles[role] = role
        elif kind == "agent_spawned":
            roles[agent] = str(ev.get("role", "worker"))
        elif kind == "model_response":
            usage = ev.get("usage") or {}
            info["tokens_in"] += int(usage.get("input_tokens", 0))
            info["tokens_out"] += int(usage.get("output_tokens", 0))
            info["cost"] += float(ev.get("cost_usd", 0.0))
        elif kind == "worker_finished":
            seen.setdefault(f"worker:{ev.get('worker')}", dict(info))["state"] = str(ev.get("exit_reason"))
        elif kind == "agent_failed":
            info["state"] = "failed, restarting"
        elif kind == "session_ended":
            ended = True
    out = []
    for agent, role in {**roles, **{a: roles.get(a, a.split(":")[0]) for a in seen}}.items():
        info = seen.get(agent, {"tokens_in": 0, "tokens_out": 0, "cost": 0.0, "events": 0, "last": 0.0, "state": ""})
        if live is not None and agent in live.background:
            state = live.background[agent].state
        elif live is not None and agent == "main":
            state = live.status
        else:
            state = info["state"] or ("ended" if ended else "stopped")
        out.append(p.AgentInfo(agent=agent, role=role, state=state, last_activity_at=info["last"],
                               input_tokens=info["tokens_in"], output_tokens=info["tokens_out"],
                               cost_usd=round(info["cost"], 8), events=info["events"]))
    return p.Agents(id=request_id, session_id=sid, agents=out)


def cost_report(index: SessionIndex, session_id: str, workspace: str, request_id: int) -> Any:
    """Tokens and dollars per agent and model, from the session's ``model_response`` events."""
    from .errors import SessionNotFound
    from .eventlog import iter_events

    if session_id:
        sid = index.resolve_id(session_id)
    else:
        latest = index.latest(workspace)
        if latest is None:
            raise SessionNotFound(f"no session in {workspace}; give a session id (`musec sessions --all`)")
        sid = latest
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    retries = 0
    for ev in iter_events(index.log_path(sid)):
        if ev.get("type") == "model_retry":
            retries += 1
        if ev.get("type") != "model_response":
            continue
        row = rows.setdefault((str(ev.get("agent", "main")), str(ev.get("model", ""))),
                              {"calls": 0, "in": 0, "out": 0, "cr": 0, "cw": 0, "usd": 0.0})
        usage = ev.get("usage") or {}
        row["calls"] += 1
        row["in"] += int(usage.get("input_tokens", 0))
        row["out"] += int(usage.get("output_tokens", 0))
        row["cr"] += int(usage.get("cache_read_tokens", 0))
        row["cw"] += int(usage.get("cache_write_tokens", 0))
        row["usd"] += float(ev.get("cost_usd", 0.0))
    out = [p.CostRow(agent=a, model=m, calls=r["calls"], input_tokens=r["in"], output_tokens=r["out"],
                     cache_read_tokens=r["cr"], cache_write_tokens=r["cw"], cost_usd=round(r["usd"], 8))
           for (a, m), r in sorted(rows.items())]
    return p.CostReport(id=request_id, session_id=sid, rows=out, total_usd=round(sum(r.cost_usd for r in out), 8),
                        retries=retries)
