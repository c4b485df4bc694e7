"""Following one session's stream on a connection, across cut-offs.

The daemon sends a session's logged events (``Event``, each with its ``seq``), live-only
messages (``Delta``, ``Idle``) and its end (``SessionEnded``). A client that falls behind
is cut off with ``Resync``; ``SessionStream`` then re-attaches from the last seq it read,
so nothing is missed or shown twice, and it completes a ``SessionEnded{not_live}`` (the
session ended while this client was away) from the logged ``session_ended`` event.
"""

from __future__ import annotations

import json
from typing import Any

from musec.daemon import protocol as p

from .connection import Connection


class SessionStream:
    """The bookkeeping of one followed session: last seq, its logged end, re-attaching.

    Args:
        conn: the connection the stream comes on.
        request_id: the id of the request that opened it (``StartSession``,
            ``ResumeSession`` or ``Attach``); a re-attach uses it again.
    """

    def __init__(self, conn: Connection, request_id: int) -> None:
        self.conn = conn
        self.request_id = request_id
        self.session_id = ""
        self.last_seq = -1
        self.resyncs = 0
        self.logged_end: dict[str, Any] | None = None
        self.turn_ended_while_away = False
        self.last_answer: dict[str, Any] | None = None

    def event(self, msg: p.Event) -> dict[str, Any] | None:
        """The event ``msg`` carries, decoded; ``None`` when it was read before."""
        if msg.seq <= self.last_seq:
            return None
        self.last_seq = msg.seq
        self.session_id = self.session_id or msg.session_id
        ev = json.loads(msg.line)
        kind = ev.get("type")
        if kind == "session_ended":
            self.logged_end = ev
        elif kind == "model_response" and ev.get("agent", "main") == "main":
            self.last_answer = ev  # where a long final answer is logged whole (``result_chars``)
        elif kind == "turn_ended" and msg.backlog and self.resyncs and ev.get("agent", "main") == "main":
            # Its Idle went to the subscription that was cut off: the turn ended here.
            self.turn_ended_while_away = True
        return ev

    def reattach(self, msg: p.Resync) -> None:
        """Attach again after a cut-off, from the last seq read."""
        self.resyncs += 1
        self.session_id = self.session_id or msg.session_id
        self.conn.send(p.Attach(id=self.request_id, session_id=msg.session_id, since_seq=self.last_seq))

    def ended(self, msg: p.SessionEnded) -> p.SessionEnded:
        """How the session ended: ``msg``, or for ``not_live`` its logged ``session_ended``."""
        end = self.logged_end
        if msg.exit_reason != "not_live" or end is None:
            return msg
        usage = end.get("usage")
        return p.SessionEnded(
            id=msg.id, session_id=msg.session_id, exit_reason=str(end.get("exit_reason", "error")),  # type: ignore[arg-type]
            result=self._result(end), turns=int(end.get("turns", 0) or 0),
            usage={k: v for k, v in usage.items() if isinstance(v, int)} if isinstance(usage, dict) else {},
            cost_usd=float(end.get("cost_usd", 0.0) or 0.0), message=str(end.get("message", "")),
            log_path=msg.log_path)

    def _result(self, end: dict[str, Any]) -> str:
        """The logged end's result; a long one (``result_chars``: only its start is in the
        end event) is the text of the main agent's last answer, when that is it whole."""
        result = str(end.get("result", ""))
        whole = end.get("result_chars")
        answer = self.last_answer
        if isinstance(whole, int) and answer is not None and isinstance(answer.get("content"), list):
            text = "".join(str(b.get("text", "")) for b in answer["content"]
                           if isinstance(b, dict) and b.get("type") == "text")
            if len(text) == whole and text.startswith(result):
                return text
        return result
