"""Giving memory back to the OS after large-log work (issue 19).

A daemon that replayed, verified or resumed a log of 100 MiB kept its peak resident
memory for good: the C allocator keeps freed heap pages for reuse, and after a large block
is freed glibc raises its mmap threshold, so later large blocks come from that heap too.
``release_memory`` asks glibc to return free heap pages (``malloc_trim(0)``, which also
gives back free pages in the middle of the heap since glibc 2.8). Elsewhere (macOS, musl)
it does nothing. It runs in a worker thread: ctypes releases the GIL for the call.

Large-log work in a worker thread also stalled the event loop through the GIL, in two
ways that ``quiet_collector`` and ``drop_in_slices`` remove (issue 19: status round trips
of 100-170 ms during a 100k-event replay): the cyclic collector's full passes, each a walk
of every tracked object (60-110 ms over a replay's 200k) with the GIL held, and freeing a
list of 100k events at once, one C call of 50+ ms.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


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


_quiet_lock = threading.Lock()
_quiet_depth = 0
_saved_threshold: tuple[int, ...] = ()
_NO_FULL_PASS = 1 << 30  # full passes wait for this many passes of the middle generation


@contextmanager
def quiet_collector() -> Iterator[None]:
    """Hold off the cyclic collector's full passes while a worker thread builds and drops
    a structure as large as a log (a replay's events and histories, a resume's fold).

    A full pass walks every tracked object with the GIL held, and CPython starts one each
    time the oldest generation has grown by a quarter: building 200k objects set off five,
    of 20-110 ms each, and the event loop waited through every one. The young generations
    are still collected (their passes are bounded by their thresholds); cyclic garbage that
    reaches the oldest generation meanwhile waits for the next full pass, after the work.
    Nested and concurrent uses are counted; the last one out restores the thresholds.
    """
    global _quiet_depth, _saved_threshold
    with _quiet_lock:
        if _quiet_depth == 0:
            _saved_threshold = gc.get_threshold()
            gc.set_threshold(*_saved_threshold[:2], _NO_FULL_PASS)
        _quiet_depth += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_depth -= 1
            if _quiet_depth == 0:
                gc.set_threshold(*_saved_threshold)


def freeze_startup() -> None:
    """Move every object the daemon's start made (modules, classes, functions: 37k of them)
    out of the cyclic collector's reach for good (``gc.freeze``), once, before serving.

    They live as long as the process, yet each full pass walked them: 25-50 ms of the GIL
    on a loaded machine, a stall of the event loop whenever one ran. Called before any
    session exists, so no session's garbage is frozen with them (a frozen cycle would
    never be collected). Only the daemon's entry point calls it.
    """
    gc.collect()
    gc.freeze()


def drop_in_slices(items: list[Any], slice_len: int = 2048) -> None:
    """Empty ``items`` a slice at a time from its end.

    Dropping the last reference to a list of 100k events frees them all in one C call that
    holds the GIL throughout (50-70 ms); between slices the interpreter may switch to the
    event loop's thread. The caller must hold no other reference to what it wants freed
    early (the objects die when their last reference does).
    """
    while items:
        del items[-slice_len:]
