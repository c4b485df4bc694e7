"""The quick path of ``musec sessions`` and ``musec daemon status``: the usual case of each
answered without msgspec, argparse or the rest of the client, so the command starts in a
few times a bare interpreter's start (issue 19 part 6; bench/client_start.py measures it).

``run`` handles a command line only when it is one of the plain forms below and the
daemon runs, is of this version and answers as expected; then it prints exactly what the
full path (``cli``) prints. In every other case it prints nothing and returns ``None``,
and the caller runs the full path, which starts the daemon, replaces one of another
version, or says what went wrong, each in its usual words and with its usual exit code.
Both questions only read, so asking twice changes nothing.

Plain forms: ``sessions [--all] [--json]`` (the workspace is the current directory; with
``--workspace`` the full path resolves it) and ``daemon status [--json]``.

The requests are built as plain values (``protocol.plain``, the bytes msgspec writes for
the same Structs: tests/daemon/test_plain.py) and framed by ``protocol.frame``; the
replies are read with ``protocol.FrameBuffer`` and checked field by field before use.
"""

from __future__ import annotations

import os
import socket
import sys
import time

from musec.daemon import protocol as p
from musec.daemon.protocol import plain

from .exitcodes import OK
from .output import Column, counted, out, out_json, table
from .version import __version__

TYPE_CHECKING = False  # not typing's: importing typing costs this path's start
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

HANDSHAKE_TIMEOUT_S = 5.0  # as connection.try_connect
REQUEST_TIMEOUT_S = 30.0  # as connection.Connection.request


def run(argv: Sequence[str]) -> int | None:
    """Answer ``musec ARGV`` when it is a plain form and the daemon answers as expected
    (the exit code); ``None`` when the full path must run instead (nothing was printed)."""
    match list(argv):
        case ["sessions", *flags] if set(flags) <= {"--all", "--json"}:
            return _sessions("--all" in flags, "--json" in flags)
        case ["daemon", "status", *flags] if set(flags) <= {"--json"}:
            return _status("--json" in flags)
    return None


def _sessions(all_: bool, as_json: bool) -> int | None:
    workspace = ""
    if not all_:
        try:
            workspace = os.path.realpath(os.getcwd())  # requests.resolve_workspace(None)
            workspace.encode("utf-8")  # one the wire cannot carry: the full path says so
        except (OSError, UnicodeEncodeError):
            return None
    reply = _ask(sessions_request(workspace), "sessions")
    rows = session_rows(reply)
    if rows is None:
        return None
    print_sessions(rows, workspace, all_, as_json)
    return int(OK)


def _status(as_json: bool) -> int | None:
    info = status_info(_ask(status_request(), "status_reply"))
    if info is None:
        return None
    print_status(info, p.PROTOCOL_VERSION, as_json)
    return int(OK)


def hello_request(pid: int) -> dict[str, Any]:
    """``protocol.Hello`` as ``connection`` sends it, as a map (``role`` is ``client``, the
    default, so it is left out as msgspec leaves out every default; so is a ``pid`` of 0)."""
    return {"type": "hello", "protocol_version": p.PROTOCOL_VERSION, "version": __version__, **({"pid": pid} if pid else {})}


def sessions_request(workspace: str) -> dict[str, Any]:
    """``protocol.ListSessions(id=1, workspace=workspace)`` as a map."""
    return {"type": "list_sessions", "id": 1, **({"workspace": workspace} if workspace else {})}


def status_request() -> dict[str, Any]:
    """``protocol.Status(id=1)`` as a map."""
    return {"type": "status", "id": 1}


def print_sessions(rows: list[dict[str, Any]], workspace: str, all_: bool, as_json: bool) -> None:
    """Print ``musec sessions``' answer: ``rows`` (the ``SessionInfo`` fields ``id``,
    ``workspace``, ``started_at``, ``updated_at``, ``status``, ``title``), the most
    recently active first."""
    if as_json:
        out_json([{k: s[k] for k in ("id", "workspace", "started_at", "updated_at", "status", "title")} for s in rows])
        return
    if not rows:
        where = "" if all_ else f" in {workspace} (--all lists every workspace)"
        out(f"no sessions{where}")
        return
    # one write for all the lines (safe keeps the newlines): not a write and a flush per line
    out("\n".join(table([[s["id"], s["status"], age(s["updated_at"]), s["workspace"], s["title"]] for s in rows],
                         [Column(), Column(), Column(align=">"), Column(), Column()])))


