"""Base commits, worker worktrees and their removal, on real repositories."""

from __future__ import annotations

import shutil
from pathlib import Path

import pygit2
import pytest
from conftest import SID, SIG, git, hash_working_copy, make_repo, write_files
from musec.agents.workers import (
    BranchExists,
    InvalidName,
    RepositoryBusy,
    SubmodulesUnsupported,
    UnbornHead,
    WorktreeDirty,
    commit_all,
    create_worktree,
    prepare_base,
    remove_worktrees,
    uncommitted_paths,
    worker_states,
)
from pygit2.enums import FileMode

FILES = {"a.txt": "a\n", "b.txt": "b\n", "d.txt": "d1\n", "e.txt": "e\n", "src/m.py": "x = 1\n",
         ".gitignore": "*.log\n"}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "person", FILES)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


def tree_files(repo_dir: Path, commit: str) -> dict[str, str]:
    repo = pygit2.Repository(str(repo_dir))
    out = {}

    def walk(tree: pygit2.Tree, prefix: str) -> None:
        for entry in tree:
            if entry.type_str == "tree":
                walk(repo[entry.id], f"{prefix}{entry.name}/")
            else:
                out[prefix + entry.name] = repo[entry.id].data.decode()

    walk(repo[commit].peel(pygit2.Commit).tree, "")
    return out


def test_clean_tree_gives_head(repo: Path) -> None:
    before = hash_working_copy(repo)
    base = prepare_base(repo, SID)
    head = str(pygit2.Repository(str(repo)).head.target)
    assert (base.commit, base.head, base.branch, base.snapshot) == (head, head, "main", False)
    assert git(repo, "rev-parse", "refs/musec/" + SID + "/base").strip() == head
    assert hash_working_copy(repo) == before


def test_snapshot_holds_staged_unstaged_and_untracked_changes_and_touches_nothing(repo: Path) -> None:
    person = pygit2.Repository(str(repo))
    write_files(repo, {"a.txt": "a staged\n", "d.txt": "d staged\n"})
    person.index.add("a.txt")
    person.index.add("d.txt")
    person.index.write()
    write_files(repo, {"b.txt": "b unstaged\n", "d.txt": "d staged then edited\n",
                       "new/untracked.txt": "u\n", "ignored.log": "noise\n", "e.txt": None})
    refs_before = set(person.references)
    before = hash_working_copy(repo)
    status_before = git(repo, "status", "--porcelain=v1")

    base = prepare_base(repo, SID, signature=SIG)

    assert hash_working_copy(repo) == before
    assert git(repo, "status", "--porcelain=v1") == status_before
    assert set(pygit2.Repository(str(repo)).references) == refs_before | {f"refs/musec/{SID}/base"}
    assert git(repo, "stash", "list") == ""
    assert base.snapshot and base.head == str(person.head.target) and base.commit != base.head
    assert base.dirty_paths == ("a.txt", "b.txt", "d.txt", "e.txt", "new/untracked.txt")
    assert "snapshot" in base.note
    snap = pygit2.Repository(str(repo))[base.commit]
    assert [str(p) for p in snap.parent_ids] == [base.head]
    files = tree_files(repo, base.commit)
    assert files["a.txt"] == "a staged\n"
    assert files["b.txt"] == "b unstaged\n"
    assert files["d.txt"] == "d staged then edited\n"
    assert files["new/untracked.txt"] == "u\n"
    assert "e.txt" not in files and "ignored.log" not in files
    # the worker starts from the snapshot; git itself agrees on the tree
    wt = create_worktree(repo, repo.parent / "state", SID, "w1", base)
    assert (wt.path / "b.txt").read_text() == "b unstaged\n"
    assert (wt.path / "new/untracked.txt").exists() and not (wt.path / "e.txt").exists()
    assert git(wt.path, "status", "--porcelain=v1") == ""


def test_refuse_mode_lists_the_dirty_paths(repo: Path) -> None:
    write_files(repo, {"a.txt": "changed\n", "zz.txt": "new\n"})
    before = hash_working_copy(repo)
    with pytest.raises(WorktreeDirty) as err:
        prepare_base(repo, SID, dirty="refuse")
    assert err.value.paths == ("a.txt", "zz.txt")
    assert "a.txt" in str(err.value) and "zz.txt" in str(err.value) and "commit or stash" in str(err.value)
    assert f"refs/musec/{SID}/base" not in pygit2.Repository(str(repo)).references
    assert hash_working_copy(repo) == before


