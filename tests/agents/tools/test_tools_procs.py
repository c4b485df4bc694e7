"""OutputBuffer: the head-and-tail cap, checked against the plain stream."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st
from musec.agents.tools.procs import OutputBuffer


@given(
    data=st.binary(max_size=3000),
    cuts=st.lists(st.integers(0, 3000), max_size=8),
    max_bytes=st.integers(1, 1200),
    keep_max_bytes=st.integers(0, 2600),
)
def test_output_buffer_matches_the_stream(
    data: bytes, cuts: list[int], max_bytes: int, keep_max_bytes: int
) -> None:
    buffer = OutputBuffer(max_bytes, keep_max_bytes=keep_max_bytes)
    bounds = sorted({0, len(data), *(c for c in cuts if c <= len(data))})
    for a, b in zip(bounds, bounds[1:], strict=False):
        buffer.feed(data[a:b])
    assert buffer.total_bytes == len(data)
    assert buffer.capped == (len(data) > max_bytes)
    if not buffer.capped:
        assert buffer.text() == data.decode("utf-8", "backslashreplace")
        assert buffer.full() == data
        return
    head_n = max_bytes // 2
    tail_n = max_bytes - head_n
    omitted = len(data) - max_bytes
    head = data[:head_n].decode("utf-8", "backslashreplace")
    tail = data[len(data) - tail_n :].decode("utf-8", "backslashreplace")
    assert buffer.text() == f"{head}\n[... {omitted} bytes omitted ...]\n{tail}"
    kept = max(keep_max_bytes // 2, max_bytes)
    full = buffer.full()
    if len(data) <= 2 * kept or full == data:  # whole chunks may keep more than asked
        assert full == data
        return
    head, marker, tail = re.fullmatch(
        rb"(.*)\n\[\.\.\. (\d+) bytes omitted \.\.\.\]\n(.*)", full, re.DOTALL
    ).groups()
    assert head == data[: len(head)] and tail == data[len(data) - len(tail) :]
    assert len(head) >= kept and len(tail) >= kept
    assert len(head) + int(marker) + len(tail) == len(data)
