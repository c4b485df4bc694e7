"""The session's blackboard: what the agents have learned, shared between them (DESIGN §7).

Every agent's file reads go through it: a file read once, by any agent, is kept with its
size, modification time and inode, and a later read of the unchanged file is served from
memory instead of the disk. It also holds facts the background agents post (the latest
test status, the repository map's summary). Bounded: past ``max_bytes`` new files are
read but not kept.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_BLACKBOARD_BYTES = 64 * 1024 * 1024


@dataclass
class _Entry:
    key: tuple[int, int, int]  # size, mtime_ns, inode
    data: bytes
    reader: str


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
        key = (st.st_size, st.st_mtime_ns, st.st_ino)
        name = str(path)
        with self._lock:
            entry = self._files.get(name)
            if entry is not None and entry.key == key and len(entry.data) >= min(max_bytes, st.st_size):
                self.served += 1
                if entry.reader != reader:
                    self.served_to_others += 1
                return entry.data[:max_bytes]
        with open(path, "rb") as f:
            data = f.read(max_bytes)
        with self._lock:
            self.disk_reads += 1
            old = self._files.pop(name, None)
            self._bytes -= len(old.data) if old else 0
            if self._bytes + len(data) <= self.max_bytes:
                self._files[name] = _Entry(key, data, reader)
                self._bytes += len(data)
        return data

    def stats(self) -> dict[str, int]:
        """The counters, for the ``session_ended`` event and ``musec agents``."""
        return {"disk_reads": self.disk_reads, "served": self.served, "served_to_others": self.served_to_others,
                "files": len(self._files), "bytes": self._bytes}
