"""The project's test command: finding it, running it with a deadline, reading what failed.

``detect_test_command`` looks at the files of a tree, in this order, and takes the first
that applies (a configured command always wins):

1. ``Makefile``/``makefile``/``GNUmakefile`` with a ``test:`` target -> ``make test``
   (the project's own word on how it is tested);
2. ``package.json`` whose ``scripts.test`` is not npm's placeholder -> ``npm test``;
3. ``Cargo.toml`` -> ``cargo test``;
4. ``go.mod`` -> ``go test ./...``;
5. pytest configured (``pytest.ini``, ``conftest.py``, ``[tool.pytest.ini_options]`` in
   ``pyproject.toml``, ``[tool:pytest]`` in ``setup.cfg``, ``[pytest]`` in ``tox.ini``)
   -> ``python -m pytest``;
6. ``test*.py`` files at the top or under ``tests/``/``test/``: ``python -m unittest``
   (discovery) when every one of them is written for unittest (``unittest.TestCase``
   and no module-level ``test_`` functions), else ``python -m pytest``, the runner that
   collects plain test functions (unittest would run 0 of them and exit 0).

A run that collects no test ("no tests ran": pytest's exit status 5, unittest's
``Ran 0 tests``, ``NO TESTS RAN``) is never a pass: ``TestRun.no_tests_ran`` says so
and ``TestRun.passed`` is false.

``run_tests`` runs it as a tool process (``agents/tools/procs.py``): its own session,
stdin closed, the process group killed on timeout, output capped.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..tools.procs import OutputBuffer, run_process_group
from ..tools.sandbox import scrub_env

__all__ = [
    "TestCommand",
    "TestRun",
    "detect_test_command",
    "failing_tests",
    "no_tests_ran",
    "run_tests",
]

DEFAULT_TIMEOUT_S = 600.0
DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024
_NPM_PLACEHOLDER = "no test specified"


@dataclass(frozen=True)
class TestCommand:
    """A test command.

    Attributes:
        argv: the program and its arguments.
        source: why it was chosen (``"configured"``, ``"Makefile"``, ``"package.json"``...).
    """

    __test__ = False  # not a pytest test class

    argv: tuple[str, ...]
    source: str

    def __str__(self) -> str:
        return shlex.join(self.argv)


def _python() -> str:
    return shutil.which("python3") or shutil.which("python") or sys.executable


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


MAX_SNIFFED_TEST_FILES = 200
"""How many ``test*.py`` files detection reads to tell unittest from pytest style."""

_PLAIN_TEST = re.compile(r"^(?:async\s+)?def\s+test\w*\s*\(|^\s*(?:import|from)\s+pytest\b", re.M)
_UNITTEST = re.compile(r"\bunittest\b|\bTestCase\b")


def _test_files(root: Path) -> list[Path]:
    found: list[Path] = []
    for folder, pattern in ((root, "test*.py"), (root / "tests", "**/test*.py"), (root / "test", "**/test*.py")):
        if folder.is_dir():
            found += sorted(folder.glob(pattern))[: MAX_SNIFFED_TEST_FILES - len(found)]
    return found


def _python_test_style(files: Sequence[Path]) -> str:
    """``"unittest"`` when every file is unittest-style, else ``"pytest"``."""
    for path in files:
        text = _read(path)
        if _PLAIN_TEST.search(text) or not _UNITTEST.search(text):
            return "pytest"
    return "unittest"


def detect_test_command(
    root: Path | str,
    configured: TestCommand | Sequence[str] | str | None = None,
    *,
    python: str | None = None,
) -> TestCommand | None:
    """The test command of the project at ``root``, or ``None`` when none is found.

    Args:
        root: the project's working tree.
        configured: a command set by the person (a string is split as a shell would);
            when given, it is returned as is.
        python: the interpreter for Python projects; default ``python3`` on ``PATH``.

    Returns:
        The command, with why it was chosen.
    """
    if configured is not None:
        if isinstance(configured, TestCommand):
            return configured
        argv = shlex.split(configured) if isinstance(configured, str) else list(configured)
        if not argv:
            raise ValueError("the configured test command is empty")
        return TestCommand(tuple(argv), "configured")
    root = Path(root)
    for name in ("GNUmakefile", "makefile", "Makefile"):
        if re.search(r"^test\s*:", _read(root / name), flags=re.MULTILINE):
            return TestCommand(("make", "test"), name)
    if (root / "package.json").is_file():
        try:
            script = json.loads(_read(root / "package.json")).get("scripts", {}).get("test")
        except (ValueError, AttributeError):
            script = None
        if isinstance(script, str) and _NPM_PLACEHOLDER not in script:
            return TestCommand(("npm", "test"), "package.json")
    if (root / "Cargo.toml").is_file():
        return TestCommand(("cargo", "test"), "Cargo.toml")
    if (root / "go.mod").is_file():
        return TestCommand(("go", "test", "./..."), "go.mod")
    py = python or _python()
    pytest_markers = {
        "pytest.ini": None,
        "conftest.py": None,
        "pyproject.toml": "[tool.pytest.ini_options]",
        "setup.cfg": "[tool:pytest]",
        "tox.ini": "[pytest]",
    }
    for name, section in pytest_markers.items():
        path = root / name
        if path.is_file() and (section is None or section in _read(path)):
            return TestCommand((py, "-m", "pytest"), name)
    files = _test_files(root)
    if not files:
        return None
    if _python_test_style(files) == "unittest":
        return TestCommand((py, "-m", "unittest"), "test*.py (unittest)")
    return TestCommand((py, "-m", "pytest"), "test*.py (plain test functions)")


_FAILING = [
    re.compile(r"^(?:FAIL|ERROR): (\S+ \([^)]*\))", re.MULTILINE),  # unittest
    re.compile(r"^(?:FAILED|ERROR) (\S+::\S+)", re.MULTILINE),  # pytest -rf summary
    re.compile(r"^--- FAIL: (\S+)", re.MULTILINE),  # go test
    re.compile(r"^test (\S+) \.\.\. FAILED$", re.MULTILINE),  # cargo test
]


_NO_TESTS = re.compile(
    r"^Ran 0 tests in |^NO TESTS RAN\b|^=+ no tests ran\b|^collected 0 items\b|^No tests found\b",
    re.MULTILINE,
)


_CARGO_COUNT = re.compile(r"^running (\d+) tests?$", re.MULTILINE)
_GO_RAN = re.compile(r"^(?:ok|FAIL|---)\s", re.MULTILINE)


def no_tests_ran(argv: Sequence[str], exit_status: int | None, output: str) -> bool:
    """Whether a test run collected no test: pytest's exit status 5, or the words
    unittest (``Ran 0 tests``, ``NO TESTS RAN``), pytest or jest print for it, cargo's
    ``running 0 tests`` for every test binary, or go's ``[no test files]`` for every package."""
    if exit_status == 5 and any("pytest" in part for part in argv):
        return True
    if _NO_TESTS.search(output):
        return True
    counts = _CARGO_COUNT.findall(output)  # cargo: one "running N tests" per test binary
    if counts and all(n == "0" for n in counts):
        return True
    return "[no test files]" in output and not _GO_RAN.search(output)  # go: no package has tests


