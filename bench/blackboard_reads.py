"""File reads across all agents of a scripted session, with and without the blackboard.

    python bench/blackboard_reads.py [--repo DIR] [--reads 40]

Runs the same scripted session twice through a real daemon on a real repository (by
default this one, read only): the scout maps the repository while the main agent reads
``--reads`` Python files with ``read_file``. Counts the reads that reached the disk (from
the blackboard's counters in ``session_ended``; without the blackboard every read does:
the scout's one per Python file plus the main agent's) and prints both and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", default=str(ROOT))
    parser.add_argument("--reads", type=int, default=40)
    args = parser.parse_args()
    repo = Path(args.repo).resolve()
    rg = shutil.which("rg") or str(BIN / "rg")
    files = subprocess.run([rg, "--files", "--glob", "*.py"], cwd=repo, capture_output=True, text=True, check=True).stdout.split()
    files.sort()
    picked = files[: args.reads]
    home = tempfile.mkdtemp(prefix="mhbb", dir="/tmp")
    work = Path(tempfile.mkdtemp(prefix="bb"))
    script = work / "reads.json"
    script.write_text(json.dumps({"turns": [[{"tool": "read_file", "input": {"path": f}}] for f in picked] + [[{"text": "done"}]]}))
    env = {**os.environ, "MUSEC_HOME": home}
    results = {}
    try:
        for label, flags in (("with blackboard", []), ("without blackboard", ["--no-blackboard"])):
            t0 = time.perf_counter()
            proc = subprocess.run([str(BIN / "musec"), "run", "--model", f"scripted:{script}", "--approval", "auto",
                                   "--agents", "scout", "--max-turns", str(len(picked) + 5), *flags,
                                   "--output-format", "json", "read"], cwd=repo, env=env, capture_output=True, text=True)
            elapsed = time.perf_counter() - t0
            if proc.returncode != 0:
                raise SystemExit(f"run failed: {proc.stderr.strip()}")
            sid = json.loads(proc.stdout)["session_id"]
            log = Path(home) / "state" / "sessions" / f"{sid}.jsonl"
            ended = json.loads(log.read_text().splitlines()[-1])
            board = ended.get("blackboard")
            disk = board["disk_reads"] if board else len(files) + len(picked)
            results[label] = (disk, board, elapsed)
    finally:
        subprocess.run([str(BIN / "musec"), "daemon", "stop"], env=env, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    with_disk, board, _ = results["with blackboard"]
    without_disk, _, _ = results["without blackboard"]
    print(f"repository {repo}: {len(files)} Python files mapped by the scout, {len(picked)} read by the main agent")
    print(f"without blackboard  {without_disk:6d} disk reads")
    print(f"with blackboard     {with_disk:6d} disk reads   ({with_disk / without_disk:.2f}x; "
          f"{board['served_to_others']} reads served from another agent's read)")


if __name__ == "__main__":
    main()
