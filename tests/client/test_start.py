"""What the client's start imports (issue 19 part 6): ``musec --version`` nothing but the
client's package, ``musec sessions`` and ``musec daemon status`` no msgspec and no argparse.

The modules are read from ``python -X importtime`` of the real command (the installed
``musec`` script, run by this interpreter) and compared with a bare ``python -c pass`` of
the same interpreter, so what the interpreter's own start imports does not count. The
times are the bench's business (bench/client_start.py); these tests keep the imports that
make them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BIN, REPO_ROOT


def imported(argv: list[str], env: dict[str, str] | None = None) -> set[str]:
    """The modules ``python -X importtime ARGV`` imports."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True, text=True, env=env,
                          timeout=60)
    names = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    names.discard("imported package")
    return names


@pytest.fixture(scope="module")
def bare() -> set[str]:
    return imported(["-c", "pass"])


def test_musec_is_the_repository_script() -> None:
    """``musec`` installs bin/musec (a script: pip's console-script wrapper imports ``re``
    before anything of musec runs), which imports only ``sys`` and the client's package.
    Read from pyproject and the script itself, so an environment installed before the
    change (its ``musec`` still pip's wrapper) does not fail here: reinstall it."""
    import ast
    import tomllib

    meta = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "musec" not in meta["project"]["scripts"]
    assert meta["tool"]["setuptools"]["script-files"] == ["bin/musec"]
    tree = ast.parse((REPO_ROOT / "bin" / "musec").read_text(encoding="utf-8"))
    imports = {alias.name if isinstance(node, ast.Import) else node.module
               for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)
               for alias in node.names}
    assert imports == {"sys", "musec.client"}


def test_version_imports_only_the_client_package(bare: set[str]) -> None:
    extra = imported([str(REPO_ROOT / "bin" / "musec"), "--version"]) - bare
    assert extra <= {"musec", "musec.client", "musec.client.version", "__future__"}, sorted(extra)


def test_the_script_runs_main() -> None:
    proc = subprocess.run([str(BIN / "musec"), "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("musec ")


def _write_sessions(home: Path, workspace: Path, count: int) -> None:
    """``count`` ended sessions, written by the real event log, half of them in ``workspace``."""
    from musec.agents.core import events as ev
    from musec.daemon.eventlog import EventLog

    directory = home / "state" / "sessions"
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        sid = f"20260101-000000-{i:06x}"
        log = EventLog.create(directory / f"{sid}.jsonl")
        ws = workspace if i % 2 else workspace.parent
        log.append(ev.SessionStarted(session_id=sid, workspace=str(ws), title=f"task {i}\twith  a tab é"))
        log.append(ev.SessionEnded(exit_reason="finished", turns=1))
        log.close()


FULL = ["-c", "import sys; from musec.client.cli import main; sys.exit(main(sys.argv[1:]))"]
QUICK_FORMS = [["sessions"], ["sessions", "--all"], ["sessions", "--json"], ["sessions", "--all", "--json"],
               ["sessions", "--json", "--all", "--all"], ["daemon", "status"], ["daemon", "status", "--json"]]


def _without_ages(text: str) -> str:
    """``musec sessions`` lines without their age column (it may tick between two runs)."""
    return re.sub(r"^(\S+  \S+\s+) *\d+[smhd]  ", r"\1AGE  ", text, flags=re.M)


@pytest.fixture
def listed(musec, musec_home: Path, tmp_path: Path) -> Path:
    """A running daemon over 6 sessions, 3 of them in the returned workspace."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    _write_sessions(musec_home, workspace, 6)
    assert musec("daemon", "start").returncode == 0
    return workspace


def test_the_quick_forms_import_no_msgspec_nor_argparse(musec, listed: Path, bare: set[str]) -> None:
    for argv in QUICK_FORMS:
        extra = imported([str(BIN / "musec"), *argv], env=musec.env) - bare
        assert "musec.client.quick" in extra, argv
        never = {"msgspec", "argparse", "typing", "pathlib", "musec.daemon.protocol.messages", "musec.client.cli"}
        if "--json" not in argv:
            never |= {"json", "re"}  # (json imports re)
        assert not extra & never, (argv, sorted(extra & never))


@pytest.mark.parametrize("argv", QUICK_FORMS, ids=" ".join)
def test_the_quick_and_the_full_path_print_the_same(musec, listed: Path, argv: list[str]) -> None:
    quick = subprocess.run([str(BIN / "musec"), *argv], env=musec.env, cwd=listed, capture_output=True, text=True,
                           timeout=60)
    full = subprocess.run([sys.executable, *FULL, *argv], env=musec.env, cwd=listed, capture_output=True, text=True,
                          timeout=60)
    assert (quick.returncode, quick.stderr) == (full.returncode, full.stderr) == (0, "")
    assert _without_ages(quick.stdout) == _without_ages(full.stdout)
    if argv[0] == "sessions" and "--json" not in argv:
        assert len(quick.stdout.splitlines()) == (6 if "--all" in argv else 3)
        assert all(re.match(r"^\S+  finished\s+\d+[smhd]  /", line) for line in quick.stdout.splitlines())


@pytest.mark.parametrize("argv", [["daemon", "status"], ["daemon", "status", "--json"], ["sessions", "--al"],
                                  ["sessions", "-h"], ["sessions", "--nope"], ["daemon", "status", "x"]], ids=" ".join)
def test_what_the_quick_path_does_not_answer_is_answered_as_before(musec, tmp_path: Path, argv: list[str]) -> None:
    """No daemon, an abbreviated or unknown option, help: the full path answers, in its
    words and with its exit code (the quick path printed nothing)."""
    quick = subprocess.run([str(BIN / "musec"), *argv], env=musec.env, cwd=tmp_path, capture_output=True, text=True,
                           timeout=60)
    full = subprocess.run([sys.executable, *FULL, *argv], env=musec.env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert (quick.returncode, quick.stdout, quick.stderr) == (full.returncode, full.stdout, full.stderr)
    assert quick.returncode != 0 or argv[-1] in ("-h", "--al")


def test_sessions_with_no_daemon_starts_it(musec, tmp_path: Path) -> None:
    """(A daemon of another version: tests/client/test_version_skew.py, through the quick
    path's entry, which leaves it to the full path.)"""
    proc = musec("sessions", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"no sessions in {tmp_path.resolve()} (--all lists every workspace)\n"
    assert musec.daemon_pid() is not None
