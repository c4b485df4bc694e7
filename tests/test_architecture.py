"""The layout's rules (DESIGN §1), checked on the source itself.

Every ``.py`` under ``agents/``, ``client/``, ``daemon/`` and ``kernels/`` is parsed (never
imported) and each ``import`` and ``from ... import`` in it, at any depth (function-level
and ``TYPE_CHECKING`` imports included: a type-only import still couples two layers), is
resolved to the musec module it names. ``from pkg import name`` names ``pkg.name`` when that
is a module, else ``pkg`` itself. Importing ``a.b.c`` is an edge to ``a.b.c`` only, not to
its parent packages (the convention of import-graph tools such as grimp).

Rules that other work has still to satisfy are ``xfail(strict=True)``, with the reason:
when the work lands, the case passes, the xfail turns into a failure, and the mark must be
removed, so a rule once met stays met.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP = ("agents", "client", "daemon", "kernels")
#: Not musec code: the example repository ``musec demo`` copies (package data).
NOT_MODULES = ("client/demo/",)


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["musec", *parts])


@cache
def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every musec module under ``root`` by dotted name (``musec.daemon.server``) -> its file."""
    found = {}
    for top in TOP:
        for path in sorted((root / top).rglob("*.py")):
            if not path.relative_to(root).as_posix().startswith(NOT_MODULES):
                found[_module_name(path, root)] = path
    return found


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from`` import starts from (``from ..x import y`` -> ``a.x``)."""
    if node.level == 0:
        return node.module or ""
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _imports_of(name: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """The musec modules (of ``known``) that ``name`` imports, with the line of each import."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, path.name == "__init__.py", node)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known and target.startswith("musec."):
                target = target.rpartition(".")[0]  # ``import musec.x.y as z`` of a non-module attribute
            if target in known and target != name:
                yield target, node.lineno


@cache
def graph(root: Path = ROOT) -> dict[str, dict[str, int]]:
    """importer -> {imported: first line} over every musec module under ``root``."""
    out: dict[str, dict[str, int]] = {}
    known = modules(root)
    for name, path in known.items():
        edges: dict[str, int] = {}
        for target, line in _imports_of(name, path, known):
            edges.setdefault(target, line)
        out[name] = edges
    return out


def cycles(root: Path = ROOT) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    g = graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


@dataclass(frozen=True)
class Rule:
    """Modules under ``importers`` may import musec modules only under ``allowed``
    (their own package is always allowed unless ``own`` is False)."""

    name: str
    importers: str
    allowed: tuple[str, ...]
    why: str
    own: bool = True

    def violations(self, root: Path = ROOT) -> list[str]:
        """``path:line imports module`` for each import that breaks the rule."""
        bad = []
        for importer, edges in graph(root).items():
            if not _in(importer, self.importers):
                continue
            for target, line in edges.items():
                if self.own and _in(target, self.importers):
                    continue
                if not any(_in(target, ok) for ok in self.allowed):
                    path = modules(root)[importer].relative_to(root)
                    bad.append(f"{path}:{line} imports {target}")
        return bad


CORE = "musec.agents.core"

RULES = [
    Rule("client", "musec.client", ("musec.daemon.protocol",),
         "the client imports only client/ and daemon/protocol/ (DESIGN §1)"),
    Rule("protocol", "musec.daemon.protocol", (), "daemon/protocol/ imports nothing else of musec"),
    Rule("kernels", "musec.kernels", (), "kernels/ imports nothing from the rest of musec"),
    Rule("agents", "musec.agents", ("musec.kernels",),
         "agents/ never imports up into the daemon or the client (daemon -> agents, not back)"),
    Rule("providers", "musec.agents.providers", (CORE,),
         "providers import neither the daemon nor the tools nor the rest of agents/, only the core"),
    Rule("tools", "musec.agents.tools", (CORE,),
         "tools import neither the daemon nor the providers nor the rest of agents/, only the core"),
    Rule("core", CORE, (), "the agents' core (conversation, errors, events, faults) imports nothing else of musec"),
    Rule("roles", "musec.agents.roles", (CORE, "musec.agents.recorder", "musec.agents.blackboard", "musec.agents.workers",
                                         "musec.agents.tools"),
         "background roles take a Recorder and the blackboard; they never import the daemon or the loop"),
]

