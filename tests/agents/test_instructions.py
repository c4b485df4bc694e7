"""AGENTS.md discovery on a real git repository: order, overrides, budget, subdirectories."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from musec.agents.instructions import SubdirInstructions, discover, render, render_added, repo_root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "svc" / "api" / "handlers").mkdir(parents=True)
    pygit2.init_repository(str(root))
    (root / "AGENTS.md").write_text("ROOT: use tabs\n")
    (root / "svc" / "AGENTS.md").write_text("SVC: plain\n")
    (root / "svc" / "AGENTS.override.md").write_text("SVC-OVERRIDE: wins\n")
    (root / "svc" / "api" / "handlers" / "AGENTS.md").write_text("HANDLERS: deep\n")
    (root / "svc" / "api" / "handlers" / "h.py").write_text("x = 1\n")
    return root


def test_root_to_cwd_with_override_and_user_file_first(repo: Path, tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "AGENTS.md").write_text("MINE: be brief\n")
    cwd = repo / "svc" / "api"
    files = discover(cwd, config)
    assert [(f.rel, f.scope) for f in files] == [
        ("~config/AGENTS.md", "user"), ("AGENTS.md", "repository"), ("svc/AGENTS.override.md", "repository"),
    ]
    text, warnings = render(files)
    assert warnings == []
    assert text.index("MINE") < text.index("ROOT") < text.index("SVC-OVERRIDE")
    assert "SVC: plain" not in text and "HANDLERS" not in text
    assert '<user_instructions path="~config/AGENTS.md">' in text
    assert '<repository_instructions path="svc/AGENTS.override.md">' in text


def test_git_file_marks_a_worktree_root(tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    (wt / "a").mkdir(parents=True)
    (wt / ".git").write_text("gitdir: /elsewhere\n")
    assert repo_root(wt / "a") == wt


def test_outside_a_repository_only_cwd(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("ABOVE\n")
    cwd = tmp_path / "plain"
    cwd.mkdir()
    (cwd / "AGENTS.md").write_text("HERE\n")
    if repo_root(cwd) is None:
        assert [f.text for f in discover(cwd)] == ["HERE\n"]


def test_budget_cuts_the_specific_end_with_a_warning(repo: Path) -> None:
    (repo / "AGENTS.md").write_text("R" * 30_000)
    (repo / "svc" / "AGENTS.override.md").write_text("S" * 10_000)
    text, warnings = render(discover(repo / "svc"))
    assert len(text.encode()) <= 32 * 1024 + 300
    assert "R" * 30_000 in text and "S" * 10_000 not in text
    assert warnings == ["AGENTS.md budget of 32 KiB exceeded: cut svc/AGENTS.override.md"]


def test_subdirectory_files_arrive_once_when_a_file_under_them_is_read(repo: Path) -> None:
    sub = SubdirInstructions(repo)
    assert sub.for_path(repo / "README.md") == []
    added = sub.for_path(repo / "svc" / "api" / "handlers" / "h.py")
    assert [f.rel for f in added] == ["svc/AGENTS.override.md", "svc/api/handlers/AGENTS.md"]
    for f in added:
        sub.mark(f.path)
    assert sub.for_path(repo / "svc" / "api" / "handlers" / "h.py") == []
    assert sub.for_path(Path("/etc/passwd")) == []
    assert "added because you are working under it" in render_added(added[1])
    assert "svc/api/handlers/" in render_added(added[1])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=400), min_size=1, max_size=6), st.integers(256, 4096))
def test_render_never_exceeds_its_budget_by_more_than_the_marker(texts: list[str], budget: int) -> None:
    from musec.agents.instructions import InstructionFile

    files = [InstructionFile(f"/r/{n}/AGENTS.md", f"{n}/AGENTS.md", "repository", t) for n, t in enumerate(texts)]
    text, warnings = render(files, budget)
    intro = len(text.split("\n", 1)[0].encode()) + 1 if text else 0
    assert len(text.encode()) - intro <= budget + 80
    pieces = [len(f'<repository_instructions path="{f.rel}">\n{f.text.rstrip()}\n</repository_instructions>'.encode()) for f in files]
    assert bool(warnings) == (sum(pieces) > budget)
