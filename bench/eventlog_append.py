"""Event log appends per second, with and without fsync, as ratios to plain file writes.

    python bench/eventlog_append.py [--events N] [--dir DIR]

The baselines, run on the same disk in the same run: a loop of ``os.write`` of lines of
the same size (no fsync), and the same loop with ``os.fsync`` after each line. A ratio of
1.0 means the log costs nothing over the bare system calls.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from musec.daemon.eventlog import EventLog

FIELDS = {"call_id": "toolu_01AbCdEfGhIjKlMnOpQrStUv", "tool": "bash", "input": {"command": "pytest -q tests/test_x.py"},
          "content": "x" * 300, "exit_status": 0, "duration_s": 0.123}


def rate(n: int, fn) -> float:
    t0 = time.perf_counter()
    fn(n)
    return n / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--fsync-events", type=int, default=2_000)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        root = Path(d)
        probe = EventLog.create(root / "probe.jsonl")
        line = probe.encode("tool_finished", **FIELDS)[0] + b"\n"
        probe.close()

        def plain(n: int, sync: bool, name: str) -> None:
            fd = os.open(root / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            for _ in range(n):
                os.write(fd, line)
                if sync:
                    os.fsync(fd)
            os.close(fd)

        def logged(n: int, sync: bool, name: str) -> None:
            log = EventLog.create(root / name)
            for _ in range(n):
                log.append("tool_finished", sync=sync, **FIELDS)
            log.close()

        w = rate(args.events, lambda n: plain(n, False, "plain.txt"))
        lw = rate(args.events, lambda n: logged(n, False, "log.jsonl"))
        ws = rate(args.fsync_events, lambda n: plain(n, True, "plain_sync.txt"))
        ls = rate(args.fsync_events, lambda n: logged(n, True, "log_sync.jsonl"))
    print(f"line size {len(line)} bytes")
    print(f"plain write            {w:10.0f}/s   1.00x")
    print(f"event log, no fsync    {lw:10.0f}/s   {lw / w:.2f}x of plain write")
    print(f"plain write+fsync      {ws:10.0f}/s   1.00x")
    print(f"event log, fsync each  {ls:10.0f}/s   {ls / ws:.2f}x of plain write+fsync")


if __name__ == "__main__":
    main()
