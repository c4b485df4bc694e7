"""Read deny rules hold against every spelling (issue 13, case 8): commands in the sandbox
cannot see what a ``read`` deny rule covers (``sub/../secret``, symlinks, hard links), the
file tools refuse a hard link to a denied file, and ``~`` means home, never a folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from musec.agents.permissions import Policy, parse_rule
from musec.agents.tools import BashTool, ReadFileTool, ToolContext, WriteFileTool
from musec.agents.tools.sandbox import hidden_paths

pytestmark = pytest.mark.anyio

SECRET = "TOP-SECRET-VALUE-42"


@pytest.fixture
def secret_ws(workspace: Path) -> Path:
    (workspace / "secret").mkdir()
    (workspace / "secret" / "x").write_text(SECRET + "\n")
    (workspace / "keys").mkdir()
    (workspace / "keys" / "a.pem").write_text(SECRET + " pem\n")
    (workspace / "sub").mkdir()
    (workspace / "public.txt").write_text("public\n")
    os.link(workspace / "secret" / "x", workspace / "hardlink.txt")
    os.symlink("secret/x", workspace / "symlink.txt")
    return workspace


def _policy(ws: Path) -> Policy:
    return Policy(rules=[parse_rule("read(secret/**)", "deny"), parse_rule("read(*.pem)", "deny")], workspace=ws)


def test_hidden_paths_cover_the_rules_and_every_hard_link(secret_ws: Path) -> None:
    hidden = dict(hidden_paths(_policy(secret_ws).read_deny_globs(), secret_ws))
    assert hidden == {str(secret_ws / "secret"): True, str(secret_ws / "keys" / "a.pem"): False,
                      str(secret_ws / "hardlink.txt"): False}


@pytest.mark.parametrize("command", [
    "cat secret/x", "cat sub/../secret/x", "cat ./secret/../secret/x", "cat symlink.txt", "cat hardlink.txt",
    "cat keys/a.pem", "grep -r TOP-SECRET .", "cd secret && cat *", "find . -type f -exec cat {} +",
])
async def test_commands_cannot_read_what_a_read_deny_rule_covers(
    secret_ws: Path, make_ctx, command: str
) -> None:
    ctx: ToolContext = make_ctx(read_deny=_policy(secret_ws).read_deny_globs())
    out = await BashTool().run({"command": command + "; cat public.txt"}, ctx)
    assert SECRET not in out.content, command
    assert "public" in out.content  # the rest of the workspace is still there


async def test_without_rules_the_same_command_reads_the_file(secret_ws: Path, ctx: ToolContext) -> None:
    out = await BashTool().run({"command": "cat sub/../secret/x"}, ctx)
    assert SECRET in out.content  # the test above can fail


def test_a_hard_link_to_a_denied_file_is_denied_to_the_file_tools(secret_ws: Path) -> None:
    policy = _policy(secret_ws)
    for path in ("hardlink.txt", "symlink.txt", "sub/../secret/x"):
        call = policy.call("read_file", "read", {"path": path}, [path])
        verdict = policy.decide("auto", call)
        assert verdict.decision == "deny" and verdict.rule == "read(secret/**)", path
    public = policy.call("read_file", "read", {"path": "public.txt"}, ["public.txt"])
    assert policy.decide("auto", public).decision == "allow"
    listing = policy.filter_listing("grep", f"hardlink.txt:1:{SECRET}\npublic.txt:1:public")
    assert SECRET not in listing and "public.txt:1:public" in listing


def test_a_home_rule_matches_a_tilde_path(tmp_path: Path) -> None:
    policy = Policy(rules=[parse_rule("read(~/.ssh/**)", "deny")], workspace=tmp_path)
    call = policy.call("read_file", "read", {"path": "~/.ssh/id_ed25519"}, ["~/.ssh/id_ed25519"])
    assert policy.decide("auto", call).decision == "deny"


async def test_tilde_means_home_never_a_folder(workspace: Path, make_ctx, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    outside = make_ctx(env={"HOME": str(home)})
    out = await WriteFileTool().run({"path": "~/x", "content": "hi\n"}, outside)
    assert out.is_error and "outside the workspace" in out.content
    assert not (workspace / "~").exists() and not (home / "x").exists()
    inside = make_ctx(env={"HOME": str(workspace)})
    out = await WriteFileTool().run({"path": "~/x", "content": "hi\n"}, inside)
    assert not out.is_error and (workspace / "x").read_text() == "hi\n" and not (workspace / "~").exists()
    other = await ReadFileTool().run({"path": "~root/x"}, inside)
    assert other.is_error and "another user's home" in other.content
    literal = await WriteFileTool().run({"path": "./~/x", "content": "ok\n"}, inside)
    assert not literal.is_error and (workspace / "~" / "x").exists()
