"""Keeping forbidden modules out of a candidate: read its source first, block at import time.

Two layers (DESIGN.md section 10):

1. ``forbidden_imports(source, forbidden)`` reads the source with ``ast`` before anything runs
   and lists every ``import x`` / ``from x import`` / ``__import__("x")`` /
   ``importlib.import_module("x")`` (a literal name) that reaches a forbidden module.
2. In the evaluation process, ``candidate_scope(forbidden)`` installs a meta path finder that
   refuses forbidden modules and hides any already imported (the baseline may legitimately
   use one, e.g. FLA) for as long as candidate code is imported or run; outside the scope
   they are back, so the baseline keeps working.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.abc
import sys
from collections.abc import Iterable


def _matches(name: str, forbidden: Iterable[str]) -> str | None:
    for f in forbidden:
        if name == f or name.startswith(f + "."):
            return f
    return None


def forbidden_imports(source: str, forbidden: Iterable[str]) -> list[str]:
    """Forbidden modules the source imports, as ``"line N: import fla.ops"`` strings.

    Args:
        source: Python source of the candidate.
        forbidden: module names; a submodule of one is forbidden too.

    Returns:
        One entry per offending import, in source order (empty when clean). A source that does
        not parse returns no entry (running it will report the syntax error).
    """
    forbidden = tuple(forbidden)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found: list[str] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func) and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names = [arg.value]
        for name in names:
            if _matches(name, forbidden):
                found.append(f"line {node.lineno}: import {name}")
                break
    return sorted(set(found), key=lambda s: int(s.split(":")[0].split()[1]))


def _is_dynamic_import(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ("__import__", "import_module")
    return isinstance(func, ast.Attribute) and func.attr in ("import_module", "__import__")


class ForbiddenFinder(importlib.abc.MetaPathFinder):
    """A meta path finder that refuses to find forbidden modules (``ImportError`` with a reason)."""

    def __init__(self, forbidden: Iterable[str]):
        self.forbidden = tuple(forbidden)

    def find_spec(self, fullname, path=None, target=None):
        """Raise ImportError for a forbidden module; return None (look elsewhere) otherwise."""
        hit = _matches(fullname, self.forbidden)
        if hit:
            raise ImportError(
                f"module {fullname!r} is forbidden in this campaign ({hit}): write the algorithm yourself",
                name=fullname,
            )
        return None


class CandidateScope:
    """While active, forbidden modules cannot be imported and already-imported ones are hidden.

    Enter it around importing the candidate and around every call of it; the baseline runs
    outside. Which loaded modules to hide is decided when the scope is made (a scan of
    ``sys.modules``), so entering and leaving cost only the forbidden entries themselves:
    make a fresh scope after the baseline has been imported and warmed up.
    """

    def __init__(self, forbidden: Iterable[str]):
        self.finder = ForbiddenFinder(forbidden)
        self.names = [n for n in list(sys.modules) if _matches(n, self.finder.forbidden)]
        self._hidden: dict[str, object] = {}

    def __enter__(self) -> CandidateScope:
        self._hidden = {n: sys.modules.pop(n) for n in self.names if n in sys.modules}
        sys.meta_path.insert(0, self.finder)
        return self

    def __exit__(self, *exc) -> None:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self.finder)
        sys.modules.update(self._hidden)
        self._hidden = {}


def candidate_scope(forbidden: Iterable[str]) -> CandidateScope:
    """A fresh ``CandidateScope`` for ``forbidden`` (use as a context manager)."""
    return CandidateScope(forbidden)
