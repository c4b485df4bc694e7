"""The glob syntax of the ``glob`` tool, matched against relative paths."""

from __future__ import annotations

import pytest
from musec.agents.tools.globmatch import compile_glob


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.py", "a.py", True),
        ("*.py", "x/y/a.py", True),
        ("*.py", "a.pyc", False),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/x/a.py", False),
        ("src/*.py", "lib/src/a.py", False),
        ("src/**/*.py", "src/a.py", True),
        ("src/**/*.py", "src/x/y/a.py", True),
        ("**/*.py", "a.py", True),
        ("**", "a/b", True),
        ("a/**", "a/b/c", True),
        ("a/**", "b/a/c", False),
        ("*.{ts,tsx}", "a/b.tsx", True),
        ("*.{ts,tsx}", "b.js", False),
        ("{src,lib}/**/*.{c,h}", "lib/x/y.h", True),
        ("[!a]*.py", "b.py", True),
        ("[!a]*.py", "a.py", False),
        ("[ab]?.txt", "b1.txt", True),
        ("docs/", "docs/x/y.md", True),
        ("/top.py", "top.py", True),
        ("/top.py", "x/top.py", False),
        ("./src/*.py", "src/a.py", True),
        ("foo?.c", "foo1.c", True),
        ("foo?.c", "foo/.c", False),
        ("[", "[", True),
        (r"\*.md", "*.md", True),
        (r"\*.md", "a.md", False),
        ("a.b", "axb", False),
        ("ünï*.txt", "dir/ünïcode.txt", True),
    ],
)
def test_glob_matching(pattern: str, path: str, matches: bool) -> None:
    assert bool(compile_glob(pattern).fullmatch(path)) is matches


def test_empty_pattern_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        compile_glob("  ")
