"""Following one session in a terminal, whoever drives it (the interactive client and
``musec attach`` in a terminal).

Every message of the session's stream is read as it comes, whether this terminal waits
for a turn of its own or sits at the prompt (``interactive_input`` wakes the prompt when
the daemon sends something): so a turn that another terminal started (a person's message,
a goal's turns, an approval it asks for) is shown live here too, with the spinner instead
of an idle prompt, and the end of the session ends this client with its exit code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, assert_never

from musec.daemon import protocol as p

from .approvals import ApprovalDesk
from .connection import Connection
from .ctrlc import CTRL_C
from .errors import DaemonLost
from .exitcodes import Exit, for_reason, for_signal
from .keys import EscWatch
from .output import err, out
from .render import Renderer
from .status import SessionStatus
from .stream import SessionStream

# Live events of the main agent that mean a turn runs (the agent works until ``Idle``).
# ``approval_requested`` of any agent: its question is asked in the busy state.
_TURN_EVENTS = frozenset({"user_message", "model_request", "model_response", "tool_started", "goal_checked"})


class TurnFollower:
    """Shows a session's stream: ``follow`` until the agent is idle, ``drain`` what came
    while the prompt waited.

    Args:
        conn: the connection.
        request_id: the id of the request whose stream this is.
        renderer: where events are shown.
        on_trust: called with the message of a ``trust_required`` refusal (a new session).
        status: the status line's fold (a new one when not given).
        on_end: says how the session ended (default: ``session ended: REASON``).

    Attributes:
        busy: the agent works (a turn of anyone's runs): the spinner, not the prompt.
        ended: the session's end, once it came.
        on_started: called with the session's id when the daemon says it started (set
            after the follower is made).
    """

    def __init__(self, conn: Connection, request_id: int, renderer: Renderer,
                 on_trust: Callable[[str], None] | None = None, status: SessionStatus | None = None,
                 on_end: Callable[[p.SessionEnded], None] | None = None) -> None:
        self.conn = conn
        self.renderer = renderer
        self.on_trust = on_trust
        self.on_end = on_end
        self.on_started: Callable[[str], None] | None = None
        self.status = status if status is not None else SessionStatus()
        self.stream = SessionStream(conn, request_id)
        self.desk = ApprovalDesk(conn, renderer.answered, self._before_ask, renderer.show_diff)
        self.desk.on_interrupt = renderer.interrupting
        self.keys = EscWatch()
        self.keys.on_line = self._queued
        renderer.typing = lambda: self.keys.ahead.line
        self.error_code = ""  # the code of the daemon's refusal to start or resume
        self.exit_code: Exit = Exit.GOAL_UNMET  # set from the session's end, when it ended
        self.busy = False
        self.own_turn = False  # the running turn is this terminal's message's (until its Idle)
        self.ended: p.SessionEnded | None = None
        self.banner = ""  # said before the first event (``musec attach``: once the session is known)
        self.inputs: set[int] = set()  # ids of this terminal's UserInput requests (an Error answers one)
        self.compacts: set[int] = set()  # ids of this terminal's Compact requests not yet answered
        self.unseen_own: list[str] = []  # client_msg_ids sent here whose user_message has not come yet
        self._interrupted = False
        self._backlog_turn = False
        self._stale_idle = False  # a turn was seen ended in a backlog: its Idle, if it comes, ends nothing

    @property
    def session_id(self) -> str:
        return self.stream.session_id

    @property
    def interrupted(self) -> bool:
        """Whether the person interrupted the turn last followed (Esc or Ctrl-C here)."""
        return self._interrupted

    def _queued(self, line: str) -> None:
        self.renderer.note(f"queued: {line}  (sent when the agent is idle; Esc interrupts and brings it back)")

    def _before_ask(self) -> None:
        self.keys.off()
        self.renderer.stop_wait()
        self.renderer.notify("an approval is needed")

    def _interrupt(self) -> None:
        self.renderer.stop_wait()
        self.conn.send(p.Interrupt(id=self.conn.next_id(), session_id=self.stream.session_id))
        self.renderer.interrupting()
        out("\n[interrupting…]")

    def stopped(self, signum: int) -> Exit:
        """SIGTERM or SIGHUP (the terminal closed): a turn this terminal started is
        interrupted unless another terminal follows the session (there it goes on, as
        Claude Code's turn would not, but the session is the daemon's: DESIGN §4); say so
        (where the terminal is still there) and return 143 or 129."""
        import signal
        import time

        name = signal.Signals(signum).name
        try:
            if self.busy and self.own_turn and self.session_id:
                stop = p.Interrupt(id=self.conn.next_id(), session_id=self.session_id, unless_followed=True)
                self.conn.send(stop)
                deadline = time.monotonic() + 5
                while (left := deadline - time.monotonic()) > 0:
                    msg = self.conn.recv(left)
                    if isinstance(msg, p.Ok | p.Error) and msg.id == stop.id:
                        break
                err(f"\nmusec: {name}: this terminal's turn was interrupted, unless another terminal "
                    f"follows session {self.session_id} (there it goes on)")
            else:
                err(f"\nmusec: {name}: leaving session {self.session_id or '(not started)'}")
        except (DaemonLost, OSError):
            pass  # the daemon is gone, or so is the terminal
        return for_signal(signum)

    def sent(self, request_id: int, client_msg_id: str) -> None:
        """This terminal sent a person's message (``UserInput`` ``request_id``): the agent
        is busy until the next ``Idle``; the message is not shown again when it is logged."""
        self.inputs.add(request_id)
        self.own_turn = True
        self.unseen_own.append(client_msg_id)
        self.renderer.own_messages.add(client_msg_id)
        self.busy = True

    def compact(self, focus: str) -> None:
        """``/compact [focus]``: ask the daemon, and follow it as a turn: busy until its
        ``Idle`` (every attached terminal gets it, with the outcome), or until its reply
        when it was not done now (the session is in a turn: it compacts before its next call)."""
        req = p.Compact(id=self.conn.next_id(), session_id=self.session_id, focus=focus)
        self.conn.send(req)
        self.compacts.add(req.id)
        self.busy = True

    def _compacted(self, msg: p.Compacted) -> str | None:
        """The reply to a ``/compact`` of this terminal's (``compact``)."""
        if msg.id not in self.compacts:
            return None
        self.compacts.discard(msg.id)
        if msg.done:  # the status line shows the compacted context at once, not after the next call
            self.status.context_tokens = msg.tokens_after
        if msg.ran:
            return None  # its outcome came (or comes) with its Idle, in every terminal
        self.renderer.note(msg.message)
        self.busy = False
        return self.stream.session_id

    def drain(self) -> None:
        """Handle every message already sent by the daemon, without waiting (what came
        while the prompt waited, or while a slash command's request waited)."""
        while self.ended is None:
            ready = self.conn.take_ready()
            if not ready:
                return
            for msg in ready:
                self.handle(msg)

    def follow(self) -> str:
        """Show the session until the agent is idle; return the session id ("" when the
        session could not start or has ended)."""
        self._interrupted = False
        with CTRL_C.while_busy(lambda: self.busy):  # a Ctrl-C between waits is kept, not lost or taken as leaving
            try:
                return self._follow()
            finally:
                CTRL_C.forget()  # one kept as the turn ended: the turn is over, the prompt comes back
                self.keys.off()
                self.renderer.stop_wait(turn_over=True)

    def _follow(self) -> str:
        stream = self.stream
        while True:
            if stream.turn_ended_while_away:
                stream.turn_ended_while_away = False
                self.busy = False
                self._stale_idle = True  # that turn's Idle may still come on the new subscription
                return stream.session_id
            try:
                with CTRL_C.waiting():  # a Ctrl-C kept while an event was shown is raised here
                    esc = bool(stream.session_id) and not self._interrupted and self.keys.wait(self.conn, self.renderer.tick)
                    msg = None if esc else self.conn.recv()
                if msg is None:
                    self._interrupted = True
                    self._interrupt()
                    continue
            except KeyboardInterrupt:
                if stream.session_id and not self._interrupted:
                    self._interrupted = True
                    self._interrupt()
                    continue
                raise
            done = self.handle(msg)
            if done is not None:
                return done

    def handle(self, msg: p.DaemonMsg) -> str | None:  # noqa: C901 - one branch per message kind
        """Show one message; the session id when the agent is now idle (or a request of
        this terminal's was refused), "" when the session ended or could not start, else None."""
        stream = self.stream
        if isinstance(msg, p.Event | p.Delta | p.Busy | p.Idle | p.SessionEnded | p.Resync | p.SessionStarted) \
                and msg.id != stream.request_id:
            return None  # a stream this terminal no longer follows (a session it left)
        match msg:
            case p.Error():
                self.renderer.stop_wait()
                if msg.code == "trust_required" and self.on_trust is not None and not stream.session_id:
                    self.keys.off()  # the question is read line by line, echoed
                    self.on_trust(msg.message)
                    return None
                err(f"musec: {msg.message}")
                if not stream.session_id:
                    self.error_code, self.busy = msg.code, False
                    return ""
                if msg.id in self.inputs or msg.id in self.compacts:  # refused here: nothing runs for it
                    self.compacts.discard(msg.id)
                    self.busy = False
                    return stream.session_id
            case p.SessionStarted():
                stream.session_id = msg.session_id
                if self.on_started is not None:
                    self.on_started(msg.session_id)
            case p.Event():
                self._stale_idle = self._stale_idle and msg.backlog
                self._event(msg)
            case p.Delta():
                if msg.agent == "main":
                    self._busy()
                self.renderer.delta(msg.text, msg.kind, msg.agent)
            case p.Resync():
                self.renderer.resynced()
                stream.reattach(msg)
            case p.Busy():
                self._stale_idle = False
                if msg.activity:  # work that is no turn (a /compact from any terminal): said, then the spinner
                    self.renderer.note(f"{msg.activity}…")
                self._busy()
            case p.Idle() if self._stale_idle:  # the Idle of a turn already seen ended (after a cut-off)
                self._stale_idle = False
            case p.Idle():
                self.busy = self.own_turn = False
                self.renderer.stop_wait(turn_over=True)
                if msg.note:
                    self.renderer.note(msg.note)
                return stream.session_id
            case p.Compacted():
                return self._compacted(msg)
            case p.SessionEnded():
                self.renderer.stop_wait(turn_over=True)
                self.busy = False
                self.ended = stream.ended(msg)
                if self.on_end is not None:
                    self.on_end(self.ended)
                else:
                    out(f"session ended: {self.ended.exit_reason}")
                self.exit_code = for_reason(self.ended.exit_reason)
                return ""
            case (p.Hello() | p.EventPart() | p.Ok() | p.Sessions() | p.LogLines() | p.VerifyResult() | p.ReplayResult()
                  | p.Models() | p.CostReport() | p.Agents() | p.Workers() | p.Applied() | p.Collected()
                  | p.StatusReply() | p.WorkspaceReport() | p.GoalReply() | p.PlanReport()):
                pass  # Ok answers a message or an approval sent here
            case _:
                assert_never(msg)
        return None

    def _busy(self) -> None:
        """A turn runs (this terminal's or another's): the spinner, until ``Idle``."""
        self.busy = True
        if not self._interrupted:
            self.renderer.start_wait()

    def _event(self, msg: p.Event) -> None:
        ev = self.stream.event(msg)
        if ev is None:
            return
        if self.banner:
            err(self.banner)
            self.banner = ""
        kind = ev.get("type")
        main = ev.get("agent", "main") == "main"
        if msg.backlog:  # history: whether it ends in the middle of a turn (an attach while the agent works)
            if main and kind in _TURN_EVENTS:
                self._backlog_turn = True
            elif main and kind in ("turn_ended", "session_ended"):
                self._backlog_turn = False
        elif kind == "approval_requested" or (main and kind in _TURN_EVENTS):
            self._busy()
        self.status.fold(ev)
        self.renderer.event(ev, backlog=msg.backlog)
        if kind == "user_message" and main and not msg.backlog:  # a worker's task is no person's message
            self._user_message(ev)
        if msg.backlog_end and self._backlog_turn and self.busy:
            self._busy()  # attached in the middle of a turn: it goes on
        self.desk.on_event(msg, ev, ask=not self._interrupted)
        if self.renderer.in_turn and not self._interrupted and self.busy:
            self.renderer.start_wait()

    def _user_message(self, ev: dict[str, Any]) -> None:
        """A person's message taken by the agent: one of this terminal's, or another's (then
        a message sent here and not yet taken waits behind it: say so)."""
        mid = ev.get("client_msg_id")
        if mid in self.unseen_own:
            self.unseen_own.remove(mid)
        elif self.unseen_own:
            self.renderer.note("(your message is queued: the agent takes it when this turn ends)")
