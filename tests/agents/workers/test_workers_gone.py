"""Removing the worktrees of a session whose repository is gone: deleted, moved, or a
linked worktree deleted while its repository stays (fresh-user s5 F8)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import SID, git, make_repo, write_files
from musec.agents.workers import NotARepository, create_worktree, prepare_base, remove_worktrees

FILES = {"a.txt": "a\n"}


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


def _session(repo: Path, state: Path) -> Path:
    """A session with two worker worktrees and an uncommitted file in one; its folder."""
    base = prepare_base(repo, SID)
    for name in ("w1", "w2"):
        create_worktree(repo, state, SID, name, base)
    write_files(state / "worktrees" / SID / "w2", {"wip.txt": "a crashed worker's\n"})
    return state / "worktrees" / SID


def test_the_worktrees_of_a_deleted_repository_are_removed(tmp_path: Path, state: Path) -> None:
    repo = make_repo(tmp_path / "clone", FILES)
    folder = _session(repo, state)
    shutil.rmtree(repo)

    dry = remove_worktrees(repo, state, SID, dry_run=True)
    assert dry.removed == ("w1", "w2") and dry.bytes > 0 and "would be removed" in dry.note
    assert (folder / "w2" / "wip.txt").exists()

    removal = remove_worktrees(repo, state, SID)
    assert removal.removed == ("w1", "w2") and not removal.kept
    assert f"{repo} is gone" in removal.note
    assert not folder.exists() and (state / "worktrees").is_dir()


def test_a_moved_repository_is_left_clean_by_the_command_in_the_note(tmp_path: Path, state: Path) -> None:
    repo = make_repo(tmp_path / "here", FILES)
    folder = _session(repo, state)
    moved = tmp_path / "there"
    repo.rename(moved)

    removal = remove_worktrees(repo, state, SID)

    assert removal.removed == ("w1", "w2") and not folder.exists()
    command = removal.note.split("clean up there with: ", 1)[1]
    subprocess.run(command, shell=True, cwd=moved, check=True)
    assert git(moved, "for-each-ref", "refs/heads/musec", "refs/musec") == ""
    assert git(moved, "worktree", "list", "--porcelain").count("worktree ") == 1
    git(moved, "fsck", "--no-progress")


def test_a_deleted_linked_worktree_is_cleaned_through_its_repository(tmp_path: Path, state: Path) -> None:
    main = make_repo(tmp_path / "main", FILES)
    linked = tmp_path / "linked"
    git(main, "worktree", "add", "-q", "-b", "feature", str(linked))
    base = prepare_base(linked, SID)
    create_worktree(linked, state, SID, "w1", base)
    shutil.rmtree(linked)

    removal = remove_worktrees(linked, state, SID)

    assert removal.removed == ("w1",) and removal.note == ""  # not orphans: their repository is there
    assert not (state / "worktrees" / SID).exists()
    assert git(main, "for-each-ref", "refs/heads/musec", "refs/musec") == ""


def test_a_folder_that_is_no_orphan_is_never_removed(tmp_path: Path, state: Path) -> None:
    repo = make_repo(tmp_path / "clone", FILES)
    folder = _session(repo, state)
    shutil.rmtree(repo)
    make_repo(folder / "w3", FILES)  # a repository of its own: not musec's to delete

    with pytest.raises(NotARepository, match="not an orphaned worktree"):
        remove_worktrees(repo, state, SID)
    assert (folder / "w1").is_dir() and (folder / "w3" / ".git").is_dir()


def test_orphans_left_by_a_repository_made_anew_in_the_same_place_go(tmp_path: Path, state: Path) -> None:
    repo = make_repo(tmp_path / "clone", FILES)
    folder = _session(repo, state)
    shutil.rmtree(repo)
    make_repo(repo, FILES)  # cloned again where it was

    removal = remove_worktrees(repo, state, SID)

    assert not folder.exists(), removal
