"""A real local HTTP server that plays the Anthropic Messages API from a queue.

Each ``POST /v1/messages`` takes the next queued answer; every request is recorded.
Usage::

    from tests.support.anthropic_server import FIXTURES, AnthropicServer, message, replay

    with AnthropicServer() as server:                  # 127.0.0.1, a free port, a thread
        server.enqueue(
            raw(FIXTURES / "anthropic/http_429.txt"),  # a raw HTTP response, byte for byte
            replay(FIXTURES / "anthropic/tool_use.sse", cuts=[10, 99]),  # recorded stream
            message([{"type": "tool_use", "id": "toolu_1", "name": "bash",
                      "input": {"command": "ls"}}]),   # synthesized stream
            message([{"type": "text", "text": "done"}]),
        )
        credentials = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.base_url}
        ...                                            # run the provider / agent loop
        server.requests[1].body["messages"]            # parsed JSON of each request
        check_tool_pairing(server.requests)

The API:

* ``FIXTURES``: ``tests/fixtures/providers``, the recorded streams, inside the repository.
* ``AnthropicServer()``: context manager. ``base_url``, ``requests`` (list of
  ``RecordedRequest``: ``method``, ``path``, ``headers`` with lower-case names, ``body``
  parsed JSON, ``raw_body``), ``received_at`` (``time.monotonic()`` of each request),
  ``enqueue(*answers)``, ``pending`` (answers left), ``headers_for(number)`` (extra
  headers of each streamed answer; assign a function to send, say, rate-limit state). With
  the queue empty it answers HTTP 400 ``invalid_request_error`` (never retried), so a
  test that runs out of answers fails loudly.
* Answers (``Answer``), one per request:
  ``replay(path, *, cuts=(), end="finish")``: a recorded ``.sse`` file, sent as HTTP
  chunks split at the byte offsets ``cuts``, each flushed.
  ``replay_chunks(path)``: an ``edge/chunks*.json`` file (base64 chunks) sent as is.
  ``message(blocks, *, stop_reason=None, error=None, ...)``: a stream synthesized in the
  recorded format from Anthropic content blocks (``text``, ``thinking``, ``tool_use``;
  a ``tool_use`` may carry ``partial_json`` to send instead of its ``input``), one event
  per chunk; ``error="overloaded_error"`` ends it with an error event instead.
  ``raw(path_or_bytes)``: a whole HTTP response written to the socket.
  ``paused(answer, after, gate)``: ``answer`` held after the chunk that streams the text
  ``after`` until the test sets the ``threading.Event`` ``gate`` (or the server stops).
  ``error_response(status, error_type, message, headers=None)``: a JSON error answer.
  ``end`` is ``"finish"`` (terminate the body), ``"close"`` (drop the connection
  mid-body) or ``"hang"`` (send, then go silent until the server stops).
* A window (``AnthropicServer(window_tokens=200_000)``): the server counts each request's
  tokens as ``ceil(len(body) / bytes_per_token)`` (``tokens``: every request's count, in
  order) and answers a request over the window with the provider's overflow error
  (``overflow_answer``: HTTP 400 "prompt is too long: N tokens > W maximum" here, 400
  ``context_length_exceeded`` from ``OpenAIServer``), taking no queued answer;
  ``refused`` counts them. ``overflow_in_stream=True`` sends it as an error event of a
  200 stream instead. Without ``window_tokens`` nothing changes.
* ``respond``: a function ``(request, tokens, cached_tokens) -> Answer`` that answers when
  the queue is empty (a long scripted session computes each answer from the request).
  ``cached_tokens`` is what a prefix cache would serve: the bytes this request shares from
  the start with the one before it, in tokens (``cached``: every request's figure).
* ``connections``: TCP connections accepted so far; a client that reuses its connection
  makes fewer than ``len(requests)``.
* ``keep_bodies=False``: requests are recorded without ``body`` and ``raw_body`` (``None``
  and ``b""``; a thousand 800 KB requests would fill the test's memory); ``respond`` still
  sees each whole.
* ``check_tool_pairing(requests)``: asserts that roles alternate starting with ``user``
  and that every ``tool_use`` is answered by a ``tool_result`` with the same id in the
  next user message (and no result answers nothing).
"""

from __future__ import annotations

