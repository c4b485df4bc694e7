"""The session index: the sessions on disk, listed and named (DESIGN §5 rule 7).

The logs are the index: nothing is stored beside them. A session's status comes from the
live sessions of this daemon when it is one of them, else from its log's last line. The
daemon keeps what it read of each log in memory, keyed by the file's size and mtime, so a
listing reopens only the logs that changed (issue 19).
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from musec.agents.core.events import GoalSet, IntegrationApplied, SessionEnded, SessionStarted, UserMessage

from . import protocol as p
from .errors import SessionNotFound
from .eventlog import first_and_last, try_decode


def new_session_id() -> str:
    """A time-sortable session id: milliseconds since the epoch in hex, then 6 random hex."""
    return f"{int(time.time() * 1000):x}-{secrets.token_hex(3)}"


class SessionIndex:
    """The sessions under one ``state/sessions`` directory.

    Args:
        directory: where the logs are (``<id>.jsonl`` each).
        live: the sessions this daemon hosts now (``daemon.session.Session``), by
            id; read, never changed, here.
    """

    def __init__(self, directory: Path, live: Mapping[str, Any]) -> None:
        self.directory = directory
        self.live = live
        self._cache: dict[str, tuple[int, int, _Entry]] = {}  # file name -> (size, mtime_ns, entry)

    def log_path(self, session_id: str) -> Path:
        """Where the log of ``session_id`` is (whether or not it exists)."""
        return self.directory / f"{session_id}.jsonl"

    def resolve_id(self, prefix: str) -> str:
        """The session id that ``prefix`` names uniquely.

        Raises:
            SessionNotFound: no session, or several, start with ``prefix``.
        """
        if not prefix or "/" in prefix:
            raise SessionNotFound(f"no session {prefix!r}; list them with `musec sessions --all`")
        if (self.directory / f"{prefix}.jsonl").exists():
            return prefix
        # Not a glob of the prefix: ``*``, ``?`` and ``[`` in it are characters, not patterns.
        matches = sorted(f.stem for f in self.directory.glob("*.jsonl") if f.stem.startswith(prefix))
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise SessionNotFound(f"no session {prefix!r}; list them with `musec sessions --all`")
        raise SessionNotFound(f"{prefix!r} names {len(matches)} sessions; give more of the id")

    def latest(self, workspace: str) -> str | None:
        """The id of the most recently started session of ``workspace``, if any."""
        found = self.list_sessions(workspace)
        return found[0].id if found else None

    def list_sessions(self, workspace: str = "") -> list[p.SessionInfo]:
        """Sessions, the most recently active first, rebuilt from the logs (of ``workspace`` only, when given).

        A log is read (its first and last lines) only when its size or mtime changed since
        the last listing (``_cache``), so listing 1,000 unchanged sessions costs a
        directory scan. Safe to call from worker threads.
        """
        out = []
        cache: dict[str, tuple[int, int, _Entry]] = {}
        with os.scandir(self.directory) as entries:
            for entry in entries:
                if not entry.name.endswith(".jsonl") or not entry.is_file():
                    continue
                try:
                    st = entry.stat()
                except FileNotFoundError:  # collected meanwhile
                    continue
                known = self._cache.get(entry.name)
                if known is not None and known[0] == st.st_size and known[1] == st.st_mtime_ns:
                    row = known[2]
                else:
                    row = _read_entry(Path(entry.path), st.st_mtime)
                cache[entry.name] = (st.st_size, st.st_mtime_ns, row)
                if workspace and row.workspace != workspace:
                    continue
                sid = entry.name[: -len(".jsonl")]
                live = self.live.get(sid)
                status = live.status if live is not None and row.status != "broken" else row.status
                out.append(p.SessionInfo(sid, row.workspace, row.started_at, row.updated_at, status, row.title,
                                         entry.path))
        self._cache = cache
        out.sort(key=lambda s: s.updated_at, reverse=True)  # the most recently active first
        return out


@dataclass(frozen=True)
class _Entry:
    """What a listing shows of one log, read from its ends (a live status overrides ``status``)."""

    workspace: str
    started_at: float
    updated_at: float
    status: str
    title: str


def _read_entry(path: Path, mtime: float) -> _Entry:
    first, last = first_and_last(path)
    if not isinstance(first, SessionStarted):
        return _Entry("", mtime, mtime, "broken", "(empty or damaged log)")
    if isinstance(last, SessionEnded):
        status = last.exit_reason or "ended"
    else:  # an ended session whose integration was then applied (daemon/apply.py) says so last
        status = "applied" if isinstance(last, IntegrationApplied) else "interrupted"
    return _Entry(first.workspace, first.ts, (last or first).ts, status, first.title or _first_task(path))


def _first_task(path: Path) -> str:
    """The title of a session started before its first task: that task's first line (a
    goal's condition, ``goal: ...``, when the goal came first)."""
    with open(path, "rb") as f:
        for _, line in zip(range(8), f, strict=False):
            ev = try_decode(line)
            if ev is None:
                return ""
            if isinstance(ev, UserMessage) and ev.agent == "main":
                return ev.text.strip().splitlines()[0][:80] if ev.text.strip() else ""
            if isinstance(ev, GoalSet) and ev.condition.strip():  # ``musec run --goal G`` with no task
                return ("goal: " + ev.condition.strip().splitlines()[0])[:80]
    return ""