def test_unborn_and_busy_repositories_are_refused(tmp_path: Path, repo: Path) -> None:
    empty = tmp_path / "empty"
    pygit2.init_repository(str(empty))
    with pytest.raises(UnbornHead):
        prepare_base(empty, SID)
    (Path(pygit2.Repository(str(repo)).path) / "MERGE_HEAD").write_text(
        git(repo, "rev-parse", "HEAD"))
    with pytest.raises(RepositoryBusy, match="merge"):
        prepare_base(repo, SID)


@pytest.mark.parametrize("session,worker", [("a/b", "w"), (SID, ".."), (SID, "-x"), (SID, "w.lock"),
                                            (SID, "integration"), ("", "w"), (SID, "a+b")])
def test_bad_names_are_refused(repo: Path, state: Path, session: str, worker: str) -> None:
    base = prepare_base(repo, SID)
    with pytest.raises(InvalidName):
        create_worktree(repo, state, session, worker, base)


def test_worktree_layout_branch_and_commit_all(repo: Path, state: Path) -> None:
    base = prepare_base(repo, SID)
    wt = create_worktree(repo, state, SID, "w1", base)
    assert wt.path == (state / "worktrees" / SID / "w1").absolute()
    assert wt.branch == f"musec/{SID}/w1" and not wt.resumed
    assert (wt.path / ".git").is_file()
    assert git(wt.path, "rev-parse", "--abbrev-ref", "HEAD").strip() == wt.branch
    assert str(wt.path) in git(repo, "worktree", "list", "--porcelain")
    assert commit_all(wt, "nothing", signature=SIG) is None
    write_files(wt.path, {"a.txt": "a by w1\n", "b.txt": None, "c/new.txt": "n\n", "x.log": "ignored\n"})
    commit = commit_all(wt, "w1 work", signature=SIG)
    assert commit is not None
    assert git(repo, "rev-parse", wt.branch).strip() == commit
    files = tree_files(repo, commit)
    assert files["a.txt"] == "a by w1\n" and "b.txt" not in files and files["c/new.txt"] == "n\n"
    assert "x.log" not in files
    assert uncommitted_paths(wt.path) == ()
    other = create_worktree(repo, state, SID, "w2", base)
    write_files(other.path, {"wip.txt": "x\n"})
    states = worker_states(repo, SID, base)
    assert [(s.worker, s.commits, s.uncommitted, s.path) for s in states] == [
        ("w1", 1, (), wt.path), ("w2", 0, ("wip.txt",), other.path)]
    assert states[0].head == commit
    assert git(repo, "rev-parse", "main").strip() == base.head  # the person's branch did not move
    git(repo, "fsck", "--no-progress")


def test_create_again_resumes_and_keeps_committed_work(repo: Path, state: Path) -> None:
    base = prepare_base(repo, SID)
    wt = create_worktree(repo, state, SID, "w1", base)
    assert create_worktree(repo, state, SID, "w1", base).resumed
    write_files(wt.path, {"a.txt": "w\n"})
    commit = commit_all(wt, "work", signature=SIG)
    shutil.rmtree(wt.path)  # the folder vanished (a restart, a cleanup): metadata is stale
    again = create_worktree(repo, state, SID, "w1", base)
    assert not again.resumed and (again.path / "a.txt").read_text() == "w\n"
    assert git(repo, "rev-parse", wt.branch).strip() == commit


def test_existing_branch_not_descending_from_base_is_refused(repo: Path, state: Path) -> None:
    base = prepare_base(repo, SID)
    person = pygit2.Repository(str(repo))
    other = person.create_commit(None, SIG, SIG, "unrelated", person.index.write_tree(), [])
    person.branches.local.create(f"musec/{SID}/w1", person[other])
    with pytest.raises(BranchExists):
        create_worktree(repo, state, SID, "w1", base)


