"""``musec``: the thin command-line client (DESIGN §3, contract).

Every command talks to the daemon over its socket; nothing here touches session files.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from musec.daemon import protocol as p

from . import exitcodes
from .connection import Connection, connect
from .errors import ClientError, DaemonLost, UsageError
from .render import Renderer, safe

DEFAULT_MODEL = "anthropic/claude-sonnet-4-6"
DEFAULT_AGENTS = "scout,verifier,reviewer"
APPROVALS = ("ask", "auto", "read-only", "never")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="musec", description="musec: a terminal coding agent.")
    parser.add_argument("--version", action="version", version=f"musec {p.__version__}")

    def session_opts(sp: argparse.ArgumentParser, approval_default: str) -> None:
        sp.add_argument("--model", default=None, help=f"PROVIDER/MODEL, an alias, or scripted:PATH (default: $MUSEC_MODEL or {DEFAULT_MODEL})")
        sp.add_argument("--workspace", default=None, help="the repository to work in (default: the current directory)")
        sp.add_argument("--approval", choices=APPROVALS, default=None, help=f"default: {approval_default}")
        sp.add_argument("--max-turns", type=int, default=None, help="model turns per message (default: 50)")
        sp.add_argument("--sandbox", choices=("auto", "bwrap", "seatbelt", "off"), default="auto")
        sp.add_argument("--no-blackboard", dest="blackboard", action="store_false",
                        help="every agent reads files from disk itself (for comparison)")
        sp.add_argument("--agents-model", default="", metavar="M",
                        help="a model for the scout (it then answers with its own read-only agent); "
                             "a cheaper one is a good choice")
        sp.add_argument("--agents-budget-usd", type=float, default=0.0, metavar="X",
                        help="the background agents' own budget (0: none)")
        sp.add_argument("--agents", default=None, metavar="ROLES",
                        help=f"background agents, comma-separated, or none (default: $MUSEC_AGENTS or {DEFAULT_AGENTS})")
        sp.add_argument("--trust", action="store_true",
                        help="trust this workspace's .musec/ files (project config, hooks, skills) as they are now")

    session_opts(parser, "ask")  # `musec --model M` opens an interactive session
    sub = parser.add_subparsers(dest="command")

    run = sub.add_parser("run", help="run one task headlessly")
    run.add_argument("task", nargs="?", default="")
    session_opts(run, "ask")
    run.add_argument("--output-format", choices=("text", "json", "stream-json"), default="text")
    run.add_argument("--budget-usd", type=float, default=None)
    run.add_argument("--resume", default=None, metavar="ID", help="go on with session ID")
    run.add_argument("--continue", dest="continue_", action="store_true")

    sessions = sub.add_parser("sessions", help="list sessions, newest first")
    sessions.add_argument("--workspace", default=None)
    sessions.add_argument("--all", action="store_true")
    sessions.add_argument("--json", action="store_true")

    log = sub.add_parser("log", help="show a session's event log, or `log verify ID`")
    log.add_argument("args", nargs="+", metavar="ID | verify ID")
    log.add_argument("--json", action="store_true")

    attach = sub.add_parser("attach", help="join a live session and print its events")
    attach.add_argument("session_id")
    attach.add_argument("--output-format", choices=("text", "stream-json"), default="text")

    daemon = sub.add_parser("daemon", help="manage the daemon")
    daemon.add_argument("action", choices=("start", "stop", "status", "run", "install"))
    daemon.add_argument("--json", action="store_true")

    resume = sub.add_parser("resume", help="reopen a session interactively (a picker when no ID)")
    resume.add_argument("session_id", nargs="?", default=None)
    resume.add_argument("--last", action="store_true", help="the latest session of this workspace")
    resume.add_argument("--workspace", default=None)

    replay = sub.add_parser("replay", help="rebuild a session from its log, no model calls")
    replay.add_argument("session_id")
    replay.add_argument("--json", action="store_true")

    gc = sub.add_parser("gc", help="remove sessions (not live ones) last active longer ago than an age, with their blobs")
    gc.add_argument("--older-than", required=True, help="an age like 30d, 12h or 90m")
    gc.add_argument("--dry-run", action="store_true")

    cost = sub.add_parser("cost", help="tokens and dollars of a session, per agent and model")
    cost.add_argument("session_id", nargs="?", default="", help="default: the latest session of this workspace")
    cost.add_argument("--json", action="store_true")
    agents = sub.add_parser("agents", help="a session's agents: role, state, last activity, tokens, cost")
    agents.add_argument("session_id")
    agents.add_argument("--json", action="store_true")
    workers = sub.add_parser("workers", help="a session's fan-out workers: branch, state, commits, tokens, cost")
    workers.add_argument("session_id")
    workers.add_argument("--json", action="store_true")
    apply_ = sub.add_parser("apply", help="bring a session's integrated fan-out result onto your branch (git merge)")
    apply_.add_argument("session_id")

    models = sub.add_parser("models", help="the model catalog: ids, aliases, context, prices")
    models.add_argument("--json", action="store_true")

    sub.add_parser("doctor", help="check the sandbox, socket, credentials, git and GPU")
    demo = sub.add_parser("demo", help="fix a bundled example's failing test with the scripted model")
    demo.add_argument("--keep", action="store_true", help="keep the example's copy")

    from .evaluate import add_parser as add_eval_parser

    add_eval_parser(sub)
    interactive = sub.add_parser("chat", help="interactive session (the default with no command)")
    session_opts(interactive, "ask")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return dispatch(args)
    except ClientError as exc:
        print(f"musec: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return exitcodes.INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`musec log ID | head`): stop quietly, as cat does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return exitcodes.OK


def dispatch(args: argparse.Namespace) -> int:
    match args.command:
        case "run":
            return cmd_run(args)
        case "sessions":
            return cmd_sessions(args)
        case "log":
            return cmd_log(args)
        case "attach":
            return cmd_attach(args)
        case "resume":
            from .interactive import cmd_resume

            return cmd_resume(args)
        case "replay":
            return cmd_replay(args)
        case "gc":
            return cmd_gc(args)
        case "models":
            return cmd_models(args)
        case "workers":
            return cmd_workers(args)
        case "agents":
            return cmd_agents(args)
        case "cost":
            return cmd_cost(args)
        case "apply":
            return cmd_apply(args)
        case "daemon":
            from .service import cmd_daemon

            return cmd_daemon(args)
        case "doctor":
            from .doctor import cmd_doctor

            return cmd_doctor()
        case "demo":
            from .demo import cmd_demo

            return cmd_demo(args)
        case "eval":
            from .evaluate import cmd_eval

            return cmd_eval(args)
        case "chat" | None:
            from .interactive import cmd_interactive

            return cmd_interactive(args)
        case _:  # pragma: no cover - argparse refuses unknown commands
            return exitcodes.USAGE


# --- helpers --------------------------------------------------------------------------


def credentials() -> dict[str, str]:
    """The provider variables of this environment, passed to the daemon per request."""
    return {k: os.environ[k] for k in p.CREDENTIAL_VARS if os.environ.get(k)}


def secret_values() -> list[str]:
    """Values of this environment's ``*_KEY``, ``*_TOKEN``, ``*_SECRET`` and ``*PASSWORD*``
    variables: the daemon redacts them from everything it writes (DESIGN §5 rule 6)."""
    markers = ("_KEY", "_TOKEN", "_SECRET", "PASSWORD")
    return sorted({v for k, v in os.environ.items() if len(v) >= 8 and any(m in k.upper() for m in markers)})


def resolve_agents(agents: str | None) -> list[str]:
    """The background roles: ``--agents``, else ``$MUSEC_AGENTS``, else the default."""
    text = agents if agents is not None else os.environ.get("MUSEC_AGENTS", DEFAULT_AGENTS)
    return [] if text.strip() in ("", "none") else [r.strip() for r in text.split(",") if r.strip()]


def resolve_model(model: str | None) -> str:
    model = model or os.environ.get("MUSEC_MODEL") or DEFAULT_MODEL
    if model.startswith("scripted:"):
        path = Path(model.removeprefix("scripted:")).expanduser()
        if not path.is_file():
            raise UsageError(f"scripted model file {path} does not exist")
        model = "scripted:" + str(path.resolve())
    return model


def resolve_workspace(workspace: str | None) -> str:
    path = Path(workspace or os.getcwd()).expanduser()
    if not path.is_dir():
        raise UsageError(f"workspace {path} is not a directory")
    return str(path.resolve())


def start_request(conn: Connection, args: argparse.Namespace, task: str, *, interactive: bool) -> p.StartSession:
    max_turns = 50 if args.max_turns is None else args.max_turns
    if max_turns < 1:
        raise UsageError("--max-turns must be at least 1")
    budget_usd = getattr(args, "budget_usd", None) or 0.0
    if not math.isfinite(budget_usd) or budget_usd < 0 or getattr(args, "budget_usd", None) == 0:
        raise UsageError("--budget-usd must be a finite number of dollars more than 0")
    return p.StartSession(
        id=conn.next_id(), workspace=resolve_workspace(args.workspace), model=resolve_model(args.model),
        task=task, approval=args.approval or "ask", max_turns=max_turns, credentials=credentials(),
        interactive=interactive, end_when_idle=not interactive, sandbox=args.sandbox, redact=secret_values(),
        budget_usd=budget_usd, agents=resolve_agents(getattr(args, "agents", None)),
        blackboard=getattr(args, "blackboard", True),
        agents_model=resolve_model(args.agents_model) if getattr(args, "agents_model", "") else "",
        agents_budget_usd=getattr(args, "agents_budget_usd", 0.0) or 0.0, trust=bool(getattr(args, "trust", False)),
        ask_trust=interactive and not getattr(args, "trust", False),
    )


# --- musec run ------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    task = args.task if args.task != "-" else sys.stdin.read()
    # Bytes that are not UTF-8 (a bad locale, a binary paste) become U+FFFD, not a crash.
    task = task.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if args.resume and args.continue_:
        raise UsageError("give either --resume ID or --continue, not both")
    if (args.resume or args.continue_) and args.model:
        raise UsageError("a resumed session keeps its model; start a new run to use another (--model)")
    if args.resume or args.continue_:
        conn = connect()
        resume = p.ResumeSession(
            id=conn.next_id(), session_id=args.resume or "",
            workspace="" if args.resume else resolve_workspace(args.workspace), task=task,
            credentials=credentials(), interactive=False, end_when_idle=True,
            approval=args.approval or "", max_turns=args.max_turns or 0, redact=secret_values(),
        )
        return follow_run(conn, resume, args.output_format)
    if not task.strip():
        raise UsageError('give the task: musec run "fix the failing test"')
    conn = connect()
    req = start_request(conn, args, task, interactive=False)
    return follow_run(conn, req, args.output_format)


def follow_run(
    conn: Connection, req: p.StartSession | p.ResumeSession, output_format: str,
    events: list[dict[str, Any]] | None = None, info: dict[str, str] | None = None, quiet: bool = False,
) -> int:
    """Start a headless session and show it until it ends; return the exit code.

    ``events``, when given, collects every logged event (decoded) as it arrives;
    ``info`` gets the ``session_id`` and ``log_path``.
    """
    info = {} if info is None else info
    conn.send(req)
    renderer = Renderer(sys.stdout)
    session_id = ""
    interrupted = False
    while True:
        try:
            msg = conn.recv()
        except KeyboardInterrupt:
            if interrupted or not session_id:
                return exitcodes.INTERRUPTED
            interrupted = True
            conn.send(p.Interrupt(id=conn.next_id(), session_id=session_id))
            print("\nmusec: interrupting the turn (Ctrl-C again to leave it running)", file=sys.stderr)
            continue
        except DaemonLost:
            if session_id:
                print(f"musec: the daemon stopped during session {session_id}; nothing acknowledged is lost. "
                      f"Go on with `musec run --resume {session_id}`", file=sys.stderr)
            else:
                print("musec: the daemon stopped; check `musec daemon status`", file=sys.stderr)
            return exitcodes.UNREACHABLE
        match msg:
            case p.Error() if msg.id in (req.id, 0):
                print(f"musec: {msg.message}", file=sys.stderr)
                return exitcodes.USAGE if msg.code == "bad_request" else exitcodes.GOAL_UNMET
            case p.SessionStarted():
                session_id = msg.session_id
                info.update(session_id=msg.session_id, log_path=msg.log_path)
                if output_format == "text" and not quiet:
                    verb = "resumed" if msg.resumed else "session"
                    cut = f" ({len(msg.interrupted_calls)} interrupted call(s) answered as interrupted)" if msg.interrupted_calls else ""
                    print(f"{verb} {session_id}{cut}", file=sys.stderr)
            case p.Event():
                if events is not None:
                    events.append(json.loads(msg.line))
                if msg.seq == 0 and b'"note"' in msg.line:
                    note = (json.loads(msg.line).get("trust") or {}).get("note")
                    if note:
                        print(f"musec: {safe(note)}", file=sys.stderr)
                if output_format == "stream-json":
                    sys.stdout.write(msg.line.decode() + "\n")
                    sys.stdout.flush()
                elif output_format == "text":
                    renderer.event(json.loads(msg.line))
            case p.Delta():
                if output_format == "text":
                    renderer.delta(msg.text, msg.kind)
            case p.SessionEnded():
                return finish_run(output_format, msg)
            case _:
                pass


def finish_run(output_format: str, msg: p.SessionEnded) -> int:
    code = exitcodes.for_reason(msg.exit_reason)
    summary = {
        "type": "result", "session_id": msg.session_id, "exit_reason": msg.exit_reason, "exit_code": code,
        "result": msg.result, "message": msg.message, "turns": msg.turns, "usage": msg.usage,
        "cost_usd": msg.cost_usd, "log_path": msg.log_path,
    }
    sys.stdout.flush()
    if output_format in ("json", "stream-json"):
        print(json.dumps(summary, ensure_ascii=False))
    else:
        if msg.message and msg.exit_reason != "finished":
            print(f"musec: {msg.message}", file=sys.stderr)
        print(f"musec: {msg.exit_reason} after {msg.turns} turns; log: {msg.log_path}", file=sys.stderr)
    return code


# --- sessions, log, attach ------------------------------------------------------------


def _age(ts: float) -> str:
    s = max(0, time.time() - ts)
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{int(s // n)}{unit}"
    return f"{int(s)}s"


def cmd_sessions(args: argparse.Namespace) -> int:
    conn = connect()
    workspace = "" if args.all else resolve_workspace(args.workspace)
    reply = conn.request(p.ListSessions(id=conn.next_id(), workspace=workspace))
    rows = reply.sessions
    if args.json:
        print(json.dumps([{"id": s.id, "workspace": s.workspace, "started_at": s.started_at, "updated_at": s.updated_at,
                           "status": s.status, "title": s.title} for s in rows], ensure_ascii=False))
        return exitcodes.OK
    if not rows:
        where = "" if args.all else f" in {workspace} (--all lists every workspace)"
        print(f"no sessions{where}")
        return exitcodes.OK
    for s in rows:
        print(f"{s.id}  {s.status:<12} {_age(s.updated_at):>4}  {s.workspace}  {safe(s.title)}")
    return exitcodes.OK


def cmd_log(args: argparse.Namespace) -> int:
    conn = connect()
    if args.args[0] == "verify":
        if len(args.args) != 2:
            raise UsageError("usage: musec log verify ID")
        r = conn.request(p.VerifyLog(id=conn.next_id(), session_id=args.args[1]))
        if r.ok:
            print(f"ok: {r.events} events, hash chain intact ({r.session_id})")
            return exitcodes.OK
        for problem in r.problems:
            print(f"FAILED: {problem}")
        return exitcodes.GOAL_UNMET
    if len(args.args) != 1:
        raise UsageError("usage: musec log ID [--json] | musec log verify ID")
    r = conn.request(p.ReadLog(id=conn.next_id(), session_id=args.args[0]))
    for n, line in enumerate(r.lines):
        try:
            event = json.loads(line)
        except ValueError:
            print(f"musec: seq {n} is damaged; the log is shown up to it (check it with `musec log verify {r.session_id}`)",
                  file=sys.stderr)
            return exitcodes.GOAL_UNMET
        if args.json:
            sys.stdout.write(line.decode() + "\n")
        else:
            print(log_line_summary(event))
    return exitcodes.OK


def log_line_summary(ev: dict[str, Any]) -> str:
    from .render import Renderer, call_summary

    t = time.strftime("%H:%M:%S", time.localtime(ev.get("ts", 0)))
    kind = ev.get("type", "?")
    detail = ""
    if kind in ("tool_started", "approval_requested"):
        detail = call_summary(ev.get("tool", "?"), ev.get("input") or {})
    elif kind == "tool_finished":
        detail = f"{ev.get('tool')} {Renderer.result_summary(ev)}"
    elif kind == "model_response":
        blocks = ev.get("content", [])
        text = " ".join(b.get("text", "") for b in blocks if b.get("type") == "text").strip()
        calls = [b.get("name") for b in blocks if b.get("type") == "tool_call"]
        detail = (text[:70] + ("…" if len(text) > 70 else "")) + (f" → {', '.join(calls)}" if calls else "")
    elif kind in ("user_message",):
        detail = ev.get("text", "")[:80]
    elif kind == "file_edited":
        detail = ev.get("path", "")
    elif kind in ("session_ended", "turn_ended"):
        detail = ev.get("exit_reason", "")
    elif kind == "session_started":
        detail = f"{ev.get('model')} in {ev.get('workspace')}"
    return f"{ev.get('seq', '?'):>5}  {t}  {ev.get('agent', ''):<6} {kind:<18} {detail}".rstrip()


def cmd_attach(args: argparse.Namespace) -> int:
    """Follow a live session; in a terminal, answer its approvals too (the first answer
    from any attached client wins)."""
    conn = connect()
    req = p.Attach(id=conn.next_id(), session_id=args.session_id, since_seq=-1)
    conn.send(req)
    answering = args.output_format == "text" and sys.stdin.isatty()
    if args.output_format == "text":
        print("(attached; you can answer approvals here, the first answer from any terminal wins)" if answering
              else "(following read-only: stdin is not a terminal, so approvals are answered elsewhere)", file=sys.stderr)
    renderer = Renderer(sys.stdout)
    pending: dict[str, dict[str, Any]] = {}
    while True:
        msg = conn.recv()
        match msg:
            case p.Error() if msg.id == req.id:
                print(f"musec: {msg.message}", file=sys.stderr)
                return exitcodes.USAGE
            case p.Error():
                print(f"musec: {msg.message}", file=sys.stderr)
            case p.Event():
                if args.output_format == "stream-json":
                    print(msg.line.decode(), flush=True)
                    continue
                ev = json.loads(msg.line)
                renderer.event(ev)
                if not answering:
                    continue
                if ev.get("type") == "approval_requested":
                    pending[ev["call_id"]] = ev
                elif ev.get("type") == "approval_resolved":
                    pending.pop(ev.get("call_id"), None)
                if not msg.backlog or msg.backlog_end:
                    from .interactive import ask_approval

                    for call_id, asked in list(pending.items()):
                        del pending[call_id]
                        decision = ask_approval(asked, conn)
                        if decision is not None:
                            conn.send(p.ApprovalAnswer(id=conn.next_id(), session_id=msg.session_id, call_id=call_id,
                                                       decision=decision))
            case p.Delta():
                if args.output_format == "text":
                    renderer.delta(msg.text, msg.kind)
            case p.Resync():
                conn.send(p.Attach(id=req.id, session_id=msg.session_id, since_seq=msg.last_seq))
            case p.SessionEnded():
                return exitcodes.OK
            case _:
                pass


def cmd_replay(args: argparse.Namespace) -> int:
    conn = connect()
    r = conn.request(p.Replay(id=conn.next_id(), session_id=args.session_id), timeout_s=300)
    if args.json:
        print(json.dumps({"session_id": r.session_id, "ok": r.ok, "events": r.events, "model_requests": r.model_requests,
                          "turns": r.turns, "problems": r.problems, "next_request_digest": r.next_request_digest}))
    else:
        verdict = "every request re-derived byte for byte" if r.ok else "MISMATCH"
        print(f"{r.session_id}: {r.events} events, {r.turns} turns, {r.model_requests} model requests: {verdict}")
        for problem in r.problems:
            print(f"  {problem}")
        print(f"next request digest: {r.next_request_digest}")
    return exitcodes.OK if r.ok else exitcodes.GOAL_UNMET


def parse_age_s(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    try:
        return float(text[:-1]) * units[text[-1]]
    except (KeyError, ValueError, IndexError):
        raise UsageError(f"--older-than takes an age like 30d, 12h or 90m, not {text!r}") from None


def cmd_gc(args: argparse.Namespace) -> int:
    conn = connect()
    r = conn.request(p.CollectSessions(id=conn.next_id(), older_than_s=parse_age_s(args.older_than), dry_run=args.dry_run))
    verb = "would remove" if args.dry_run else "removed"
    print(f"{verb} {len(r.sessions)} session(s), {r.bytes_freed} bytes")
    for sid in r.sessions:
        print(f"  {sid}")
    for line in r.kept:
        print(f"kept {line}")
    return exitcodes.OK


def cmd_models(args: argparse.Namespace) -> int:
    conn = connect()
    r = conn.request(p.ListModels(id=conn.next_id()))
    if args.json:
        import msgspec

        print(msgspec.json.encode(r.models).decode())
        return exitcodes.OK
    print(f"{'model':<36} {'aliases':<18} {'context':>8} {'in $/M':>7} {'cached':>7} {'out $/M':>8}  trains")
    for m in r.models:
        ctx = f"{m.context_window_tokens // 1000}k" if m.context_window_tokens else "?"
        print(f"{m.id:<36} {','.join(m.aliases)[:18]:<18} {ctx:>8} {m.input_per_mtok:>7.2f} {m.cached_input_per_mtok:>7.2f} "
              f"{m.output_per_mtok:>8.2f}  {'YES' if m.trains_on_data else 'no'}")
    return exitcodes.OK


def cmd_workers(args: argparse.Namespace) -> int:
    conn = connect()
    r = conn.request(p.ListWorkers(id=conn.next_id(), session_id=args.session_id))
    if args.json:
        print(json.dumps({"session_id": r.session_id, "integration": r.integration, "workers": [
            {"name": w.name, "branch": w.branch, "state": w.state, "commits": w.commits, "path": w.path,
             "input_tokens": w.input_tokens, "output_tokens": w.output_tokens, "cost_usd": w.cost_usd}
            for w in r.workers]}))
        return exitcodes.OK
    if not r.workers:
        print(f"session {r.session_id} started no workers")
        return exitcodes.OK
    for w in r.workers:
        print(f"{w.name:<16} {w.state:<14} {w.commits:>2} commit(s)  {w.input_tokens + w.output_tokens:>8} tokens  "
              f"${w.cost_usd:.4f}  {w.branch}")
    if r.integration:
        print(f"integration {r.integration}")
    return exitcodes.OK


def cmd_apply(args: argparse.Namespace) -> int:
    conn = connect()
    r = conn.request(p.ApplyIntegration(id=conn.next_id(), session_id=args.session_id), timeout_s=300)
    print(f"{r.branch}: {r.how} {r.old_head[:12]} -> {r.new_head[:12]}")
    return exitcodes.OK


def cmd_agents(args: argparse.Namespace) -> int:
    conn = connect()
    r = conn.request(p.ListAgents(id=conn.next_id(), session_id=args.session_id))
    if args.json:
        print(json.dumps([{"agent": a.agent, "role": a.role, "state": a.state, "last_activity_at": a.last_activity_at,
                           "input_tokens": a.input_tokens, "output_tokens": a.output_tokens, "cost_usd": a.cost_usd,
                           "events": a.events} for a in r.agents]))
        return exitcodes.OK
    for a in r.agents:
        last = _age(a.last_activity_at) + " ago" if a.last_activity_at else "never"
        print(f"{a.agent:<20} {a.role:<9} {a.state:<22} {last:>9}  {a.input_tokens + a.output_tokens:>8} tokens  ${a.cost_usd:.4f}")
    return exitcodes.OK


def cmd_cost(args: argparse.Namespace) -> int:
    conn = connect()
    r = conn.request(p.Cost(id=conn.next_id(), session_id=args.session_id,
                            workspace="" if args.session_id else resolve_workspace(None)))
    if args.json:
        print(json.dumps({"session_id": r.session_id, "total_usd": r.total_usd, "retries": r.retries, "rows": [
            {"agent": x.agent, "model": x.model, "calls": x.calls, "input_tokens": x.input_tokens,
             "output_tokens": x.output_tokens, "cache_read_tokens": x.cache_read_tokens,
             "cache_write_tokens": x.cache_write_tokens, "cost_usd": x.cost_usd} for x in r.rows]}))
        return exitcodes.OK
    print(f"session {r.session_id}")
    print(f"{'agent':<18} {'model':<32} {'calls':>5} {'input':>9} {'cached':>9} {'output':>8} {'cost':>10}")
    for x in r.rows:
        print(f"{x.agent:<18} {x.model[:32]:<32} {x.calls:>5} {x.input_tokens:>9} {x.cache_read_tokens:>9} "
              f"{x.output_tokens:>8} {'$' + format(x.cost_usd, '.4f'):>10}")
    print(f"total ${r.total_usd:.4f}" + (f" ({r.retries} retried call(s))" if r.retries else ""))
    return exitcodes.OK
