"""Status latency while another client's heavy request runs in the daemon (issue 19 part 1).

    python bench/busy_status.py [--events 100000] [--rounds 5] [--probes 20] [--against DIR]

Starts a real daemon (``python -m musec.daemon``, a fresh ``MUSEC_HOME``), writes a
session log of ``--events`` events with ``bench/log_scaling.py``'s writer (digests as the
live agent logged them), then in each round times ``--probes`` ``Status`` round trips on
one connection twice, interleaved: alone (baseline), and while a second connection's
``Replay`` and ``VerifyLog`` of that log run (candidate; probing goes on until the heavy
reply has come). Printed: median status round trip in ms each way, per-round ratios, and
the heavy request's own time.

``--against DIR`` also installs another checkout (say ``git worktree add DIR main``)
normally, as ``client_start.py`` does, and starts its daemon beside this one (its own
``MUSEC_HOME`` holding a copy of the same log); this checkout is installed normally too.
Then each round runs the heavy request on both daemons, one after the other in rotating
order, probing each, and prints the ratios this/before of the probes' p50, p95 and max
and of the heavy request's time: a change measured under the same load as what it
replaces (the machine's load average is printed with each round).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _pairs import paired, percentile, print_ratios
from client_start import normal_install
from log_scaling import write_session
from musec.client import connection
from musec.daemon import protocol as p


@dataclass
class During:
    """The status probes during one heavy request (ms) and the request's own time (s)."""

    p50_ms: float
    p95_ms: float
    max_ms: float
    heavy_s: float


class Daemon:
    """A daemon process of the install whose interpreter is ``python``, serving ``home``."""

    def __init__(self, python: str, home: Path, label: str) -> None:
        self.label = label
        env = {**os.environ, "MUSEC_HOME": str(home)}
        for k in ("MUSEC_SOCKET", "XDG_RUNTIME_DIR"):
            env.pop(k, None)
        self.socket = p.socket_path(env)
        self.proc = subprocess.Popen([python, "-m", "musec.daemon"], stdin=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 60
        conn = None
        while conn is None and time.monotonic() < deadline:
            conn = connection.try_connect(self.socket, timeout_s=30)
            if conn is None:
                time.sleep(0.05)
        if conn is None:
            raise SystemExit(f"the {label} daemon did not start")
        self.probe = conn
        heavy = connection.try_connect(self.socket, timeout_s=30)
        assert heavy is not None
        self.heavy = heavy

    def status_ms(self) -> float:
        t0 = time.perf_counter()
        self.probe.request(p.Status(id=self.probe.next_id()))
        return (time.perf_counter() - t0) * 1000

    def alone(self, probes: int) -> float:
        return statistics.median(self.status_ms() for _ in range(probes))

    def during(self, kind: type) -> During:
        t = time.perf_counter()
        self.heavy.send(kind(id=self.heavy.next_id(), session_id="big"))
        latencies = []
        while not self.heavy.pending() or len(latencies) < 1:
            latencies.append(self.status_ms())
        reply = self.heavy.recv(600)
        heavy_s = time.perf_counter() - t
        assert getattr(reply, "ok", False), reply
        out = During(statistics.median(latencies), percentile(latencies, 0.95), max(latencies), heavy_s)
        print(f"  {self.label}{kind.__name__}: {heavy_s:.2f} s, {len(latencies)} statuses, p50 {out.p50_ms:.2f} ms, "
              f"p95 {out.p95_ms:.2f} ms, max {out.max_ms:.2f} ms (load {os.getloadavg()[0]:.1f})")
        return out

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def make_home(root: Path, name: str, log: Path | None, events: int) -> Path:
    """A fresh ``MUSEC_HOME`` under ``root`` whose session ``big`` is ``log`` (or a new log of
    ``events`` events); returns it."""
    home = root / name
    sessions = home / "state" / "sessions"
    sessions.mkdir(parents=True)
    if log is None:
        write_session(sessions, "big", events)
    else:
        shutil.copy(log, sessions / "big.jsonl")
        (sessions / "ws").mkdir()
    return home


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--probes", type=int, default=20)
    parser.add_argument("--against", type=Path, default=None, metavar="DIR",
                        help="another checkout, installed normally, whose daemon is probed in the same rounds")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mb", dir="/tmp"))
    daemons: list[Daemon] = []
    try:
        t0 = time.perf_counter()
        home = make_home(root, "this", None, args.events)
        print(f"log of {args.events} events written in {time.perf_counter() - t0:.1f} s")
        python = sys.executable
        if args.against:
            python = str(normal_install(root / "install-this") / "python")
            before_python = str(normal_install(root / "install-before", args.against.resolve()) / "python")
            daemons.append(Daemon(before_python, make_home(root, "before", home / "state/sessions/big.jsonl", 0),
                                  "before: "))
        this = Daemon(python, home, "")
        daemons.append(this)
        for kind in (p.Replay, p.VerifyLog):
            pairs = paired(args.rounds, lambda: this.alone(args.probes), lambda: this.during(kind).p50_ms)  # noqa: B023
            print_ratios(f"status round trip ms, alone vs during {kind.__name__}", pairs)
        if args.against:
            before = daemons[0]
            for kind in (p.Replay, p.VerifyLog):
                rounds = paired(args.rounds, lambda: before.during(kind), lambda: this.during(kind))  # noqa: B023
                for what in ("p50_ms", "p95_ms", "max_ms", "heavy_s"):
                    print_ratios(f"before vs this: {kind.__name__} {what}",
                                 [(getattr(a, what), getattr(b, what)) for a, b in rounds])
    finally:
        for daemon in daemons:
            daemon.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
