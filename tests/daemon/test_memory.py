"""daemon/memory.py: the collector's full passes held off during large-log work, lists
freed in slices (issue 19: both stalled the event loop during a 100k-event replay)."""

from __future__ import annotations

import gc
import threading
from typing import Any

from musec.daemon.memory import drop_in_slices, quiet_collector


def _full_passes(work: Any) -> int:
    """How many collections of the oldest generation start while ``work()`` runs."""
    started: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            started.append(1)

    gc.callbacks.append(note)
    try:
        work()
    finally:
        gc.callbacks.remove(note)
    return len(started)


def _build_cycles() -> None:
    kept = []
    for _ in range(200_000):  # enough young passes for CPython to start several full ones
        a: list[Any] = []
        a.append(a)
        kept.append(a)


def test_no_full_pass_starts_inside_and_the_thresholds_come_back() -> None:
    before = gc.get_threshold()
    assert _full_passes(_build_cycles) > 0  # the work does set off full passes by itself
    with quiet_collector():
        assert gc.get_threshold()[:2] == before[:2]  # the young generations are still collected
        assert _full_passes(_build_cycles) == 0
    assert gc.get_threshold() == before


def test_nested_and_concurrent_uses_restore_only_at_the_last_exit() -> None:
    before = gc.get_threshold()
    inside = threading.Event()
    leave = threading.Event()

    def other() -> None:
        with quiet_collector():
            inside.set()
            leave.wait(30)

    thread = threading.Thread(target=other)
    with quiet_collector():
        thread.start()
        assert inside.wait(30)
        with quiet_collector():
            pass
        assert gc.get_threshold() != before
    assert gc.get_threshold() != before  # the other thread is still inside
    leave.set()
    thread.join(30)
    assert gc.get_threshold() == before


def test_drop_in_slices_empties_the_list_in_place() -> None:
    items = list(range(10_001))
    alias = items
    drop_in_slices(items, slice_len=1000)
    assert alias == [] and items is alias
