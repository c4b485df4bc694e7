"""One-way event delivery to attached clients, against a bare fan-out of the same frames.

    python bench/attach_latency.py [--clients 8] [--turns 50] [--pairs 5]

Candidate: a real daemon (private MUSEC_HOME) runs a scripted session of ``--turns`` short
turns while ``--clients`` client processes (one process and one socket each, as the
terminals of ``musec attach`` are) are attached to it. For every live event a client
records its receive time minus the event's ``ts``, which the daemon stamps when it appends
the event: the one-way latency from the log to a terminal.

Baseline: a bare server process sends the same frames (the candidate's own event lines,
``Event`` frames of the daemon protocol, in the same per-turn bursts and at the same pace)
over Unix sockets to as many client processes, which read and decode them as the
candidate's clients do; ``ts`` is stamped just before the frame is written. That is the
cost of the processes, the sockets and the framing alone: what the daemon adds is the
ratio. (The daemon also streams ``Delta`` frames between the events; the baseline sends
events only.)

Both sides: separate processes on one machine, one wall clock (``time.time``), the same
quantity (one-way, log/sender to client). A warm-up candidate run (not counted) gives the
baseline its frames and pace; then pairs run interleaved (A B, B A, ...). Prints the
median and p99 of each side and the per-pair ratios (min/median/max).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _pairs import paired, percentile, print_ratios

BIN = Path(sys.executable).parent
_TS = re.compile(rb'"ts":[-+0-9.eE]+')


@dataclass
class Trial:
    """One side's latencies (seconds) over all its clients."""

    latencies: list[float]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.latencies) * 1e3

    @property
    def p99_ms(self) -> float:
        return percentile(self.latencies, 0.99) * 1e3


# --- client processes ----------------------------------------------------------------


def _client_daemon(sid: str) -> None:
    """Attach to ``sid`` like ``musec attach``; print ``ready`` after the backlog, then
    the latencies of the live events as JSON when the session ends."""
    from musec.client.connection import connect
    from musec.daemon import protocol as p

    conn = connect(start=False)
    conn.send(p.Attach(id=2, session_id=sid, since_seq=-1))
    latencies: list[float] = []
    while True:
        msg = conn.recv(120)
        now = time.time()
        if not isinstance(msg, p.Event):
            continue
        if msg.backlog:
            if msg.backlog_end:
                print("ready", flush=True)
            continue
        event = json.loads(msg.line)
        latencies.append(now - event["ts"])
        if event["type"] == "session_ended":
            break
    print(json.dumps(latencies), flush=True)


def _client_bare(path: str) -> None:
    """Connect to the bare server; print ``ready``, then the latencies as JSON."""
    from musec.daemon import protocol as p

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    print("ready", flush=True)
    frames = p.FrameBuffer()
    latencies: list[float] = []
    done = False
    while not done:
        data = sock.recv(1 << 16)
        if not data:
            break
        now = time.time()
        for body in frames.feed(data):
            msg = p.decode_daemon(body)
            event = json.loads(msg.line)
            latencies.append(now - event["ts"])
            done = done or event["type"] == "session_ended"
    print(json.dumps(latencies), flush=True)


def _server_bare(path: str, clients: int, bursts_file: str, gap_s: float) -> None:
    """Accept ``clients`` connections, wait for ``go`` on stdin, send the bursts."""
    from musec.daemon import protocol as p

    bursts = [[line.encode() for line in burst] for burst in json.loads(Path(bursts_file).read_text())]
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(clients)
    print("listening", flush=True)
    socks = [listener.accept()[0] for _ in range(clients)]
    sys.stdin.readline()
    seq = 0
    for n, burst in enumerate(bursts):
        if n:
            time.sleep(gap_s)  # the candidate's pace: one turn per gap
        for line in burst:
            stamped = _TS.sub(b'"ts":' + repr(time.time()).encode(), line, count=1)
            frame = p.encode(p.Event(id=2, session_id="bench", seq=seq, line=stamped))
            for s in socks:
                s.sendall(frame)
            seq += 1
    for s in socks:
        s.close()


# --- the two sides ---------------------------------------------------------------------


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, __file__, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def _wait_line(proc: subprocess.Popen[str], want: str) -> None:
    line = proc.stdout.readline().strip()
    if line != want:
        raise SystemExit(f"a bench process said {line!r}, not {want!r} (exit {proc.poll()})")


def _collect(procs: list[subprocess.Popen[str]]) -> list[float]:
    out: list[float] = []
    for proc in procs:
        stdout, _ = proc.communicate(timeout=300)
        if proc.returncode != 0:
            raise SystemExit(f"a client process failed (exit {proc.returncode})")
        out += json.loads(stdout.strip().splitlines()[-1])
    return out


