"""The session event log (DESIGN §5, contract: location and line format).

One JSONL file per session, ``state/sessions/<SESSION_ID>.jsonl``. Each line is one JSON
object ``{"seq": N, "ts": UNIX_SECONDS, "agent": ..., "type": ..., ...fields, "h": H}``
where ``seq`` counts from 0 without gaps and ``h`` chains the line to the one before:

    h_n = sha256(h_{n-1} || body_n)[:32 hex digits]      (h_{-1} = "")

``body_n`` is the line's bytes with the trailing ``,"h":"…"`` member removed, so the
chain covers every byte of every line and ``verify`` detects any change, gap or
truncation. ``h`` is always the last member.

The events are the Structs of ``musec.agents.core.events``; ``line_fields`` gives a line's
members in order. A line is thus verifiable with nothing but sha256: strip the trailing
``,"h":"…"``, close the object with ``}``, hash the previous ``h`` (ASCII) followed by
those bytes, and keep the first 32 hex digits.

Writes: the log is held by an exclusive ``flock`` so two daemons never write one file.
``append`` fsyncs a write-ahead event (``persistence``) before returning, so a side
effect starts only after its announcement is durable, unless the caller defers that fsync
(the live session does: ``daemon.commit`` fsyncs in a worker thread and the session holds
the effect until then); other appends are written at once and fsynced at the next sync
(group commit). A torn last line found on open is cut off,
kept in ``<log>.torn``, and reported. Secrets are replaced before anything is written;
only the line is redacted, never the event the caller keeps.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import msgspec
from musec.agents.core.events import (
    AnyEvent,
    CompactionFinished,
    Durability,
    ToolFinished,
    decode_event,
    line_fields,
    persistence,
)

from .errors import LogCorrupt, SessionLocked
from .redaction import Redactor

_H_LEN = 32
_H_SUFFIX_LEN = len(b',"h":"') + _H_LEN + len(b'"}')
_json = msgspec.json.Encoder()


def chain_hash(prev_h: str, body: bytes) -> str:
    """The chain value of a line whose hashed bytes are ``body``, after ``prev_h``."""
    return hashlib.sha256(prev_h.encode("ascii") + body).hexdigest()[:_H_LEN]


def split_line(line: bytes) -> tuple[bytes, str]:
    """Split a log line (no newline) into its hashed body and its ``h``.

    Raises:
        LogCorrupt: the line does not end with an ``h`` member.
    """
    tail = line[-_H_SUFFIX_LEN:]
    if len(line) < _H_SUFFIX_LEN + 2 or not tail.startswith(b',"h":"') or not tail.endswith(b'"}'):
        raise LogCorrupt("line has no trailing hash member")
    return line[:-_H_SUFFIX_LEN] + b"}", tail[6:-2].decode("ascii", "replace")


@dataclass
class OpenReport:
    """What ``EventLog.open`` found: the number of events and any torn tail it cut."""

    events: int
    torn_bytes: int = 0
    torn_path: str | None = None


class CrashPoints(Protocol):
    """What the log needs of the restart tests' crash points (``agents.core.faults.Faults``
    is one; the daemon injects it): the log imports no fault module and reads no
    environment."""

    def armed(self, point: str) -> bool: ...

    def crash_at(self, point: str) -> None: ...

    def before_fsync(self) -> None: ...


def _printable_strings(value: object) -> object:
    """``value`` (builtins) with every string made encodable (``printable``)."""
    from musec.agents.tools.base import printable

    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable(k) if isinstance(k, str) else k: _printable_strings(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_printable_strings(v) for v in value]
    return value


class EventLog:
    """The single writer of one session's log file.

    Use ``EventLog.create`` for a new session and ``EventLog.open`` to go on with an
    existing one. Not thread-safe; the daemon appends from one task.
    """

    def __init__(self, path: Path, fd: int, next_seq: int, last_h: str, redactor: Redactor,
                 faults: CrashPoints | None = None) -> None:
        self.path = path
        self._fd = fd
        self.next_seq = next_seq
        self.last_h = last_h
        self.redact = redactor
        self.faults = faults
        self._unsynced = False
        self.durable_through = next_seq - 1  # the last seq known to be on disk (fsynced)
        self.ahead_through = next_seq - 1  # the last write-ahead seq appended (all before it are on disk once it is)

    # -- opening ------------------------------------------------------------------

    @classmethod
    def create(cls, path: Path, *, secrets: Iterable[str] = (), named: Mapping[str, str] | None = None,
               faults: CrashPoints | None = None) -> EventLog:
        """Create a new, empty, locked log (mode 0600). ``named``: secrets by variable name
        (``Redactor``); ``faults``: the restart tests' crash points (``mid_append``),
        injected (``agents.core.faults.Faults``); none by default.

        Raises:
            FileExistsError: the file exists already.
        """
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o600)
        _lock(fd, path)
        return cls(path, fd, 0, "", Redactor(secrets, named), faults)

    @classmethod
    def open(cls, path: Path, *, secrets: Iterable[str] = (), named: Mapping[str, str] | None = None,
             faults: CrashPoints | None = None) -> tuple[EventLog, OpenReport]:
        """Open an existing log for appending, cutting a torn last line.

        Raises:
            SessionLocked: another process holds the log.
            LogCorrupt: a line before the last is damaged (the log is not appended to).
        """
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        _lock(fd, path)  # closes fd itself when the log is held
        try:
            report = OpenReport(events=0)
            cut = _last_newline_end(fd)
            size = os.fstat(fd).st_size
            if cut < size:
                torn = os.pread(fd, size - cut, cut)
                torn_path = path.with_name(path.name + ".torn")
                with open(os.open(torn_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600), "ab") as f:
                    f.write(torn + b"\n")
                    f.flush()
                    os.fsync(f.fileno())
                os.ftruncate(fd, cut)
                os.fsync(fd)
                report.torn_bytes, report.torn_path = len(torn), str(torn_path)
            with open(path, "rb", buffering=1 << 20) as f:
                check = verify_lines(f)
            if check.problems:
                raise LogCorrupt(f"{path.name}: {check.problems[0]}; open it read-only with `musec log`")
            report.events = check.events
            return cls(path, fd, check.events, check.last_h, Redactor(secrets, named), faults), report
        except BaseException:
            os.close(fd)
            raise

    # -- writing ------------------------------------------------------------------

    def stamp(self, event: AnyEvent) -> AnyEvent:
        """``event`` with the ``seq`` and ``ts`` that ``append`` would give it next."""
        return msgspec.structs.replace(event, seq=self.next_seq, ts=round(time.time(), 6))

    def encode(self, event: AnyEvent) -> tuple[bytes, str]:
        """The line (without newline) of a stamped ``event``, redacted, and its ``h``.

        A lone surrogate in a string (a file name's byte that is not UTF-8, as ``os.fsdecode``
        gives it) cannot be UTF-8: such strings are logged as ``tools.base.printable``
        shows them (``\\xNN`` for the byte) rather than fail the append and the session."""
        fields = line_fields(event)
        try:
            body = self.redact.encode(fields)
        except UnicodeEncodeError:
            body = self.redact.encode(_printable_strings(fields))
        h = chain_hash(self.last_h, body)
        return body[:-1] + b',"h":"' + h.encode("ascii") + b'"}', h

    def append(self, event: AnyEvent, *, defer_sync: bool = False) -> tuple[AnyEvent, bytes]:
        """Append one event; return it with its ``seq`` and ``ts`` set, and the line
        written (no newline). A write-ahead event (``persistence``) is fsynced first,
        unless ``defer_sync``: then the caller makes it durable (``daemon.commit``: a group
        commit off the event loop) before the side effect it announces starts.

        The event returned is the caller's, unredacted: what runs and what the model sees
        are the exact values; only the line is redacted.

        Raises:
            OSError: the write failed (e.g. ENOSPC). The file is cut back to its last
                whole line first, so nothing half-written stays.
        """
        event = self.stamp(event)
        line, h = self.encode(event)
        data = line + b"\n"
        size = os.lseek(self._fd, 0, os.SEEK_END)
        torn = "mid_append" if isinstance(event, ToolFinished) else (
            "mid_compaction_append" if isinstance(event, CompactionFinished) else None)
        if torn is not None and self.faults is not None and self.faults.armed(torn):
            os.write(self._fd, data[: len(data) // 2])
            self.faults.crash_at(torn)
        try:
            written = os.write(self._fd, data)
            if written != len(data):
                raise OSError(28, "short write to the event log")
            ahead = persistence(event).durability is Durability.WRITE_AHEAD
            if ahead and not defer_sync:
                self.fsync(self._fd)
                self._unsynced = False
                self.durable_through = self.next_seq
            else:
                self._unsynced = True
        except OSError:
            try:
                os.ftruncate(self._fd, size)
            except OSError:
                pass
            raise
        if ahead:
            self.ahead_through = self.next_seq
        self.next_seq += 1
        self.last_h = h
        return event, line

    def sync(self) -> None:
        """Make every appended line durable (the group commit), here and now."""
        if self._unsynced:
            self.fsync(self._fd)
            self._unsynced = False
            self.durable_through = self.next_seq - 1

    def fsync(self, fd: int) -> None:
        """fsync ``fd`` (this log's file), after the test's slow disk when one is injected
        (``CrashPoints.before_fsync``): every fsync of the log goes through here, so a test
        that holds it sees any fsync still made on the event loop.

        Raises:
            OSError: the fsync failed.
        """
        if self.faults is not None:
            self.faults.before_fsync()
        os.fsync(fd)

    def dup_fd(self) -> int:
        """A new descriptor of the log file (for an fsync in another thread: closing the
        log cannot take it away mid-call). The caller closes it."""
        return os.dup(self._fd)

    def synced(self, through_seq: int) -> None:
        """Note that an fsync begun when ``through_seq`` was the last line has returned."""
        self.durable_through = max(self.durable_through, through_seq)
        if self.durable_through >= self.next_seq - 1:
            self._unsynced = False

    def close(self) -> None:
        """Sync, unlock and close. Idempotent."""
        if self._fd >= 0:
            try:
                self.sync()
            finally:
                os.close(self._fd)
                self._fd = -1


def _lock(fd: int, path: Path) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        os.close(fd)
        raise SessionLocked(f"{path.name} is held by another musec daemon") from exc


# --- reading and verifying ------------------------------------------------------------


@dataclass
class VerifyReport:
    """Result of checking a log: ``ok`` only when intact with no torn tail."""

    events: int = 0
    last_h: str = ""
    torn_bytes: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.torn_bytes


def verify_lines(lines: Iterable[bytes]) -> VerifyReport:
    """Check the hash chain and the ``seq`` sequence of a log, line by line.

    ``lines`` are the file's lines with their newlines (iterating a binary file gives
    them), so memory stays flat however long the log. A last line without its newline
    is counted in ``torn_bytes``, not as a problem. Checking stops at the first damaged
    line, whose ``seq`` (the expected one) is named. A line whose hash checks is the line
    that was written, so only its ``seq`` prefix is parsed.
    """
    report = VerifyReport()
    prev_h = ""
    n = 0
    for raw in lines:
        if not raw.endswith(b"\n"):
            report.torn_bytes = len(raw)
            break
        line = raw[:-1]
        try:
            body, h = split_line(line)
        except LogCorrupt:
            report.problems.append(f"line {n + 1} (seq {n}) is damaged")
            break
        if chain_hash(prev_h, body) != h:
            report.problems.append(f"seq {n}: hash chain broken (the line or one before it was changed)")
            break
        seq = _seq_prefix(body)
        if seq != n:
            report.problems.append(f"line {n + 1} has seq {seq}, expected {n}")
            break
        prev_h = h
        n += 1
        report.events = n
    report.last_h = prev_h
    return report


def _seq_prefix(body: bytes) -> int | None:
    if not body.startswith(b'{"seq":'):
        return None
    end = body.find(b",", 7)
    try:
        return int(body[7:end])
    except ValueError:
        return None


def _last_newline_end(fd: int, chunk: int = 1 << 16) -> int:
    """The offset just past the file's last newline (0 when it has none)."""
    end = os.fstat(fd).st_size
    while end > 0:
        start = max(0, end - chunk)
        data = os.pread(fd, end - start, start)
        i = data.rfind(b"\n")
        if i >= 0:
            return start + i + 1
        end = start
    return 0


