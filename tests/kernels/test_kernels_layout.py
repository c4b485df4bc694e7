"""Layout rules of ``kernels/`` (DESIGN.md section 1, STYLE.md): read from the source, no import.

- kernels import nothing of musec outside ``musec.kernels``;
- no module over 500 lines, no function over 80 lines;
- every public function and class has a docstring.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
MODULES = sorted(KERNELS.rglob("*.py"))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def test_kernels_folder_found():
    assert len(MODULES) >= 10, MODULES


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(KERNELS)))
def test_kernels_import_nothing_else_of_musec(path):
    for node in ast.walk(_tree(path)):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            if name == "musec" or name.startswith("musec."):
                assert name.startswith("musec.kernels"), f"{path.name} imports {name}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(KERNELS)))
def test_kernel_module_and_function_sizes(path):
    lines = path.read_text().count("\n")
    assert lines <= 500, f"{path.name}: {lines} lines > 500"
    for fn in _functions(_tree(path)):
        n = fn.end_lineno - fn.lineno + 1
        assert n <= 80, f"{path.name}:{fn.lineno} {fn.name}: {n} lines > 80"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(KERNELS)))
def test_public_kernel_api_has_docstrings(path):
    tree = _tree(path)
    assert ast.get_docstring(tree), f"{path.name}: no module docstring"
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_"):
            assert ast.get_docstring(node), f"{path.name}: {node.name} has no docstring"
