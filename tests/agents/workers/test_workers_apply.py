"""``apply`` in the cases a new user met (fresh-user s5 F1, F4, F5), on real repositories.

F1: the workers edit a file the person had uncommitted changes in: their diff goes onto the
working tree, uncommitted, and nothing of the person's is committed. F5: two fan-outs
from one base: after the first is applied, the second merges onto the moved branch. F4:
file names that are not UTF-8 go through the snapshot, the worktrees, the integration and
apply as bytes, and reach messages as text that encodes.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pygit2
import pytest
from conftest import SID, SIG, git, hash_working_copy, make_repo, write_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from musec.agents.workers import (
    WorktreeDirty,
    apply,
    commit_all,
    create_worktree,
    merge_branches,
    prepare_base,
)
from musec.agents.workers.errors import list_paths

PROJECT = {"calc.py": "def add(a, b):\n    return a + b\n", "notes.txt": "one\ntwo\nthree\nfour\nfive\nsix\n"}
SID2 = "18f0c0ffee-def456"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "person", PROJECT)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


def _fan_out(repo: Path, state: Path, sid: str, files: dict[str, str | None] | dict[bytes, bytes]):
    """A one-worker fan-out that writes ``files``; the base and the integration."""
    base = prepare_base(repo, sid, signature=SIG)
    wt = create_worktree(repo, state, sid, "w", base)
    for name, data in files.items():
        if isinstance(name, bytes):
            Path(os.fsdecode(os.fsencode(wt.path) + b"/" + name)).write_bytes(data)  # type: ignore[arg-type]
        else:
            write_files(wt.path, {name: data})  # type: ignore[dict-item]
    assert commit_all(wt, "w: work", signature=SIG) is not None
    return base, merge_branches(repo, state, sid, base, [wt.branch], signature=SIG)


def _staged(repo: Path) -> str:
    return git(repo, "diff", "--cached", "--name-status")


@pytest.mark.parametrize("worker_edit", [
    "one\ntwo (mine, edited by the worker)\nthree\nfour\nfive\nsix\n",  # the very line the person changed
    "one\ntwo (mine)\nthree\nfour\nfive\nsix, by the worker\n",          # another line of that file
])
def test_a_worker_edit_to_a_file_the_person_had_changed_lands_uncommitted(repo: Path, state: Path,
                                                                          worker_edit: str) -> None:
    write_files(repo, {"notes.txt": PROJECT["notes.txt"].replace("two", "two (mine)"), "mine.txt": "untracked\n"})
    head = git(repo, "rev-parse", "HEAD").strip()
    base, outcome = _fan_out(repo, state, SID, {"notes.txt": worker_edit, "new.py": "x = 1\n"})
    staged = _staged(repo)

    applied = apply(repo, outcome.branch, expected_head=base.head, snapshot=base.commit, signature=SIG)

    assert applied.how == "uncommitted" and applied.new_head == applied.old_head == head
    assert "notes.txt" in applied.note and "uncommitted" in applied.note
    assert git(repo, "rev-parse", "HEAD").strip() == head  # nothing committed
    assert (repo / "notes.txt").read_text() == worker_edit and (repo / "new.py").read_text() == "x = 1\n"
    assert (repo / "mine.txt").read_text() == "untracked\n"
    assert _staged(repo) == staged  # the index is the person's, untouched
    assert sorted(git(repo, "status", "--porcelain").splitlines()) == [" M notes.txt", "?? mine.txt", "?? new.py"]
    before = hash_working_copy(repo)
    again = apply(repo, outcome.branch, expected_head=base.head, snapshot=base.commit, signature=SIG)
    assert again.how == "up-to-date" and hash_working_copy(repo) == before


def test_a_tree_changed_since_the_snapshot_is_refused_with_what_to_do(repo: Path, state: Path) -> None:
    write_files(repo, {"notes.txt": "mine\n"})
    base, outcome = _fan_out(repo, state, SID, {"notes.txt": "the worker's\n"})
    write_files(repo, {"notes.txt": "mine, and more\n"})
    before = hash_working_copy(repo)
    with pytest.raises(WorktreeDirty, match="changed since musec snapshotted") as err:
        apply(repo, outcome.branch, expected_head=base.head, snapshot=base.commit)
    assert f"git diff {base.commit[:12]} {outcome.branch} | git apply -3" in str(err.value)
    assert hash_working_copy(repo) == before


def test_the_second_of_two_fan_outs_merges_onto_the_first(repo: Path, state: Path) -> None:
    base_a, first = _fan_out(repo, state, SID, {"a.txt": "from A\n"})
    base_b, second = _fan_out(repo, state, SID2, {"b.txt": "from B\n", "notes.txt": PROJECT["notes.txt"] + "B\n"})
    assert base_a.head == base_b.head

    assert apply(repo, first.branch, expected_head=base_a.head, signature=SIG).how == "fast-forward"
    applied = apply(repo, second.branch, expected_head=base_b.head, signature=SIG)

    assert applied.how == "merge" and applied.old_head == first.head and "run them" in applied.note
    merge = pygit2.Repository(str(repo))[applied.new_head]
    assert [str(p) for p in merge.parent_ids] == [first.head, second.head]
    assert (repo / "a.txt").exists() and (repo / "b.txt").exists() and (repo / "notes.txt").read_text().endswith("B\n")
    assert git(repo, "status", "--porcelain") == ""
    assert apply(repo, second.branch, expected_head=base_b.head).how == "up-to-date"


def test_two_fan_outs_from_one_snapshot_both_land_and_the_persons_work_stays_uncommitted(repo: Path,
                                                                                        state: Path) -> None:
    write_files(repo, {"calc.py": PROJECT["calc.py"] + "# mine\n"})
    base_a, first = _fan_out(repo, state, SID, {"a.txt": "from A\n"})
    base_b, second = _fan_out(repo, state, SID2, {"b.txt": "from B\n"})

    assert apply(repo, first.branch, expected_head=base_a.head, snapshot=base_a.commit, signature=SIG).how == "commit"
    applied = apply(repo, second.branch, expected_head=base_b.head, snapshot=base_b.commit, signature=SIG)

    assert applied.how == "commit" and "not on this merge" in applied.note
    assert git(repo, "log", "--format=%P", "-1").split() == [applied.old_head]  # one parent: no snapshot in history
    assert git(repo, "diff", "--name-only", "HEAD~2", "HEAD").split() == ["a.txt", "b.txt"]
    assert git(repo, "status", "--porcelain").splitlines() == [" M calc.py"]


def test_a_non_utf8_untracked_name_goes_through_snapshot_integration_and_apply(repo: Path, state: Path) -> None:
    root = os.fsencode(repo)
    Path(os.fsdecode(root + b"/unt\xf6.txt")).write_bytes(b"dirty\n")
    base, outcome = _fan_out(repo, state, SID, {b"na\xefve.txt": b"new\n"})

    assert base.snapshot and base.dirty_paths == ("unt\\xf6.txt",)  # as text that encodes, for the log
    snap = pygit2.Repository(str(repo))[base.commit]
    assert os.fsdecode(b"unt\xf6.txt") in [e.name for e in snap.tree]  # the snapshot holds the bytes
    snap.message.encode("utf-8")
    applied = apply(repo, outcome.branch, expected_head=base.head, snapshot=base.commit, signature=SIG)
    assert applied.how == "commit"
    committed = subprocess.run(["git", "ls-tree", "--name-only", "-z", "HEAD"], cwd=repo, capture_output=True,
                               check=True).stdout
    assert committed.split(b"\0")[:-1] == [b"calc.py", b"na\xefve.txt", b"notes.txt"]
    assert Path(os.fsdecode(root + b"/unt\xf6.txt")).read_bytes() == b"dirty\n"  # still untracked, as it was


def test_a_worker_edit_to_a_non_utf8_file_the_person_had_changed_lands_uncommitted(repo: Path,
                                                                                   state: Path) -> None:
    name = os.fsdecode(b"caf\xe9.txt")
    (repo / name).write_text("committed\n")
    repo_git = pygit2.Repository(str(repo))
    repo_git.index.add_all()
    repo_git.index.write()
    repo_git.create_commit("HEAD", SIG, SIG, "latin-1 name", repo_git.index.write_tree(), [repo_git.head.target])
    (repo / name).write_text("committed\nmine\n")
    base, outcome = _fan_out(repo, state, SID, {b"caf\xe9.txt": b"committed\nmine\nthe worker's\n"})
    applied = apply(repo, outcome.branch, expected_head=base.head, snapshot=base.commit, signature=SIG)
    assert applied.how == "uncommitted" and "caf\\xe9.txt" in applied.note
    applied.note.encode("utf-8")
    assert (repo / name).read_text() == "committed\nmine\nthe worker's\n"


_names = st.binary(min_size=1, max_size=12).filter(
    lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b"..") and not b.startswith(b".git")
    and b.lower() != b".git")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.sets(_names, min_size=1, max_size=4))
def test_any_untracked_names_are_snapshotted_byte_for_byte(names: set[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp) / "r", {"committed.txt": "x\n"})
        names = {n for n in names if n != b"committed.txt"}
        for n in names:
            (Path(os.fsdecode(os.fsencode(repo) + b"/" + n))).write_bytes(n)
        if not names:
            return
        base = prepare_base(repo, SID, signature=SIG)
        tree = pygit2.Repository(str(repo))[base.commit].tree
        stored = {os.fsencode(e.name): pygit2.Repository(str(repo))[e.id].data for e in tree}
        assert {n: stored.get(n) for n in names} == {n: n for n in names}
        for text in (*base.dirty_paths, list_paths(base.dirty_paths), base.note):
            text.encode("utf-8")  # what goes to the log, the wire and the person encodes
        assert len(base.dirty_paths) == len(names)
