"""What the verifier needs to take a baseline beside the main agent, never before it.

``snapshot_tree`` copies the workspace as it is when the session starts (the files
ripgrep lists: ``.gitignore``'d files and ``.git`` left out) into a private folder, so the
baseline test run sees the code before any edit however long it takes, while the main agent
edits the workspace. ``narrow_test_command`` turns the project's test command into one that
runs only the tests touching the changed files (a test file that changed, or one that names
a changed module), so an edit is checked in seconds while a slow full baseline still runs.

Known limit: a file the tests need that ``.gitignore`` leaves out (a generated version
module, a built extension) is missing from the snapshot; the baseline then fails where the
workspace would not, which hides a failure (never invents one: only failures missing from
the baseline are reported).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from ..workers.testcmd import TestCommand

__all__ = ["MAX_SNAPSHOT_BYTES", "MAX_SNAPSHOT_FILES", "is_text", "list_files", "narrow_test_command", "snapshot_tree"]

MAX_SNAPSHOT_FILES = 20_000
MAX_SNAPSHOT_BYTES = 256 * 1024 * 1024
MAX_TEST_FILES_SCANNED = 5_000
MAX_TEST_TARGETS = 64
_TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test)\.py$")


def list_files(root: Path) -> list[str]:
    """The files under ``root`` ripgrep would search (hidden ones included; ``.git`` and
    ignored files left out), as POSIX paths relative to ``root``, sorted; empty when
    ripgrep is missing or fails.

    Names are decoded as the filesystem's (``os.fsdecode``): one that is not UTF-8 keeps its
    bytes as lone surrogates, so ``root / name`` opens it, but such a name must not reach a
    log or the wire as it is (see ``is_text``)."""
    from musec.agents.tools.search import find_ripgrep

    rg = find_ripgrep()
    if rg is None:
        return []
    try:
        proc = subprocess.run([rg, "--files", "--hidden", "--no-require-git", "--glob", "!.git"], cwd=root,
                              capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return sorted(os.fsdecode(line) for line in proc.stdout.splitlines())


def is_text(name: str) -> bool:
    """Whether ``name`` is valid text (no lone surrogate from undecodable bytes), so it can
    be written to the log, the wire or a command line that is logged."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def snapshot_tree(root: Path, dest: Path) -> bool:
    """Copy the files of ``root`` (see ``list_files``) into ``dest``, keeping modes and symlinks.

    Args:
        root: the workspace.
        dest: an empty folder to fill.

    Returns:
        False (and ``dest`` left partly filled) when the tree is over ``MAX_SNAPSHOT_FILES``
        files or ``MAX_SNAPSHOT_BYTES`` bytes, or nothing could be listed: the caller tests
        in place instead.
    """
    files = list_files(root)
    if not files or len(files) > MAX_SNAPSHOT_FILES:
        return False
    total = 0
    for rel in files:
        src, dst = root / rel, dest / rel
        try:
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_symlink():
                os.symlink(os.readlink(src), dst)
                continue
            total += src.stat().st_size
            if total > MAX_SNAPSHOT_BYTES:
                return False
            shutil.copy2(src, dst)
        except OSError:
            continue  # a file that vanished or cannot be read is missing from the baseline too
    return True


def _kind(command: TestCommand) -> str | None:
    argv = list(command.argv)
    if "-m" in argv[:-1]:
        module = argv[argv.index("-m") + 1]
        if module in ("pytest", "unittest"):
            return module
    if argv and PurePosixPath(argv[0]).name in ("pytest", "py.test"):
        return "pytest"
    return None


def is_test_file(path: str) -> bool:
    """A Python test file by its name (``test_*.py`` or ``*_test.py``)."""
    return bool(_TEST_FILE.search(path))


def narrow_test_command(command: TestCommand, root: Path, changed: Iterable[str]) -> TestCommand | None:
    """``command`` limited to the tests that touch ``changed``, or None when it cannot be.

    A test file touches a change when it is one of the changed files, or when its text names
    a changed Python module (its file name without ``.py``, as a whole word). Only pytest and
    unittest commands can be narrowed (their arguments are test files).

    Args:
        command: the project's test command.
        root: the tree the tests run in.
        changed: the changed paths, relative to ``root``.

    Returns:
        The narrowed command (its ``source`` says ``narrowed``); a command with no test
        files at all is returned as None too, as there is nothing quick to run.
    """
    kind = _kind(command)
    if kind is None:
        return None
    changed = sorted(set(changed))
    targets = [p for p in changed if is_test_file(p) and (root / p).is_file()]
    modules = {PurePosixPath(p).stem for p in changed if p.endswith(".py") and not is_test_file(p)}
    modules.discard("__init__")
    if modules:
        word = re.compile(r"\b(" + "|".join(re.escape(m) for m in sorted(modules)) + r")\b")
        tests = [p for p in list_files(root)
                 if is_test_file(p) and p.endswith(".py") and is_text(p)][:MAX_TEST_FILES_SCANNED]
        for path in tests:
            if path in targets:
                continue
            try:
                text = (root / path).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if word.search(text):
                targets.append(path)
    if not targets or len(targets) > MAX_TEST_TARGETS:
        return None
    return TestCommand((*command.argv, *targets), f"narrowed {command.source}")
