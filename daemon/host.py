"""The host of live sessions: starting, resuming, running and ending them.

The host keeps the daemon's live sessions by id (the session index reads them for
statuses) and runs each in the daemon's root task group; a session that fails is logged
and ends alone (DESIGN §6).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.abc
import structlog
from musec.agents.core.events import UNSET, AgentMessage, SessionResumed

from . import protocol as p
from .errors import BadRequest, SessionNotFound
from .eventlog import EventLog
from .index import SessionIndex, new_session_id
from .memory import release_memory
from .pending import stopped_live_turn
from .session import Session
from .takeover import take_over

if TYPE_CHECKING:
    from .agent_setup import AgentDeps

log = structlog.get_logger("musec.daemon")


class SessionHost:
    """The sessions live in this daemon.

    Args:
        deps: what building agents needs (directories, HTTP client, rate limiters).
        tg: the task group sessions run in (the daemon's root one).

    Attributes:
        sessions: the live sessions by id (a session leaves when it ends).
        index: the sessions on disk, with these live ones' statuses.
    """

    def __init__(self, deps: AgentDeps, tg: anyio.abc.TaskGroup) -> None:
        self.deps = deps
        self.tg = tg
        self.sessions: dict[str, Session] = {}
        self._resuming: set[str] = set()  # ids whose logs are being read for a resume
        self._unlogged_stops: dict[str, str] = {}  # Session.unlogged_stop of sessions that ended so, by id
        self.index = SessionIndex(deps.paths.sessions, self.sessions)

    def start_session(self, req: p.StartSession) -> Session:
        """Create a session, its log (``session_started``) and its agents; not yet running.

        Raises:
            BadRequest: the workspace is not a directory, or see ``agent_setup.build_agent``.
        """
        from .agent_setup import build_main_agent, session_started_event

        workspace = Path(req.workspace)
        if not workspace.is_dir():
            raise BadRequest(f"workspace {req.workspace} is not a directory")
        credentials = {k: v for k, v in req.credentials.items() if k in p.CREDENTIAL_VARS}
        session_id = new_session_id()
        path = self.index.log_path(session_id)
        elog = EventLog.create(path, secrets=req.redact, named=p.named_secrets(credentials, req.redact_named),
                               faults=self.deps.faults)
        session = Session(session_id, elog, interactive=req.interactive, end_when_idle=req.end_when_idle)
        try:
            session.blackboard = _blackboard(req.blackboard)
            session.idle_timeout_s = idle_timeout_s(self.deps.paths.config)
            agent = build_main_agent(self.deps, session, req, credentials)
            session.agent = agent
            session.record(session_started_event(req, agent, workspace, session))
            session.base_approval, session.approve_plan, session.grill_next = req.approval, req.approve_plan, req.grill
            if req.plan:
                from .plans import start_planning

                start_planning(session, req.task, only=req.plan_only)
            self._tell_of_others(session, workspace)
        except BaseException:
            # A session that never started leaves no log (fresh-user s8 J4: a start on a full
            # disk left a 0-byte log, still locked by this daemon, that resume then called
            # "held by another musec daemon" and `log verify` "changed after it was written").
            with contextlib.suppress(OSError):
                elog.close()
            path.unlink(missing_ok=True)
            raise
        self._add(session)
        return session

    def _tell_of_others(self, session: Session, workspace: Path) -> None:
        """Tell the person and the model when another live session works in the same
        workspace (issue 13): their edits of one file are taken in turn and an edit of a
        file changed since its read is refused, but their plans do not know of each other."""
        here = os.path.realpath(workspace)
        others = [s.id for s in self.sessions.values()
                  if s.agent is not None and os.path.realpath(s.agent.ctx.workspace) == here]
        if others:
            session.record(AgentMessage(
                agent="daemon", to="main", from_="daemon", priority="high",
                body=f"Another musec session is live in this workspace ({', '.join(others)}): it may edit "
                     "the same files. Edits of one file are applied one at a time, and an edit of a file "
                     "that changed since it was read is refused; re-read files before editing them."))

    def live_to_take_over(self, req: p.ResumeSession) -> Session | None:
        """The live session ``req`` resumes, taken over by its client; ``None`` when the
        session is not live here (it is then resumed from its log).

        A live session no client follows (its client was killed, its terminal closed) is
        continued by whoever resumes it: it takes the new client's mode and credentials'
        redaction, and says so in ``session_resumed`` (issue 13 case 6).

        Raises:
            BadRequest: a client that started or resumed the session still follows it.
            SessionNotFound: no session has that id.
        """
        if req.session_id:
            sid = self.index.resolve_id(req.session_id)
        else:
            sid = self.index.latest(req.workspace) or ""
        session = self.sessions.get(sid)
        if session is None:
            return None
        if session.driven:
            raise BadRequest(f"session {sid} is live in this daemon and another client follows it; "
                             f"join it with `musec attach {sid}`")
        continues = stopped_live_turn(session, req, sid)  # raises when nothing is pending: left as it is
        credentials = {k: v for k, v in req.credentials.items() if k in p.CREDENTIAL_VARS}
        session.log.redact.add(req.redact, p.named_secrets(credentials, req.redact_named))
        take_over(session, interactive=req.interactive, end_when_idle=req.end_when_idle, approval=req.approval)
        mode = session.agent.approval_mode if session.agent is not None else req.approval
        session.record(SessionResumed(pid=os.getpid(), approval=mode, continues=continues or UNSET))
        session.go_on_stopped = bool(continues)
        log.info("session_taken_over", session_id=sid, interactive=req.interactive)
        return session

    def go_on(self, session: Session, task: str) -> bool:
        """After a take-over: queue ``task``, or with none end a headless session that is
        idle. Returns whether the session waits idle for its new client's first message."""
        if task:
            session.submit(task)
            return False
        if session.go_on_stopped:  # its stopped turn goes on (``pending.stopped_live_turn``)
            session.go_on_stopped = False
            session.kick()
            return False
        if session.status != "idle" or session.approvals:
            return False  # its turn goes on; the client follows it
        if session.end_when_idle:
            session.end_idle("finished", "nothing to resume: the session was idle")
            return False
        return True

    async def resume_session(self, req: p.ResumeSession, *, compacting: bool = False) -> tuple[Session, bool, list[str]]:
        """Reopen a session from its log (the log is read off the event loop); see
        ``resume.resume_session``.

        Raises:
            BadRequest: the session is being resumed by another request; see also
                ``resume.resume_session``.
        """
        from .resume import resume_session

        sid = self.index.resolve_id(req.session_id) if req.session_id else ""
        if sid and sid in self._resuming:
            raise BadRequest(f"session {sid} is being resumed by another client; join it with `musec attach {sid}`")
        if sid:
            self._resuming.add(sid)
        try:
            timeout_s = idle_timeout_s(self.deps.paths.config)
            session, mid_turn, interrupted = await resume_session(self.index, self.deps, req, compacting=compacting,
                                                                  stops=self._unlogged_stops)
            session.idle_timeout_s = timeout_s
        finally:
            self._resuming.discard(sid)
        self._add(session)
        return session, mid_turn, interrupted

    def switch_model(self, req: p.SwitchModel) -> None:
        """``/model M``: the live session's main agent goes on with ``req.model`` from its
        next request (a model it already uses changes nothing).

        Raises:
            SessionNotFound: the session is not live; BadRequest: as ``build_agent``.
        """
        from .agent_setup import switch_model

        session = self.live(req.session_id)
        if session.agent is None:
            raise BadRequest(f"session {session.id} has no agent to switch yet")
        credentials = {k: v for k, v in req.credentials.items() if k in p.CREDENTIAL_VARS}
        switch_model(self.deps, session, session.agent, req.model, credentials, by="interactive")

    def _add(self, session: Session) -> None:
        self.sessions[session.id] = session
        session.on_end = self._ended

    def _ended(self, session: Session) -> None:
        self.sessions.pop(session.id, None)
        if session.unlogged_stop:  # its resume says what cut its calls off, not "the daemon stopped"
            self._unlogged_stops[session.id] = session.unlogged_stop

    def live(self, session_id: str) -> Session:
        """The live session ``session_id`` (a prefix) names.

        Raises:
            SessionNotFound: no such session, or it is not live in this daemon.
        """
        sid = self.index.resolve_id(session_id)
        session = self.sessions.get(sid)
        if session is None:
            raise SessionNotFound(f"session {sid} is not live in this daemon")
        return session

    def launch(self, session: Session, task: str, resume_turn: bool = False) -> None:
        """Start running a session (after its client has been told it exists)."""
        self.tg.start_soon(self._run_session, session, task, resume_turn)

    async def _run_session(self, session: Session, task: str, resume_turn: bool = False) -> None:
        try:
            await session.run(task, resume_turn=resume_turn)
        except Exception as exc:
            log.exception("session_failed", session_id=session.id, error=str(exc))
        session.let_go()  # its histories (as large as its log) go now, not at the next full gc
        del session  # the allocator gives the pages back
        await anyio.to_thread.run_sync(release_memory)

    def end_all(self, cause: str) -> None:
        """End every live session (each writes ``session_ended``); ``cause`` says why to the
        model and in the transcript of a turn cut off (``stopped_by``)."""
        for session in list(self.sessions.values()):
            session.end(cause)


def stopped_by(how: str) -> str:
    """The cause a turn cut off by the daemon's stop is given (``how``: what stopped it,
    ``musec daemon stop`` or a signal): never "the person interrupted" (fresh-user 23)."""
    return f"the daemon was stopped ({how}) while it ran"


def _blackboard(enabled: bool) -> object | None:
    from musec.agents.blackboard import Blackboard

    return Blackboard() if enabled else None


def idle_timeout_s(config_dir: Path) -> float:
    """``[daemon] idle_timeout_s`` of the person's ``config.toml``: seconds after which a
    live session with no client and no work ends (0: never); 1800 when not set.

    Raises:
        BadRequest: the file is not valid TOML, or the value is not a number of seconds >= 0.
    """
    from musec.agents.config import ConfigError, load_toml

    from .takeover import IDLE_TIMEOUT_S

    path = config_dir / "config.toml"
    try:
        table = load_toml(path).get("daemon", {})
    except ConfigError as exc:
        raise BadRequest(str(exc)) from exc
    value = table.get("idle_timeout_s", IDLE_TIMEOUT_S) if isinstance(table, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
        raise BadRequest(f"{path}: [daemon] idle_timeout_s must be a number of seconds (0: never), like idle_timeout_s = 1800")
    return float(value)

