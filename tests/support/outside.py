"""A guard that fails any test reading outside the repository.

The suite must pass from a clone in any directory, so nothing under ``tests/`` may read
files that sit beside the repository. The team's docs folder next to the worktrees
(the team's ``shared`` folder beside the checkout, which once held the provider fixtures) is the place a test reaches by
accident; ``install`` adds an audit hook (PEP 578) that makes opening or listing anything
under it raise ``OutsideRepository`` in the test process.

Usage (done once by ``tests/conftest.py``)::

    from tests.support.outside import install
    install(REPO_ROOT)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["OutsideRepository", "forbidden_roots", "install"]

#: Audit events that carry a path to read as their first argument.
_EVENTS = frozenset({"open", "os.listdir", "os.scandir"})
_installed: list[tuple[str, ...]] = []


class OutsideRepository(RuntimeError):
    """A test opened or listed a path outside the repository (the ``shared`` folder beside the checkout)."""


def forbidden_roots(repo_root: Path) -> tuple[str, ...]:
    """The path prefixes (each ending in a separator) that tests may not read.

    Args:
        repo_root: The repository's root directory.

    Returns:
        the ``shared`` folder beside ``repo_root``, as written and with symlinks resolved.
    """
    shared = repo_root.parent / "shared"
    return tuple(sorted({os.path.abspath(shared) + os.sep, os.path.realpath(shared) + os.sep}))


def install(repo_root: Path) -> None:
    """Add the audit hook for ``repo_root`` to this process (once; later calls do nothing)."""
    if _installed:
        return
    roots = forbidden_roots(repo_root)
    _installed.append(roots)

    def hook(event: str, args: tuple) -> None:
        if event not in _EVENTS or not args:
            return
        path = args[0]
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str | os.PathLike):
            return  # a file descriptor
        if (os.path.abspath(path) + os.sep).startswith(roots):
            raise OutsideRepository(
                f"a test reached {path}, outside the repository; put what it needs under "
                f"tests/fixtures/ (see tests/fixtures/providers/README.md)"
            )

    sys.addaudithook(hook)
