"""The protocol's parts that need no msgspec: its version, the framing (a 4-byte big-endian
length, then the body) and its limits, where the daemon listens, and which environment
variables hold secrets.

Part of ``musec.daemon.protocol``, which re-exports every name here: import the package,
not this module. Kept apart from the messages so that a client command that needs no
Struct (``musec sessions``) starts without importing msgspec (issue 19 part 6).
"""

from __future__ import annotations

import os
import struct
import sys

TYPE_CHECKING = False  # not typing's: importing typing costs a quick client command's start
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

# 2: safe defaults (approval "ask", sandbox "auto"), closed sets checked, Hello.sessions.
# 3: logs and events of any size (issue 12 part 8): ``ReadLog`` streams ``Event`` frames and
#    ends with ``LogLines{events}``; an event over ``EVENT_PIECE_BYTES`` comes as
#    ``EventPart`` frames and an ``Event{parts}``; ``Error{too_large}``.
# 4: ``Busy`` (the main agent works: a turn or a compaction, sent to every attached client),
#    ``Idle.note``: an older client cannot read ``Busy``, so it is told at ``Hello``.
PROTOCOL_VERSION = 4
MAX_FRAME_BYTES = 16 * 1024 * 1024
EVENT_PIECE_BYTES = 4 * 1024 * 1024
"""The most bytes of a log line one frame carries; a longer line is sent in pieces."""
MAX_EVENT_BYTES = 1024 * 1024 * 1024
"""The largest event a client puts back together from pieces (a bound on its memory)."""
_HEADER = struct.Struct(">I")


# --- credentials and secrets (DESIGN §2, §5 rule 6) -------------------------------------

# Provider variables the client passes with each request (DESIGN §2); never logged.
CREDENTIAL_VARS = (
    "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL",
    "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT",
)
_SECRET_WORDS = frozenset({"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "APIKEY",
                           "CREDENTIAL", "CREDENTIALS"})
_SECRET_PARTS = ("PASSWORD", "PASSWD", "SECRET")
MIN_SECRET_CHARS = 8


def is_secret_name(name: str) -> bool:
    """Whether an environment variable called ``name`` holds a secret: the one rule that
    the client (what it passes on, what it asks to redact), the daemon (what it redacts)
    and the sandbox (what it keeps from commands) share.

    Secret: a name with ``KEY``, ``TOKEN``, ``SECRET``, ``PASSWORD``, ``PASSWD``,
    ``PASSPHRASE``, ``APIKEY`` or ``CREDENTIAL(S)`` as one of its ``_``-separated words
    (``ANTHROPIC_API_KEY``, ``GITHUB_TOKEN``, ``AWS_ACCESS_KEY_ID``), or ``PASSWORD``,
    ``PASSWD`` or ``SECRET`` anywhere (``PGPASSWORD``); case-insensitive. Not secret:
    ``KEYBOARD``, ``TOKENIZERS_PARALLELISM``, ``PATH``.
    """
    upper = name.upper()
    if any(part in upper for part in _SECRET_PARTS):
        return True
    words = "".join(c if c.isalnum() else " " for c in upper).split()
    return any(word in _SECRET_WORDS for word in words)


def secret_names(env: Mapping[str, str]) -> dict[str, str]:
    """``env``'s secret variables (``is_secret_name``) whose values are long enough to
    redact safely (``MIN_SECRET_CHARS``), by name: the log names each where it redacts
    it (``[REDACTED:NAME]``), and a resume that brings it fills it in again."""
    return {k: v for k, v in env.items() if len(v) >= MIN_SECRET_CHARS and is_secret_name(k)}


def named_secrets(credentials: Mapping[str, str], named: Mapping[str, str]) -> dict[str, str]:
    """The secrets a request brings, by variable name: its ``redact_named`` and its
    credentials (each kept only if named like a secret, ``is_secret_name``)."""
    return {**secret_names(named), **secret_names(credentials)}


def secret_values(env: Mapping[str, str]) -> list[str]:
    """The values of ``env``'s secret variables (``is_secret_name``) long enough to redact
    safely (``MIN_SECRET_CHARS``), sorted, without repeats."""
    return sorted({v for k, v in env.items() if len(v) >= MIN_SECRET_CHARS and is_secret_name(k)})


# --- where the daemon listens (DESIGN §2, contract) --------------------------------------

# sun_path holds 108 bytes on Linux, 104 on macOS and the BSDs, the final NUL included.
MAX_SOCKET_PATH_BYTES = 107 if sys.platform.startswith("linux") else 103


def socket_path(env: Mapping[str, str] | None = None) -> Path:
    """The daemon's socket path: ``MUSEC_SOCKET``, else under ``MUSEC_HOME``, else
    ``$XDG_RUNTIME_DIR/musec/musecd.sock``, else under the state directory.

    A ``MUSEC_HOME`` so deep that its socket path would be longer than the OS allows
    (``MAX_SOCKET_PATH_BYTES``) gets a socket in ``$XDG_RUNTIME_DIR/musec/`` named by a
    digest of the home instead, when that directory is set; otherwise the long path is
    returned and ``socket_path_problem`` says what to do. Pure: reads ``env`` (default
    ``os.environ``) and the working directory, touches no file.
    """
    from pathlib import Path  # here: the quick client commands use socket_file, without pathlib

    return Path(socket_file(env))


