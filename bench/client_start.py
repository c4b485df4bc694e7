"""Client start time as ratios to a bare interpreter, measured in the same run.

    python bench/client_start.py [--runs N]

Prints the median wall time of ``python -c pass``, ``musec --version`` and ``musec sessions``
against a warm daemon (started first, in a private MUSEC_HOME), and their ratios to the
bare interpreter. Targets (issue 2): --version <= 1.5x, sessions <= 4x.
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
from pathlib import Path

BIN = Path(sys.executable).parent


def median_s(cmd: list[str], env: dict[str, str], runs: int) -> float:
    subprocess.run(cmd, env=env, capture_output=True, check=True)  # warm the page cache
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="mhb", dir="/tmp")
    env = {**os.environ, "MUSEC_HOME": home}
    musec = str(BIN / "musec")
    try:
        subprocess.run([musec, "daemon", "start"], env=env, capture_output=True, check=True)
        base = median_s([sys.executable, "-c", "pass"], env, args.runs)
        version = median_s([musec, "--version"], env, args.runs)
        sessions = median_s([musec, "sessions", "--all"], env, args.runs)
    finally:
        subprocess.run([musec, "daemon", "stop"], env=env, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)
    print(f"python -c pass      {base * 1000:7.1f} ms  1.00x")
    print(f"musec --version     {version * 1000:7.1f} ms  {version / base:.2f}x  (target <= 1.5x)")
    print(f"musec sessions      {sessions * 1000:7.1f} ms  {sessions / base:.2f}x  (target <= 4x, warm daemon)")


if __name__ == "__main__":
    main()
