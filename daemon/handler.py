"""One client connection: the peer check, the handshake, then requests until it goes.

Each request is answered by the replies the protocol names for it (``daemon.protocol``);
a ``DaemonError`` becomes an ``Error`` frame with its code, anything else an ``internal``
one, and the connection goes on. Attached sessions' events are forwarded by one task per
subscription, in the connection's own task group.
"""

from __future__ import annotations

import functools
import os
import secrets
import socket
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, assert_never, get_args

import anyio
import anyio.abc
import anyio.to_thread
import structlog
from musec.agents.core.events import IntegrationApplied
from musec.agents.core.words import counted

from . import protocol as p
from .errors import BadRequest, ClientGone, DaemonError, disk_full
from .host import SessionHost
from .logstream import event_batches, send_log
from .memory import quiet_collector, release_memory
from .paths import Paths
from .peers import peer_pid, refused_peer
from .session import CompactOutcome, Session
from .verifier import verify_off_process
from .version import musec_version

log = structlog.get_logger("musec.daemon")
T = TypeVar("T")
STALE_ANSWER = ("your answer was not applied: that question was already answered in another terminal "
                "(or is no longer asked)")
"""The refusal of an ``ApprovalAnswer`` to a question no longer pending (``Error{already_resolved}``)."""


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (Linux, macOS)."""
    if hasattr(socket, "SO_PEERCRED"):
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", creds)[1]
    if hasattr(os, "getpeereid"):  # pragma: no cover - macOS/BSD
        return os.getpeereid(sock.fileno())[0]  # type: ignore[attr-defined]
    return None  # pragma: no cover


class Connection:
    """One client connection.

    Args:
        conn: the accepted socket stream.
        host: the live sessions (and, through it, the index).
        paths: the daemon's directories (for ``Status`` and the model catalog).
        stop: ends every session and stops the daemon (``Shutdown``).
    """

    def __init__(self, conn: anyio.abc.SocketStream, host: SessionHost, paths: Paths, stop: Callable[[], None]) -> None:
        self.conn = conn
        self.host = host
        self.index = host.index
        self.paths = paths
        self.stop = stop
        self.send_lock = anyio.Lock()
        self.name = f"client:{secrets.token_hex(3)}"
        self.driving: set[str] = set()  # sessions this client started or resumed (a re-attach still drives)
        self.subscriptions: list[Any] = []  # this client's subscribers (``Interrupt.unless_followed``)

    async def send(self, msg: Any) -> None:
        """Send one message, in as many frames as it needs (``protocol.encode_fitted``);
        the frames of concurrent senders never interleave.

        Raises:
            FrameError: no frame can carry ``msg`` (see ``encode_fitted``).
        """
        await self.send_bytes(p.encode_fitted(msg))

    async def send_bytes(self, frames: bytes) -> None:
        """Write whole encoded frames (never interleaved with another sender's).

        Raises:
            ClientGone: the client closed the connection.
        """
        async with self.send_lock:
            try:
                await self.conn.send(frames)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError) as exc:
                raise ClientGone(f"{self.name} closed the connection") from exc

    async def run(self) -> None:
        """Serve the connection until the client goes or breaks the protocol; a client
        that goes while it is answered (``ClientGone``) ends it quietly."""
        try:
            await self._serve()
        except* ClientGone:
            log.info("client_gone", client=self.name)  # a reader that closed early (`musec log ID | head`): normal

    async def _serve(self) -> None:
        raw = self.conn.extra(anyio.abc.SocketAttribute.raw_socket)
        uid = peer_uid(raw)
        if uid is not None and uid != os.getuid():
            log.warning("peer_refused", uid=uid)
            await self.send(p.Error(id=0, code="permission_denied", message="this daemon serves only its own user"))
            return
        why = refused_peer(peer_pid(raw))
        if why is not None:
            log.warning("peer_refused", why=why)
            with anyio.move_on_after(2):  # its Hello first: a close with it unread resets the answer away
                await self.conn.receive(65536)
            await self.send(p.Error(id=0, code="permission_denied",
                                    message=f"the daemon does not serve this process: {why}, and a session's tools "
                                            "may not drive musec (run musec from your own terminal)"))
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
                        await self.send(p.Error(id=exc.request_id, code=exc.code, message=str(exc)))
                        continue
                    if not greeted:
                        if not await self._greet(msg):
                            tg.cancel_scope.cancel()
                            return
                        greeted = True
                        continue
                    await self._answer(msg)
            tg.cancel_scope.cancel()

    async def _greet(self, msg: p.ClientMsg) -> bool:
        """Answer the client's first frame; whether the connection may go on."""
        if not isinstance(msg, p.Hello):
            await self.send(p.Error(id=0, code="no_hello", message="the first frame must be Hello"))
            return False
        await self.send(p.Hello(protocol_version=p.PROTOCOL_VERSION, version=musec_version(), role="daemon",
                                pid=os.getpid(), sessions=len(self.host.sessions)))
        if msg.protocol_version != p.PROTOCOL_VERSION:
            await self.send(p.Error(id=0, code="protocol_mismatch", message=(
                f"client speaks protocol {msg.protocol_version}, daemon {p.PROTOCOL_VERSION}; "
                "restart the daemon with `musec daemon stop`")))
            return False
        return True

    async def _answer(self, msg: p.ClientMsg) -> None:
        """Handle one request; a failure is answered with an ``Error``, never raised."""
        try:
            await self.handle(msg)
        except ClientGone:
            raise
        except p.FrameError as exc:
            await self.send(_too_large(getattr(msg, "id", 0), type(msg).__name__, exc))
        except DaemonError as exc:
            await self.send(p.Error(id=getattr(msg, "id", 0), code=exc.code, message=str(exc)))
        except Exception as exc:
            full = disk_full(exc, self.paths.state) if isinstance(exc, OSError) else None
            if full is not None:  # a condition of the machine, not a fault of the daemon
                log.error("request_failed_disk_full", error=str(exc))
                await self.send(p.Error(id=getattr(msg, "id", 0), code=full.code, message=str(full)))
                return
            log.exception("request_failed", error=str(exc))
            await self.send(p.Error(id=getattr(msg, "id", 0), code="internal", message=f"{type(exc).__name__}: {exc}"))

    async def handle(self, msg: p.ClientMsg) -> None:
        """Handle one request: send its replies, or raise ``DaemonError``."""
        match msg:
            case p.Hello():
                return
            case p.StartSession() | p.ResumeSession() | p.Attach():
                await self._join(msg)
            case p.UserInput() | p.ApprovalAnswer() | p.Interrupt() | p.EndSession() | p.SetApproval():
                await self._control(msg)
            case p.SwitchModel():
                self.host.switch_model(msg)
                await self.send(p.Ok(id=msg.id))
            case p.ReadLog():
                sid = self.index.resolve_id(msg.session_id)
                path = self.index.log_path(sid)
                damaged: list[str] = []
                sent = await send_log(self.send_bytes, event_batches(path, msg.id, sid, -1, damaged=damaged))
                await self.send(p.LogLines(id=msg.id, session_id=sid, lines=[], log_path=str(path), events=sent,
                                           damaged=damaged[0] if damaged else ""))
            case p.Replay() | p.Cost() | p.ListAgents() | p.ListWorkers() | p.VerifyLog() | p.ShowPlan():
                await self.send(await off_loop(self._quiet_view, msg))
                await off_loop(release_memory)  # a view of a large log was as large as it
            case p.ApplyIntegration():
                from .apply import append_to_ended, apply_integration, remove_applied_worktrees

                reply, workspace = await off_loop(apply_integration, self.index, msg.session_id, msg.id)
                applied = IntegrationApplied(branch=reply.branch, old_head=reply.old_head, new_head=reply.new_head,
                                             how=reply.how)
                session = self.host.sessions.get(reply.session_id)
                if reply.how != "up-to-date" and session is not None:  # recorded on the loop: one writer task
                    session.record(applied)
                    await session.durable()
                elif reply.how != "up-to-date":  # the person's branch changed: an ended session's log says so too
                    await off_loop(append_to_ended, self.index.log_path(reply.session_id), applied)
                    if reply.how != "uncommitted":  # else its branch is the one record of the workers' changes alone
                        await off_loop(remove_applied_worktrees, workspace, self.paths.state, reply.session_id)
                await self.send(reply)
            case p.Compact():
                await self.send(await self._compact(msg))
            case p.CollectSessions():
                from .collect import collect

                removed, freed, kept, sizes, notes, items = await off_loop(functools.partial(
                    collect, self.index, self.paths.state, self.paths.blobs, msg.older_than_s, msg.dry_run,
                    discard_unapplied=msg.discard_unapplied))
                await self.send(p.Collected(id=msg.id, sessions=removed, bytes_freed=freed, kept=kept,
                                            session_bytes=sizes, notes=notes, session_items=items))
            case p.ListModels():
                await self.send(p.Models(id=msg.id, models=await off_loop(list_models, self.paths.config)))
            case p.InspectWorkspace():
                from .extensions import inspect_workspace

                await self.send(await inspect_workspace(self.paths.config, self.paths.state, msg))
            case p.ListSessions():
                await self.send(p.Sessions(id=msg.id, sessions=await off_loop(self.index.list_sessions, msg.workspace)))
            case p.GoalCommand():
                await self.send(await self._goal(msg))
            case p.Status():
                await self.send(p.StatusReply(
                    id=msg.id, pid=os.getpid(), socket=str(self.paths.socket), version=musec_version(),
                    sessions=sorted(self.host.sessions), home=str(self.paths.state),
                    log_file=str(self.paths.logs / "musecd.log")))
            case p.Shutdown():
                await self.send(p.Ok(id=msg.id))
                self.stop()
            case _:
                raise BadRequest(f"unexpected message {type(msg).__name__}")

    async def _join(self, msg: p.StartSession | p.ResumeSession | p.Attach) -> None:
        """Start, resume or attach to a session, and subscribe to its events."""
        host = self.host
        match msg:
            case p.StartSession():
                session = host.start_session(msg)
                self._subscribe(session, msg.id, -1, drives=True)
                # The client learns the session id before anything runs (a crash may follow),
                # once its log is on disk (written here, fsynced off the loop).
                await session.durable()
                await self.send(p.SessionStarted(id=msg.id, session_id=session.id, log_path=str(session.log_path)))
                host.launch(session, msg.task)
            case p.ResumeSession():
                live = host.live_to_take_over(msg)
                if live is not None:
                    sub = self._subscribe(live, msg.id, -1 if msg.backlog else live.log.next_seq - 1, drives=True)
                    await live.durable()  # its session_resumed
                    await self.send(p.SessionStarted(id=msg.id, session_id=live.id, log_path=str(live.log_path),
                                                     resumed=True))
                    if host.go_on(live, msg.task):  # after the backlog, this client is told it is idle
                        sub.send.send_nowait(p.Idle(id=msg.id, session_id=live.id, exit_reason="ready"))
                    return
                session, mid_turn, interrupted = await host.resume_session(msg)
                since = -1 if msg.backlog else session.resumed_at_seq - 1
                self._subscribe(session, msg.id, since, drives=True)
                await session.durable()  # what resuming wrote (session_resumed, the calls it answered)
                await self.send(p.SessionStarted(id=msg.id, session_id=session.id, log_path=str(session.log_path),
                                                 resumed=True, interrupted_calls=interrupted))
                host.launch(session, msg.task, mid_turn)
            case p.Attach():
                sid = self.index.resolve_id(msg.session_id)
                live = host.sessions.get(sid)
                if live is not None:
                    sub = self._subscribe(live, msg.id, msg.since_seq, drives=sid in self.driving)
                    if msg.tell_idle and msg.since_seq < 0 and live.activity:  # a /compact runs: busy until its Idle
                        sub.send.send_nowait(p.Busy(id=msg.id, session_id=live.id, activity=live.activity))
                    elif msg.tell_idle and msg.since_seq < 0 and live.status == "idle" and not live.approvals:
                        # A new client (not a re-attach after a cut-off) learns after the backlog that it waits.
                        sub.send.send_nowait(p.Idle(id=msg.id, session_id=live.id, exit_reason="ready"))
                    return
                path = self.index.log_path(sid)
                await send_log(self.send_bytes, event_batches(path, msg.id, sid, msg.since_seq))
                await self.send(p.SessionEnded(id=msg.id, session_id=sid, exit_reason="not_live", log_path=str(path)))

    async def _control(self, msg: p.UserInput | p.ApprovalAnswer | p.Interrupt | p.EndSession | p.SetApproval) -> None:
        """Input, approval answers, interrupts, approval modes and ends for a live session."""
        if isinstance(msg, p.ApprovalAnswer) and msg.decision not in ("allow", "deny", "always"):
            raise BadRequest(f"decision must be allow, deny or always, not {msg.decision!r}")
        if isinstance(msg, p.SetApproval) and msg.approval not in get_args(p.ApprovalMode):
            raise BadRequest(f"approval must be ask, auto, read-only or never, not {msg.approval!r}")
        session = self.host.live(msg.session_id)
        match msg:
            case p.UserInput():
                session.submit(msg.text, msg.client_msg_id)
            case p.ApprovalAnswer():
                if not session.answer(msg.call_id, msg.decision, self.name, msg.plan_action, msg.text, msg.asked_seq):
                    await self.send(p.Error(id=msg.id, code="already_resolved", message=STALE_ANSWER))
                    return
            case p.Interrupt():
                if not (msg.unless_followed and self._others_follow(session)):
                    session.interrupt(self.name)
            case p.EndSession():
                if msg.unless_followed and self._others_follow(session):
                    await self.send(p.Error(id=msg.id, code="still_followed",
                                            message="another terminal follows the session: it stays open for it"))
                    return
                session.end()
            case p.SetApproval():
                session.set_approval(msg.approval, self.name)
                await session.durable()  # its approval_mode_changed, before the client is told
        await self.send(p.Ok(id=msg.id))

    def _others_follow(self, session: Any) -> bool:
        """Whether a client other than this one follows ``session``."""
        return any(sub not in self.subscriptions for sub in session.subscribers)

    async def _goal(self, msg: p.GoalCommand) -> p.GoalReply:
        """``/goal`` for a live session. Raises ``BadRequest`` with the usage or the reason."""
        from musec.agents.goal import GoalUsageError

        session = self.host.live(msg.session_id)
        if session.goals is None:
            raise BadRequest("this session cannot take a goal")
        try:
            lines = await session.goals.command(msg.text, idle=session.status != "running")
        except GoalUsageError as exc:
            raise BadRequest(str(exc)) from None
        return p.GoalReply(id=msg.id, session_id=session.id, lines=lines)

    async def _compact(self, msg: p.Compact) -> p.Compacted:
        """Compact a live session, or resume one that is not live just for that."""
        sid = self.index.resolve_id(msg.session_id)
        session = self.host.sessions.get(sid)
        if session is None:
            session, _, _ = await self.host.resume_session(p.ResumeSession(
                id=msg.id, session_id=sid, credentials=msg.credentials, end_when_idle=True), compacting=True)
            session.compact_first = msg.focus
            self.host.launch(session, "")
            await session.ended.wait()
            outcome = session.compacted or CompactOutcome(False, 0, 0, "the session ended before compacting", True)
        else:
            outcome = await session.compact(msg.focus)
        return p.Compacted(id=msg.id, session_id=sid, **outcome._asdict())

    def _quiet_view(self, msg: p.Replay | p.Cost | p.ListAgents | p.ListWorkers | p.VerifyLog | p.ShowPlan) -> p.DaemonMsg:
        """``_view`` with the collector's full passes held off until what it built is freed
        (``memory.quiet_collector``: a replay's full passes stalled the event loop)."""
        with quiet_collector():
            return self._view(msg)

    def _view(self, msg: p.Replay | p.Cost | p.ListAgents | p.ListWorkers | p.VerifyLog | p.ShowPlan) -> p.DaemonMsg:
        """The reply of a read-only request: a view of a session rebuilt from its log.

        Runs in a worker thread (``off_loop``): it reads live sessions only through the
        index's ``live`` mapping, and never records.
        """
        from . import projections
        from .resume import replay

        index = self.index
        match msg:
            case p.Replay():
                return replay(index, msg.session_id, msg.id)
            case p.Cost():
                return projections.cost_report(index, msg.session_id, msg.workspace, msg.id)
            case p.ListAgents():
                return projections.list_agents(index, msg.session_id, msg.id)
            case p.ListWorkers():
                return projections.list_workers(index, msg.session_id, msg.id)
            case p.ShowPlan():
                from .plans import plan_report

                return plan_report(index, msg.session_id, msg.id)
            case p.VerifyLog():
                sid = index.resolve_id(msg.session_id)
                report = verify_off_process(index.log_path(sid))  # a large log in a child: the GIL stays here
                problems = list(report.problems)
                if report.torn_bytes:
                    problems.append(f"torn last line ({counted(report.torn_bytes, 'byte')} without a newline)")
                return p.VerifyResult(id=msg.id, session_id=sid, ok=report.ok, events=report.events, problems=problems)
            case _:
                assert_never(msg)

    def _subscribe(self, session: Session, request_id: int, since_seq: int, *, drives: bool = False) -> Any:
        sub, upto_seq = session.attach(request_id, since_seq, drives=drives)
        self.subscriptions.append(sub)
        if drives:
            self.driving.add(session.id)
        self.tg.start_soon(self._forward, session, sub, upto_seq)
        return sub

    async def _forward(self, session: Session, sub: Any, upto_seq: int) -> None:
        """Send the backlog (the log's lines after ``sub.since_seq`` up to ``upto_seq``,
        read from the file off the loop), then the live stream, until it ends."""
        try:
            if upto_seq > sub.since_seq:
                await send_log(self.send_bytes, event_batches(session.log_path, sub.request_id, session.id,
                                                              sub.since_seq, upto_seq, backlog=True))
            async with sub.receive:
                async for msg in sub.receive:
                    try:
                        await self.send(msg)
                    except p.FrameError as exc:  # this message only; the stream goes on
                        await self.send(_too_large(sub.request_id, type(msg).__name__, exc, session.id))
            if sub.cut_off:
                await self.send(p.Resync(id=sub.request_id, session_id=session.id, last_seq=sub.last_seq))
        except (ClientGone, anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
            pass
        finally:
            session.detach(sub)
            if sub in self.subscriptions:
                self.subscriptions.remove(sub)


def _too_large(request_id: int, what: str, exc: p.FrameError, session_id: str = "") -> p.Error:
    where = f" (`musec log {session_id} --json`)" if session_id else ""
    return p.Error(id=request_id, code="too_large", message=(
        f"the daemon could not send a {what} message: {exc}; the daemon is still running"
        + (f", and the session's log has everything{where}" if session_id else "")))


async def off_loop(func: Callable[..., T], *args: Any) -> T:
    """Run ``func(*args)`` in a worker thread, so that the event loop keeps serving.

    Everything that reads a whole log, walks the sessions directory or runs git goes
    through here (issue 19): a 100k-event replay must not delay another client's status
    or a live session's events. ``func`` must not touch the loop's objects (streams,
    events, ``Session.record``); cancelling the waiting request abandons the thread's
    result, it does not stop the thread.
    """
    return await anyio.to_thread.run_sync(lambda: func(*args), abandon_on_cancel=True)


def list_models(config_dir: Path) -> list[p.ModelInfo]:
    """The catalog as wire structs (DESIGN §2: shipped default + the user's models.toml)."""
    from musec.agents.providers.catalog import load_catalog

    out = []
    for e in load_catalog(config_dir).entries():
        pr = e.prices
        out.append(p.ModelInfo(
            id=e.id, provider=e.provider, aliases=list(e.aliases), context_window_tokens=e.context_window_tokens or 0,
            max_output_tokens=e.max_output_tokens or 0, input_per_mtok=pr.input if pr else 0.0,
            cached_input_per_mtok=(pr.cached_input or 0.0) if pr else 0.0,
            cache_write_per_mtok=(pr.cache_write or 0.0) if pr else 0.0,
            output_per_mtok=pr.output if pr else 0.0, trains_on_data=e.trains_on_data))
    return out
