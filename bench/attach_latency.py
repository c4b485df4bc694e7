"""Event delivery latency to 8 attached clients, against a request round trip.

    python bench/attach_latency.py [--clients 8] [--turns 200]

Starts a daemon in a private MUSEC_HOME, runs a scripted session of ``--turns`` short
turns, and attaches ``--clients`` clients (threads, each its own socket). For every event
each client receives, the latency is its receive time minus the event's ``ts`` (written
when the event was appended). The baseline, taken in the same run, is the round trip of
a ``Status`` request on one connection. Prints medians and p99s and their ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="mhl", dir="/tmp")
    os.environ["MUSEC_HOME"] = home
    from musec.client.connection import connect
    from musec.daemon import protocol as p

    work = Path(tempfile.mkdtemp(prefix="ws"))
    script = work / "s.json"
    script.write_text(json.dumps({"turns": [[{"text": f"turn {n}"}] for n in range(args.turns + 1)]}))
    try:
        conn = connect()
        rtts = []
        for _ in range(200):
            t0 = time.perf_counter()
            conn.request(p.Status(id=conn.next_id()))
            rtts.append(time.perf_counter() - t0)
        conn.send(p.StartSession(id=1, workspace=str(work), model=f"scripted:{script}", task="go", approval="auto",
                                 interactive=True, end_when_idle=False))
        sid = conn.recv(10).session_id
        latencies: list[float] = []
        lock = threading.Lock()

        def follow() -> None:
            c = connect(start=False)
            attached_at = time.time()
            c.send(p.Attach(id=2, session_id=sid, since_seq=-1))
            mine = []
            while True:
                msg = c.recv(30)
                now = time.time()
                if isinstance(msg, p.Event):
                    ev = json.loads(msg.line)
                    if ev["ts"] > attached_at:  # live events only, not the backlog
                        mine.append(now - ev["ts"])
                    if ev["type"] == "session_ended":
                        break
            with lock:
                latencies.extend(mine)

        threads = [threading.Thread(target=follow) for _ in range(args.clients)]
        for t in threads:
            t.start()
        time.sleep(0.5)  # let every client attach before the turns start
        for n in range(args.turns):
            conn.send(p.UserInput(id=10 + n, session_id=sid, text=f"m{n}"))
            while not isinstance(conn.recv(30), p.Idle):
                pass
        conn.request(p.EndSession(id=5, session_id=sid))
        for t in threads:
            t.join(60)
    finally:
        subprocess.run([str(BIN / "musec"), "daemon", "stop"], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    lat = sorted(latencies)
    med, p99 = statistics.median(lat), lat[int(len(lat) * 0.99)]
    rtt = statistics.median(rtts)
    print(f"{len(lat)} deliveries to {args.clients} clients over {args.turns} turns")
    print(f"request round trip (baseline)  median {rtt * 1e3:6.2f} ms")
    print(f"event delivery                 median {med * 1e3:6.2f} ms ({med / rtt:.1f}x)   p99 {p99 * 1e3:6.2f} ms ({p99 / rtt:.1f}x)")


if __name__ == "__main__":
    main()