def test_repository_whose_git_is_a_file(tmp_path: Path, state: Path) -> None:
    main = make_repo(tmp_path / "main", FILES)
    linked = tmp_path / "linked"
    git(main, "worktree", "add", "-q", "-b", "feature", str(linked))
    assert (linked / ".git").is_file()
    write_files(linked, {"a.txt": "dirty in linked\n"})
    before = hash_working_copy(linked)
    base = prepare_base(linked, SID)
    assert base.snapshot and base.branch == "feature"
    wt = create_worktree(linked, state, SID, "w1", base)
    assert (wt.path / "a.txt").read_text() == "dirty in linked\n"
    assert hash_working_copy(linked) == before
    listed = git(main, "worktree", "list", "--porcelain")
    assert str(linked) in listed and str(wt.path) in listed
    removal = remove_worktrees(linked, state, SID)
    assert removal.removed == ("w1",) and not wt.path.exists()
    assert str(wt.path) not in git(main, "worktree", "list", "--porcelain")


def test_submodules_are_refused_clearly(repo: Path, state: Path) -> None:
    person = pygit2.Repository(str(repo))
    write_files(repo, {".gitmodules": '[submodule "lib"]\n\tpath = vendor/lib\n\turl = ../lib\n'})
    person.index.add(".gitmodules")
    person.index.add(pygit2.IndexEntry("vendor/lib", person.head.target, FileMode.COMMIT))
    person.index.write()
    person.create_commit("HEAD", SIG, SIG, "add a submodule", person.index.write_tree(), [person.head.target])
    base = prepare_base(repo, SID)
    with pytest.raises(SubmodulesUnsupported, match="vendor/lib") as err:
        create_worktree(repo, state, SID, "w1", base)
    assert err.value.paths == ("vendor/lib",)
    assert not (state / "worktrees" / SID / "w1").exists()


def test_removal_keeps_uncommitted_work_then_force_removes(repo: Path, state: Path) -> None:
    base = prepare_base(repo, SID)
    clean = create_worktree(repo, state, SID, "clean", base)
    busy = create_worktree(repo, state, SID, "busy", base)
    gone = create_worktree(repo, state, SID, "gone", base)
    other = create_worktree(repo, state, "othersession", "w", base)
    write_files(busy.path, {"wip.txt": "not committed\n", "x.log": "ignored\n"})
    write_files(clean.path, {"y.log": "ignored only\n"})
    shutil.rmtree(gone.path)

    removal = remove_worktrees(repo, state, SID)

    # Nothing of the session goes while one worktree holds work (issue 13, case 12).
    assert removal.removed == ()
    assert [w for w, _ in removal.kept] == ["busy"] and "wip.txt" in removal.message
    assert str(busy.path) in removal.message and busy.branch in removal.message  # how to rescue it
    assert clean.path.exists() and (busy.path / "wip.txt").exists()
    branches = git(repo, "branch", "--list", "musec/*")
    assert busy.branch in branches and clean.branch in branches and gone.branch in branches
    assert f"refs/musec/{SID}/base" in pygit2.Repository(str(repo)).references  # kept with the work
    listed = git(repo, "worktree", "list", "--porcelain")
    assert str(busy.path) in listed and str(clean.path) in listed
    dry = remove_worktrees(repo, state, SID, dry_run=True)
    assert dry.kept == removal.kept and dry.bytes > 0 and clean.path.exists()

    removal = remove_worktrees(repo, state, SID, force=True)
    assert removal.removed == ("busy", "clean", "gone") and not removal.kept
    assert not (state / "worktrees" / SID).exists()
    assert f"refs/musec/{SID}/base" not in pygit2.Repository(str(repo)).references
    assert other.path.exists() and other.branch in git(repo, "branch", "--list", "musec/*")
    assert sorted(p.name for p in (repo / ".git" / "worktrees").iterdir()) == ["musec+othersession+w"]
    git(repo, "fsck", "--no-progress")


def test_removal_prunes_stale_metadata_of_musec_worktrees_only(tmp_path: Path, repo: Path, state: Path) -> None:
    base = prepare_base(repo, SID)
    stale = create_worktree(repo, state, "old", "w", base)
    mine = tmp_path / "persons-own"
    git(repo, "worktree", "add", "-q", "-b", "own", str(mine))
    shutil.rmtree(stale.path)
    shutil.rmtree(mine)
    removal = remove_worktrees(repo, state, SID)
    assert removal.pruned == ("musec+old+w",)
    metadata = repo / ".git" / "worktrees"
    assert (metadata / "persons-own").is_dir() and not (metadata / "musec+old+w").exists()
