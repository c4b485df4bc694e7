"""Reading a log into frames (daemon/logstream.py): any bounds, any batch size, a torn
tail left out, the backlog's end marked; what a client joins is the log, line for line."""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from musec.daemon import protocol as p
from musec.daemon.logstream import event_batches, send_log

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _client_view(data: bytes) -> list[p.Event]:
    joiner = p.EventJoiner()
    got = []
    for body in p.FrameBuffer().feed(data):
        msg = joiner.take(p.decode_daemon(body))
        if msg is not None:
            got.append(msg)
    return got


@SETTINGS
@given(lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=12),
       torn=st.binary(max_size=8).map(lambda b: b.replace(b"\n", b"")),
       since=st.integers(-1, 13), upto=st.none() | st.integers(-1, 13), batch=st.integers(1, 200),
       backlog=st.booleans())
def test_the_frames_are_the_lines_between_the_bounds(lines: list[bytes], torn: bytes, since: int, upto: int | None,
                                                     batch: int, backlog: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s.jsonl"
        path.write_bytes(b"".join(line + b"\n" for line in lines) + torn)
        batches = list(event_batches(path, 7, "s", since, upto, backlog=backlog, batch_bytes=batch))
    got = _client_view(b"".join(frames for frames, _ in batches))
    last = len(lines) - 1 if upto is None else min(upto, len(lines) - 1)
    want = [(seq, lines[seq]) for seq in range(since + 1, last + 1)]
    assert [(m.seq, m.line) for m in got] == want
    assert sum(count for _, count in batches) == len(want)
    assert all(m.id == 7 and m.session_id == "s" and m.backlog == backlog for m in got)
    assert [m.backlog_end for m in got] == [backlog and i == len(got) - 1 for i in range(len(got))]


def test_a_line_over_a_frame_comes_in_pieces_and_whole(tmp_path: Path) -> None:
    big = b'{"seq":1,"text":"' + b"z" * (p.MAX_FRAME_BYTES + 5) + b'"}'
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"seq":0}\n' + big + b'\n{"seq":2}\n')
    sent: list[bytes] = []

    async def send(data: bytes) -> None:
        sent.append(data)

    count = anyio.run(send_log, send, event_batches(path, 1, "s", -1))
    assert count == 3
    bodies = p.FrameBuffer().feed(b"".join(sent))
    assert all(len(b) <= p.MAX_FRAME_BYTES for b in bodies) and len(bodies) > 3
    assert [m.line for m in _client_view(b"".join(sent))] == [b'{"seq":0}', big, b'{"seq":2}']