import base64
import json
import math
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "FIXTURES",
    "AnthropicServer",
    "Answer",
    "RecordedRequest",
    "check_tool_pairing",
    "error_response",
    "message",
    "paused",
    "raw",
    "replay",
    "replay_chunks",
]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "providers"

End = Literal["finish", "close", "hang"]


@dataclass(frozen=True)
class Answer:
    """One queued answer: an SSE body in HTTP chunks, or raw response bytes."""

    chunks: tuple[bytes, ...] = ()
    raw: bytes | None = None
    end: End = "finish"
    headers: tuple[tuple[str, str], ...] = ()
    gates: tuple[tuple[int, threading.Event], ...] = ()  # (chunk index, event): wait before it


def paused(answer: Answer, after: str, gate: threading.Event) -> Answer:
    """``answer`` held after its first chunk holding ``after`` until the test sets
    ``gate`` (or the server stops): a stream that pauses mid-answer, released by the test."""
    needle = json.dumps(after, ensure_ascii=False)[1:-1].encode()
    index = next(i for i, c in enumerate(answer.chunks) if needle in c)
    return replace(answer, gates=(*answer.gates, (index + 1, gate)))


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw_body: bytes = field(repr=False)


def replay(path: Path | str, *, cuts: Iterable[int] = (), end: End = "finish") -> Answer:
    """A recorded stream file, split into HTTP chunks at the byte offsets ``cuts``."""
    data = Path(path).read_bytes()
    points = sorted({c for c in cuts if 0 < c < len(data)})
    bounds = [0, *points, len(data)]
    return Answer(
        chunks=tuple(data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)), end=end
    )


def replay_chunks(path: Path | str) -> Answer:
    """An ``edge/chunks*.json`` file: a JSON list of base64 chunks, sent one by one."""
    chunks = json.loads(Path(path).read_text())
    return Answer(chunks=tuple(base64.b64decode(c) for c in chunks))


def raw(response: Path | str | bytes) -> Answer:
    """A complete HTTP response (status line, headers, body) written as is."""
    data = response if isinstance(response, bytes) else Path(response).read_bytes()
    return Answer(raw=data)


