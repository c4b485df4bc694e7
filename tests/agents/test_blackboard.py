"""The blackboard serves a file from memory only while it is unchanged (fresh-user trial s5,
F17: a same-sized rewrite whose mtime was put back was served stale to read_file while grep
saw the new text). Real files; the times are set as ``touch -d``/``cp -p``/``tar x`` do."""

from __future__ import annotations

import os
import time
from pathlib import Path

from musec.agents.blackboard import Blackboard


def _settled(path: Path) -> None:
    """Make ``path``'s change time old enough to trust (waits past the settle time)."""
    deadline = time.time() + 5
    while time.time() < deadline:
        if time.time_ns() - os.stat(path).st_ctime_ns > 2_100_000_000:
            return
        time.sleep(0.1)


def test_a_rewrite_with_its_mtime_put_back_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "conf.py"
    path.write_text('VALUE = "aaaa"\n')
    old = os.stat(path)
    os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns - 5_000_000_000))  # an old file
    _settled(path)
    board = Blackboard()
    assert board.read(path, "main", 1 << 20) == b'VALUE = "aaaa"\n'
    assert board.read(path, "scout", 1 << 20) == b'VALUE = "aaaa"\n' and board.served == 1  # unchanged: memory
    st = os.stat(path)
    path.write_text('VALUE = "bbbb"\n')  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime put back (cp -p, tar x, touch -d)
    assert os.stat(path).st_mtime_ns == st.st_mtime_ns and os.stat(path).st_size == st.st_size
    assert board.read(path, "main", 1 << 20) == b'VALUE = "bbbb"\n'


def test_a_file_read_just_after_its_change_is_not_served_from_memory(tmp_path: Path) -> None:
    """Two writes in one tick of the file clock keep every time the same: a file read right
    after a change is read from the disk again next time."""
    path = tmp_path / "a.txt"
    path.write_text("one\n")
    board = Blackboard()
    assert board.read(path, "main", 100) == b"one\n"
    assert board.read(path, "main", 100) == b"one\n"
    assert board.served == 0 and board.disk_reads == 2
