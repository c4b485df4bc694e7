"""What the client's start imports (issue 19 part 6): ``musec --version`` nothing but the
client's package, ``musec sessions`` and ``musec daemon status`` no msgspec and no argparse.

The modules are read from ``python -X importtime`` of the real command (the installed
``musec`` script, run by this interpreter) and compared with a bare ``python -c pass`` of
the same interpreter, so what the interpreter's own start imports does not count. The
times are the bench's business (bench/client_start.py); these tests keep the imports that
make them.
"""

from __future__ import annotations

import subprocess
import sys

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


def test_the_script_is_the_repository_one() -> None:
    """The installed ``musec`` is bin/musec (not pip's console-script wrapper, which imports
    ``re`` before anything of musec runs)."""
    installed = (BIN / "musec").read_text().splitlines()
    assert installed[1:] == (REPO_ROOT / "bin" / "musec").read_text().splitlines()[1:]


def test_version_imports_only_the_client_package(bare: set[str]) -> None:
    extra = imported([str(BIN / "musec"), "--version"]) - bare
    assert extra <= {"musec", "musec.client", "musec.client.version", "__future__"}, sorted(extra)


def test_the_script_runs_main() -> None:
    proc = subprocess.run([str(BIN / "musec"), "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("musec ")
