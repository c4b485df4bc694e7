"""What the sandbox hides from commands outside the workspace (fresh-user s5 F2): a read
deny rule's folder under home, musec's default credential stores, never the workspace.

The home here lives under /var/tmp: one under /tmp would be hidden by the sandbox's
private /tmp anyway, and the tests could not fail."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from musec.agents.tools import BashTool
from musec.agents.tools.masks import HidesWorkspace, default_hidden, hidden_paths
from musec.agents.tools.sandbox import bwrap_argv, seatbelt_profile

pytestmark = pytest.mark.anyio

KEY = "FAKE-PRIVATE-KEY-9c1f"


@pytest.fixture
def home() -> Iterator[Path]:
    """A home folder commands can see (outside /tmp), with an SSH key, AWS credentials
    and a rule-protected folder."""
    try:
        path = Path(tempfile.mkdtemp(prefix="musec-home-", dir="/var/tmp")).resolve()
    except OSError:
        pytest.skip("/var/tmp is not writable here")
    (path / ".ssh").mkdir()
    (path / ".ssh" / "id_rsa").write_text(KEY + " ssh\n")
    (path / ".aws").mkdir()
    (path / ".aws" / "credentials").write_text(KEY + " aws\n")
    (path / "private").mkdir()
    (path / "private" / "notes.txt").write_text(KEY + " notes\n")
    (path / "public.txt").write_text("public\n")
    yield path
    shutil.rmtree(path, ignore_errors=True)


COMMAND = "cat ~/.ssh/id_rsa; cat $HOME/private/notes.txt; cat ~/.aws/credentials; cat ~/public.txt"


async def test_a_home_deny_rule_hides_the_folder_from_bash(home: Path, make_ctx) -> None:
    globs = tuple(g.replace("~", str(home)) for g in ("~/.ssh/**", "~/private/**"))
    ctx = make_ctx(env={"HOME": str(home)}, read_deny=globs)
    out = await BashTool().run({"command": COMMAND}, ctx)
    assert KEY + " ssh" not in out.content and KEY + " notes" not in out.content
    assert KEY + " aws" in out.content  # no rule, no default here: this test can fail
    assert "public" in out.content


async def test_without_a_rule_or_default_bash_reads_the_key(home: Path, make_ctx) -> None:
    out = await BashTool().run({"command": COMMAND}, make_ctx(env={"HOME": str(home)}))
    assert KEY + " ssh" in out.content  # the tests above and below can fail


async def test_the_defaults_hide_credential_stores_without_any_rule(home: Path, make_ctx, tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "config.toml").write_text(f'# {KEY} token\n')
    hide = default_hidden(str(home), str(config))
    ctx = make_ctx(env={"HOME": str(home)}, hide=hide, writable_roots=(str(config),))
    out = await BashTool().run({"command": COMMAND + f"; cat {config}/config.toml; ls -a ~/.ssh"}, ctx)
    assert KEY not in out.content.replace(KEY + " notes", "")
    assert KEY + " notes" in out.content and "public" in out.content  # the rest of home is there


def test_an_allow_rule_keeps_a_default_visible(home: Path) -> None:
    hide = default_hidden(str(home), None, allowed=["~/.aws/**", "~/.ssh/known_hosts"])
    assert str(home / ".aws") not in hide
    assert str(home / ".ssh") in hide  # one file allowed does not open the folder
    assert str(home / ".gnupg") in hide and str(home / ".config" / "gh") in hide


def test_a_rule_that_would_hide_the_workspace_is_refused(home: Path) -> None:
    ws = home / "src" / "app"
    ws.mkdir(parents=True)
    for globs in ((f"{home}/**",), (f"{home}/src/*",), (str(ws),), (str(home),)):
        with pytest.raises(HidesWorkspace, match="would hide the workspace"):
            hidden_paths(globs, ws)
    with pytest.raises(HidesWorkspace):
        bwrap_argv(_policy(read_deny=(f"{home}/**",)), ws, {}, ["true"])


def test_a_default_holding_the_workspace_is_hidden_but_the_way_to_it(home: Path) -> None:
    ws = home / ".ssh" / "work"
    ws.mkdir()
    assert hidden_paths((), ws, hide=default_hidden(str(home), None)) == [
        (str(home / ".aws"), True), (str(home / ".ssh" / "id_rsa"), False)]


def test_masks_are_bwrap_mounts_and_seatbelt_denials(home: Path, workspace: Path) -> None:
    policy = _policy(read_deny=(f"{home}/private/**",), hide=default_hidden(str(home), None))
    args = bwrap_argv(policy, workspace, {}, ["true"])
    tmpfs = [args[i + 1] for i, a in enumerate(args) if a == "--tmpfs"]
    assert {str(home / ".ssh"), str(home / ".aws"), str(home / "private")} <= set(tmpfs)
    assert args.index("--tmpfs", args.index(str(workspace))) > args.index("--bind")  # after the workspace
    profile = seatbelt_profile(policy, workspace)
    assert f'(deny file-read* (subpath "{home}/.ssh"))' in profile


def _policy(**fields: object):
    from musec.agents.tools import SandboxPolicy

    return SandboxPolicy(**fields)  # type: ignore[arg-type]


HISTORY = "cat ~/.bash_history ~/.zsh_history ~/.local/share/fish/fish_history"


@pytest.fixture
def state(home: Path) -> Path:
    """musec's state folder under the home: a session's log, a blob, a worker's worktree."""
    path = home / ".local" / "state" / "musec"
    for rel in ("sessions/other.jsonl", "blobs/ab/cd", "worktrees/s1/w1/code.py", "worktrees/s1/w2/other.py"):
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(f"{KEY} {rel}\n")
    for rel in (".bash_history", ".zsh_history", ".local/share/fish/fish_history"):
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(f"{KEY} history {rel}\n")
    return path


