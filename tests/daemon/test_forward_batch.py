"""The daemon sends an attached client the messages already waiting in its stream in one
write (``handler._batch``): in order, each whole, a big event still in its pieces, and a
message no frame can carry answered ``too_large`` in its place while the rest go on."""

from __future__ import annotations

import anyio
from musec.daemon import protocol as p
from musec.daemon.handler import BATCH_BYTES, _batch
from musec.daemon.session import Subscriber


def _decode_all(data: bytes) -> list[p.DaemonMsg]:
    joiner = p.EventJoiner()
    out = []
    for body in p.FrameBuffer().feed(data):
        msg = joiner.take(p.decode_daemon(body))
        if msg is not None:
            out.append(msg)
    return out


def _event(seq: int, size: int = 10) -> p.Event:
    return p.Event(id=7, session_id="s1", seq=seq, line=b'{"seq":%d,"x":"%s"}' % (seq, b"y" * size))


def _drain(sub: Subscriber) -> list[list[p.DaemonMsg]]:
    """Each write's messages, until the stream is empty."""
    writes = []
    while True:
        try:
            first = sub.receive.receive_nowait()
        except (anyio.WouldBlock, anyio.EndOfStream):
            return writes
        writes.append(_decode_all(_batch(first, sub)))


def _close(sub: Subscriber) -> None:
    sub.send.close()
    sub.receive.close()


def test_waiting_messages_go_in_one_write_in_order() -> None:
    sub = Subscriber(7)
    sent = [_event(0), p.Delta(id=7, session_id="s1", agent="main", text="hi"), _event(1),
            p.Error(id=7, code="x", message="m" * (p.MAX_FRAME_BYTES + 1)), _event(2),
            _event(3, size=p.EVENT_PIECE_BYTES * 2 + 5)]  # the last one sent in pieces
    for msg in sent:
        sub.send.send_nowait(msg)
    [got] = _drain(sub)
    _close(sub)
    assert len(got) == len(sent)
    assert got[:3] == sent[:3] and got[4:] == sent[4:]
    assert isinstance(got[3], p.Error) and got[3].code == "too_large" and got[3].id == 7


def test_a_write_stops_near_the_batch_limit_and_leaves_the_rest_waiting() -> None:
    sub = Subscriber(7)
    sent = [_event(i, size=BATCH_BYTES // 3) for i in range(6)]
    for msg in sent:
        sub.send.send_nowait(msg)
    writes = _drain(sub)
    _close(sub)
    assert len(writes) > 1 and all(len(w) > 1 for w in writes)
    assert [m for w in writes for m in w] == sent


def test_a_closed_stream_ends_the_batch() -> None:
    sub = Subscriber(7)
    sub.send.send_nowait(_event(0))
    sub.send.close()
    assert _decode_all(_batch(_event(9), sub)) == [_event(9), _event(0)]
    sub.receive.close()