PENDING: dict[str, str] = {}


def test_the_event_log_is_handed_its_crash_points() -> None:
    """Issue 11: fault hooks are injected (the daemon's entry point makes them from its
    environment), never imported by the event log."""
    edges = graph()["musec.daemon.eventlog"]
    assert not [t for t in edges if _in(t, f"{CORE}.faults")], edges


def _xfail(name: str, reasons: dict[str, str]) -> list:
    return [pytest.mark.xfail(strict=True, reason=reasons[name])] if name in reasons else []


@pytest.mark.parametrize("rule", [pytest.param(r, id=r.name, marks=_xfail(r.name, PENDING)) for r in RULES])
def test_dependency_rule(rule: Rule) -> None:
    bad = rule.violations()
    assert not bad, f"{rule.why}:\n  " + "\n  ".join(bad)


PENDING_CYCLES: dict[str, str] = {}


@pytest.mark.parametrize("top", [pytest.param(t, id=t, marks=_xfail(t, PENDING_CYCLES)) for t in TOP])
def test_no_import_circle(top: str) -> None:
    """No circle among musec modules touches ``top`` (a circle is reported once per top
    folder it passes through)."""
    mine = [c for c in cycles() if any(_in(m, f"musec.{top}") for m in c)]
    assert not mine, "import circles:\n  " + "\n  ".join(" <-> ".join(c) for c in mine)


def test_the_walk_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The walk itself, on a small tree made here: relative, absolute, aliased,
    function-level and TYPE_CHECKING imports all become edges, and a circle and a broken
    rule are reported, so a rule above cannot pass by not looking."""
    files = {
        "agents/__init__.py": "",
        "agents/a.py": "def f():\n    from . import b\n",
        "agents/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n",
        "agents/tools/__init__.py": "",
        "agents/tools/t.py": "from ..b import x\nfrom musec.agents.tools import t2\n",
        "agents/tools/t2.py": "",
        "daemon/__init__.py": "def main():\n    from .server import run\n",
        "daemon/server.py": "import musec.agents.a as a\n",
        "daemon/protocol.py": "from .version import VERSION\n",
        "daemon/version.py": "VERSION = '1'\n",
        "client/__init__.py": "import musec.daemon.protocol.Hello\nfrom musec.daemon import server\n",
        "kernels/__init__.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    g = graph(tmp_path)
    assert g["musec.agents.a"] == {"musec.agents.b": 2}  # function-level, relative
    assert g["musec.agents.b"] == {"musec.agents.a": 3}  # TYPE_CHECKING
    assert g["musec.agents.tools.t"] == {"musec.agents.b": 1, "musec.agents.tools.t2": 2}
    assert g["musec.daemon"] == {"musec.daemon.server": 2}
    assert g["musec.daemon.server"] == {"musec.agents.a": 1}  # aliased absolute
    assert g["musec.client"] == {"musec.daemon.protocol": 1, "musec.daemon.server": 2}  # attribute -> module
    assert cycles(tmp_path) == [["musec.agents.a", "musec.agents.b"]]
    rules = {r.name: r for r in RULES}
    assert rules["client"].violations(tmp_path) == ["client/__init__.py:2 imports musec.daemon.server"]
    assert rules["protocol"].violations(tmp_path) == ["daemon/protocol.py:1 imports musec.daemon.version"]
    assert rules["tools"].violations(tmp_path) == ["agents/tools/t.py:1 imports musec.agents.b"]
    assert rules["agents"].violations(tmp_path) == []
    assert len(modules()) > 80  # and the real tree is seen


def test_every_package_is_installed() -> None:
    """Each folder with an ``__init__.py`` is in pyproject's ``package-dir`` and
    ``packages``, so a normal ``pip install .`` carries it (DESIGN §1)."""
    import tomllib

    tool = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    folders = {_module_name(init, ROOT): init.parent.relative_to(ROOT).as_posix()
               for top in TOP for init in (ROOT / top).rglob("__init__.py")}
    assert {name: tool["package-dir"].get(name) for name in folders} == folders
    assert sorted(set(folders) - set(tool["packages"])) == []