def print_status(info: dict[str, Any], protocol_version: int, as_json: bool) -> None:
    """Print ``musec daemon status``' answer for a daemon of this protocol: ``info`` holds
    the ``StatusReply`` fields ``pid``, ``socket``, ``version``, ``sessions``, ``home``
    and ``log_file``."""
    if as_json:
        out_json({"running": True, "pid": info["pid"], "socket": info["socket"], "version": info["version"],
                  "sessions": info["sessions"], "state": info["home"], "log_file": info["log_file"],
                  "protocol_version": protocol_version, "compatible": True})
    else:
        out(f"musecd {info['version']} running, pid {info['pid']}, socket {info['socket']}, "
            f"{counted(len(info['sessions']), 'live session')}; log {info['log_file']}")


def age(ts: float) -> str:
    """How long ago UNIX time ``ts`` was, in one unit: ``3d``, ``5h``, ``12m``, ``40s``."""
    s = max(0.0, time.time() - ts)
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{int(s // n)}{unit}"
    return f"{int(s)}s"


_STATUS = {"pid": int, "socket": str, "version": str, "sessions": list, "home": str, "log_file": str}


def status_info(reply: dict[str, Any] | None) -> dict[str, Any] | None:
    """The fields of a ``StatusReply`` (defaults filled in as msgspec fills them); ``None``
    when one is not of its type."""
    if reply is None:
        return None
    info = {name: reply.get(name, "" if name in ("home", "log_file") else None) for name in _STATUS}
    if any(type(info[name]) is not kind for name, kind in _STATUS.items()):
        return None
    return info if all(type(s) is str for s in info["sessions"]) else None


_ROW = {"id": str, "workspace": str, "started_at": float, "updated_at": float, "status": str, "title": str}


def session_rows(reply: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """The rows of a ``Sessions`` reply, typed as msgspec would decode them (an integer
    time becomes a float); ``None`` when one is not as ``SessionInfo`` says."""
    rows = None if reply is None else reply.get("sessions")
    if type(rows) is not list:
        return None
    for row in rows:
        if type(row) is not dict:
            return None
        for name, kind in _ROW.items():
            value = row.get(name)
            if kind is float and type(value) is int:
                row[name] = value = float(value)
            if type(value) is not kind:
                return None
    return rows


def _ask(request: dict[str, Any], reply_type: str) -> dict[str, Any] | None:
    """Send ``request`` (id 1) on a new connection to a daemon of this version and return
    its reply, a map of type ``reply_type``; ``None`` on anything else (no daemon, another
    version, an error, a timeout)."""
    path = p.socket_file()
    if p.socket_path_problem(path):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(HANDSHAKE_TIMEOUT_S)
        sock.connect(path)
        if hasattr(socket, "SO_PEERCRED"):
            cred = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)  # pid, uid, gid: 3 ints
            if int.from_bytes(cred[4:8], sys.byteorder) != os.getuid():
                return None
        frames, ready = p.FrameBuffer(), []
        sock.sendall(p.frame(plain.pack(hello_request(os.getpid()))))
        hello = _next(sock, frames, ready)
        if (hello.get("type") != "hello" or hello.get("protocol_version") != p.PROTOCOL_VERSION
                or hello.get("version") != __version__):
            return None
        sock.sendall(p.frame(plain.pack(request)))
        sock.settimeout(REQUEST_TIMEOUT_S)
        reply = _next(sock, frames, ready)
        return reply if reply.get("type") == reply_type and reply.get("id") == request["id"] else None
    except (OSError, ValueError, p.FrameError):
        return None
    finally:
        sock.close()


def _next(sock: socket.socket, frames: p.FrameBuffer, ready: list[bytes]) -> dict[str, Any]:
    """The next message (bodies already read wait in ``ready``), as a map.

    Raises:
        ValueError: it is not a map, or the connection closed first.
        OSError: the socket failed or timed out.
        FrameError: a frame over the limit.
    """
    while not ready:
        data = sock.recv(1 << 16)
        if not data:
            raise ValueError("the daemon closed the connection")
        ready.extend(frames.feed(data))
    msg = plain.unpack(ready.pop(0))
    if type(msg) is not dict:
        raise ValueError("a message that is not a map")
    return msg
