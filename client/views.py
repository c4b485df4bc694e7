"""The read-only views: ``musec sessions``, ``log``, ``replay``, ``cost``, ``agents``,
``workers`` and ``models``. Each asks the daemon one question and prints the answer as a
table or (``--json``) as JSON; everything printed goes through ``output``. Also
``musec compact``, which asks one question too (its answer changes the session's context)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from musec.daemon import protocol as p

from .calls import CallHeads
from .connection import connect
from .errors import UsageError
from .exitcodes import OK, Condition, Exit, for_condition
from .output import Column, counted, err, out, out_json, out_json_line, table
from .quick import age, print_sessions
from .render import log_line_summary
from .requests import resolve_workspace


def cmd_sessions(args: argparse.Namespace) -> Exit:
    """``musec sessions``: the most recently active first (the daemon's order). Its usual
    case is answered by ``quick`` before this module is imported; this is the rest."""
    conn = connect()
    workspace = "" if args.all else resolve_workspace(args.workspace)
    rows = conn.request(p.ListSessions(id=conn.next_id(), workspace=workspace)).sessions
    print_sessions([{"id": s.id, "workspace": s.workspace, "started_at": s.started_at, "updated_at": s.updated_at,
                     "status": s.status, "title": s.title} for s in rows], workspace, args.all, args.json)
    return OK


def cmd_log(args: argparse.Namespace) -> Exit:
    """``musec log ID [--json]`` and ``musec log verify ID``."""
    if args.args[0] == "verify":
        if len(args.args) != 2:
            raise UsageError("usage: musec log verify ID")
        conn = connect()
        r = conn.request(p.VerifyLog(id=conn.next_id(), session_id=args.args[1]))
        if r.ok:
            out(f"ok: {counted(r.events, 'event')}, hash chain intact ({r.session_id})")
            return OK
        for problem in r.problems:
            out(f"FAILED: {problem}")
        torn = all(problem.startswith("torn last line") for problem in r.problems)
        if r.events == 0 and all(problem.startswith("the log is empty") for problem in r.problems):
            out("a start that failed before it logged anything (e.g. on a full disk): nothing to resume or "
                "replay; `musec gc` removes the empty log")  # not a changed log (fresh-user s8 J4)
        else:
            out(f"the last write was cut short (a crash): `musec resume {r.session_id}` cuts it off, keeps it aside and goes on"
                if torn else f"the log was changed after it was written: `musec log {r.session_id}` shows the events before "
                "the first damaged line; a replay or resume stops there")
        return for_condition(Condition.VERIFY_FAILED)
    if len(args.args) != 1:
        raise UsageError("usage: musec log ID [--json] | musec log verify ID")
    conn = connect()
    # Streamed: one Event frame per line, a long line in pieces (protocol 3), so a log of
    # any size is printed as it comes, in memory of one event at a time.
    calls = CallHeads()
    for msg in conn.stream(p.ReadLog(id=conn.next_id(), session_id=args.args[0])):
        line = msg.line
        try:
            event = json.loads(line)
            if not isinstance(event, dict):
                raise ValueError(line)
        except ValueError:
            err(f"musec: seq {msg.seq} is damaged; the log is shown up to it (check it with "
                f"`musec log verify {msg.session_id}`)")
            return for_condition(Condition.LOG_DAMAGED)
        if args.json:
            out_json_line(line)
        else:
            out(log_line_summary(event, calls))
    damaged = getattr(conn.last_reply, "damaged", "")
    if damaged:
        err(f"musec: {damaged}; the log is shown up to it (check it with `musec log verify {args.args[0]}`)")
        return for_condition(Condition.LOG_DAMAGED)
    return OK


REPLAY_TIMEOUT_S = 1800.0


def _waiting(what: str) -> Callable[[float], None]:
    """A progress line on stderr while a long request runs (every few seconds, one line)."""

    def show(waited_s: float) -> None:
        if waited_s >= 2 and int(waited_s) % 5 == 2:
            err(f"musec: {what}... {waited_s:.0f} s so far")

    return show


def cmd_replay(args: argparse.Namespace) -> Exit:
    """``musec replay ID``: rebuild the session from its log and compare the requests."""
    conn = connect()
    r = conn.request(p.Replay(id=conn.next_id(), session_id=args.session_id), timeout_s=REPLAY_TIMEOUT_S,
                     on_wait=_waiting("replaying"))
    if args.json:
        out_json({"session_id": r.session_id, "ok": r.ok, "events": r.events, "model_requests": r.model_requests,
                  "turns": r.turns, "problems": r.problems, "next_request_digest": r.next_request_digest,
                  "redacted_requests": r.redacted_requests, "damaged": r.damaged})
    elif r.damaged:  # a sentence, not the bare MISMATCH (fresh-user trial s5, F19): nothing could be compared
        out(f"{r.session_id}: the log is damaged, so nothing was replayed ({'; '.join(r.problems) or 'unreadable'}): "
            f"`musec log verify {r.session_id}` says what changed; `musec log {r.session_id}` shows the events before it")
        return for_condition(Condition.LOG_DAMAGED)
    else:
        verdict = ("every request re-derived byte for byte" if r.ok else
                   f"{counted(len(r.problems), 'request')} did not re-derive from the log (below): this musec "
                   "builds requests differently from the one that ran the session, or the log was changed")
        out(f"{r.session_id}: {counted(r.events, 'event')}, {counted(r.turns, 'turn')}, "
            f"{counted(r.model_requests, 'model request')}: {verdict}")
        for problem in r.problems:
            out(f"  {problem}")
        if r.redacted_requests:
            out(f"  {counted(r.redacted_requests, 'request')} held text the log redacts (a secret or key-shaped text); "
                "they cannot be rebuilt from the log and were not compared")
        out(f"next request digest: {r.next_request_digest}")
    return OK if r.ok else for_condition(Condition.REPLAY_MISMATCH)


def cmd_models(args: argparse.Namespace) -> Exit:
    """``musec models``: the catalog."""
    conn = connect()
    r = conn.request(p.ListModels(id=conn.next_id()))
    if args.json:
        import msgspec

        out_json(msgspec.to_builtins(r.models))
        return OK
    rows = [[m.id, ",".join(m.aliases), f"{m.context_window_tokens // 1000}k" if m.context_window_tokens else "?",
             f"{m.input_per_mtok:.2f}", f"{m.cached_input_per_mtok:.2f}", f"{m.output_per_mtok:.2f}",
             "YES" if m.trains_on_data else "no"] for m in r.models]
    for line in table(rows, [Column("model", width=40), Column("aliases", width=24), Column("context", align=">"),
                             Column("in $/M", align=">"), Column("cached", align=">"), Column("out $/M", align=">"),
                             Column("trains")]):
        out(line)
    return OK


def cmd_workers(args: argparse.Namespace) -> Exit:
    """``musec workers ID``: a session's fan-out workers."""
    conn = connect()
    r = conn.request(p.ListWorkers(id=conn.next_id(), session_id=args.session_id))
    if args.json:
        out_json({"session_id": r.session_id, "integration": r.integration, "workers": [
            {"name": w.name, "branch": w.branch, "state": w.state, "commits": w.commits, "path": w.path,
             "input_tokens": w.input_tokens, "output_tokens": w.output_tokens, "cost_usd": w.cost_usd}
            for w in r.workers]})
        return OK
    if not r.workers:
        out(f"session {r.session_id} started no workers")
        return OK
    for line in workers_table(r.workers):
        out(line)
    if r.integration:
        out(f"integration {r.integration}")
    return OK


def cmd_compact(args: argparse.Namespace) -> Exit:
    """``musec compact ID [FOCUS]``: compact a session's context now."""
    from .requests import credentials

    conn = connect()
    r = conn.request(p.Compact(id=conn.next_id(), session_id=args.session_id, focus=args.focus,
                               credentials=credentials()), timeout_s=900)
    if args.json:
        out_json({"session_id": r.session_id, "done": r.done, "tokens_before": r.tokens_before,
                  "tokens_after": r.tokens_after, "message": r.message})
    elif r.done:
        out(f"compacted session {r.session_id}: about {r.tokens_before} tokens to {r.tokens_after}")
    elif r.failed:
        err(f"musec: session {r.session_id}: {r.message}")
    else:
        out(f"session {r.session_id}: {r.message}")
    return for_condition(Condition.COMPACT_FAILED) if r.failed else OK


def cmd_agents(args: argparse.Namespace) -> Exit:
    """``musec agents ID``: a session's agents."""
    conn = connect()
    r = conn.request(p.ListAgents(id=conn.next_id(), session_id=args.session_id))
    if args.json:
        out_json([{"agent": a.agent, "role": a.role, "state": a.state, "last_activity_at": a.last_activity_at,
                   "input_tokens": a.input_tokens, "output_tokens": a.output_tokens, "cost_usd": a.cost_usd,
                   "events": a.events, "model": a.model, "context_tokens": a.context_tokens,
                   "context_window_tokens": a.context_window_tokens or None,
                   "context_percent": a.context_percent if a.context_percent >= 0 else None} for a in r.agents])
        return OK
    for line in agents_table(r.agents):
        out(line)
    return OK


def cmd_cost(args: argparse.Namespace) -> Exit:
    """``musec cost [ID]``: tokens and dollars per agent and model."""
    conn = connect()
    r = conn.request(p.Cost(id=conn.next_id(), session_id=args.session_id,
                            workspace="" if args.session_id else resolve_workspace(None)))
    if args.json:
        out_json({"session_id": r.session_id, "total_usd": r.total_usd, "retries": r.retries,
                  "interrupted": r.interrupted, "rows": [
            {"agent": x.agent, "model": x.model, "calls": x.calls, "input_tokens": x.input_tokens,
             "output_tokens": x.output_tokens, "cache_read_tokens": x.cache_read_tokens,
             "cache_write_tokens": x.cache_write_tokens, "cost_usd": x.cost_usd} for x in r.rows]})
        return OK
    out(f"session {r.session_id}")
    for line in cost_table(r.rows):
        out(line)
    out(f"total ${r.total_usd:.4f}" + (f" ({counted(r.retries, 'retried call')})" if r.retries else ""))
    if r.interrupted:
        out(interrupted_line(r.interrupted))
    return OK


def interrupted_line(n: int) -> str:
    """The note under a cost table when answers were cut off (their output is an estimate)."""
    answers = "1 answer was" if n == 1 else f"{n} answers were"
    return f"{answers} interrupted while streaming: counted, with output tokens estimated from the text streamed"


def cost_table(rows: list[p.CostRow], indent: str = "") -> list[str]:
    """``/cost`` and ``musec cost``: one row per agent and model."""
    return table([[r.agent, r.model, str(r.calls), str(r.input_tokens), str(r.cache_read_tokens), str(r.output_tokens),
                   f"${r.cost_usd:.4f}"] for r in rows],
                 [Column("agent", width=20), Column("model", width=40), Column("calls", align=">"),
                  Column("input", align=">"), Column("cached", align=">"), Column("output", align=">"),
                  Column("cost", align=">")], indent=indent)


def agents_table(agents: list[p.AgentInfo], indent: str = "") -> list[str]:
    """``/agents`` and ``musec agents``: role, state (a sentence, wrapped in its column),
    last activity, tokens, cost and context of each agent."""
    return table([[a.agent, a.role, a.state, age(a.last_activity_at) + " ago" if a.last_activity_at else "never",
                   str(a.input_tokens + a.output_tokens), f"${a.cost_usd:.4f}", _context(a)] for a in agents],
                 [Column("agent", width=20), Column("role", width=10), Column("state", width=28, wrap=True),
                  Column("active", align=">"), Column("tokens", align=">"), Column("cost", align=">"),
                  Column("context")], indent=indent)


def workers_table(workers: list[p.WorkerInfo], indent: str = "") -> list[str]:
    """``/workers`` and ``musec workers``: state, commits, tokens, cost and branch of each worker."""
    return table([[w.name, w.state, counted(w.commits, "commit"), counted(w.input_tokens + w.output_tokens, "token"),
                   f"${w.cost_usd:.4f}", w.branch] for w in workers],
                 [Column("worker", width=20), Column("state", width=24, wrap=True), Column("commits", align=">"),
                  Column("tokens", align=">"), Column("cost", align=">"), Column("branch")], indent=indent)


def _context(a: p.AgentInfo) -> str:
    """``41.2k (21% of 200k)``, or ``41.2k`` when the model's window is unknown; ``-`` before
    the agent's first request."""
    if not a.context_tokens:
        return "-"
    text = f"{a.context_tokens / 1000:.1f}k" if a.context_tokens >= 1000 else str(a.context_tokens)
    if a.context_window_tokens:
        text += f" ({a.context_percent:.0f}% of {a.context_window_tokens // 1000}k)"
    return text
