"""The client <-> daemon wire protocol (DESIGN §4).

Frames on a Unix stream socket: a 4-byte big-endian unsigned length, then a msgpack body
encoded by msgspec. A length over ``MAX_FRAME_BYTES`` is a protocol error, answered with
an ``Error`` frame and a close. Messages are frozen msgspec Structs in one tagged union
per direction (``tag_field="type"``). The first frame each way is ``Hello``. Every
request carries an ``id``; every reply and every event caused by it carries it back.

The wire only grows: new fields get defaults, no field changes type, and a peer ignores
fields it does not know (msgspec does by default).

This module imports nothing else of musec: the client's import path is this module, the
client package and the standard library.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import msgspec

from .version import VERSION as __version__  # noqa: F401 - re-exported

PROTOCOL_VERSION = 1
MAX_FRAME_BYTES = 16 * 1024 * 1024
_HEADER = struct.Struct(">I")


class _Msg(msgspec.Struct, frozen=True, tag_field="type", omit_defaults=True):
    pass


# --- both directions ------------------------------------------------------------------


class Hello(_Msg, tag="hello"):
    """First frame each way. ``role`` is ``client`` or ``daemon``."""

    protocol_version: int
    version: str
    role: str = "client"
    pid: int = 0


# --- client -> daemon -----------------------------------------------------------------


class StartSession(_Msg, tag="start_session"):
    """Create a session and (if ``task`` is non-empty) run it as the first user message.

    ``credentials`` carries the client's provider variables (``ANTHROPIC_API_KEY``...);
    the daemon uses them for this session's model calls and never writes them anywhere.
    ``interactive`` says a person can answer approvals; a headless run that needs one
    ends with ``exit_reason="needs_approval"``. ``end_when_idle`` ends the session when
    the agent stops (headless ``musec run``).

    ``trust`` trusts the workspace's project files (``.musec/``) as they are now and records
    it (``--trust``, or the person's yes). ``ask_trust`` (an interactive client that can
    ask) makes an untrusted workspace with project files refuse with ``trust_required``,
    the message listing what would apply; the client asks and sends the request again
    with ``trust`` or without ``ask_trust``. Neither: such files are ignored.
    """

    id: int
    workspace: str
    model: str
    task: str = ""
    approval: str = "auto"
    max_turns: int = 50
    credentials: dict[str, str] = {}
    interactive: bool = False
    end_when_idle: bool = True
    sandbox: str = "bwrap"
    title: str = ""
    redact: list[str] = []
    budget_usd: float = 0.0
    agents: list[str] = []
    blackboard: bool = True
    agents_model: str = ""
    agents_budget_usd: float = 0.0
    trust: bool = False
    ask_trust: bool = False


class ResumeSession(_Msg, tag="resume_session"):
    """Go on with a session from its log (after a restart, a crash, or its end).

    ``session_id`` empty means the latest session of ``workspace`` (``--continue``).
    ``task``, when given, is the next user message. ``approval``/``max_turns`` empty or
    0 keep the session's. ``backlog`` sends every logged event first (interactive
    resume); otherwise only new events are sent.
    """

    id: int
    session_id: str = ""
    workspace: str = ""
    task: str = ""
    credentials: dict[str, str] = {}
    interactive: bool = False
    end_when_idle: bool = True
    approval: str = ""
    max_turns: int = 0
    backlog: bool = False
    redact: list[str] = []


class Replay(_Msg, tag="replay"):
    """Rebuild a session's state from its log, with no model calls, and check it."""

    id: int
    session_id: str


class Attach(_Msg, tag="attach"):
    """Receive every logged event after ``since_seq`` (-1: all), then the live stream."""

    id: int
    session_id: str
    since_seq: int = -1


class UserInput(_Msg, tag="user_input"):
    """A person's message into a live session.

    ``client_msg_id``, when set, makes a re-send idempotent: a message whose id the
    session has already logged is not applied again.
    """

    id: int
    session_id: str
    text: str
    credentials: dict[str, str] = {}
    client_msg_id: str = ""


class ApprovalAnswer(_Msg, tag="approval_answer"):
    """An answer to a pending approval: ``decision`` is ``allow``, ``deny`` or ``always``."""

    id: int
    session_id: str
    call_id: str
    decision: str


class Interrupt(_Msg, tag="interrupt"):
    """Stop the session's current turn (the tool running is killed, the model call dropped)."""

    id: int
    session_id: str


class EndSession(_Msg, tag="end_session"):
    """End a live session."""

    id: int
    session_id: str


class CollectSessions(_Msg, tag="collect_sessions"):
    """Remove ended sessions older than ``older_than_s`` with their blobs (never a live one)."""

    id: int
    older_than_s: float
    dry_run: bool = False


class Cost(_Msg, tag="cost"):
    """Tokens and dollars of a session (empty id: the latest of ``workspace``), per agent and model."""

    id: int
    session_id: str = ""
    workspace: str = ""


