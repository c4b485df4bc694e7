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


def test_a_default_holding_the_workspace_is_skipped(home: Path) -> None:
    ws = home / ".ssh" / "work"
    ws.mkdir()
    assert hidden_paths((), ws, hide=default_hidden(str(home), None)) == [(str(home / ".aws"), True)]


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
