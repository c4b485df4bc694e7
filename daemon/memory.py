"""Giving memory back to the OS after large-log work (issue 19).

A daemon that replayed, verified or resumed a log of 100 MiB kept its peak resident
memory for good: the C allocator keeps freed heap pages for reuse, and after a large block
is freed glibc raises its mmap threshold, so later large blocks come from that heap too.
``release_memory`` asks glibc to return free heap pages (``malloc_trim(0)``, which also
gives back free pages in the middle of the heap since glibc 2.8). Elsewhere (macOS, musl)
it does nothing. It runs in a worker thread: ctypes releases the GIL for the call.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None  # not glibc
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_memory() -> bool:
    """Return the allocator's free pages to the OS; whether it could (glibc only)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