def verify_bytes(data: bytes) -> VerifyReport:
    """``verify_lines`` over a log held in memory."""
    return verify_lines(io.BytesIO(data))


def verify(path: Path) -> VerifyReport:
    """Verify the log at ``path``, streaming; a 0-byte log is reported as a problem."""
    with open(path, "rb", buffering=1 << 20) as f:
        report = verify_lines(f)
    if path.stat().st_size == 0:
        report.problems.append("the log is empty (0 bytes): the session never started")
    return report


def iter_events(path: Path, refill: Callable[[bytes], bytes] | None = None, *,
                check: bool = True) -> Iterator[AnyEvent]:
    """The log's whole events, one at a time (memory stays flat); a torn tail is left out.
    ``refill`` gives each line back as it was before redaction (``Refill.line``, resume).
    ``check``: each line's hash chain is checked as it is read (``ChainCheck``), so no view
    (cost, agents, workers, plans, apply, replay) takes a changed line for what was
    logged; ``False`` where the whole log was just verified (``EventLog.open``).

    Raises:
        LogCorrupt: naming the seq of the first line that is not an event (not JSON, or
            of a type or shape this musec does not know) or whose chain is broken.
    """
    chain = ChainCheck(path.name) if check else None
    with open(path, "rb", buffering=1 << 20) as f:
        for n, raw in enumerate(f):
            if not raw.endswith(b"\n"):
                return
            if chain is not None:
                chain.line(raw[:-1])
            yield _decode(raw if refill is None else refill(raw), n, path)


