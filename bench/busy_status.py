"""Status latency while another client's heavy request runs in the daemon (issue 19 part 1).

    python bench/busy_status.py [--events 100000] [--rounds 5] [--probes 20]

Starts a real daemon (``python -m musec.daemon``, a fresh ``MUSEC_HOME``), writes a
session log of ``--events`` events with ``bench/log_scaling.py``'s writer (digests as the
live agent logged them), then in each round times ``--probes`` ``Status`` round trips on
one connection twice, interleaved: alone (baseline), and while a second connection's
``Replay`` and ``VerifyLog`` of that log run (candidate; probing goes on until the heavy
reply has come). Printed: median status round trip in ms each way, per-round ratios, and
the heavy request's own time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _pairs import paired, percentile, print_ratios
from log_scaling import write_session
from musec.client import connection
from musec.daemon import protocol as p


def status_ms(conn: connection.Connection) -> float:
    t0 = time.perf_counter()
    conn.request(p.Status(id=conn.next_id()))
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--probes", type=int, default=20)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="mb", dir="/tmp"))
    os.environ["MUSEC_HOME"] = str(home)
    for k in ("MUSEC_SOCKET", "XDG_RUNTIME_DIR"):
        os.environ.pop(k, None)
    sessions = home / "state" / "sessions"
    sessions.mkdir(parents=True)
    t0 = time.perf_counter()
    write_session(sessions, "big", args.events)
    print(f"log of {args.events} events written in {time.perf_counter() - t0:.1f} s")
    daemon = subprocess.Popen([sys.executable, "-m", "musec.daemon"], stdin=subprocess.DEVNULL)
    try:
        probe = connection.connect(start=False, timeout_s=30) if _wait_ready() else None
        assert probe is not None
        heavy = connection.connect(start=False)
        heavy_s: list[float] = []

        def alone() -> float:
            return statistics.median(status_ms(probe) for _ in range(args.probes))

        def during(kind: type) -> float:
            t = time.perf_counter()
            heavy.send(kind(id=heavy.next_id(), session_id="big"))
            latencies = []
            while not heavy.pending() or len(latencies) < 1:
                latencies.append(status_ms(probe))
            reply = heavy.recv(600)
            heavy_s.append(time.perf_counter() - t)
            assert getattr(reply, "ok", False), reply
            print(f"  {kind.__name__}: {heavy_s[-1]:.2f} s, {len(latencies)} statuses, "
                  f"p50 {statistics.median(latencies):.2f} ms, p95 {percentile(latencies, 0.95):.2f} ms, "
                  f"max {max(latencies):.2f} ms")
            return statistics.median(latencies)

        for kind in (p.Replay, p.VerifyLog):
            pairs = paired(args.rounds, alone, lambda: during(kind))  # noqa: B023
            print_ratios(f"status round trip ms, alone vs during {kind.__name__}", pairs)
    finally:
        daemon.terminate()
        daemon.wait(30)


def _wait_ready() -> bool:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if connection.try_connect() is not None:
            return True
        time.sleep(0.05)
    return False


if __name__ == "__main__":
    main()
