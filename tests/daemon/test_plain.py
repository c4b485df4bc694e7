"""``protocol.plain`` (the msgpack codec of the quick client commands) against msgspec: the
same bytes for the same values, the same values from the same bytes, and every request and
reply ``client/quick.py`` uses round-tripped through both encoders."""

from __future__ import annotations

import os

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from musec.client import quick
from musec.client.version import __version__
from musec.daemon import protocol as p
from musec.daemon.protocol import plain

ints = st.integers(min_value=-(2**63), max_value=2**64 - 1)
scalars = st.none() | st.booleans() | ints | st.floats(allow_nan=False) | st.text() | st.binary()
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=20) | st.dictionaries(st.text(), inner, max_size=20),
                      max_leaves=60)


@given(values)
def test_pack_writes_msgspecs_bytes(value: object) -> None:
    assert plain.pack(value) == msgspec.msgpack.encode(value)


@given(values)
def test_unpack_reads_msgspecs_bytes(value: object) -> None:
    assert plain.unpack(msgspec.msgpack.encode(value)) == value


@pytest.mark.parametrize("n", [0, 15, 16, 31, 32, 255, 256, 65535, 65536])
def test_every_length_form(n: int) -> None:
    """fix, 8-, 16- and 32-bit lengths of strings, bytes, arrays and maps."""
    for value in ("x" * n, b"x" * n, [0] * n, {str(i): 0 for i in range(n)}):
        data = msgspec.msgpack.encode(value)
        assert plain.pack(value) == data
        assert plain.unpack(data) == value


@given(st.binary(max_size=64))
def test_any_bytes_are_a_value_or_a_value_error(data: bytes) -> None:
    """Bytes that msgspec reads are read to the same value; the rest are one ValueError
    (never another exception: the quick path turns it into the full path)."""
    try:
        expected = msgspec.msgpack.decode(data)
    except (msgspec.DecodeError, TypeError):  # TypeError: an unhashable map key
        expected = ValueError
    try:
        got = plain.unpack(data)
    except ValueError:
        got = ValueError
    if isinstance(expected, msgspec.msgpack.Ext):
        assert got is ValueError  # extension types are not read here
    elif expected != expected:  # NaN
        assert got != got
    else:
        assert got == expected


def test_cut_bodies_are_value_errors() -> None:
    data = msgspec.msgpack.encode({"type": "sessions", "id": 1, "sessions": [{"id": "x" * 40}]})
    for end in range(len(data)):
        with pytest.raises(ValueError):
            plain.unpack(data[:end])
    with pytest.raises(ValueError):
        plain.unpack(data + b"\x00")
    with pytest.raises(TypeError):
        plain.pack(object())


# --- the messages of client/quick.py --------------------------------------------------


def test_the_requests_are_msgspecs_bytes() -> None:
    """Each request the quick path sends is, byte for byte, the Struct the full path sends."""
    pairs = [
        (quick.hello_request(os.getpid()),
         p.Hello(protocol_version=p.PROTOCOL_VERSION, version=__version__, role="client", pid=os.getpid())),
        (quick.hello_request(0), p.Hello(protocol_version=p.PROTOCOL_VERSION, version=__version__)),
        (quick.sessions_request(""), p.ListSessions(id=1)),
        (quick.sessions_request("/w/é x"), p.ListSessions(id=1, workspace="/w/é x")),
        (quick.status_request(), p.Status(id=1)),
    ]
    for mine, struct in pairs:
        assert p.frame(plain.pack(mine)) == p.encode(struct), struct
        assert p.decode_client(plain.pack(mine)) == struct


def _rows(reply: p.Sessions) -> list[dict[str, object]]:
    return [{f: getattr(s, f) for f in ("id", "workspace", "started_at", "updated_at", "status", "title")}
            for s in reply.sessions]


def test_the_replies_read_as_msgspec_reads_them() -> None:
    """The replies the quick path reads, encoded by the daemon's encoder, give the values
    msgspec decodes (an integer time a float, as msgspec makes it; defaults filled in)."""
    info = [p.SessionInfo(id="a1", workspace="/w", started_at=1.5, updated_at=2.25, status="finished",
                          title="fix the\ttest é"),
            p.SessionInfo(id="b2", workspace="/x", started_at=3, updated_at=4, status="running", title="",  # type: ignore[arg-type]
                          log_path="/l")]
    for rows in ([], info, info * 600):
        reply = p.Sessions(id=1, sessions=rows)
        body = p.encode(reply)[4:]
        got = quick.session_rows(plain.unpack(body))
        decoded = p.decode_daemon(body)
        assert [{k: r[k] for k in ("id", "workspace", "started_at", "updated_at", "status", "title")} for r in got] \
            == _rows(decoded)
        assert all(type(r["started_at"]) is float and type(r["updated_at"]) is float for r in got)
    for status in (p.StatusReply(id=1, pid=7, socket="/s", version="0.1.0", sessions=["a"], home="/h", log_file="/l"),
                   p.StatusReply(id=1, pid=7, socket="/s", version="0.1.0", sessions=[])):
        body = p.encode(status)[4:]
        decoded = p.decode_daemon(body)
        assert quick.status_info(plain.unpack(body)) == {
            "pid": decoded.pid, "socket": decoded.socket, "version": decoded.version, "sessions": decoded.sessions,
            "home": decoded.home, "log_file": decoded.log_file}
    hello = p.Hello(protocol_version=3, version="0.1.0", role="daemon", pid=9, sessions=0)
    assert plain.unpack(p.encode(hello)[4:]) == msgspec.structs.asdict(hello) | {"type": "hello"}


def test_replies_msgspec_would_refuse_are_refused() -> None:
    """A reply whose fields msgspec would not accept is not used (the full path then
    reports it as it always did)."""
    bad_rows = [{"id": "a", "workspace": "/w", "started_at": 1.0, "updated_at": 2.0, "status": "x"},  # no title
                {"id": 1, "workspace": "/w", "started_at": 1.0, "updated_at": 2.0, "status": "x", "title": ""},
                {"id": "a", "workspace": "/w", "started_at": "1", "updated_at": 2.0, "status": "x", "title": ""}]
    for row in bad_rows:
        assert quick.session_rows({"type": "sessions", "id": 1, "sessions": [row]}) is None
    assert quick.session_rows({"type": "sessions", "id": 1}) is None
    assert quick.status_info({"type": "status_reply", "id": 1, "socket": "/s", "version": "v", "sessions": []}) is None
    assert quick.status_info({"type": "status_reply", "id": 1, "pid": 1, "socket": "/s", "version": "v",
                              "sessions": [1]}) is None
