"""The daemon process: one per MUSEC_HOME, serving the wire protocol on a Unix socket.

Structure (DESIGN §6): one root task group; the listener, each connection and each
session are tasks in it. A connection handler that fails is logged and closed; it never
takes the daemon down. Liveness is the OS lock on ``state/musecd.lock`` plus the socket
handshake, never a PID file.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import signal
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import structlog

from . import protocol as p
from .errors import BadRequest, DaemonAlreadyRunning, DaemonError, SessionNotFound
from .eventlog import EventLog, first_and_last, read_lines, verify
from .session import Session

log = structlog.get_logger("musec.daemon")



class Paths:
    """The daemon's directories under one root (DESIGN §2); ``ensure`` makes them 0700."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.state = p.state_home(env)
        self.config = p.config_home(env)
        self.socket = p.socket_path(env)
        self.sessions = self.state / "sessions"
        self.blobs = self.state / "blobs"
        self.logs = self.state / "logs"
        self.lock = self.state / "musecd.lock"

    def ensure(self) -> None:
        """Make the state directories 0700. The process umask is left alone: files the
        agents create in a workspace get the person's usual modes; musec's own files are
        created 0600 explicitly."""
        for d in (self.state, self.sessions, self.blobs, self.logs, self.socket.parent):
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(d, 0o700)


