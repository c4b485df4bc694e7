"""Creating worker worktrees of a large repository: musec (pygit2) against `git worktree add`.

    python bench/worktrees.py [--files 20000] [--workers 8] [--rounds 3] [--dir DIR]

A synthetic repository of ``--files`` files (about 1.5 KiB each, 100 to a folder) is
committed once. Each round creates ``--workers`` worktrees with ``create_worktree`` (one
session, after ``prepare_base``) and, in the same run on the same disk, as many with
``git worktree add -b`` from the same commit (who goes first alternates); both are
removed between rounds. Printed:
the median time of each per round, per worktree, and the ratio musec / git of each round
with its min, median and max (1.0: as fast as git; below 1: faster). The user's git
configuration is ignored for both.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pygit2
from _pairs import print_ratios
from musec.agents.workers import create_worktree, prepare_base, remove_worktrees
from pygit2.enums import ConfigLevel

SIG = pygit2.Signature("bench", "bench@example.invalid", 1_700_000_000, 0)


def make_repo(root: Path, files: int) -> str:
    root.mkdir()
    repo = pygit2.init_repository(str(root), initial_head="main")
    line = "the quick brown fox jumps over the lazy dog 0123456789\n"
    for i in range(files):
        folder = root / f"pkg{i // 100:04d}"
        folder.mkdir(exist_ok=True)
        (folder / f"mod{i % 100:03d}.py").write_text(f"# file {i}\n" + line * 27)
    repo.index.add_all()
    repo.index.write()
    return str(repo.create_commit("HEAD", SIG, SIG, "synthetic", repo.index.write_tree(), []))


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def time_ours(repo: Path, state: Path, session: str, workers: int) -> float:
    t0 = time.perf_counter()
    base = prepare_base(repo, session)
    for w in range(workers):
        create_worktree(repo, state, session, f"w{w}", base)
    return time.perf_counter() - t0


def time_git(repo: Path, into: Path, head: str, r: int, workers: int) -> float:
    t0 = time.perf_counter()
    for w in range(workers):
        git("worktree", "add", "-q", "-b", f"gitbench/{r}/w{w}", str(into / f"{r}-w{w}"), head, cwd=repo)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    os.environ.update(GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        empty = Path(d) / "noconfig"
        empty.mkdir()
        for level in (ConfigLevel.GLOBAL, ConfigLevel.XDG, ConfigLevel.SYSTEM):
            pygit2.settings.search_path[level] = str(empty)
        repo = Path(d) / "repo"
        t0 = time.perf_counter()
        head = make_repo(repo, args.files)
        print(f"repository: {args.files} files, built in {time.perf_counter() - t0:.1f} s")
        state = Path(d) / "state"
        gitwt = Path(d) / "gitwt"
        ours, theirs = [], []
        for r in range(args.rounds):
            session = f"bench{r}"
            if r % 2:  # alternate who goes first
                theirs.append(time_git(repo, gitwt, head, r, args.workers))
            ours.append(time_ours(repo, state, session, args.workers))
            if not r % 2:
                theirs.append(time_git(repo, gitwt, head, r, args.workers))
            remove_worktrees(repo, state, session, force=True)
            shutil.rmtree(gitwt)
            git("worktree", "prune", cwd=repo)
        m, g = statistics.median(ours), statistics.median(theirs)
        n = args.workers
        print(f"musec create_worktree x{n}: {m:.2f} s ({m / n * 1000:.0f} ms each)  rounds: "
              + " ".join(f"{t:.2f}" for t in ours))
        print(f"git worktree add x{n}:     {g:.2f} s ({g / n * 1000:.0f} ms each)  rounds: "
              + " ".join(f"{t:.2f}" for t in theirs))
        print_ratios(f"{n} worktrees, git -> musec", list(zip(theirs, ours, strict=True)), " s")
        print(f"({subprocess.run(['git', '--version'], capture_output=True, text=True).stdout.strip()}, "
              f"libgit2 {pygit2.LIBGIT2_VERSION})")


if __name__ == "__main__":
    main()