class ListAgents(_Msg, tag="list_agents"):
    """A session's agents: main, background roles, workers."""

    id: int
    session_id: str


class ListWorkers(_Msg, tag="list_workers"):
    """A session's fan-out workers: branch, state, commits, tokens and cost."""

    id: int
    session_id: str


class ApplyIntegration(_Msg, tag="apply_integration"):
    """Bring a session's integrated fan-out result onto the person's branch, through git."""

    id: int
    session_id: str


class ListModels(_Msg, tag="list_models"):
    """The model catalog: the shipped default merged with the user's models.toml."""

    id: int


class ListSessions(_Msg, tag="list_sessions"):
    """List sessions, newest first; ``workspace`` filters, empty means all."""

    id: int
    workspace: str = ""


class ReadLog(_Msg, tag="read_log"):
    """Return a session's log lines (``session_id`` may be a unique prefix)."""

    id: int
    session_id: str


class VerifyLog(_Msg, tag="verify_log"):
    """Check a session log's hash chain."""

    id: int
    session_id: str


class Status(_Msg, tag="status"):
    """Ask the daemon for its pid, socket, version and live sessions."""

    id: int


class Shutdown(_Msg, tag="shutdown"):
    """Stop the daemon (live sessions are ended cleanly)."""

    id: int


ClientMsg = (
    Hello | StartSession | ResumeSession | Replay | Attach | UserInput | ApprovalAnswer | Interrupt
    | EndSession | ListSessions | ListModels | Cost | ListAgents | ListWorkers | ApplyIntegration | CollectSessions | ReadLog | VerifyLog | Status | Shutdown
)


# --- daemon -> client -----------------------------------------------------------------


class Error(_Msg, tag="error"):
    """A request failed. ``code`` names the condition; ``message`` is one line for a person."""

    id: int
    code: str
    message: str


class Ok(_Msg, tag="ok"):
    """A request succeeded with nothing more to say."""

    id: int


class SessionStarted(_Msg, tag="session_started"):
    """The session ``StartSession`` created (or ``ResumeSession`` reopened, ``resumed``)."""

    id: int
    session_id: str
    log_path: str
    resumed: bool = False
    interrupted_calls: list[str] = []


class Event(_Msg, tag="event"):
    """One logged event, exactly as its log line (``line``: the JSON bytes, no newline).

    ``backlog`` marks events sent from the log on attach (history, not news);
    ``backlog_end`` marks the last of them, after which everything is live.
    """

    id: int
    session_id: str
    seq: int
    line: bytes
    backlog: bool = False
    backlog_end: bool = False


class Delta(_Msg, tag="delta"):
    """Streamed model text (live only, never logged). ``kind``: ``text`` or ``thinking``."""

    id: int
    session_id: str
    agent: str
    text: str
    kind: str = "text"


class Idle(_Msg, tag="idle"):
    """The agent stopped and waits for input. ``exit_reason`` says why it stopped."""

    id: int
    session_id: str
    exit_reason: str
    result: str = ""


class SessionEnded(_Msg, tag="session_ended"):
    """The session ended (for ``musec run`` this is the last frame).

    ``exit_reason``: ``finished``, ``goal_unmet``, ``error``, ``needs_approval``,
    ``max_turns``, ``budget``, ``provider_unreachable``, ``interrupted``.
    """

    id: int
    session_id: str
    exit_reason: str
    result: str = ""
    turns: int = 0
    usage: dict[str, int] = {}
    cost_usd: float = 0.0
    message: str = ""
    log_path: str = ""


class Resync(_Msg, tag="resync"):
    """This client fell behind and was cut off; reattach from ``last_seq``."""

    id: int
    session_id: str
    last_seq: int


class SessionInfo(msgspec.Struct, frozen=True):
    id: str
    workspace: str
    started_at: float
    updated_at: float
    status: str
    title: str
    log_path: str = ""


class Sessions(_Msg, tag="sessions"):
    id: int
    sessions: list[SessionInfo]


class LogLines(_Msg, tag="log_lines"):
    id: int
    session_id: str
    lines: list[bytes]
    log_path: str = ""


class VerifyResult(_Msg, tag="verify_result"):
    """``ok`` only when the chain is intact and there is no torn tail."""

    id: int
    session_id: str
    ok: bool
    events: int
    problems: list[str] = []


class ReplayResult(_Msg, tag="replay_result"):
    """What replay rebuilt: ``ok`` when every logged request digest was re-derived."""

    id: int
    session_id: str
    ok: bool
    events: int
    model_requests: int
    turns: int
    problems: list[str] = []
    next_request_digest: str = ""


class ModelInfo(msgspec.Struct, frozen=True):
    """One catalog entry; prices in US dollars per million tokens (0 when unknown)."""

    id: str
    provider: str
    aliases: list[str] = []
    context_window_tokens: int = 0
    max_output_tokens: int = 0
    input_per_mtok: float = 0.0
    cached_input_per_mtok: float = 0.0
    cache_write_per_mtok: float = 0.0
    output_per_mtok: float = 0.0
    trains_on_data: bool = False


