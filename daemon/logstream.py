"""Sending a session's log to a client, however long, in frames under the frame limit.

``musec log``, ``attach`` and a resumed session's backlog used to read the whole log into
memory and (for ``musec log``) send it in one frame, which a log over 16 MiB could not be
(issue 12 part 8). Here the log is read line by line in a worker thread, each line is
encoded as an ``Event`` (in pieces when it is longer than ``protocol.EVENT_PIECE_BYTES``),
and the frames go to the socket in batches of about ``BATCH_BYTES``: the daemon's memory
stays flat and its event loop only writes bytes (issue 19).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from pathlib import Path

import anyio.to_thread

from . import protocol as p
from .errors import LogCorrupt
from .eventlog import ChainCheck

BATCH_BYTES = 1 << 20


def event_batches(path: Path, request_id: int, session_id: str, since_seq: int, upto_seq: int | None = None, *,
                  backlog: bool = False, batch_bytes: int = BATCH_BYTES,
                  damaged: list[str] | None = None) -> Generator[tuple[bytes, int], None, None]:
    """The log's lines with ``since_seq < seq <= upto_seq`` as encoded ``Event`` frames.

    Args:
        path: the log.
        request_id: the id the frames carry (the request that asked for them).
        session_id: the session's id.
        since_seq: lines up to this seq are skipped (-1: none).
        upto_seq: the last seq to send; ``None``: every whole line (a torn last line,
            without its newline, is left out).
        backlog: mark the frames ``backlog`` and the last one ``backlog_end``.
        batch_bytes: about how many bytes of frames each batch holds.
        damaged: when given, each line's hash chain is checked from the first line
            (``eventlog.ChainCheck``); at the first line that was changed after it was
            written, nothing more is sent and what is wrong is appended here.

    Yields:
        ``(frames, count)``: the bytes of ``count`` events' frames, ready to write.
    """
    frames: list[bytes] = []
    size = count = 0
    held: tuple[int, bytes] | None = None  # one line held back: the last one is marked

    def frame(seq: int, line: bytes, last: bool) -> bytes:
        return p.event_frames(request_id, session_id, seq, line, backlog=backlog, backlog_end=backlog and last)

    chain = None if damaged is None else ChainCheck(path.name)
    with open(path, "rb", buffering=1 << 20) as f:
        for seq, raw in enumerate(f):
            if not raw.endswith(b"\n") or (upto_seq is not None and seq > upto_seq):
                break
            if chain is not None and damaged is not None:
                try:
                    chain.line(raw[:-1])
                except LogCorrupt as exc:
                    damaged.append(str(exc))
                    break
            if seq <= since_seq:
                continue
            if held is not None:
                data = frame(*held, last=False)
                frames.append(data)
                size += len(data)
                count += 1
                if size >= batch_bytes:
                    yield b"".join(frames), count
                    frames, size, count = [], 0, 0
            held = (seq, raw[:-1])
            if seq == upto_seq:
                break
    if held is not None:
        frames.append(frame(*held, last=True))
        count += 1
    if frames:
        yield b"".join(frames), count


async def send_log(send: Callable[[bytes], Awaitable[None]], batches: Generator[tuple[bytes, int], None, None]) -> int:
    """Read ``batches`` in a worker thread, one at a time, and ``send`` each; return how
    many events were sent. Cancelling waits for the batch being read (a few ms), then
    closes the file."""
    sent = 0
    try:
        while True:
            batch = await anyio.to_thread.run_sync(next, batches, None)
            if batch is None:
                return sent
            await send(batch[0])
            sent += batch[1]
    finally:
        batches.close()
