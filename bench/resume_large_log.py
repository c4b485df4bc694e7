"""Resume cost for a large session log: wall time and peak memory.

    python bench/resume_large_log.py [--mib 100]

Writes a synthetic session log of about ``--mib`` MiB (turns of a model call, a tool call
and an 8 KiB tool result), then, in fresh child processes, measures (a) the baseline:
reading the file's bytes once, and (b) what resuming costs the daemon: opening the log
for appending (lock, torn-tail check, chain verification) and folding every event into
the agent's history. Prints seconds and peak RSS of each and their ratio. Target (issue
4): at most 2 s and 200 MiB RSS for 100 MiB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD_BASELINE = """
import sys, time, resource
t0 = time.perf_counter()
data = open(sys.argv[1], 'rb').read()
print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""

CHILD_RESUME = """
import sys, time, resource
from pathlib import Path
from musec.daemon.eventlog import EventLog, iter_events
from musec.daemon.resume import fold_for_resume
from musec.agents.history import History
t0 = time.perf_counter()
log, report = EventLog.open(Path(sys.argv[1]))
history = History("main")
state = fold_for_resume(iter_events(Path(sys.argv[1])), [history.apply])
elapsed = time.perf_counter() - t0
assert report.events == state.events, (report.events, state.events)
print(elapsed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, len(history.messages))
"""


def write_log(path: Path, mib: int) -> int:
    from musec.daemon.eventlog import EventLog

    log = EventLog.create(path)
    log.append("session_started", workspace="/w", model="scripted:/s.json", system_prompt="be good", git={})
    output = ("lorem ipsum dolor sit amet " * 320)[:8192]
    n = 0
    log.append("user_message", text="make the tests pass", sync=False)
    while path.stat().st_size < mib * 1024 * 1024:
        call = f"toolu_{n:08d}"
        log.append("model_request", provider="scripted", model="m", digest="0" * 64, messages=n)
        log.append("model_response", content=[{"type": "text", "text": "Running it."},
                                               {"type": "tool_call", "id": call, "name": "bash", "input": {"command": f"pytest -k t{n}"}}],
                   stop_reason="tool_use", usage={"input_tokens": 100, "output_tokens": 20})
        log.append("tool_started", call_id=call, tool="bash", input={"command": f"pytest -k t{n}"})
        log.append("tool_finished", call_id=call, tool="bash", content=output, is_error=False, exit_status=0)
        n += 1
    log.close()
    return n


def child(code: str, path: Path) -> list[float]:
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    return [float(x) for x in out.stdout.split()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "big.jsonl"
        turns = write_log(path, args.mib)
        size = path.stat().st_size / 2**20
        base_s, base_kib = child(CHILD_BASELINE, path)
        res_s, res_kib, messages = child(CHILD_RESUME, path)
    print(json.dumps({"log_mib": round(size, 1), "turns": turns, "messages": int(messages)}))
    print(f"read the bytes once   {base_s:6.2f} s  {base_kib / 1024:7.1f} MiB peak RSS")
    print(f"open + fold (resume)  {res_s:6.2f} s  {res_kib / 1024:7.1f} MiB peak RSS  "
          f"({res_s / base_s:.1f}x time, {res_kib / base_kib:.2f}x memory; target <= 2 s, <= 200 MiB)")


if __name__ == "__main__":
    main()
