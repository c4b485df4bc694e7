"""Resuming a session from a large log through the daemon: time and the daemon's memory.

    python bench/resume_large_log.py [--mib 100] [--pairs 3] [--against DIR]

Makes two real sessions with the scripted model through a daemon (a turn that reads an
8 KiB file, then a final answer; no background agents). One is kept small; the other is grown to about
``--mib`` MiB by repeating its tool turn (a model call, a tool call and its 8 KiB result)
with fresh call ids, renumbered and re-chained by the log format's rules (DESIGN §5:
``h_n = sha256(h_{n-1} || body_n)``, 32 hex digits), and checked with ``musec log verify``.

Each trial starts a fresh daemon, then a client process (this one) sends
``ResumeSession`` and times it until the daemon answers ``SessionStarted``: the daemon has
opened the log (lock, torn-tail check), folded every event into the agent's history and
the session's state, and hosts the session again. The daemon's peak RSS growth over that
request is read from ``/proc/PID/status`` (``VmHWM``), and its resident memory once the
session has ended again (``VmRSS``: what the daemon keeps after large-log work). Baseline: the small session resumed
the same way; candidate: the large one; pairs interleaved (A B, B A, ...), per-pair ratios.
Targets (issue 4): at most 2 s and 200 MiB RSS for 100 MiB.

``--against DIR`` installs another checkout (say ``git worktree add DIR main``) and this
one normally (as ``client_start.py`` does) and adds pairs that resume the large log with
the other checkout's daemon (baseline) and this one's (candidate), interleaved the same
way: a change measured under the same load as what it replaces. Each resume prints its
time with the machine's load average.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _pairs import paired, print_ratios
from client_start import normal_install

BIN = Path(sys.executable).parent
MUSEC = str(BIN / "musec")
_SEQ = re.compile(rb'^\{"seq":\d+,')
_H = re.compile(rb',"h":"[0-9a-f]+"\}$')


@dataclass
class Resume:
    """One resume: seconds until ``SessionStarted`` (wall, and the daemon's CPU: user +
    system, steadier on a loaded machine), the daemon's peak RSS (MiB) and its growth."""

    seconds: float
    peak_mib: float
    growth_mib: float
    after_mib: float
    cpu_s: float = 0.0