class Models(_Msg, tag="models"):
    id: int
    models: list[ModelInfo]


class WorkerInfo(msgspec.Struct, frozen=True):
    """One worker: ``state`` is running, finished, error, time_limit, needs_approval..."""

    name: str
    branch: str
    state: str
    commits: int = 0
    path: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    instruction: str = ""


class CostRow(msgspec.Struct, frozen=True):
    """One agent's use of one model: calls, tokens, dollars (list price, catalog)."""

    agent: str
    model: str
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0


class CostReport(_Msg, tag="cost_report"):
    id: int
    session_id: str
    rows: list[CostRow]
    total_usd: float = 0.0
    retries: int = 0


class AgentInfo(msgspec.Struct, frozen=True):
    """One agent of a session; ``last_activity_at`` in UNIX seconds."""

    agent: str
    role: str
    state: str
    last_activity_at: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    events: int = 0


class Agents(_Msg, tag="agents"):
    id: int
    session_id: str
    agents: list[AgentInfo]


class Workers(_Msg, tag="workers"):
    id: int
    session_id: str
    workers: list[WorkerInfo]
    integration: str = ""


class Applied(_Msg, tag="applied"):
    """``how``: fast-forward, merge or up-to-date."""

    id: int
    session_id: str
    branch: str
    old_head: str
    new_head: str
    how: str


class Collected(_Msg, tag="collected"):
    """``kept``: one line per session kept back and why (a worktree with uncommitted work)."""

    id: int
    sessions: list[str]
    bytes_freed: int = 0
    kept: list[str] = []


class StatusReply(_Msg, tag="status_reply"):
    id: int
    pid: int
    socket: str
    version: str
    sessions: list[str]
    home: str = ""
    log_file: str = ""


DaemonMsg = (
    Hello | Error | Ok | SessionStarted | Event | Delta | Idle | SessionEnded | Resync
    | Sessions | LogLines | VerifyResult | ReplayResult | Models | CostReport | Agents | Workers | Applied | Collected | StatusReply
)


# Provider variables the client passes with each request (DESIGN §2); never logged.
CREDENTIAL_VARS = (
    "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL",
    "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT",
)


# --- where the daemon listens (DESIGN §2, contract) --------------------------------------


def socket_path(env: dict[str, str] | None = None) -> Path:
    """The daemon's socket path: ``MUSEC_SOCKET``, else under ``MUSEC_HOME``, else
    ``$XDG_RUNTIME_DIR/musec/musecd.sock``, else under the state directory.

    Pure: reads ``env`` (default ``os.environ``), touches no file.
    """
    env = os.environ if env is None else env
    if env.get("MUSEC_SOCKET"):
        return Path(env["MUSEC_SOCKET"])
    if env.get("MUSEC_HOME"):
        return Path(env["MUSEC_HOME"]) / "run" / "musecd.sock"
    if env.get("XDG_RUNTIME_DIR"):
        return Path(env["XDG_RUNTIME_DIR"]) / "musec" / "musecd.sock"
    return state_home(env) / "run" / "musecd.sock"


def state_home(env: dict[str, str] | None = None) -> Path:
    """The state directory: ``$MUSEC_HOME/state``, else ``$XDG_STATE_HOME/musec``."""
    env = os.environ if env is None else env
    if env.get("MUSEC_HOME"):
        return Path(env["MUSEC_HOME"]) / "state"
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "musec"


def config_home(env: dict[str, str] | None = None) -> Path:
    """The config directory: ``$MUSEC_HOME/config``, else ``$XDG_CONFIG_HOME/musec``."""
    env = os.environ if env is None else env
    if env.get("MUSEC_HOME"):
        return Path(env["MUSEC_HOME"]) / "config"
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "musec"


# --- framing --------------------------------------------------------------------------


class FrameError(Exception):
    """A frame is malformed: too long, truncated, or not a valid message."""


_client_decoder = msgspec.msgpack.Decoder(ClientMsg)
_daemon_decoder = msgspec.msgpack.Decoder(DaemonMsg)
_encoder = msgspec.msgpack.Encoder()


def encode(msg: Any) -> bytes:
    """Encode one message as a frame: 4-byte big-endian length + msgpack body.

    Raises:
        FrameError: the body is over ``MAX_FRAME_BYTES``.
    """
    body = _encoder.encode(msg)
    if len(body) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(body)} bytes is over the {MAX_FRAME_BYTES}-byte maximum")
    return _HEADER.pack(len(body)) + body


def decode_client(body: bytes) -> ClientMsg:
    """Decode a frame body sent by a client. Raises ``FrameError``."""
    try:
        return _client_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise FrameError(f"bad client frame: {exc}") from exc


def decode_daemon(body: bytes) -> DaemonMsg:
    """Decode a frame body sent by the daemon. Raises ``FrameError``."""
    try:
        return _daemon_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise FrameError(f"bad daemon frame: {exc}") from exc


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
