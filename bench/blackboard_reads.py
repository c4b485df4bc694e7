"""Files opened from disk across all agents of a session, with and without the blackboard.

    python bench/blackboard_reads.py [--repo DIR] [--reads 40] [--pairs 3]

Copies the repository (by default this one; the files ``rg --files`` lists) into a private
git repository, then runs the same scripted session through a real daemon with and
without ``--no-blackboard``: the scout maps the repository while the main agent reads
``--reads`` Python files with ``read_file``. Both sides are measured the same way, from
outside musec: an inotify watch (Linux, ``inotify(7)``) on every directory of the copy
counts each open of a file by any process during the run. Reported per pair (A B, B A,
...): opens of Python files (what the agents read), opens of any file, and the run's wall
time. The blackboard's own counter (``disk_reads`` in ``session_ended``) is printed beside
the measured opens as a check.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from _pairs import paired, print_ratios

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]

# From <sys/inotify.h>.
IN_OPEN = 0x00000020
IN_Q_OVERFLOW = 0x00004000
IN_ISDIR = 0x40000000
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name


class OpenWatch:
    """Counts file opens under a directory tree with inotify (directories themselves not counted).

    Raises:
        OSError: inotify is unavailable (not Linux) or out of watches.
    """

    def __init__(self, root: Path) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self._dirs: dict[int, Path] = {}
        for folder in [root, *(p for p in root.rglob("*") if p.is_dir() and ".git" not in p.parts)]:
            wd = self._libc.inotify_add_watch(self.fd, os.fsencode(folder), IN_OPEN)
            if wd < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {folder} failed")
            self._dirs[wd] = folder

    def drain(self) -> Counter[Path]:
        """Opens since the last drain, per file."""
        opened: Counter[Path] = Counter()
        while True:
            try:
                data = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                return opened
            at = 0
            while at < len(data):
                wd, mask, _, size = _EVENT.unpack_from(data, at)
                name = data[at + _EVENT.size: at + _EVENT.size + size].rstrip(b"\0")
                at += _EVENT.size + size
                if mask & IN_Q_OVERFLOW:
                    raise SystemExit("inotify queue overflowed: the counts would be wrong")
                if not mask & IN_ISDIR and name:
                    opened[self._dirs[wd] / os.fsdecode(name)] += 1

    def close(self) -> None:
        os.close(self.fd)


@dataclass
class Run:
    """One session's measured opens, the blackboard's counters, and its wall time."""

    py_opens: int
    all_opens: int
    board: dict | None
    seconds: float


def copy_repo(src: Path, dst: Path) -> list[str]:
    """Copy the files ``rg --files`` lists into ``dst`` and commit them; return the Python ones."""
    rg = shutil.which("rg") or str(BIN / "rg")
    files = subprocess.run([rg, "--files"], cwd=src, capture_output=True, text=True, check=True).stdout.split()
    past = time.time() - 3600  # no racily-clean index entries: git never re-reads a file to check it
    for name in files:
        target = dst / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / name, target)
        os.utime(target, (past, past))
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    for cmd in (["init", "-q"], ["add", "-A"], ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid",
                                                  "commit", "-qm", "copy"]):
        subprocess.run(["git", *cmd], cwd=dst, env=env, check=True, capture_output=True)
    return sorted(name for name in files if name.endswith(".py"))


def run_session(repo: Path, script: Path, turns: int, home: str, blackboard: bool) -> Run:
    """One ``musec run`` with the scout, counting the opens it causes."""
    env = {**os.environ, "MUSEC_HOME": home}
    watch = OpenWatch(repo)
    try:
        watch.drain()
        t0 = time.perf_counter()
        proc = subprocess.run([str(BIN / "musec"), "run", "--model", f"scripted:{script}", "--approval", "auto",
                               "--agents", "scout", "--max-turns", str(turns + 5),
                               *([] if blackboard else ["--no-blackboard"]), "--output-format", "json", "read"],
                              cwd=repo, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        opened = watch.drain()
    finally:
        watch.close()
    if proc.returncode != 0:
        raise SystemExit(f"run failed: {proc.stderr.strip()}")
    sid = json.loads(proc.stdout)["session_id"]
    log = Path(home) / "state" / "sessions" / f"{sid}.jsonl"
    ended = json.loads(log.read_text().splitlines()[-1])
    py = sum(n for path, n in opened.items() if path.suffix == ".py")
    return Run(py, sum(opened.values()), ended.get("blackboard"), seconds)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", default=str(ROOT))
    parser.add_argument("--reads", type=int, default=40)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="mhbb", dir="/tmp")
    work = Path(tempfile.mkdtemp(prefix="bb"))
    repo = work / "repo"
    try:
        py_files = copy_repo(Path(args.repo).resolve(), repo)
        picked = py_files[: args.reads]
        script = work / "reads.json"
        script.write_text(json.dumps({"turns": [[{"tool": "read_file", "input": {"path": f}}] for f in picked]
                                      + [[{"text": "done"}]]}))
        run = lambda board: run_session(repo, script, len(picked), home, board)  # noqa: E731
        run(True)  # warm-up: the daemon starts, the page cache fills
        pairs = paired(args.pairs, baseline=lambda: run(False), candidate=lambda: run(True))
    finally:
        subprocess.run([str(BIN / "musec"), "daemon", "stop"], env={**os.environ, "MUSEC_HOME": home},
                       capture_output=True)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    print(f"repository {args.repo}: {len(py_files)} Python files mapped by the scout, {len(picked)} read by the "
          f"main agent; baseline --no-blackboard, candidate with the blackboard; opens counted by inotify")
    print_ratios("Python files opened", [(a.py_opens, b.py_opens) for a, b in pairs], fmt=".0f")
    print_ratios("any file opened", [(a.all_opens, b.all_opens) for a, b in pairs], fmt=".0f")
    print_ratios("session wall time", [(a.seconds, b.seconds) for a, b in pairs], " s")
    boards = [b.board for _, b in pairs]
    print("blackboard's own count (disk_reads / served to another agent), per candidate run: "
          + ", ".join(f"{bd['disk_reads']}/{bd['served_to_others']}" if bd else "none" for bd in boards))


if __name__ == "__main__":
    main()