def error_response(
    status: int, error_type: str, message: str, headers: dict[str, str] | None = None
) -> Answer:
    """An Anthropic-shaped JSON error answer with the given HTTP status."""
    body = json.dumps({"type": "error", "error": {"type": error_type, "message": message}})
    lines = [f"HTTP/1.1 {status} Error", "content-type: application/json"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    lines.append(f"content-length: {len(body.encode())}")
    return Answer(raw=("\r\n".join(lines) + "\r\n\r\n" + body).encode())


def _event(data: dict[str, Any]) -> bytes:
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"event: {data['type']}\ndata: {payload}\n\n".encode()


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [p for p in (text[:middle], text[middle:]) if p]


def _split(text: str, parts: int) -> list[str]:
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _block_events(index: int, block: dict[str, Any], fragments: int) -> list[dict[str, Any]]:
    kind = block["type"]
    if kind == "text":
        start = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": t} for t in _halves(block["text"])]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": t} for t in _halves(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "tool_use":
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        text = block.get("partial_json")
        if text is None:
            text = json.dumps(block["input"], ensure_ascii=False)
        pieces = ["", *_split(text, fragments)]
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
    else:
        raise ValueError(f"message(): unsupported block type {kind!r}")
    events = [{"type": "content_block_start", "index": index, "content_block": start}]
    events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
    return events


_message_counter = iter(range(1, 1_000_000))


def message(
    blocks: Sequence[dict[str, Any]],
    *,
    stop_reason: str | None = None,
    error: str | None = None,
    message_id: str | None = None,
    model: str = "claude-test",
    input_tokens: int = 10,
    output_tokens: int = 5,
    fragments: int = 3,
    end: End = "finish",
    cache_read_tokens: int = 0,
    error_message: str | None = None,
) -> Answer:
    """A stream in the recorded format, one event per HTTP chunk.

    ``blocks`` are Anthropic content blocks (``text``, ``thinking`` with ``signature``,
    ``tool_use`` with ``id``/``name``/``input`` or a raw ``partial_json`` string). Tool
    input is sent as an empty fragment then ``fragments`` pieces. ``stop_reason``
    defaults to ``tool_use`` when there is a tool call, else ``end_turn``. With
    ``error`` (e.g. ``"overloaded_error"``) the stream stops after the blocks' deltas
    with an ``error`` event, as in ``anthropic/overloaded_error.sse`` (its message
    ``error_message``, default the type). ``input_tokens`` is the uncached input and
    ``cache_read_tokens`` the cached part, as the API reports them.
    """
    usage = {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cache_read_tokens,
        "output_tokens": 1,
    }
    start = {
        "id": message_id or f"msg_local_{next(_message_counter):06d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(blocks):
        events += _block_events(index, block, fragments)
        if index == 0:
            events.insert(2, {"type": "ping"})
        if error is None:
            events.append({"type": "content_block_stop", "index": index})
    if error is not None:
        events.append({"type": "error", "error": {"type": error, "message": error_message or error}})
    else:
        if stop_reason is None:
            has_tool = any(b["type"] == "tool_use" for b in blocks)
            stop_reason = "tool_use" if has_tool else "end_turn"
        events.append(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            }
        )
        events.append({"type": "message_stop"})
    return Answer(chunks=tuple(_event(e) for e in events), end=end)


def check_tool_pairing(requests: Iterable[RecordedRequest]) -> None:
    """Assert each request's history is well formed for the Messages API.

    Roles alternate starting with ``user``; the tool_use ids of each assistant message
    equal the tool_result ids of the next user message; no other tool_result appears.

    Raises:
        AssertionError: naming the request, message index and ids at fault.
    """
    for r, request in enumerate(requests):
        messages = request.body["messages"]
        for i, msg in enumerate(messages):
            expected_role = "user" if i % 2 == 0 else "assistant"
            assert msg["role"] == expected_role, (
                f"request {r}: message {i} has role {msg['role']!r}, expected {expected_role!r}"
            )
            content = msg["content"] if isinstance(msg["content"], list) else []
            if msg["role"] != "user":
                continue
            results = [b["tool_use_id"] for b in content if b.get("type") == "tool_result"]
            previous = messages[i - 1]["content"] if i > 0 else []
            calls = [
                b["id"] for b in previous if isinstance(b, dict) and b.get("type") == "tool_use"
            ]
            assert sorted(results) == sorted(calls), (
                f"request {r}: message {i} answers tool calls {results}, "
                f"but message {i - 1} made {calls}"
            )
        if messages and messages[-1]["role"] == "assistant":
            last = messages[-1]["content"]
            dangling = [
                b["id"] for b in last if isinstance(b, dict) and b.get("type") == "tool_use"
            ]
            assert not dangling, f"request {r}: tool calls {dangling} are never answered"


def _common_prefix(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (binary search over slices)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib name)
        pass  # quiet tests

    def setup(self) -> None:
        super().setup()
        # As model APIs' servers do: without it, a reused connection's answer waits on
        # Nagle's algorithm for the client's delayed ACK (40 ms a call on Linux).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.owner._lock:
            self.server.owner.connections += 1

    def do_POST(self) -> None:
        began = time.perf_counter()
        try:
            self._post()
        finally:
            with self.server.owner._lock:
                self.server.owner.busy_s += time.perf_counter() - began

    def _post(self) -> None:
        owner = self.server.owner
        raw_body = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw_body) if raw_body else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        answer, number = owner._take(RecordedRequest("POST", self.path, headers, body, raw_body))
        if self.path.partition("?")[0] not in owner.routes:
            answer = error_response(404, "not_found_error", f"no route {self.path}")
        elif answer is None:
            answer = error_response(
                400, "invalid_request_error", f"{type(owner).__name__}: no answer queued"
            )
        self._send(answer, number)

    def _send(self, answer: Answer, number: int) -> None:
        if answer.raw is not None:
            self.wfile.write(answer.raw)
            return
        extra = {**dict(answer.headers), **self.server.owner.headers_for(number)}
        head = (
            "HTTP/1.1 200 OK\r\n"
            "content-type: text/event-stream; charset=utf-8\r\n"
            "cache-control: no-cache\r\n"
            f"{self.server.owner.request_id_header}: req_local_{number:06d}\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in extra.items())
            + "transfer-encoding: chunked\r\n\r\n"
        )
        self.wfile.write(head.encode())
        gates = dict(answer.gates)
        for n, chunk in enumerate(answer.chunks):
            gate = gates.get(n)
            while gate is not None and not gate.wait(0.1) and not self.server.owner._stopping.is_set():
                pass  # held until the test releases it
            if chunk:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
        if answer.end == "finish":
            self.wfile.write(b"0\r\n\r\n")
        elif answer.end == "close":
            self.close_connection = True
        else:
            self.server.owner._stopping.wait()
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: AnthropicServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up mid-answer is not a test failure


