"""The approval desk: asking the person about a tool call, in the interactive client and
in ``musec attach`` alike, and the workspace-trust question.

Approvals that arrive live are asked at once; those found in a backlog (a resumed or
attached session) are asked once the backlog ends, and only if still pending. While a
question waits, the daemon is watched: when another terminal answers first, the question
is withdrawn (the first answer wins, DESIGN §4).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from musec.daemon import protocol as p

from .calls import call_summary
from .connection import Connection
from .ctrlc import CTRL_C
from .keys import discard_typeahead, read_line
from .output import counted, out, safe

INTERRUPT: Literal["interrupt"] = "interrupt"
"""What ``ask_approval`` returns when the person pressed Esc or Ctrl-C: interrupt the turn."""


class ApprovalDesk:
    """Pending approvals of one session, each asked once.

    Args:
        conn: where answers go (``ApprovalAnswer``) and the daemon is watched.
        answered: the call ids this client answered are added here (so the renderer can
            say "by you" rather than a client id).
        before_ask: called before each question (to stop a spinner and ring the bell).
        show_diff: shows a file edit's diff before its question (coloured by the
            renderer); without it the diff is printed plain.
    """

    def __init__(self, conn: Connection, answered: set[str] | None = None,
                 before_ask: Callable[[], None] | None = None,
                 show_diff: Callable[[str], None] | None = None) -> None:
        self.conn = conn
        self.show_diff = show_diff
        self.pending: dict[str, dict[str, Any]] = {}
        self.answered = answered if answered is not None else set()
        self.before_ask = before_ask
        self.last_plan = ""  # the latest plan_proposed text: what a plan's approval asks about
        self.on_interrupt: Callable[[], None] | None = None  # told when this terminal interrupts the turn

    def on_event(self, msg: p.Event, ev: dict[str, Any], ask: bool = True) -> None:
        """Note an ``approval_requested`` or ``approval_resolved`` event; ask about what is
        pending when ``msg`` is live or ends a backlog and ``ask`` (not after this terminal
        interrupted the turn: the interrupt answers it, and a question then waited for a
        person who had already said stop). The main agent's turn end drops what it left."""
        if ev.get("type") == "plan_proposed":
            self.last_plan = str(ev.get("text", ""))
        if ev.get("type") == "approval_requested" and isinstance(ev.get("call_id"), str):
            self.pending[ev["call_id"]] = ev
        elif ev.get("type") == "approval_resolved":
            self.pending.pop(ev.get("call_id"), None)  # type: ignore[arg-type]
        elif ev.get("type") == "turn_ended" and ev.get("agent", "main") == "main":
            self.pending.clear()
        if ask and (not msg.backlog or msg.backlog_end):
            self.ask_pending(msg.session_id)

    def ask_pending(self, session_id: str) -> None:
        """Ask about every pending approval, in order, and send the answers."""
        for call_id, asked in list(self.pending.items()):
            del self.pending[call_id]
            if self.before_ask is not None:
                self.before_ask()
            if discard_typeahead().strip():  # typed before this question showed: meant for another
                out(TYPED_BEFORE)
            if asked.get("tool") in ("propose_plan", "grill_question"):
                if not self._ask_plan(session_id, call_id, asked):
                    return
                continue
            decision = ask_approval(asked, self.conn, self.show_diff)
            if decision == INTERRUPT:
                self.pending.clear()
                out("[interrupting…]")
                self._interrupt(session_id)
                return
            if decision is not None:
                self.answered.add(call_id)
                self.conn.send(p.ApprovalAnswer(id=self.conn.next_id(), session_id=session_id, call_id=call_id,
                                                decision=decision, asked_seq=_seq(asked)))


    def _interrupt(self, session_id: str) -> None:
        self.conn.send(p.Interrupt(id=self.conn.next_id(), session_id=session_id))
        if self.on_interrupt is not None:
            self.on_interrupt()

    def _ask_plan(self, session_id: str, call_id: str, asked: dict[str, Any]) -> bool:
        """Ask about a proposed plan, or a grill's question (``client/plan.py``), and send the
        answer; ``False`` when the person interrupted the turn instead."""
        from .plan import ask_grill, ask_plan, plan_text

        read = lambda q: _read_answer(q, self.conn, call_id)  # noqa: E731
        try:
            if asked.get("tool") == "grill_question":
                grilled = ask_grill(asked, read)
                if grilled is not None:
                    self.answered.add(call_id)
                    self.conn.send(p.ApprovalAnswer(id=self.conn.next_id(), session_id=session_id, call_id=call_id,
                                                    decision=grilled[0], text=grilled[1],  # type: ignore[arg-type]
                                                    asked_seq=_seq(asked)))
                return True
            answer = ask_plan(plan_text(asked, self.last_plan), read)
        except KeyboardInterrupt:
            self.pending.clear()
            out("\n[interrupting…]")
            if asked.get("tool") == "propose_plan":  # the session stays in plan mode: say how on (J11)
                out("  plan mode stays on: a message asks for more planning, `/grill` grills the plan, "
                    "`/approval MODE` leaves plan mode without carrying the plan out")
            self._interrupt(session_id)
            return False
        except EOFError:
            answer = ("feedback", "")
        if answer is not None:
            action, text = answer
            self.answered.add(call_id)
            self.conn.send(p.ApprovalAnswer(id=self.conn.next_id(), session_id=session_id, call_id=call_id,
                                            decision="deny" if action == "feedback" else "allow",
                                            plan_action=action, text=text,  # type: ignore[arg-type]
                                            asked_seq=_seq(asked)))
        return True