class ChainCheck:
    """The hash chain and ``seq`` order checked one line at a time, from the first line
    (the module docstring's chain, as ``verify_lines`` checks it).

    Args:
        name: the log's file name, for the error.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.prev_h = ""
        self.n = 0

    def line(self, line: bytes) -> None:
        """Check the next line (no newline).

        Raises:
            LogCorrupt: the line is not the one that was written after the ones before.
        """
        try:
            body, h = split_line(line)
        except LogCorrupt:
            raise LogCorrupt(f"{self.name}: seq {self.n} is damaged") from None
        if chain_hash(self.prev_h, body) != h or _seq_prefix(body) != self.n:
            raise LogCorrupt(f"{self.name}: seq {self.n}: hash chain broken (the line or one before it was "
                             "changed after it was written)")
        self.prev_h = h
        self.n += 1


def _decode(line: bytes, n: int, path: Path) -> AnyEvent:
    try:
        return decode_event(line)
    except msgspec.ValidationError as exc:
        raise LogCorrupt(f"{path.name}: seq {n} is not an event this musec knows ({exc}); "
                         "a newer musec may have written it") from exc
    except msgspec.DecodeError as exc:
        raise LogCorrupt(f"{path.name}: seq {n} is damaged") from exc


def read_lines(path: Path) -> list[bytes]:
    """The whole lines of a log (a torn tail left out), without newlines."""
    data = path.read_bytes()
    return data[: data.rfind(b"\n") + 1].split(b"\n")[:-1]


def read_events(path: Path) -> list[AnyEvent]:
    """The log's events, in order (a torn tail left out).

    Read line by line (``iter_events``), not split from the whole file's bytes: splitting
    a 30 MiB log is one C call holding the GIL for 50 ms, and the file and its lines were
    both in memory at once (issue 19).

    Raises:
        LogCorrupt: naming the seq of the first line that is not an event.
    """
    return list(iter_events(path))


def first_and_last(path: Path) -> tuple[AnyEvent | None, AnyEvent | None]:
    """The events of the first and last whole lines of a log, reading only its ends
    (``None`` where there is no such line, or it is damaged or of a type this musec does not
    know: the session index lists logs of any musec version).

    The last line is read whole however long it is (fresh-user s8 J8: a 5 MB end event,
    cut to the last 64 KiB, read as damaged, and the finished session was listed as
    ``interrupted``): back from the end, 64 KiB at a time, to the newline before it."""
    with open(path, "rb") as f:
        head = f.readline()
        fd = f.fileno()
        end = _last_newline_end(fd)  # past the last whole line
        start = end - 1  # its newline; the line starts after the newline before it
        while start > 0:
            lo = max(0, start - 65536)
            i = os.pread(fd, start - lo, lo).rfind(b"\n")
            if i >= 0:
                start = lo + i + 1
                break
            start = lo
        last_line = os.pread(fd, end - 1 - max(start, 0), max(start, 0)) if end > 0 else b""
    first = try_decode(head) if head.endswith(b"\n") else None
    last = try_decode(last_line) if end > 0 else None
    return first, last


def try_decode(line: bytes) -> AnyEvent | None:
    """The event of a log line, or ``None`` when it is damaged or of an unknown type."""
    try:
        return decode_event(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
