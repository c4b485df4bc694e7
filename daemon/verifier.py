"""Verifying a large log in a child process (issue 19), so the daemon's event loop keeps
the GIL to itself.

Checking a hash chain is pure Python line after line (a short hash, a slice, a compare):
in a worker thread it holds the GIL but for the switch interval, so each round trip of
another client waited ~5 ms for it (a status's median went from 0.1 to 5 ms during a
100k-event ``musec log verify``). A child process checks the same chain with the same
code (``eventlog.verify``) and prints its report as one JSON object; the daemon waits for
it in a worker thread. Small logs, where starting a process would cost more than the
check, are checked in the thread as before, and so is any log whose child fails to report
(the check itself is never skipped).

Run as ``python -m musec.daemon.verifier PATH``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .eventlog import VerifyReport, verify

CHILD_FROM_BYTES = 8 << 20  # logs at least this large are checked in a child process
CHILD_TIMEOUT_S = 600.0


def verify_off_process(path: Path, *, child_from_bytes: int = CHILD_FROM_BYTES) -> VerifyReport:
    """``eventlog.verify(path)``, run in a child process when the log holds at least
    ``child_from_bytes`` bytes; in this thread otherwise, or when the child gives no report.

    Raises:
        OSError: the log cannot be read (as ``verify``).
    """
    if path.stat().st_size < child_from_bytes:
        return verify(path)
    try:
        proc = subprocess.run([sys.executable, "-m", "musec.daemon.verifier", str(path)], capture_output=True,
                              stdin=subprocess.DEVNULL, timeout=CHILD_TIMEOUT_S, check=False)
        out = json.loads(proc.stdout) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        out = None
    if not isinstance(out, dict):
        return verify(path)
    return VerifyReport(events=int(out["events"]), last_h=str(out["last_h"]), torn_bytes=int(out["torn_bytes"]),
                        problems=[str(x) for x in out["problems"]])


def main(argv: list[str]) -> int:
    """Verify the log named by ``argv[0]``; print the report as JSON; exit 0 (2 on usage)."""
    if len(argv) != 1:
        print("usage: python -m musec.daemon.verifier PATH", file=sys.stderr)
        return 2
    report = verify(Path(argv[0]))
    print(json.dumps({"events": report.events, "last_h": report.last_h, "torn_bytes": report.torn_bytes,
                      "problems": report.problems}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
