"""Git inside a worker's sandbox (fresh-user s5 F3): status, diff, log and add work in a
musec worktree; commit is refused with musec's message; the person's refs, the common git
dir and the worktree's HEAD cannot be changed from inside; musec's own commit of the
worker's work still takes what the worker added."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pygit2
import pytest
from musec.agents.tools import BashTool
from musec.agents.tools.gitmounts import worktree_git
from musec.agents.workers import commit_all, create_worktree, prepare_base, remove_worktrees

from tests.support.repos import one_commit_repo

pytestmark = pytest.mark.anyio


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The person's repository (under /tmp: the sandbox's private /tmp hides it unless
    mounted), one commit on ``main``."""
    return one_commit_repo(tmp_path / "repo")


@pytest.fixture
def worker(repo: Path, tmp_path: Path) -> Path:
    base = prepare_base(repo, "s1")
    return create_worktree(repo, tmp_path / "state", "s1", "w1", base).path.resolve()


def _refs(repo: Path) -> dict[str, str]:
    r = pygit2.Repository(str(repo))
    return {name: str(r.references[name].target) for name in r.references}


GIT = "git -c user.name=w -c user.email=w@example.invalid"


async def test_git_reads_and_stages_in_a_worker(worker: Path, repo: Path, make_ctx) -> None:
    (worker / "calc.py").write_text("def add(a, b):\n    return b + a\n")
    (worker / "new.py").write_text("X = 1\n")
    ctx = make_ctx(env={"HOME": str(worker), "GIT_CONFIG_NOSYSTEM": "1"})
    ctx = msgspec.structs.replace(ctx, workspace=worker)
    out = await BashTool().run({"command": f"git status --short; git diff --stat; git log --oneline -1; "
                                           f"{GIT} add new.py && git diff --cached --name-only; echo END"}, ctx)
    assert "not a git repository" not in out.content, out.content
    assert " M calc.py" in out.content and "?? new.py" in out.content
    assert "calc.py | 2 +-" in out.content and " calc\n" in out.content
    assert "\nnew.py\nEND" in out.content, out.content


async def test_a_worker_cannot_commit_or_move_refs(worker: Path, repo: Path, make_ctx) -> None:
    before = _refs(repo)
    git = worktree_git(worker)
    assert git is not None and git.musec
    head_file = Path(git.gitdir, "HEAD").read_text()
    (worker / "new.py").write_text("X = 1\n")
    ctx = make_ctx(env={"HOME": str(worker), "GIT_CONFIG_NOSYSTEM": "1"})
    ctx = msgspec.structs.replace(ctx, workspace=worker)
    command = (f"{GIT} add -A; {GIT} commit -qm x; echo commit=$?; {GIT} commit --no-verify -qm x; "
               "git update-ref refs/heads/main HEAD~0 2>&1 | tail -1; git branch evil 2>&1 | tail -1; "
               "git checkout -q main 2>&1 | tail -1; echo 'ref: refs/heads/main' > " + git.gitdir + "/HEAD; "
               f"printf '[core]\\n\\tfsmonitor = touch {repo}/ran\\n' > {git.gitdir}/config.worktree; "
               f"rm -rf {git.common}/objects/* 2>&1 | head -1; echo hi > {repo}/x.txt; echo END")
    out = await BashTool().run({"command": command}, ctx)
    assert "musec: a worker does not commit" in out.content and "commit=1" in out.content, out.content
    assert "Read-only file system" in out.content and "END" in out.content
    assert _refs(repo) == before  # no ref of the person's (or musec's) moved
    assert Path(git.gitdir, "HEAD").read_text() == head_file
    assert Path(git.gitdir, "config.worktree").read_text() == ""  # no config that runs a program
    assert not (repo / "x.txt").exists() and pygit2.Repository(str(repo)).head.peel().tree is not None
    # musec commits what the worker left, including the file its own `git add` staged
    commit = commit_all(worker, "musec worker w1")
    r = pygit2.Repository(str(repo))
    assert commit is not None and "new.py" in r[commit].tree and str(r.branches.local["musec/s1/w1"].target) == commit


async def test_the_person_s_repository_is_unchanged_but_the_worker_metadata(worker: Path, repo: Path,
                                                                           tmp_path: Path, make_ctx) -> None:
    ctx = make_ctx(env={"HOME": str(worker)})
    ctx = msgspec.structs.replace(ctx, workspace=worker)
    await BashTool().run({"command": "git status"}, ctx)
    git = worktree_git(worker)
    assert git is not None and Path(git.gitdir, "musec-objects").is_dir()
    removal = remove_worktrees(repo, tmp_path / "state", "s1", force=True)
    assert removal.removed == ("w1",) and not Path(git.gitdir).exists()  # the gitdir goes whole


def test_seatbelt_lets_the_gitdir_be_written_but_not_its_head(worker: Path) -> None:
    from musec.agents.tools import SandboxPolicy
    from musec.agents.tools.sandbox import seatbelt_profile

    git = worktree_git(worker)
    assert git is not None
    profile = seatbelt_profile(SandboxPolicy(mode="seatbelt"), worker)
    allow, deny = f'(allow file-write* (subpath "{git.gitdir}"))', f'(literal "{git.gitdir}/HEAD")'
    assert allow in profile and deny in profile and profile.index(allow) < profile.index(deny)
    assert git.common not in profile.replace(git.gitdir, "")  # the common git dir stays read-only


def test_a_person_s_own_linked_worktree_gets_its_git_dir_read_only(repo: Path, tmp_path: Path) -> None:
    from musec.agents.tools import SandboxPolicy
    from musec.agents.tools.sandbox import bwrap_argv

    r = pygit2.Repository(str(repo))
    r.add_worktree("mine", str(tmp_path / "mine"), r.branches.local.create("mine", r.head.peel()))
    git = worktree_git(tmp_path / "mine")
    assert git is not None and not git.musec
    args = bwrap_argv(SandboxPolicy(), tmp_path / "mine", {}, ["true"])
    binds = [tuple(args[i + 1:i + 3]) for i, a in enumerate(args) if a == "--bind"]
    assert (git.common, git.common) in [tuple(args[i + 1:i + 3]) for i, a in enumerate(args) if a == "--ro-bind"]
    assert all(git.common not in src for src, _ in binds) and not Path(git.gitdir, "musec-objects").exists()