def _seq(asked: dict[str, Any]) -> int:
    """The question's identity for the daemon: the seq of its ``approval_requested`` event
    (``ApprovalAnswer.asked_seq``), so an answer that comes late is refused, never applied
    to the question asked next under the same call id."""
    seq = asked.get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0 else -1


def describe_call(ev: dict[str, Any]) -> tuple[str, list[str]]:
    """The question's head (``bash(pytest -q)``) and, when the main argument is long or
    has several lines, that argument whole, line by line (nothing hidden, nothing joined)."""
    tool = safe(str(ev.get("tool", "?")))
    inp = ev.get("input") if isinstance(ev.get("input"), dict) else {}
    for key in ("command", "path", "pattern", "content"):
        value = inp.get(key)
        if isinstance(value, str) and ("\n" in value.rstrip("\n") or len(value) > 80 or safe(value) != value):
            lines = safe(value).rstrip("\n").split("\n")
            return f"{tool} with this {key} ({counted(len(lines), 'line')})", lines
    return call_summary(ev.get("tool", "?"), inp), []


def ask_approval(ev: dict[str, Any], conn: Connection | None = None,
                 show_diff: Callable[[str], None] | None = None) -> p.Decision | Literal["interrupt"] | None:
    """Ask the person about one call; return allow, deny or always; ``INTERRUPT`` on
    Esc or Ctrl-C (the turn is to be interrupted, as the banner says); Ctrl-D: deny.

    The call's main argument is shown whole with its line breaks, and the rule that asked;
    for a file edit, first the diff it would make (the event's ``preview``).
    With ``conn``, the daemon is watched while the question waits: when another terminal
    answers first, or the turn ends without an answer (another terminal interrupted it),
    the question is withdrawn, saying which, and ``None`` returned.
    """
    head, lines = describe_call(ev)
    preview = ev.get("preview")
    if isinstance(preview, str) and preview:
        lines = []  # the diff shows the content; the head names the file
        head = call_summary(ev.get("tool", "?"), ev.get("input") if isinstance(ev.get("input"), dict) else {})
        out(f"{head} would change:")
        if show_diff is not None:
            show_diff(preview)
        else:
            for line in safe(preview).splitlines():
                out(f"    {line}")
    agent = str(ev.get("agent") or "")  # two workers may ask the same: the question says whose it is (s8 J12)
    whose = f" for worker {safe(agent.removeprefix('worker:'))}" if agent.startswith("worker:") else ""
    if lines:
        out(f"Allow {head}{whose}?")
        for line in lines:
            out(f"  │ {line}")
    rule, source = safe(str(ev.get("rule") or "")), safe(str(ev.get("source") or ""))
    if rule:
        out(f"  (asked by the {source + ' ' if source else ''}rule: {rule})")
    elif source == "mode":
        out("  (asked by the approval mode: no rule allows it)")
    always = ev.get("always")
    if isinstance(always, list):  # what [a]lways would save, before the person answers
        saved = ", ".join(safe(str(r)) for r in always)
        out(f"  ([a]lways saves the allow rule{'s' if len(always) > 1 else ''} {saved})" if always
            else "  ([a]lways allows this call only: no rule can name what it changes)")
    question = (f"Allow it{whose}?" if lines else f"Allow {head}{whose}?") + " [y]es / [n]o / [a]lways (then Enter; Esc or Ctrl-C interrupts): "
    while True:
        try:
            answer = _read_answer(question, conn, ev.get("call_id"))
        except KeyboardInterrupt:
            out()
            return INTERRUPT
        except EOFError:
            out()
            return "deny"
        if answer is None:
            return None
        answer = answer.strip().lower()
        if answer in ("y", "yes"):
            return "allow"
        if answer in ("n", "no"):
            return "deny"
        if answer in ("a", "always"):
            return "always"


