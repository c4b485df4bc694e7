"""Client start time as ratios to a bare interpreter, measured in the same run.

    python bench/client_start.py [--runs N] [--editable]

Installs this checkout normally (``pip install --no-deps``, not editable: an editable
install adds an import finder to every start) into a private venv that borrows this
interpreter's installed dependencies, then times, in rounds whose order rotates, ``python
-c pass`` (the baseline, the same venv's interpreter), ``musec --version`` and ``musec
sessions`` against a warm daemon (started first, in a private MUSEC_HOME). Each round
gives one ratio per command; printed: the medians and the per-round ratios (min, median,
max). ``--editable`` times the current environment's ``musec`` instead. Targets (issue
2): --version <= 1.5x, sessions <= 4x.
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


def normal_install(into: Path) -> Path:
    """A venv at ``into`` with this checkout installed normally; returns its bin folder."""
    subprocess.run([sys.executable, "-m", "venv", str(into / "venv")], check=True)
    site = next((into / "venv" / "lib").glob("python*/site-packages"))
    deps = [p for p in sys.path if p.endswith("site-packages")]
    (site / "_bench_deps.pth").write_text("\n".join(deps) + "\n")  # dependencies, not musec itself
    src = into / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", ".venv*", "build", "*.egg-info", "__pycache__",
                                                             "tests", "bench", "evals"))
    subprocess.run([str(into / "venv" / "bin" / "pip"), "install", "-q", "--no-deps",
                    str(src)], check=True, capture_output=True)
    return into / "venv" / "bin"


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, capture_output=True, check=True)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--editable", action="store_true", help="time this environment's musec as installed")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cs"))
    home = tempfile.mkdtemp(prefix="mhb", dir="/tmp")
    env = {**os.environ, "MUSEC_HOME": home}
    try:
        bin_dir = Path(sys.executable).parent if args.editable else normal_install(tmp)
        musec = str(bin_dir / "musec")
        commands = {"python -c pass": [str(bin_dir / "python"), "-c", "pass"],
                    "musec --version": [musec, "--version"],
                    "musec sessions": [musec, "sessions", "--all"]}
        subprocess.run([musec, "daemon", "start"], env=env, capture_output=True, check=True)
        for cmd in commands.values():
            timed(cmd, env)  # warm the page cache
        names = list(commands)
        rounds: list[dict[str, float]] = []
        for r in range(args.runs):
            order = names[r % len(names):] + names[: r % len(names)]  # rotate who goes first
            rounds.append({name: timed(commands[name], env) for name in order})
    finally:
        subprocess.run([str(Path(sys.executable).parent / "musec"), "daemon", "stop"], env=env, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'editable' if args.editable else 'normal'} install, {args.runs} rounds, baseline python -c pass, "
          "sessions against a warm daemon")
    for name, target in (("musec --version", "<= 1.5x"), ("musec sessions", "<= 4x")):
        print_ratios(f"{name} (target {target})", [(r["python -c pass"] * 1e3, r[name] * 1e3) for r in rounds], " ms", ".1f")


if __name__ == "__main__":
    main()