def _until(conn, kind: type, timeout_s: float = 60):
    while True:
        msg = conn.recv(timeout_s)
        if isinstance(msg, kind):
            return msg


def run_daemon(work: Path, clients: int, turns: int) -> tuple[Trial, list[list[str]], float]:
    """One candidate trial; returns its latencies, its live lines in per-turn bursts, and
    the seconds per turn."""
    from musec.client.connection import connect
    from musec.daemon import protocol as p

    script = Path(tempfile.mkstemp(suffix=".json", dir=work)[1])
    script.write_text(json.dumps({"turns": [[{"text": f"turn {n}"}] for n in range(turns + 1)]}))
    conn = connect(start=False)
    try:
        conn.send(p.StartSession(id=1, workspace=str(work), model=f"scripted:{script}", task="go",
                                 approval="auto", interactive=True, end_when_idle=False))
        started = _until(conn, p.SessionStarted)
        _until(conn, p.Idle)
        procs = [_spawn("--role", "daemon-client", "--sid", started.session_id) for _ in range(clients)]
        for proc in procs:
            _wait_line(proc, "ready")
        t0 = time.perf_counter()
        for n in range(turns):
            conn.send(p.UserInput(id=10 + n, session_id=started.session_id, text=f"m{n}"))
            _until(conn, p.Idle)
        per_turn_s = (time.perf_counter() - t0) / turns
        conn.request(p.EndSession(id=5, session_id=started.session_id))
        latencies = _collect(procs)
    finally:
        conn.close()
    lines = Path(started.log_path).read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if json.loads(line)["type"] == "user_message"][1:]
    bursts = [lines[a:b] for a, b in zip(starts, [*starts[1:], len(lines)], strict=True)]
    return Trial(latencies), bursts, per_turn_s


def run_bare(work: Path, clients: int, bursts_file: Path, gap_s: float) -> Trial:
    """One baseline trial."""
    path = str(work / f"fan{len(list(work.glob('fan*')))}.sock")
    server = _spawn("--role", "bare-server", "--socket", path, "--clients", str(clients),
                    "--bursts", str(bursts_file), "--gap-s", repr(gap_s))
    _wait_line(server, "listening")
    procs = [_spawn("--role", "bare-client", "--socket", path) for _ in range(clients)]
    for proc in procs:
        _wait_line(proc, "ready")
    server.stdin.write("go\n")
    server.stdin.flush()
    latencies = _collect(procs)
    server.communicate(timeout=60)
    os.unlink(path)
    return Trial(latencies)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--role", default="", help=argparse.SUPPRESS)
    parser.add_argument("--sid", default="", help=argparse.SUPPRESS)
    parser.add_argument("--socket", default="", help=argparse.SUPPRESS)
    parser.add_argument("--bursts", default="", help=argparse.SUPPRESS)
    parser.add_argument("--gap-s", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "daemon-client":
        return _client_daemon(args.sid)
    if args.role == "bare-client":
        return _client_bare(args.socket)
    if args.role == "bare-server":
        return _server_bare(args.socket, args.clients, args.bursts, args.gap_s)

    home = tempfile.mkdtemp(prefix="mhl", dir="/tmp")
    work = Path(tempfile.mkdtemp(prefix="ws", dir="/tmp"))
    os.environ["MUSEC_HOME"] = home  # for this process and the client processes
    musec = str(BIN / "musec")
    try:
        subprocess.run([musec, "daemon", "start"], check=True, capture_output=True)
        _, bursts, per_turn_s = run_daemon(work, args.clients, args.turns)  # warm-up
        bursts_file = work / "bursts.json"
        bursts_file.write_text(json.dumps(bursts))
        pairs = paired(args.pairs,
                       baseline=lambda: run_bare(work, args.clients, bursts_file, per_turn_s),
                       candidate=lambda: run_daemon(work, args.clients, args.turns)[0])
    finally:
        subprocess.run([musec, "daemon", "stop"], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    events = sum(len(b) for b in bursts)
    print(f"{args.clients} client processes, {args.turns} turns, {events} live events a run "
          f"({per_turn_s * 1e3:.1f} ms a turn), {args.pairs} pairs; baseline: bare fan-out of the same frames")
    print_ratios("one-way delivery, median", [(a.median_ms, b.median_ms) for a, b in pairs], " ms")
    print_ratios("one-way delivery, p99", [(a.p99_ms, b.p99_ms) for a, b in pairs], " ms")


if __name__ == "__main__":
    main()