def socket_file(env: Mapping[str, str] | None = None) -> str:
    """``socket_path`` as a string (the same file; not normalised as a ``Path`` is)."""
    env = os.environ if env is None else env
    if env.get("MUSEC_SOCKET"):
        return env["MUSEC_SOCKET"]
    runtime = os.path.join(env["XDG_RUNTIME_DIR"], "musec") if env.get("XDG_RUNTIME_DIR") else None
    if env.get("MUSEC_HOME"):
        home = os.path.abspath(env["MUSEC_HOME"])
        path = os.path.join(home, "run", "musecd.sock")
        if _fits(path) or runtime is None:
            return path
        import hashlib  # here: it loads OpenSSL, too slow for every client start

        digest = hashlib.sha256(home.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        return os.path.join(runtime, f"home-{digest}.sock")
    if runtime is not None:
        return os.path.join(runtime, "musecd.sock")
    return os.path.join(_state_base(env), "musec", "run", "musecd.sock")


def private_dir(path: Path) -> Path:
    """Make ``path`` a directory only its owner can use (0700) and return it.

    Every missing ancestor is made 0700 too (the XDG base directory rule: a fresh
    ``MUSEC_HOME`` is as private as what it holds); ``path`` itself, when it exists looser,
    is tightened (it is musec's own). Existing ancestors are left as they are.

    Raises:
        OSError: a directory cannot be made or changed (the caller says what to do).
    """
    missing = []
    for d in (path, *path.parents):
        if d.exists():
            break
        missing.append(d)
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:  # made meanwhile by another process: only tightened if it is ``path``
            continue
        os.chmod(d, 0o700)  # the umask may have taken bits away mkdir's mode asked for
    if path.stat().st_mode & 0o777 != 0o700:
        os.chmod(path, 0o700)
    return path


def _fits(path: str | Path) -> bool:
    return len(os.fsencode(path)) <= MAX_SOCKET_PATH_BYTES


def socket_path_problem(path: Path) -> str | None:
    """One line saying why a socket cannot be made at ``path`` (too long for the OS), and
    what to do; ``None`` when it can."""
    if _fits(path):
        return None
    return (f"the socket path {path} is {len(os.fsencode(path))} bytes, longer than the "
            f"{MAX_SOCKET_PATH_BYTES} this OS allows; set MUSEC_SOCKET to a shorter path "
            f"(e.g. /tmp/musec-$USER.sock) or use a shorter MUSEC_HOME")


def state_home(env: Mapping[str, str] | None = None) -> Path:
    """The state directory: ``$MUSEC_HOME/state``, else ``$XDG_STATE_HOME/musec``."""
    from pathlib import Path

    env = os.environ if env is None else env
    if env.get("MUSEC_HOME"):
        return Path(env["MUSEC_HOME"]) / "state"
    return Path(_state_base(env)) / "musec"


def _state_base(env: Mapping[str, str]) -> str:
    return env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")


def config_home(env: Mapping[str, str] | None = None) -> Path:
    """The config directory: ``$MUSEC_HOME/config``, else ``$XDG_CONFIG_HOME/musec``."""
    from pathlib import Path

    env = os.environ if env is None else env
    if env.get("MUSEC_HOME"):
        return Path(env["MUSEC_HOME"]) / "config"
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "musec"


# --- framing --------------------------------------------------------------------------


class FrameError(Exception):
    """A frame is malformed: too long, truncated, or not a message at all.

    ``code`` is the ``Error.code`` to answer it with; ``request_id`` the id of the request
    it carried, when that could be read (0 otherwise).
    """

    code: str = "bad_frame"  # an ErrorCode

    def __init__(self, message: str, request_id: int = 0) -> None:
        super().__init__(message)
        self.request_id = request_id


class InvalidMessage(FrameError):
    """A well-formed message that breaks its schema: a missing field, a wrong type, a
    string outside its closed set. It is the sender's bad request, answered with its id."""

    code: str = "bad_request"


def frame(body: bytes) -> bytes:
    """One frame: the 4-byte big-endian length of ``body``, then ``body``.

    Raises:
        FrameError: ``body`` is over ``MAX_FRAME_BYTES``.
    """
    if len(body) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(body)} bytes is over the {MAX_FRAME_BYTES}-byte maximum")
    return _HEADER.pack(len(body)) + body


class FrameBuffer:
    """Incremental frame splitter: feed bytes as they arrive, take whole bodies out.

    The length is checked before any of the body is buffered, so a peer announcing a
    huge frame costs nothing.
    """

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()
        self._max = max_frame_bytes

    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data``; return the complete frame bodies now available, in order.

        Raises:
            FrameError: a frame announces a length over the maximum.
        """
        self._buf += data
        out: list[bytes] = []
        while len(self._buf) >= 4:
            (n,) = _HEADER.unpack_from(self._buf)
            if n > self._max:
                raise FrameError(f"frame of {n} bytes is over the {self._max}-byte maximum")
            if len(self._buf) < 4 + n:
                break
            out.append(bytes(self._buf[4 : 4 + n]))
            del self._buf[: 4 + n]
        return out

    @property
    def pending(self) -> int:
        """Bytes buffered that do not yet form a whole frame."""
        return len(self._buf)