async def test_shell_history_and_musecs_state_are_hidden_from_bash(home: Path, state: Path, make_ctx) -> None:
    command = f"{HISTORY}; cat {state}/sessions/other.jsonl {state}/blobs/ab/cd; ls {state}/worktrees/s1; cat ~/public.txt"
    bare = await BashTool().run({"command": command}, make_ctx(env={"HOME": str(home)}))
    assert bare.content.count(KEY) == 5, bare.content  # without the defaults all of it shows: this test can fail
    hide = default_hidden(str(home), None, state_dir=str(state))
    out = await BashTool().run({"command": command}, make_ctx(env={"HOME": str(home)}, hide=hide))
    # (the worktrees' names as ls lists them: a temporary home's random name may hold "w1")
    assert KEY not in out.content and not {"w1", "w2"} & set(out.content.split()), out.content
    assert "public" in out.content


async def test_a_worktree_in_the_state_folder_sees_itself_and_nothing_else_there(home: Path, state: Path, make_ctx) -> None:
    from musec.agents.tools.base import SandboxPolicy, ToolContext

    ws = state / "worktrees" / "s1" / "w1"
    ctx = ToolContext(workspace=ws, env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
                      sandbox=SandboxPolicy(hide=default_hidden(str(home), None, state_dir=str(state))))
    out = await BashTool().run({"command": f"cat code.py; echo new > made.txt; cat {state}/sessions/other.jsonl "
                                           f"../w2/other.py; ls {state}/worktrees/s1"}, ctx)
    assert f"{KEY} worktrees/s1/w1/code.py" in out.content, out.content  # its own files
    assert (ws / "made.txt").read_text() == "new\n"  # and writable
    assert f"{KEY} sessions" not in out.content and f"{KEY} worktrees/s1/w2" not in out.content, out.content
    hidden = dict(hidden_paths((), ws, hide=[str(state)]))
    assert str(state / "sessions") in hidden and str(state / "worktrees" / "s1" / "w2") in hidden
    assert not any(ws.as_posix().startswith(p) for p in hidden)  # nothing holding the workspace


async def test_the_file_tools_refuse_what_commands_cannot_see(home: Path, state: Path) -> None:
    from musec.agents.tools import GlobTool, GrepTool, ReadFileTool
    from musec.agents.tools.base import SandboxPolicy, ToolContext

    ctx = ToolContext(workspace=home, env={"HOME": str(home), "PATH": "/usr/bin:/bin"},  # a session in $HOME
                      sandbox=SandboxPolicy(hide=default_hidden(str(home), None, state_dir=str(state))))
    for path in (".ssh/id_rsa", "~/.bash_history", f"{state}/sessions/other.jsonl", ".local/state/musec"):
        out = await ReadFileTool().run({"path": path}, ctx)
        assert out.is_error and "hidden" in out.content and KEY not in out.content, (path, out.content)
    found = await GrepTool().run({"pattern": "FAKE-PRIVATE"}, ctx)
    assert KEY + " notes" in found.content  # the rest of home is searched: this can fail
    assert ".ssh" not in found.content and "history" not in found.content and "sessions" not in found.content, found.content
    listed = await GlobTool().run({"pattern": "**"}, ctx)
    assert "public.txt" in listed.content
    assert ".ssh" not in listed.content and ".bash_history" not in listed.content and "musec" not in listed.content
    assert (await ReadFileTool().run({"path": "public.txt"}, ctx)).content.count("public") == 1


def test_a_writable_root_in_a_hidden_folder_stays_visible(home: Path, state: Path, workspace: Path) -> None:
    scratch = state / "blobs"
    args = bwrap_argv(_policy(hide=(str(state),), writable_roots=(str(scratch),)), workspace, {}, ["true"])
    tmpfs = [args[i + 1] for i, a in enumerate(args) if a == "--tmpfs"]
    assert str(state / "sessions") in tmpfs and str(scratch) not in tmpfs and str(state) not in tmpfs