def _withdrawn(msg: p.DaemonMsg, call_id: Any) -> str:
    """Why the question about ``call_id`` no longer stands after ``msg`` ("" while it does):
    another client answered it, or the turn (or the session) ended without an answer, as
    when another terminal interrupted it."""
    match msg:
        case p.Event() if b'"approval_resolved"' in msg.line or b'"turn_ended"' in msg.line:
            ev = json.loads(msg.line)
            if ev.get("type") == "approval_resolved" and ev.get("call_id") == call_id:
                return ANSWERED_ELSEWHERE
            if ev.get("type") == "turn_ended" and ev.get("agent", "main") == "main":
                return TURN_OVER
        case p.Idle() | p.SessionEnded():
            return TURN_OVER
        case _:
            pass
    return ""


ANSWERED_ELSEWHERE = "(answered in another terminal)"
TURN_OVER = "(the turn ended without an answer; the question is withdrawn)"
NOT_APPLIED = "\n(what you typed was not applied: that question was already answered)"
TYPED_BEFORE = "(what was typed before this question was shown was discarded: answer it now)"


ANSWER_WORDS = frozenset({"y", "yes", "n", "no", "a", "always", "u", "e", "k", "f", "g"})
"""What answers a question here (an approval's, a plan's): alone on a line, never a message."""
LATE_S = 10.0
"""How long after a question was withdrawn such a line typed at the prompt is taken as a late
answer to it (one queued while the turn went on is, however long the turn ran)."""
_withdrawn_at = [0.0]  # when this terminal's latest question was withdrawn (time.monotonic); 0: none since


def late_answer(text: str, queued: bool) -> str:
    """The note to show instead of sending ``text`` as a message, when it is an answer
    typed to a question that is gone (fresh-user s8 J2: a ``y`` typed as another terminal
    answered went to the agent as the person's message); "" to send it. ``queued``: typed
    while the turn went on (else at the prompt). Any line ends the watch."""
    import time

    at, _withdrawn_at[0] = _withdrawn_at[0], 0.0
    word = text.strip().lower()
    if not at or word not in ANSWER_WORDS or not (queued or time.monotonic() - at < LATE_S):
        return ""
    return (f"({word!r} was not sent: it answers a question that was already answered or withdrawn; "
            "type a whole message to send one)")


def _read_answer(question: str, conn: Connection | None, call_id: Any) -> str | None:
    """A line from the person (``keys.read_line``: Esc raises ``EscPressed``, a
    ``KeyboardInterrupt``, and is not echoed), or ``None`` (after saying why) when the
    daemon says the question no longer stands (``_withdrawn``): a line typed just after
    it that only answers it is then dropped, not sent as a message (``late_answer``)."""
    _withdrawn_at[0] = 0.0  # a question stands again: what is typed now answers it
    with CTRL_C.waiting():  # a Ctrl-C kept while the question was shown interrupts here
        if conn is None:
            return read_line(question)
        why = [""]

        def withdrawn() -> bool:
            why[0] = next((w for w in (_withdrawn(msg, call_id) for msg in conn.pending()) if w), "")
            return bool(why[0])

        answer = read_line(question, conn.sock.fileno(), withdrawn)
        if answer is None:
            import time

            typed = discard_typeahead().strip()  # an answer typed as another terminal's came
            out("\n" + why[0] + (NOT_APPLIED if typed else ""))
            _withdrawn_at[0] = time.monotonic()
        return answer


def ask_trust(message: str) -> bool:
    """Show what trusting the workspace would apply (every hook, skill and config file) and
    ask; Esc, Ctrl-C or Ctrl-D: not trusted."""
    message, _, changes = message.partition("\n")  # what changed since trusted, a diff
    head, _, listing = message.partition(" applies: ")
    out(f"{head} applies:" if listing else head)
    for item in listing.split("; "):
        out(f"  {item}")
    for line in changes.splitlines():
        out(f"  {line}")
    while True:
        try:
            answer = str(read_line("Trust it? Hooks will run as commands. [y]es / [n]o (then Enter; Esc: no): ")).strip().lower()
        except (EOFError, KeyboardInterrupt):
            out()
            return False
        if answer in ("y", "yes", "n", "no"):
            return answer.startswith("y")
