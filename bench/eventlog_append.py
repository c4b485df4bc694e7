"""Event log appends per second, with and without fsync, as ratios to plain file writes.

    python bench/eventlog_append.py [--events N] [--fsync-events N] [--rounds 5] [--dir DIR]

The baselines, run on the same disk in the same run: a loop of ``os.write`` of lines of
the same size (no fsync), and the same loop with ``os.fsync`` after each line. Each round
runs baseline and log once (who goes first alternates), into fresh files; printed: the
median rates and the ratio log / baseline of each round (min, median, max). A ratio of
1.0 means the log costs nothing over the bare system calls.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from _pairs import paired, print_ratios
from musec.agents.core.events import ToolFinished, ToolStarted
from musec.daemon.eventlog import EventLog

# A group-committed event and a write-ahead one (``persistence`` decides the fsync).
GROUP = ToolFinished(call_id="toolu_01AbCdEfGhIjKlMnOpQrStUv", tool="bash", content="x" * 300, exit_status=0,
                     duration_s=0.123)
AHEAD = ToolStarted(call_id="toolu_01AbCdEfGhIjKlMnOpQrStUv", tool="bash",
                    input={"command": "pytest -q tests/test_x.py", "pad": "x" * 260})


def rate(n: int, fn) -> float:
    t0 = time.perf_counter()
    fn(n)
    return n / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--fsync-events", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        root = Path(d)
        probe = EventLog.create(root / "probe.jsonl")
        lines = {sync: probe.encode(probe.stamp(ev))[0] + b"\n" for sync, ev in ((False, GROUP), (True, AHEAD))}
        probe.close()

        def plain(n: int, sync: bool, name: str) -> None:
            line = lines[sync]
            fd = os.open(root / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            for _ in range(n):
                os.write(fd, line)
                if sync:
                    os.fsync(fd)
            os.close(fd)

        def logged(n: int, sync: bool, name: str) -> None:
            log = EventLog.create(root / name)
            for _ in range(n):
                log.append(AHEAD if sync else GROUP)
            log.close()

        names = iter(range(1_000_000))

        def rates(n: int, sync: bool) -> list[tuple[float, float]]:
            return paired(args.rounds, baseline=lambda: rate(n, lambda k: plain(k, sync, f"p{next(names)}")),
                          candidate=lambda: rate(n, lambda k: logged(k, sync, f"l{next(names)}")))

        no_sync = rates(args.events, False)
        each_sync = rates(args.fsync_events, True)
    print(f"line size {len(lines[False])} bytes (group-committed), {len(lines[True])} bytes (write-ahead); "
          f"appends per second, {args.rounds} rounds")
    print_ratios("no fsync: plain write -> log", no_sync, "/s", ".0f")
    print_ratios("fsync each: write+fsync -> log", each_sync, "/s", ".0f")


if __name__ == "__main__":
    main()