def make_session(home: str, work: Path, name: str) -> str:
    """A real two-turn session (read an 8 KiB file, answer); returns its id."""
    workspace = work / name
    workspace.mkdir()
    (workspace / "notes.txt").write_text("".join(f"{n:3d} lorem ipsum dolor sit amet, consectetur adipiscing elit\n"
                                                 for n in range(136)))  # 8 KiB in 136 lines
    script = work / f"{name}.json"
    script.write_text(json.dumps({"turns": [[{"tool": "read_file", "input": {"path": "notes.txt"}}],
                                            [{"text": "Read it."}]]}))
    proc = subprocess.run([MUSEC, "run", "--model", f"scripted:{script}", "--approval", "auto", "--agents", "none",
                           "--output-format", "json", "read the notes"],
                          cwd=workspace, env={**os.environ, "MUSEC_HOME": home}, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"musec run failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout)["session_id"]


def grow(path: Path, mib: int) -> int:
    """Repeat the session's tool turn until the log is ``mib`` MiB; returns the repeats."""
    lines = path.read_bytes().splitlines()
    events = [json.loads(line) for line in lines]
    calls = [i for i, e in enumerate(events) if e["type"] == "model_request" and e.get("agent", "main") == "main"]
    head, block, tail = lines[: calls[0]], lines[calls[0]: calls[1]], lines[calls[1]:]
    call_id = next(e["call_id"] for e in events[calls[0]: calls[1]] if e["type"] == "tool_started").encode()
    seq, prev_h, repeats = 0, b"", 0
    with open(path, "wb") as out:

        def put(line: bytes) -> None:
            nonlocal seq, prev_h
            body = _H.sub(b"}", _SEQ.sub(b'{"seq":%d,' % seq, line, count=1), count=1)
            prev_h = hashlib.sha256(prev_h + body).hexdigest()[:32].encode()
            out.write(body[:-1] + b',"h":"' + prev_h + b'"}\n')
            seq += 1

        for line in head:
            put(line)
        while out.tell() < mib * 2**20:
            for line in block:
                put(line.replace(call_id, call_id + b"_%d" % repeats))
            repeats += 1
        for line in tail:
            put(line)
    return repeats


def _vm_hwm_mib(pid: int, field: str = "VmHWM") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"no {field} in /proc: this bench needs Linux")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def resume_once(sid: str, bin_dir: Path = BIN, label: str = "") -> Resume:
    """Start a daemon (the install at ``bin_dir``), resume ``sid`` through it, end the
    session, stop the daemon."""
    from musec.client.connection import connect
    from musec.daemon import protocol as p

    musec = str(bin_dir / "musec")
    subprocess.run([musec, "daemon", "start"], check=True, capture_output=True)
    try:
        pid = json.loads(subprocess.run([musec, "daemon", "status", "--json"], check=True, capture_output=True,
                                        text=True).stdout)["pid"]
        before = _vm_hwm_mib(pid)
        conn = connect(start=False)
        cpu0 = _cpu_s(pid)
        t0 = time.perf_counter()
        conn.send(p.ResumeSession(id=1, session_id=sid, interactive=True, end_when_idle=False))
        while True:
            msg = conn.recv(120)
            if isinstance(msg, p.Error):
                raise SystemExit(f"resume failed: {msg.message}")
            if isinstance(msg, p.SessionStarted):
                break
        seconds = time.perf_counter() - t0
        cpu = _cpu_s(pid) - cpu0
        peak = _vm_hwm_mib(pid)
        conn.send(p.EndSession(id=2, session_id=sid))
        while not isinstance(conn.recv(120), p.SessionEnded):
            pass
        time.sleep(1.0)  # the daemon lets go of the session after its end was sent
        status = connect(start=False)  # a round trip after the end: the daemon is idle again
        status.request(p.Status(id=3))
        status.close()
        after = _vm_hwm_mib(pid, "VmRSS")
        conn.close()
    finally:
        subprocess.run([musec, "daemon", "stop"], capture_output=True)
    print(f"  {label}{sid}: {seconds:.3f} s (daemon CPU {cpu:.3f} s), peak RSS {peak:.0f} MiB "
          f"(load {os.getloadavg()[0]:.1f})")
    return Resume(seconds, peak, peak - before, after, cpu)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=100)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--against", type=Path, default=None, metavar="DIR",
                        help="another checkout, installed normally; its daemon resumes the large log in the same run")
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="mhr", dir="/tmp")
    work = Path(tempfile.mkdtemp(prefix="rs", dir="/tmp"))
    os.environ["MUSEC_HOME"] = home
    try:
        small = make_session(home, work, "small")
        large = make_session(home, work, "large")
        subprocess.run([MUSEC, "daemon", "stop"], capture_output=True)
        sessions = Path(home) / "state" / "sessions"
        repeats = grow(sessions / f"{large}.jsonl", args.mib)
        check = subprocess.run([MUSEC, "log", "verify", large], capture_output=True, text=True)
        if check.returncode != 0:
            raise SystemExit(f"the grown log does not verify (has the line format changed?): {check.stdout}{check.stderr}")
        sizes = {sid: (sessions / f"{sid}.jsonl").stat().st_size / 2**20 for sid in (small, large)}
        this, versus = BIN, []
        if args.against:
            this = normal_install(work / "install-this")
            before = normal_install(work / "install-before", args.against.resolve())
            versus = paired(args.pairs, baseline=lambda: resume_once(large, before, "before: "),
                            candidate=lambda: resume_once(large, this))
        pairs = paired(args.pairs, baseline=lambda: resume_once(small, this), candidate=lambda: resume_once(large, this))
    finally:
        subprocess.run([MUSEC, "daemon", "stop"], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    print(f"resume through the daemon: baseline a {sizes[small] * 1024:.0f} KiB log, candidate a "
          f"{sizes[large]:.1f} MiB log ({repeats} tool turns); fresh daemon each time, {args.pairs} pairs")
    print_ratios("ResumeSession -> SessionStarted", [(a.seconds, b.seconds) for a, b in pairs], " s", ".3f")
    print_ratios("daemon CPU over the resume", [(a.cpu_s, b.cpu_s) for a, b in pairs], " s", ".3f")
    print_ratios("daemon peak RSS", [(a.peak_mib, b.peak_mib) for a, b in pairs], " MiB", ".1f")
    print_ratios("daemon peak RSS growth", [(a.growth_mib, b.growth_mib) for a, b in pairs], " MiB", ".1f")
    print_ratios("daemon RSS after the session ended", [(a.after_mib, b.after_mib) for a, b in pairs], " MiB", ".1f")
    if versus:
        print(f"the large log resumed by {args.against}'s daemon (baseline) and this one's (candidate):")
        print_ratios("before vs this: resume", [(a.seconds, b.seconds) for a, b in versus], " s", ".3f")
        print_ratios("before vs this: daemon CPU", [(a.cpu_s, b.cpu_s) for a, b in versus], " s", ".3f")
        print_ratios("before vs this: peak RSS", [(a.peak_mib, b.peak_mib) for a, b in versus], " MiB", ".1f")
    worst = max(b.seconds for _, b in pairs), max(b.peak_mib for _, b in pairs)
    print(f"large log, worst of {args.pairs}: {worst[0]:.2f} s, {worst[1]:.0f} MiB peak RSS "
          f"(targets for 100 MiB: 2 s, 200 MiB)")


if __name__ == "__main__":
    main()
