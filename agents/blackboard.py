"""The session's blackboard: what the agents have learned, shared between them (DESIGN §7).

Every agent's file reads go through it: a file read once, by any agent, is kept with its
size, modification and change times, inode and device, and a later read of the unchanged
file is served from memory instead of the disk. The change time (ctime) is what no
``touch -d``, ``cp -p`` or ``tar x`` can set back: a same-sized rewrite whose mtime was
restored served the old text before (fresh-user trial s5, F17). A file changed shortly before it was read
(``settle_ns``) is not served again from memory: file times tick in steps (a few
milliseconds; whole seconds on some filesystems), so a second write in the same step would
keep every time the same (git's "racily clean" entries, the same remedy). It also holds facts the background agents post (the latest
test status, the repository map's summary). Bounded: past ``max_bytes`` new files are
read but not kept.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_BLACKBOARD_BYTES = 64 * 1024 * 1024


def settle_ns(st: os.stat_result) -> int:
    """How long after its last change a file's times can be trusted: 100 ms where they carry
    sub-second parts (the kernel's clock ticks are at most 10 ms), else 2 s (a filesystem
    with whole-second, or FAT's two-second, times)."""
    fine = st.st_mtime_ns % 1_000_000_000 or st.st_ctime_ns % 1_000_000_000
    return 100_000_000 if fine else 2_000_000_000


@dataclass
class _Entry:
    key: tuple[int, ...]  # size, mtime_ns, ctime_ns, inode, device
    data: bytes
    reader: str
    settled: bool  # read long enough after its last change to be served again


@dataclass
class Blackboard:
    """Files read (with who read them first) and facts, with read counters.

    Attributes:
        disk_reads: reads that went to the disk.
        served: reads served from memory.
        served_to_others: of those, reads of a file first read by another agent.
        facts: ``{name: value}`` posted by agents (``test_status``, ``repo_map``...).
    """

    max_bytes: int = MAX_BLACKBOARD_BYTES
    disk_reads: int = 0
    served: int = 0
    served_to_others: int = 0
    facts: dict[str, Any] = field(default_factory=dict)
    _files: dict[str, _Entry] = field(default_factory=dict)
    _bytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self, path: Path, reader: str, max_bytes: int) -> bytes:
        """The first ``max_bytes`` bytes of ``path``, from memory when it is unchanged.

        Raises:
            OSError: as ``open``/``stat`` do.
        """
        st = os.stat(path)
        key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
        name = str(path)
        with self._lock:
            entry = self._files.get(name)
            if entry is not None and entry.settled and entry.key == key and len(entry.data) >= min(max_bytes, st.st_size):
                self.served += 1
                if entry.reader != reader:
                    self.served_to_others += 1
                return entry.data[:max_bytes]
        settled = time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > settle_ns(st)
        with open(path, "rb") as f:
            data = f.read(max_bytes)
        with self._lock:
            self.disk_reads += 1
            old = self._files.pop(name, None)
            self._bytes -= len(old.data) if old else 0
            if self._bytes + len(data) <= self.max_bytes:
                self._files[name] = _Entry(key, data, reader, settled)
                self._bytes += len(data)
        return data

    def stats(self) -> dict[str, int]:
        """The counters, for the ``session_ended`` event and ``musec agents``."""
        return {"disk_reads": self.disk_reads, "served": self.served, "served_to_others": self.served_to_others,
                "files": len(self._files), "bytes": self._bytes}
