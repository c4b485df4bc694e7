"""Counts with their nouns: ``1 turn``, ``2 turns``, never ``1 turns`` or ``turn(s)``
(issue 18: "finished after 1 turns" in every one-turn run).

One helper per layer that may not import the other (``musec.client.output.counted`` and
``musec.agents.core.words.counted``), held here to the same answers; and the source of
the client, the agents and the daemon is read for the ways a count was written without
it (``edit(s)``, ``line{'s' if n != 1 else ''}``), so a new one fails here.
"""

from __future__ import annotations

import ast
import io
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from musec.agents.core.words import counted as agents_counted
from musec.client.output import counted as client_counted
from musec.daemon import protocol as p

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("n", "noun", "plural", "said"), [
    (0, "turn", "", "0 turns"),
    (1, "turn", "", "1 turn"),
    (2, "turn", "", "2 turns"),
    (1, "retry", "retries", "1 retry"),
    (3, "retry", "retries", "3 retries"),
    (1, "live session", "", "1 live session"),
    (-1, "byte", "", "-1 bytes"),
])
def test_counted(n: int, noun: str, plural: str, said: str) -> None:
    assert client_counted(n, noun, plural) == agents_counted(n, noun, plural) == said


@given(st.integers(), st.text(min_size=1), st.text())
def test_the_two_helpers_agree(n: int, noun: str, plural: str) -> None:
    assert client_counted(n, noun, plural) == agents_counted(n, noun, plural)


# ``edit(s)``, ``session(s)``, ``match(es)``: a noun that does not know its number.
_EITHER = re.compile(r"[a-z]\((?:s|es)\)")


def _ad_hoc_plurals(tree: ast.AST) -> list[int]:
    """Lines of ``'s' if N != 1 else ''``: a count's plural made by hand beside the helper
    (a noun alone, ``rule{'s' if len(rules) > 1 else ''}``, is not a count)."""
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.IfExp) and isinstance(node.body, ast.Constant) and node.body.value == "s"
            and isinstance(node.orelse, ast.Constant) and node.orelse.value == ""
            and isinstance(node.test, ast.Compare) and isinstance(node.test.ops[0], ast.NotEq)
            and isinstance(node.test.comparators[0], ast.Constant) and node.test.comparators[0].value == 1]


def test_no_count_is_written_without_its_number() -> None:
    bad = []
    for top in ("client", "agents", "daemon"):
        for path in sorted((ROOT / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                          if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                          and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
            rel = path.relative_to(ROOT)
            for node in ast.walk(tree):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                        and _EITHER.search(node.value)):
                    bad.append(f"{rel}:{node.lineno}: {node.value.strip()[:60]!r}")
            bad += [f"{rel}:{line}: 's' if ... else ''" for line in _ad_hoc_plurals(tree)]
    assert not bad, "write counts with counted() (client/output.py, agents/core/words.py):\n  " + "\n  ".join(bad)


def test_a_one_turn_run_says_one_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """The headless run's last line, as a one-turn run ends."""
    import sys

    from musec.client.run import finish_run

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    ended = p.SessionEnded(id=1, session_id="s1", exit_reason="finished", turns=1, log_path="/x.jsonl")
    finish_run("text", ended)
    assert "finished after 1 turn;" in err.getvalue()