def failing_tests(output: str, limit: int = 50) -> tuple[str, ...]:
    """The names of failing tests found in test output (unittest, pytest, go, cargo), in
    order of appearance, each once; best effort, empty when none is recognised."""
    found: dict[str, None] = {}
    for pattern in _FAILING:
        for m in pattern.finditer(output):
            found.setdefault(m.group(1), None)
    return tuple(found)[:limit]


@dataclass(frozen=True)
class TestRun:
    """How a test run ended.

    Attributes:
        command: the command run.
        passed: exit status 0 within the deadline.
        exit_status: the exit status (negative: killed by that signal), ``None`` if unknown.
        timed_out: whether it was killed for running past ``timeout_s``.
        output: stdout and stderr merged, capped to ``max_output_bytes`` (head and tail).
        output_bytes: the size of the whole output.
        duration_s: wall time.
        failing_tests: names of failing tests recognised in the output.
        no_tests_ran: the run collected no test (never a pass; see ``no_tests_ran``).
    """

    __test__ = False

    command: TestCommand
    passed: bool
    exit_status: int | None
    timed_out: bool
    output: str
    output_bytes: int
    duration_s: float
    failing_tests: tuple[str, ...]
    no_tests_ran: bool = False


async def run_tests(
    command: TestCommand,
    cwd: Path | str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    env: Mapping[str, str] | None = None,
    wrap: Callable[[list[str], Path], list[str]] | None = None,
    kill_grace_s: float = 2.0,
) -> TestRun:
    """Run ``command`` in ``cwd`` in its own session, with a deadline.

    Args:
        command: the test command.
        cwd: the tree to test.
        timeout_s: seconds before the process group gets SIGTERM, then SIGKILL.
        max_output_bytes: the cap on ``TestRun.output``.
        env: the environment; default this process's without credentials
            (``tools.sandbox.scrub_env``). ``PYTHONDONTWRITEBYTECODE=1`` is added unless
            set, so Python test runs leave no ``__pycache__`` in the tree.
        wrap: turns ``(argv, cwd)`` into the argv to run, e.g. a sandbox's command line.
        kill_grace_s: seconds between SIGTERM and SIGKILL.

    Returns:
        How the run ended. A program that cannot be started is a failed run (exit status
        127), not an exception; so is a run that collected no test.
    """
    cwd = Path(cwd)
    run_env = dict(env) if env is not None else scrub_env(os.environ)
    run_env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    argv = list(command.argv)
    if wrap is not None:
        argv = wrap(argv, cwd)
    buffer = OutputBuffer(max_output_bytes)
    started = time.monotonic()
    try:
        exit_ = await run_process_group(
            argv, cwd=cwd, env=run_env, timeout_s=timeout_s, sink=buffer.feed,
            kill_grace_s=kill_grace_s,
        )
        status, timed_out = exit_.exit_status, exit_.timed_out
    except OSError as exc:
        buffer.feed(f"could not start {command}: {exc}\n".encode())
        status, timed_out = 127, False
    output = buffer.text()
    full = buffer.full().decode("utf-8", errors="replace")
    empty = not timed_out and no_tests_ran(command.argv, status, full)
    if timed_out:
        output += f"\n[killed after {timeout_s:g} s]"
    if empty:
        output += "\n[no tests ran: the command collected no test, so nothing was checked]"
    return TestRun(
        command=command,
        passed=status == 0 and not timed_out and not empty,
        exit_status=status,
        timed_out=timed_out,
        output=output,
        output_bytes=buffer.total_bytes,
        duration_s=time.monotonic() - started,
        failing_tests=failing_tests(full),
        no_tests_ran=empty,
    )
