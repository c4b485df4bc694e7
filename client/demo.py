"""``musec demo``: the embedded default that needs no API key.

Copies a bundled example repository with a failing test into a temporary directory,
makes it a git repository, and has the daemon fix it with the scripted model
(``client/demo/script.json``) through the same loop, tools, sandbox and log as a real
model. Then prints the diff, the tests' result and where the session log is.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from musec.daemon import protocol as p

from .connection import connect
from .exitcodes import OK, Condition, for_condition
from .output import err, out
from .requests import credentials
from .run import follow_run

DEMO_DIR = Path(__file__).resolve().parent / "demo"
TEST_COMMAND = [sys.executable, "-m", "unittest", "-q"]


def make_example(dest: Path) -> Path:
    """Copy the example into ``dest/windows`` and commit it with git; return the path."""
    repo_dir = dest / "windows"
    shutil.copytree(DEMO_DIR / "example", repo_dir)
    import pygit2

    repo = pygit2.init_repository(str(repo_dir))
    repo.index.add_all()
    repo.index.write()
    sig = pygit2.Signature("musec demo", "demo@musec.invalid")
    repo.create_commit("HEAD", sig, sig, "example with a failing test", repo.index.write_tree(), [])
    return repo_dir


def run_tests(repo_dir: Path) -> tuple[bool, str]:
    """Run the example's tests; return (passed, their last line of output)."""
    proc = subprocess.run(TEST_COMMAND, cwd=repo_dir, capture_output=True, text=True, timeout=120)
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    return proc.returncode == 0, lines[-1] if lines else ""


def cmd_demo(args: argparse.Namespace) -> int:
    """``musec demo``: copy the example, fix it with the scripted model, show the result.
    Without ``--keep`` the example's folder is removed however the demo ends (Ctrl-C too)."""
    tmp = Path(tempfile.mkdtemp(prefix="musec-demo-"))
    try:
        return _demo(args, tmp)
    except KeyboardInterrupt:
        err("musec: the demo was interrupted" + (f"; the example is kept at {tmp}" if args.keep else
                                                 "; its example folder is deleted"))
        raise
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def _demo(args: argparse.Namespace, tmp: Path) -> int:
    repo_dir = make_example(tmp)
    ok, summary = run_tests(repo_dir)
    out(f"example repository: {repo_dir}\ntests before: {'pass' if ok else 'FAIL'} ({summary})\n")
    conn = connect()
    req = p.StartSession(
        id=conn.next_id(), workspace=str(repo_dir), model=f"scripted:{DEMO_DIR / 'script.json'}",
        task="The tests fail. Find the bug and make the tests pass.", approval="auto",
        max_turns=20, credentials=credentials(), interactive=False, end_when_idle=True, sandbox="auto",
    )
    events: list[dict] = []
    info: dict[str, str] = {}
    code = follow_run(conn, req, "text", events, info, quiet=True)
    out("\n--- diff ---")
    for ev in events:
        if ev.get("type") == "file_edited":
            out(str(ev.get("diff", "")).rstrip())
    ok, summary = run_tests(repo_dir)
    out(f"\ntests after: {'pass' if ok else 'FAIL'} ({summary})")
    if info.get("session_id"):
        out(f"session {info['session_id']}; its log: {info['log_path']}")
        out(f"see it with `musec log {info['session_id']}`, check it with `musec log verify {info['session_id']}`")
    if args.keep:
        out(f"kept the example at {repo_dir}")
    else:
        out("the example's folder is deleted, so its session cannot be resumed; `musec demo --keep` keeps it")
    if code != OK:
        return code
    return OK if ok else for_condition(Condition.CHECKS_FAILED)
