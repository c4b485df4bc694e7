"""Integration of worker branches and apply, on a real repository with real unittest runs.

The project: ``prices.total`` and a report using it. Worker ``rename`` renames ``total`` to
``sum_prices`` everywhere it is used; worker ``summary`` adds a module calling
``prices.total``; worker ``docs`` adds a README. Each branch passes its tests alone; merged,
``summary`` calls a function that no longer exists.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pygit2
import pytest
from conftest import SID, SIG, commit_files, git, hash_working_copy, make_repo, write_files
from musec.agents.workers import (
    FiltersUnsupported,
    HeadMoved,
    MergeConflict,
    NotOnBranch,
    UnknownBranch,
    WorktreeDirty,
    apply,
    commit_all,
    create_worktree,
    integrate,
    merge_branches,
    prepare_base,
)

UNITTEST = [sys.executable, "-m", "unittest"]

PROJECT = {
    "prices.py": "def total(prices):\n    return sum(prices)\n",
    "report.py": "from prices import total\n\n\ndef report(prices):\n    return f'total: {total(prices)}'\n",
    "test_prices.py": (
        "import unittest\n\nfrom prices import total\nfrom report import report\n\n\n"
        "class PricesTest(unittest.TestCase):\n"
        "    def test_total(self):\n        self.assertEqual(total([1, 2]), 3)\n\n"
        "    def test_report(self):\n        self.assertEqual(report([1, 2]), 'total: 3')\n"
    ),
    ".gitignore": "__pycache__/\n",
}
RENAME = {
    "prices.py": "def sum_prices(prices):\n    return sum(prices)\n",
    "report.py": "from prices import sum_prices\n\n\ndef report(prices):\n    return f'total: {sum_prices(prices)}'\n",
    "test_prices.py": PROJECT["test_prices.py"].replace("total([", "sum_prices([").replace(
        "import total", "import sum_prices"),
}
SUMMARY = {
    "summary.py": "import prices\n\n\ndef summary(items):\n    return {'n': len(items), 'total': prices.total(items)}\n",
    "test_summary.py": (
        "import unittest\n\nfrom summary import summary\n\n\n"
        "class SummaryTest(unittest.TestCase):\n"
        "    def test_summary_counts(self):\n        self.assertEqual(summary([1, 2]), {'n': 2, 'total': 3})\n"
    ),
}
DOCS = {"README.md": "# prices\n\nSums prices.\n"}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "person", PROJECT)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


def unittest_passes(tree: Path) -> bool:
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([*UNITTEST, "-q"], cwd=tree, capture_output=True, env=env, timeout=60).returncode == 0


def worker(repo: Path, state: Path, base, name: str, files: dict[str, str | None]) -> str:
    """A worker: its worktree, its edits, its commit; returns its branch."""
    wt = create_worktree(repo, state, SID, name, base)
    write_files(wt.path, files)
    assert commit_all(wt, f"{name}: work", signature=SIG) is not None
    assert unittest_passes(wt.path), f"{name} should pass its own tests"
    return wt.branch


@pytest.mark.anyio
async def test_two_green_branches_that_break_together_fail_integration(repo: Path, state: Path) -> None:
    before = hash_working_copy(repo)
    base = prepare_base(repo, SID, dirty="refuse")
    branches = [worker(repo, state, base, "rename", RENAME), worker(repo, state, base, "summary", SUMMARY),
                worker(repo, state, base, "docs", DOCS)]

    result = await integrate(repo, state, SID, base, branches, timeout_s=60)

    assert not result.merge.conflicts
    assert [m.how for m in result.merge.merged] == ["fast-forward", "merge", "merge"]
    assert result.test_command is not None and result.test_command.source == "test*.py (unittest)"
    assert result.tests is not None and not result.tests.passed and not result.ok
    assert result.tests.failing_tests == ("test_summary_counts (test_summary.SummaryTest.test_summary_counts)",)
    assert "has no attribute 'total'" in result.tests.output
    assert "tests FAILED" in result.summary() and "test_summary_counts" in result.summary()
    merged = result.merge.worktree
    assert merged == (state / "worktrees" / SID / "integration").absolute()
    assert {"summary.py", "README.md"} <= {p.name for p in merged.iterdir()}
    assert git(merged, "rev-parse", "HEAD").strip() == result.merge.head
    assert git(merged, "status", "--porcelain") == ""
    assert hash_working_copy(repo) == before
    assert git(repo, "status", "--porcelain") == ""
    git(repo, "fsck", "--no-progress")


@pytest.mark.anyio
async def test_clean_integration_applies_onto_the_persons_branch(repo: Path, state: Path) -> None:
    base = prepare_base(repo, SID)
    branches = [worker(repo, state, base, "summary", SUMMARY), worker(repo, state, base, "docs", DOCS)]
    result = await integrate(repo, state, SID, base, branches, UNITTEST, timeout_s=60)
    assert result.ok, result.summary()

    applied = apply(repo, result.merge.branch, expected_head=base.head)

    assert (applied.branch, applied.old_head, applied.how) == ("main", base.head, "fast-forward")
    assert applied.new_head == result.merge.head == git(repo, "rev-parse", "main").strip()
    assert (repo / "summary.py").read_text() == SUMMARY["summary.py"]
    assert (repo / "README.md").exists()
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "diff", "--cached", "--name-only") == ""
    assert unittest_passes(repo)
    assert "musec apply" in git(repo, "reflog", "-1", "main")
    again = apply(repo, result.merge.branch, expected_head=applied.new_head)
    assert again.how == "up-to-date"


@pytest.mark.anyio
async def test_integrating_again_starts_from_the_base(repo: Path, state: Path) -> None:
    base = prepare_base(repo, SID)
    branches = [worker(repo, state, base, "rename", RENAME), worker(repo, state, base, "summary", SUMMARY)]
    first = await integrate(repo, state, SID, base, branches, UNITTEST, timeout_s=60)
    assert not first.ok
    wt = create_worktree(repo, state, SID, "summary", base)
    assert wt.resumed
    write_files(wt.path, {"summary.py": SUMMARY["summary.py"].replace("prices.total", "prices.sum_prices")})
    commit_all(wt, "summary: follow the rename", signature=SIG)
    write_files(first.merge.worktree, {"junk.txt": "left by the last test run\n"})
    second = await integrate(repo, state, SID, base, branches, UNITTEST, timeout_s=60)
    assert second.ok, second.summary()
    assert not (second.merge.worktree / "junk.txt").exists()
    assert pygit2.Repository(str(repo))[second.merge.head].parents[0].id != first.merge.head


def test_conflicts_are_reported_per_file_with_both_sides(repo: Path, state: Path) -> None:
    base = prepare_base(repo, SID)
    long_line = "x" * 500
    a = worker(repo, state, base, "a", {"prices.py": "def total(prices):\n    return sum(prices) + 0  # a\n",
                                         "big.txt": f"a {long_line}\n"})
    b = worker(repo, state, base, "b", {"prices.py": "def total(prices):\n    return sum(prices) * 1  # b\n",
                                         "big.txt": f"b {long_line}\n"})
    c = worker(repo, state, base, "c", DOCS)

    outcome = merge_branches(repo, state, SID, base, [a, b, c], signature=SIG, max_side_chars=100)

    assert [m.branch for m in outcome.merged] == [a, c]
    assert [c.branch for c in outcome.conflicts] == [b]
    files = {f.path: f for f in outcome.conflicts[0].files}
    assert sorted(files) == ["big.txt", "prices.py"]
    prices = files["prices.py"]
    assert prices.ancestor == PROJECT["prices.py"]
    assert "# a" in prices.ours and "# b" in prices.theirs and not prices.truncated
    big = files["big.txt"]
    assert big.truncated and len(big.ours) == 100 and big.ours.startswith("a x") and big.theirs.startswith("b x")
    assert big.ancestor is None
    assert (outcome.worktree / "README.md").exists()
    assert "# a" in (outcome.worktree / "prices.py").read_text()


def test_apply_merges_onto_a_branch_that_moved_on(repo: Path, state: Path) -> None:
    base = prepare_base(repo, SID)
    outcome = merge_branches(repo, state, SID, base, [worker(repo, state, base, "docs", DOCS)])
    moved = commit_files(repo, {"later.txt": "the person went on working\n"}, "person's commit")

    applied = apply(repo, outcome.branch, expected_head=base.head, signature=SIG)

    assert applied.how == "merge" and applied.old_head == moved
    assert "not on this merge" in applied.note  # the tests did not run on it, and it says so
    merge = pygit2.Repository(str(repo))[applied.new_head]
    assert [str(p) for p in merge.parent_ids] == [moved, outcome.head]
    assert (repo / "README.md").exists() and (repo / "later.txt").exists()
    assert git(repo, "status", "--porcelain") == ""


def test_apply_refuses_a_branch_reset_away_and_names_the_git_command(repo: Path, state: Path) -> None:
    first = git(repo, "rev-parse", "HEAD").strip()
    commit_files(repo, {"later.txt": "a commit the person will drop\n"}, "dropped")
    base = prepare_base(repo, SID)
    outcome = merge_branches(repo, state, SID, base, [worker(repo, state, base, "docs", DOCS)])
    git(repo, "reset", "-q", "--hard", first)
    before = hash_working_copy(repo)
    with pytest.raises(HeadMoved, match="does not descend") as err:
        apply(repo, outcome.branch, expected_head=base.head)
    assert (err.value.expected, err.value.actual) == (base.head, first)
    assert f"git merge {outcome.branch}" in str(err.value)
    assert hash_working_copy(repo) == before


def test_apply_reports_conflicts_and_changes_nothing(repo: Path, state: Path) -> None:
    base = prepare_base(repo, SID)
    outcome = merge_branches(repo, state, SID, base, [worker(repo, state, base, "w", RENAME)])
    moved = commit_files(repo, {"prices.py": "def total(prices):\n    return 0\n"}, "person's edit")
    before = hash_working_copy(repo)
    with pytest.raises(MergeConflict) as err:
        apply(repo, outcome.branch, expected_head=moved)
    assert [f.path for f in err.value.conflicts] == ["prices.py"]
    assert "return 0" in err.value.conflicts[0].ours
    assert f"git merge {outcome.branch}" in str(err.value)  # how to do it by hand, named
    assert hash_working_copy(repo) == before


@pytest.mark.parametrize("change", [{"prices.py": "edited\n"}, {"untracked.txt": "new\n"}, {"report.py": None}])
def test_apply_refuses_a_dirty_tree(repo: Path, state: Path, change: dict[str, str | None]) -> None:
    base = prepare_base(repo, SID)
    outcome = merge_branches(repo, state, SID, base, [worker(repo, state, base, "docs", DOCS)])
    write_files(repo, change)
    before = hash_working_copy(repo)
    with pytest.raises(WorktreeDirty, match="uncommitted") as err:
        apply(repo, outcome.branch, expected_head=base.head)
    assert err.value.paths == tuple(change)
    assert hash_working_copy(repo) == before


def test_apply_refuses_detached_head_and_unknown_branch(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD").strip()
    with pytest.raises(UnknownBranch):
        apply(repo, "musec/nope/integration", expected_head=head)
    git(repo, "checkout", "-q", "--detach")
    with pytest.raises(NotOnBranch):
        apply(repo, "musec/nope/integration", expected_head=head)


def test_apply_onto_a_snapshot_base(repo: Path, state: Path) -> None:
    write_files(repo, {"report.py": PROJECT["report.py"] + "# the person's edit\n", "notes.txt": "mine\n"})
    pygit2_repo = pygit2.Repository(str(repo))
    pygit2_repo.index.add("notes.txt")
    pygit2_repo.index.write()
    base = prepare_base(repo, SID, signature=SIG)
    assert base.snapshot
    outcome = merge_branches(repo, state, SID, base, [worker(repo, state, base, "docs", DOCS)])

    write_files(repo, {"notes.txt": "changed after the snapshot\n"})
    before = hash_working_copy(repo)
    with pytest.raises(WorktreeDirty, match="since musec snapshotted") as err:
        apply(repo, outcome.branch, expected_head=base.head, snapshot=base.commit)
    assert err.value.paths == ("notes.txt",)
    assert hash_working_copy(repo) == before
    write_files(repo, {"notes.txt": "mine\n"})

    applied = apply(repo, outcome.branch, expected_head=base.head, snapshot=base.commit)

    # Only the workers' changes are committed (issue 13, case 2); the person's edit and
    # staged file stay uncommitted, as they were.
    assert applied.how == "commit" and applied.old_head == base.head
    log = git(repo, "log", "--format=%s", "main").splitlines()
    assert log[0].startswith("musec: the workers' changes") and log[1:] == ["initial"]
    assert git(repo, "diff", "--name-only", "main~1", "main").split() == sorted(DOCS)
    assert (repo / "report.py").read_text().endswith("# the person's edit\n")
    assert (repo / "README.md").exists() and (repo / "notes.txt").read_text() == "mine\n"
    assert git(repo, "status", "--porcelain").splitlines() == ["A  notes.txt", " M report.py"]


def test_a_sparse_checkout_is_not_taken_for_deletions(tmp_path: Path, state: Path) -> None:
    repo = make_repo(tmp_path / "sparse", {**PROJECT, "docs/guide.md": "guide\n", "data/big.txt": "big\n"})
    git(repo, "sparse-checkout", "set", "--no-cone", "/*.py", "/docs/")
    assert not (repo / "data" / "big.txt").exists()
    assert prepare_base(repo, SID, signature=SIG).snapshot is False  # nothing uncommitted
    write_files(repo, {"report.py": PROJECT["report.py"] + "# mine\n"})
    base = prepare_base(repo, SID, signature=SIG)
    assert base.snapshot and base.dirty_paths == ("report.py",)
    snap = pygit2.Repository(str(repo))[base.commit]
    assert "data/big.txt" in [p for p in _paths(snap.tree)]  # not committed as deleted
    outcome = merge_branches(repo, state, SID, base, [worker(repo, state, base, "docs", DOCS)])
    applied = apply(repo, outcome.branch, expected_head=base.head, snapshot=base.commit)
    assert git(repo, "diff", "--name-only", "main~1", "main").split() == sorted(DOCS)
    assert not (repo / "data" / "big.txt").exists() and "S data/big.txt" in git(repo, "ls-files", "-t")
    assert git(repo, "status", "--porcelain").splitlines() == [" M report.py"]
    assert applied.how == "commit"


def _paths(tree: pygit2.Tree, prefix: str = "") -> list[str]:
    out = []
    for entry in tree:
        if entry.type_str == "tree":
            out += _paths(entry, prefix + entry.name + "/")
        else:
            out.append(prefix + entry.name)
    return out


def test_a_filter_driver_is_refused_clearly(repo: Path) -> None:
    commit_files(repo, {".gitattributes": "*.bin filter=lfs diff=lfs merge=lfs -text\n"})
    git(repo, "config", "filter.lfs.smudge", "git-lfs smudge -- %f")
    with pytest.raises(FiltersUnsupported, match="Git filter lfs .git-lfs smudge"):
        prepare_base(repo, SID, signature=SIG)
    git(repo, "config", "--unset-all", "filter.lfs.smudge")
    assert prepare_base(repo, SID, signature=SIG).snapshot is False  # without the driver, git does not filter


@pytest.mark.anyio
async def test_integrate_and_apply_in_a_repository_whose_git_is_a_file(tmp_path: Path, state: Path) -> None:
    main = make_repo(tmp_path / "main", PROJECT)
    linked = tmp_path / "linked"
    git(main, "worktree", "add", "-q", "-b", "feature", str(linked))
    base = prepare_base(linked, SID)
    branches = [worker(linked, state, base, "summary", SUMMARY), worker(linked, state, base, "docs", DOCS)]
    result = await integrate(linked, state, SID, base, branches, UNITTEST, timeout_s=60)
    assert result.ok, result.summary()
    applied = apply(linked, result.merge.branch, expected_head=base.head)
    assert applied.branch == "feature" and (linked / "summary.py").exists()
    assert git(linked, "status", "--porcelain") == ""
    assert git(main, "rev-parse", "main").strip() == base.head and not (main / "summary.py").exists()