class AnthropicServer:
    """The server; see the module docstring. Use it as a context manager.

    Subclasses serve other APIs by changing ``routes`` (the paths answered; the query
    string is ignored) and ``request_id_header``.
    """

    routes: tuple[str, ...] = ("/v1/messages",)
    request_id_header = "request-id"

    def __init__(
        self,
        *,
        window_tokens: int | None = None,
        bytes_per_token: float = 4.0,
        overflow_in_stream: bool = False,
        respond: Callable[[RecordedRequest, int, int], Answer] | None = None,
        keep_bodies: bool = True,
    ) -> None:
        self.window_tokens = window_tokens
        self.bytes_per_token = bytes_per_token
        self.overflow_in_stream = overflow_in_stream
        self.respond = respond
        self.keep_bodies = keep_bodies
        self.tokens: list[int] = []  # each request's size, in the server's tokens
        self.cached: list[int] = []  # of which a prefix cache would serve
        self.refused = 0  # requests answered with the overflow error
        self.busy_s = 0.0  # seconds spent handling requests (a bench's "time in the server")
        self.connections = 0  # TCP connections accepted (fewer than requests: connections reused)
        self.errors: list[BaseException] = []  # raised by ``respond`` (the request got a 500)
        self._previous_body = b""
        self.requests: list[RecordedRequest] = []
        self.received_at: list[float] = []  # time.monotonic() of each request
        self._answers: deque[Answer] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        host, port = self._httpd.server_address[:2]
        self.base_url = f"http://{host}:{port}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def headers_for(self, number: int) -> dict[str, str]:
        """Extra headers of the streamed answer to request ``number`` (1-based); none here.

        Override (or assign) to send headers computed when the answer is sent, such as
        rate-limit state with a reset time relative to now.
        """
        return {}

    def enqueue(self, *answers: Answer) -> None:
        """Queue answers, used in order, one per request."""
        with self._lock:
            self._answers.extend(answers)

    @property
    def pending(self) -> int:
        """Answers queued and not used yet."""
        with self._lock:
            return len(self._answers)

    def count_tokens(self, raw_body: bytes) -> int:
        """The server's token count of a request body: ``ceil(bytes / bytes_per_token)``."""
        return math.ceil(len(raw_body) / self.bytes_per_token)

    def overflow_answer(self, tokens: int) -> Answer:
        """The provider's answer to a request over ``window_tokens`` (Anthropic's here)."""
        text = f"prompt is too long: {tokens} tokens > {self.window_tokens} maximum"
        if self.overflow_in_stream:
            return message([], error="invalid_request_error", error_message=text)
        return error_response(400, "invalid_request_error", text)

    def _take(self, request: RecordedRequest) -> tuple[Answer | None, int]:
        raw_body = request.raw_body
        tokens = self.count_tokens(raw_body)
        with self._lock:
            shared = _common_prefix(self._previous_body, raw_body)
            self._previous_body = raw_body
            cached = math.floor(shared / self.bytes_per_token)
            if not self.keep_bodies:
                request = RecordedRequest(request.method, request.path, request.headers, None, b"")
            self.requests.append(request)
            self.received_at.append(time.monotonic())
            self.tokens.append(tokens)
            self.cached.append(cached)
            number = len(self.requests)
            if self.window_tokens is not None and tokens > self.window_tokens:
                self.refused += 1
                return self.overflow_answer(tokens), number
            if self._answers:
                return self._answers.popleft(), number
        if self.respond is None:
            return None, number
        try:
            full = RecordedRequest(request.method, request.path, request.headers,
                                   json.loads(raw_body) if raw_body else None, raw_body)
            return self.respond(full, tokens, cached), number
        except Exception as exc:  # the test reads ``errors``; the client sees a 500
            self.errors.append(exc)
            return error_response(500, "api_error", f"respond() failed: {type(exc).__name__}: {exc}"), number

    def __enter__(self) -> AnthropicServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
