"""Client start time as ratios to a bare interpreter, measured in the same run.

    python bench/client_start.py [--runs N] [--sessions 0,1000] [--editable] [--against DIR]

Installs this checkout normally (``pip install --no-deps``, not editable: an editable
install adds an import finder to every start) into a private venv that borrows this
interpreter's installed dependencies, then, for each session count of ``--sessions`` (a
private MUSEC_HOME holding that many small session logs, a warm daemon serving it), times
in rounds whose order rotates ``python -c pass`` (the baseline, the same venv's
interpreter), ``musec --version``, ``musec sessions --all`` and ``musec daemon status``.
Each round gives one ratio per command (its time over the baseline's of the same round);
printed per command: the medians and the per-round ratios (min, median, max), of the wall
time and of the CPU time (user + system of the child, steadier on a loaded machine).
``--editable`` times the current environment's ``musec`` instead. ``--against DIR``
installs another checkout (say ``git worktree add DIR main``) the same way and times its
commands in the same rounds, against the same daemon (printed as ``before: ...``), so a
change is measured under the same load as what it replaces. Targets (issue 19):
--version <= 1.5x, sessions <= 4x, at 0 and at 1,000 sessions.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _pairs import print_ratios

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"musec --version": "<= 1.5x", "musec sessions": "<= 4x", "musec daemon status": "none"}


def normal_install(into: Path, root: Path = ROOT) -> Path:
    """A venv at ``into`` with the checkout at ``root`` installed normally; returns its bin folder."""
    subprocess.run([sys.executable, "-m", "venv", str(into / "venv")], check=True)
    site = next((into / "venv" / "lib").glob("python*/site-packages"))
    deps = [p for p in sys.path if p.endswith("site-packages")]
    (site / "_bench_deps.pth").write_text("\n".join(deps) + "\n")  # dependencies, not musec itself
    src = into / "src"
    shutil.copytree(root, src, ignore=shutil.ignore_patterns(".git", ".venv*", "build", "*.egg-info", "__pycache__",
                                                             "tests", "bench", "evals"))
    subprocess.run([str(into / "venv" / "bin" / "pip"), "install", "-q", "--no-deps",
                    str(src)], check=True, capture_output=True)
    return into / "venv" / "bin"


def write_sessions(home: Path, count: int) -> None:
    """``count`` ended sessions of three events each under ``home``'s state, written by the
    real event log (so the daemon lists them as it lists any)."""
    from musec.agents.core import events as ev
    from musec.daemon.eventlog import EventLog

    directory = home / "state" / "sessions"
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        sid = f"20260101-000000-{i:06x}"
        log = EventLog.create(directory / f"{sid}.jsonl")
        log.append(ev.SessionStarted(session_id=sid, workspace=f"/tmp/ws{i % 7}", title=f"task number {i}"))
        log.append(ev.UserMessage(text=f"task number {i}"))
        log.append(ev.SessionEnded(exit_reason="finished", turns=1))
        log.close()


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s of the child) of one run of ``cmd``, which must exit 0."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    stderr = proc.stderr.read() if proc.stderr else b""
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {stderr.decode(errors='replace')}")
    return wall, usage.ru_utime + usage.ru_stime


def commands(bin_dir: Path, label: str = "") -> dict[str, list[str]]:
    """The timed commands of the install at ``bin_dir``, named with ``label`` in front."""
    musec = str(bin_dir / "musec")
    return {f"{label}musec --version": [musec, "--version"],
            f"{label}musec sessions": [musec, "sessions", "--all"],
            f"{label}musec daemon status": [musec, "daemon", "status"]}


def measure(bin_dir: Path, count: int, runs: int, before: Path | None) -> list[dict[str, tuple[float, float]]]:
    """``runs`` rounds of every command (and of ``before``'s, when given) against a warm
    daemon of ``bin_dir``'s install serving ``count`` sessions."""
    home = Path(tempfile.mkdtemp(prefix="mhb", dir="/tmp"))
    env = {**os.environ, "MUSEC_HOME": str(home)}
    for name in ("MUSEC_SOCKET", "XDG_RUNTIME_DIR"):
        env.pop(name, None)
    musec = str(bin_dir / "musec")
    timed_commands = {"python -c pass": [str(bin_dir / "python"), "-c", "pass"], **commands(bin_dir),
                      **(commands(before, "before: ") if before else {})}
    try:
        write_sessions(home, count)
        subprocess.run([musec, "daemon", "start"], env=env, capture_output=True, check=True)
        listed = subprocess.run([musec, "sessions", "--all"], env=env, capture_output=True, text=True, check=True)
        assert len(listed.stdout.splitlines()) == max(count, 1), listed.stdout[-500:]
        for cmd in timed_commands.values():
            timed(cmd, env)  # warm the page cache and the daemon's index
        names = list(timed_commands)
        rounds = []
        for r in range(runs):
            order = names[r % len(names):] + names[: r % len(names)]  # rotate who goes first
            rounds.append({name: timed(timed_commands[name], env) for name in order})
        return rounds
    finally:
        subprocess.run([musec, "daemon", "stop"], env=env, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--sessions", default="0,1000", help="session counts, comma-separated")
    parser.add_argument("--editable", action="store_true", help="time this environment's musec as installed")
    parser.add_argument("--against", type=Path, default=None, metavar="DIR",
                        help="another checkout, installed normally and timed in the same rounds")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cs"))
    try:
        bin_dir = Path(sys.executable).parent if args.editable else normal_install(tmp / "this")
        before = normal_install(tmp / "before", args.against.resolve()) if args.against else None
        results = {int(n): measure(bin_dir, int(n), args.runs, before) for n in args.sessions.split(",")}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'editable' if args.editable else 'normal'} install, {args.runs} rounds, baseline python -c pass, "
          "against a warm daemon" + (f"; before: {args.against}" if args.against else ""))
    for count, rounds in results.items():
        print(f"-- {count} sessions")
        for name, target in TARGETS.items():
            for label in ("before: ", "") if args.against else ("",):
                for i, what in enumerate(("wall", "cpu")):
                    print_ratios(f"{label}{name} {what} (target {target})",
                                 [(r["python -c pass"][i] * 1e3, r[label + name][i] * 1e3) for r in rounds], " ms", ".1f")


if __name__ == "__main__":
    main()