def acquire_lock(paths: Paths) -> int:
    """Take the one-daemon-per-home lock; return its fd (held for the process's life).

    Raises:
        DaemonAlreadyRunning: another daemon holds it.
    """
    fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        other = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise DaemonAlreadyRunning(
            f"a musec daemon (pid {other}) is already running for {paths.state.parent}; "
            "stop it with `musec daemon stop` or use another MUSEC_HOME"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (Linux, macOS)."""
    if hasattr(socket, "SO_PEERCRED"):
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", creds)[1]
    if hasattr(os, "getpeereid"):  # pragma: no cover - macOS/BSD
        return os.getpeereid(sock.fileno())[0]  # type: ignore[attr-defined]
    return None  # pragma: no cover


def new_session_id() -> str:
    """A time-sortable session id: milliseconds since the epoch in hex, then 6 random hex."""
    return f"{int(time.time() * 1000):x}-{secrets.token_hex(3)}"


class Daemon:
    """The daemon's state: live sessions, paths, the shared HTTP client."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self.sessions: dict[str, Session] = {}
        self.tg: anyio.abc.TaskGroup | None = None
        self.http: Any = None
        self.started_at = time.time()
        from musec.agents.providers.ratelimit import RateLimitRegistry

        self.rate_limits = RateLimitRegistry()  # one limiter per credential, for every session

    # -- serving ------------------------------------------------------------------

    async def serve(self, listener: anyio.abc.SocketListener, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        import httpx

        async with httpx.AsyncClient(timeout=httpx.Timeout(connect=10, read=300, write=30, pool=30)) as http:
            self.http = http
            async with anyio.create_task_group() as tg:
                self.tg = tg
                tg.start_soon(self._signals, tg.cancel_scope)
                task_status.started()
                log.info("daemon_ready", socket=str(self.paths.socket), pid=os.getpid())
                async with listener:
                    while True:
                        conn = await listener.accept()
                        tg.start_soon(self._connection, conn)

    async def _signals(self, scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("daemon_signal", signal=signum)
                self.shutdown(scope)
                return

    def shutdown(self, scope: anyio.CancelScope) -> None:
        for session in list(self.sessions.values()):
            session.end()
        scope.cancel()

    async def _connection(self, conn: anyio.abc.SocketStream) -> None:
        handler = Connection(self, conn)
        try:
            await handler.run()
        except Exception as exc:  # supervision at the edge: one bad client never kills the daemon
            log.exception("connection_failed", error=str(exc))
        finally:
            with anyio.move_on_after(2, shield=True):
                await conn.aclose()

    # -- sessions -----------------------------------------------------------------

    def log_path(self, session_id: str) -> Path:
        return self.paths.sessions / f"{session_id}.jsonl"

    def resolve_id(self, prefix: str) -> str:
        """The session id that ``prefix`` names uniquely. Raises ``SessionNotFound``."""
        if not prefix or "/" in prefix:
            raise SessionNotFound(f"no session {prefix!r}; list them with `musec sessions --all`")
        if (self.paths.sessions / f"{prefix}.jsonl").exists():
            return prefix
        matches = sorted(f.stem for f in self.paths.sessions.glob(f"{prefix}*.jsonl"))
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise SessionNotFound(f"no session {prefix!r}; list them with `musec sessions --all`")
        raise SessionNotFound(f"{prefix!r} names {len(matches)} sessions; give more of the id")

    def start_session(self, req: p.StartSession) -> Session:
        from .agent_setup import build_main_agent, session_started_fields

        workspace = Path(req.workspace)
        if not workspace.is_dir():
            raise BadRequest(f"workspace {req.workspace} is not a directory")
        credentials = {k: v for k, v in req.credentials.items() if k in p.CREDENTIAL_VARS}
        secrets_ = [v for k, v in credentials.items() if k.endswith("_KEY")] + list(req.redact)
        session_id = new_session_id()
        elog = EventLog.create(self.log_path(session_id), secrets=secrets_)
        session = Session(session_id, elog, interactive=req.interactive, end_when_idle=req.end_when_idle)
        session.blackboard = _blackboard(req.blackboard)
        try:
            agent = build_main_agent(self, session, req, credentials)
        except Exception:
            elog.close()
            self.log_path(session_id).unlink(missing_ok=True)
            raise
        session.agent = agent
        session.record("session_started", sync=True, **session_started_fields(req, agent, workspace))
        self.sessions[session_id] = session
        session.on_end = lambda s: self.sessions.pop(s.id, None)
        return session

    def launch(self, session: Session, task: str, resume_turn: bool = False) -> None:
        """Start running a session (after its client has been told it exists)."""
        assert self.tg is not None
        self.tg.start_soon(self._run_session, session, task, resume_turn)

    def resume_session(self, req: p.ResumeSession) -> tuple[Session, bool, list[str]]:
        from .resume import resume_session

        session, mid_turn, interrupted = resume_session(self, req)
        self.sessions[session.id] = session
        session.on_end = lambda s: self.sessions.pop(s.id, None)
        return session, mid_turn, interrupted

    def collect(self, older_than_s: float, dry_run: bool) -> tuple[list[str], int, list[str]]:
        """Remove ended sessions last updated more than ``older_than_s`` ago, and blobs
        no remaining log refers to. Live sessions are never touched."""
        now = time.time()
        removed, freed, kept = [], 0, []
        for info in self.list_sessions():
            if info.id in self.sessions or now - info.updated_at < older_than_s:
                continue
            path = self.log_path(info.id)
            if not dry_run and (why := self._remove_worktrees(info)):
                kept.append(f"{info.id}: {why}")
                continue  # a worker worktree holds uncommitted work: keep the session too
            removed.append(info.id)
            if not dry_run:
                for extra in (path, path.with_name(path.name + ".torn")):
                    if extra.exists():
                        freed += extra.stat().st_size
                        extra.unlink()
        if removed and not dry_run:
            freed += self._collect_blobs()
        return removed, freed, kept

    def _remove_worktrees(self, info: p.SessionInfo) -> str:
        """Remove a session's worktrees and branches; why not, when one holds uncommitted work."""
        if not (self.paths.state / "worktrees" / info.id).exists() or not info.workspace:
            return ""
        from musec.agents.workers import WorkerError, remove_worktrees

        try:
            removal = remove_worktrees(info.workspace, self.paths.state, info.id)
        except (WorkerError, OSError) as exc:
            log.warning("worktrees_not_removed", session_id=info.id, error=str(exc))
            return f"its worktrees could not be removed ({exc})"
        if removal.kept:
            log.info("worktrees_kept", session_id=info.id, kept=removal.message)
            return removal.message.replace("\n", "; ") + f" (in {self.paths.state / 'worktrees' / info.id})"
        return ""

    def _collect_blobs(self) -> int:
        referenced: set[str] = set()
        for path in self.paths.sessions.glob("*.jsonl"):
            data = path.read_bytes()
            start = 0
            while (i := data.find(b'"blob":"', start)) >= 0:
                referenced.add(data[i + 8 : i + 72].decode("ascii", "replace"))
                start = i + 8
        freed = 0
        for blob in self.paths.blobs.glob("*/*"):
            if blob.parent.name + blob.name not in referenced:
                freed += blob.stat().st_size
                blob.unlink()
        return freed

    async def _run_session(self, session: Session, task: str, resume_turn: bool = False) -> None:
        try:
            await session.run(task, resume_turn=resume_turn)
        except Exception as exc:
            log.exception("session_failed", session_id=session.id, error=str(exc))

    def list_sessions(self, workspace: str = "") -> list[p.SessionInfo]:
        """Sessions newest first, rebuilt from the logs (the logs are the index)."""
        out = []
        for path in self.paths.sessions.glob("*.jsonl"):
            first, last = first_and_last(path)
            sid = path.stem
            if first is None:
                status = "broken"
                info = p.SessionInfo(sid, "", path.stat().st_mtime, path.stat().st_mtime, status, "(empty or damaged log)", str(path))
            else:
                if sid in self.sessions:
                    status = self.sessions[sid].status
                elif last and last.get("type") == "session_ended":
                    status = str(last.get("exit_reason", "ended"))
                else:
                    status = "interrupted"
                info = p.SessionInfo(
                    sid, str(first.get("workspace", "")), float(first.get("ts", 0)),
                    float((last or first).get("ts", 0)), status, str(first.get("title", "")) or _first_task(path),
                    str(path))
            if workspace and info.workspace != workspace:
                continue
            out.append(info)
        out.sort(key=lambda s: s.started_at, reverse=True)
        return out


class Connection:
    """One client connection: handshake, then requests until the client goes."""

    def __init__(self, daemon: Daemon, conn: anyio.abc.SocketStream) -> None:
        self.daemon = daemon
        self.conn = conn
        self.send_lock = anyio.Lock()
        self.name = f"client:{secrets.token_hex(3)}"

    async def send(self, msg: Any) -> None:
        async with self.send_lock:
            await self.conn.send(p.encode(msg))

    async def run(self) -> None:
        raw = self.conn.extra(anyio.abc.SocketAttribute.raw_socket)
        uid = peer_uid(raw)
        if uid is not None and uid != os.getuid():
            log.warning("peer_refused", uid=uid)
            await self.send(p.Error(id=0, code="permission_denied", message="this daemon serves only its own user"))
            return
        frames = p.FrameBuffer()
        greeted = False
        async with anyio.create_task_group() as tg:
            self.tg = tg
            while True:
                try:
                    data = await self.conn.receive(65536)
                except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
                    break
                try:
                    bodies = frames.feed(data)
                except p.FrameError as exc:
                    await self.send(p.Error(id=0, code="bad_frame", message=str(exc)))
                    break
                for body in bodies:
                    try:
                        msg = p.decode_client(body)
                    except p.FrameError as exc:
                        await self.send(p.Error(id=0, code="bad_frame", message=str(exc)))
                        continue
                    if not greeted:
                        if not isinstance(msg, p.Hello):
                            await self.send(p.Error(id=0, code="no_hello", message="the first frame must be Hello"))
                            tg.cancel_scope.cancel()
                            return
                        await self.send(p.Hello(protocol_version=p.PROTOCOL_VERSION, version=p.__version__, role="daemon", pid=os.getpid()))
                        if msg.protocol_version != p.PROTOCOL_VERSION:
                            await self.send(p.Error(id=0, code="protocol_mismatch", message=(
                                f"client speaks protocol {msg.protocol_version}, daemon {p.PROTOCOL_VERSION}; "
                                "restart the daemon with `musec daemon stop`")))
                            tg.cancel_scope.cancel()
                            return
                        greeted = True
                        continue
                    try:
                        await self.handle(msg)
                    except DaemonError as exc:
                        await self.send(p.Error(id=getattr(msg, "id", 0), code=exc.code, message=str(exc)))
                    except Exception as exc:
                        log.exception("request_failed", error=str(exc))
                        await self.send(p.Error(id=getattr(msg, "id", 0), code="internal", message=f"{type(exc).__name__}: {exc}"))
            tg.cancel_scope.cancel()

    async def handle(self, msg: p.ClientMsg) -> None:
        d = self.daemon
        match msg:
            case p.Hello():
                return
            case p.StartSession():
                session = d.start_session(msg)
                self._subscribe(session, msg.id, -1)
                # The client learns the session id before anything runs (a crash may follow).
                await self.send(p.SessionStarted(id=msg.id, session_id=session.id, log_path=str(session.log_path)))
                d.launch(session, msg.task)
            case p.ResumeSession():
                session, mid_turn, interrupted = d.resume_session(msg)
                since = -1 if msg.backlog else session.resumed_at_seq - 1
                self._subscribe(session, msg.id, since)
                await self.send(p.SessionStarted(id=msg.id, session_id=session.id, log_path=str(session.log_path),
                                                 resumed=True, interrupted_calls=interrupted))
                d.launch(session, msg.task, mid_turn)
            case p.Replay():
                from .resume import replay

                await self.send(replay(d, msg.session_id, msg.id))
            case p.CollectSessions():
                removed, freed, kept = d.collect(msg.older_than_s, msg.dry_run)
                await self.send(p.Collected(id=msg.id, sessions=removed, bytes_freed=freed, kept=kept))
            case p.Attach():
                sid = d.resolve_id(msg.session_id)
                session = d.sessions.get(sid)
                if session is None:
                    for n, line in enumerate(read_lines(d.log_path(sid))):
                        if n > msg.since_seq:
                            await self.send(p.Event(id=msg.id, session_id=sid, seq=n, line=line))
                    await self.send(p.SessionEnded(id=msg.id, session_id=sid, exit_reason="not_live", log_path=str(d.log_path(sid))))
                    return
                self._subscribe(session, msg.id, msg.since_seq)
            case p.UserInput():
                self._live(msg.session_id).submit(msg.text, msg.client_msg_id)
                await self.send(p.Ok(id=msg.id))
            case p.ApprovalAnswer():
                if msg.decision not in ("allow", "deny", "always"):
                    raise BadRequest(f"decision must be allow, deny or always, not {msg.decision!r}")
                counted = self._live(msg.session_id).answer(msg.call_id, msg.decision, self.name)
                await self.send(p.Ok(id=msg.id) if counted else p.Error(id=msg.id, code="already_resolved", message="that approval was already answered"))
            case p.Interrupt():
                self._live(msg.session_id).interrupt()
                await self.send(p.Ok(id=msg.id))
            case p.EndSession():
                self._live(msg.session_id).end()
                await self.send(p.Ok(id=msg.id))
            case p.Cost():
                from .projections import cost_report

                await self.send(cost_report(d, msg.session_id, msg.workspace, msg.id))
            case p.ListAgents():
                from .projections import list_agents

                await self.send(list_agents(d, msg.session_id, msg.id))
            case p.ListWorkers():
                from .projections import list_workers

                await self.send(list_workers(d, msg.session_id, msg.id))
            case p.ApplyIntegration():
                from .fanout import apply_integration

                await self.send(apply_integration(d, msg.session_id, msg.id))
            case p.ListModels():
                await self.send(p.Models(id=msg.id, models=list_models(d)))
            case p.ListSessions():
                await self.send(p.Sessions(id=msg.id, sessions=d.list_sessions(msg.workspace)))
            case p.ReadLog():
                sid = d.resolve_id(msg.session_id)
                path = d.log_path(sid)
                await self.send(p.LogLines(id=msg.id, session_id=sid, lines=read_lines(path), log_path=str(path)))
            case p.VerifyLog():
                sid = d.resolve_id(msg.session_id)
                report = verify(d.log_path(sid))
                problems = list(report.problems)
                if report.torn_bytes:
                    problems.append(f"torn last line ({report.torn_bytes} bytes without a newline)")
                await self.send(p.VerifyResult(id=msg.id, session_id=sid, ok=report.ok, events=report.events, problems=problems))
            case p.Status():
                await self.send(p.StatusReply(
                    id=msg.id, pid=os.getpid(), socket=str(d.paths.socket), version=p.__version__,
                    sessions=sorted(d.sessions), home=str(d.paths.state), log_file=str(d.paths.logs / "musecd.log")))
            case p.Shutdown():
                await self.send(p.Ok(id=msg.id))
                assert d.tg is not None
                d.shutdown(d.tg.cancel_scope)
            case _:
                raise BadRequest(f"unexpected message {type(msg).__name__}")

    def _live(self, session_id: str) -> Session:
        sid = self.daemon.resolve_id(session_id)
        session = self.daemon.sessions.get(sid)
        if session is None:
            raise SessionNotFound(f"session {sid} is not live in this daemon")
        return session

    def _subscribe(self, session: Session, request_id: int, since_seq: int) -> None:
        sub, backlog = session.attach(request_id, since_seq)
        self.tg.start_soon(self._forward, session, sub, backlog)

    async def _forward(self, session: Session, sub: Any, backlog: list[tuple[int, bytes]]) -> None:
        try:
            for n, (seq, line) in enumerate(backlog):
                await self.send(p.Event(id=sub.request_id, session_id=session.id, seq=seq, line=line,
                                        backlog=True, backlog_end=n == len(backlog) - 1))
            async with sub.receive:
                async for msg in sub.receive:
                    await self.send(msg)
            if sub.cut_off:
                await self.send(p.Resync(id=sub.request_id, session_id=session.id, last_seq=sub.last_seq))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
            pass
        finally:
            session.detach(sub)


def _first_task(path: Path) -> str:
    """The title of a session started before its first task: that task's first line."""
    import msgspec

    with open(path, "rb") as f:
        for _, line in zip(range(8), f, strict=False):
            try:
                ev = msgspec.json.decode(line)
            except msgspec.DecodeError:
                return ""
            if isinstance(ev, dict) and ev.get("type") == "user_message" and ev.get("agent") == "main":
                return str(ev.get("text", "")).strip().splitlines()[0][:80] if str(ev.get("text", "")).strip() else ""
    return ""


def _blackboard(enabled: bool) -> object | None:
    from musec.agents.blackboard import Blackboard

    return Blackboard() if enabled else None


def list_models(daemon: Daemon) -> list[p.ModelInfo]:
    """The catalog as wire structs (DESIGN §2: shipped default + the user's models.toml)."""
    from musec.agents.catalog import load_catalog

    out = []
    for e in load_catalog(daemon.paths.config).entries():
        pr = e.prices
        out.append(p.ModelInfo(
            id=e.id, provider=e.provider, aliases=list(e.aliases), context_window_tokens=e.context_window_tokens or 0,
            max_output_tokens=e.max_output_tokens or 0, input_per_mtok=pr.input if pr else 0.0,
            cached_input_per_mtok=(pr.cached_input or 0.0) if pr else 0.0,
            cache_write_per_mtok=(pr.cache_write or 0.0) if pr else 0.0,
            output_per_mtok=pr.output if pr else 0.0, trains_on_data=e.trains_on_data))
    return out


# --- entry point ----------------------------------------------------------------------


def configure_logging(paths: Paths) -> None:
    """structlog to ``state/logs/musecd.log`` as JSON lines (configured once, here)."""
    import logging

    fd = os.open(paths.logs / "musecd.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    handler = open(fd, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.WriteLoggerFactory(file=handler),
        cache_logger_on_first_use=True,
    )


def _listen_socket(paths: Paths) -> socket.socket:
    """The listening socket: systemd's (socket activation) or a fresh one."""
    if os.environ.get("LISTEN_PID") == str(os.getpid()) and os.environ.get("LISTEN_FDS") == "1":
        sock = socket.socket(fileno=3)
        sock.setblocking(False)
        return sock
    path = paths.socket
    if path.exists() or path.is_symlink():
        path.unlink()  # we hold the lock, so whoever made it is gone
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    os.chmod(path, 0o600)
    sock.listen(64)
    sock.setblocking(False)
    return sock


def run_daemon() -> int:
    """Run the daemon in the foreground (``musec daemon run``); return the exit status."""
    paths = Paths()
    paths.ensure()
    try:
        lock_fd = acquire_lock(paths)
    except DaemonAlreadyRunning as exc:
        print(f"musec: {exc}", file=sys.stderr)
        return 1
    configure_logging(paths)
    sock = _listen_socket(paths)
    daemon = Daemon(paths)

    async def main() -> None:
        listener = await anyio.abc.SocketListener.from_socket(sock)
        await daemon.serve(listener)

    try:
        anyio.run(main, backend="asyncio", backend_options={"use_uvloop": _has_uvloop()})
    except KeyboardInterrupt:
        pass
    finally:
        try:
            if paths.socket.exists() and os.environ.get("LISTEN_FDS") is None:
                paths.socket.unlink()
        finally:
            os.close(lock_fd)
        log.info("daemon_stopped")
    return 0


def _has_uvloop() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True

