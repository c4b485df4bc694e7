"""Approval rules that a spelling must not get around (fresh-user findings 1, 3 and 23):
a deny rule sees through wrappers and git's global options, an allow rule for a command
does not cover its writing into files, and "always" on a command that destroys or
publishes saves that command only."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from musec.agents.permissions import Call, decide_call, parse_rule

SETTINGS = settings(max_examples=300, deadline=None)


def _bash(command: str) -> Call:
    return Call("bash", "execute", command=command)


def _verdict(command: str, mode: str = "auto", **lists: list[str]) -> str:
    rules = [parse_rule(t, action) for action, texts in lists.items() for t in texts]
    return decide_call(mode, _bash(command), rules).decision


# --- deny rules see through wrappers and git's global options ---------------------------------

WRAPPERS = st.sampled_from([
    "env", "env -i", "env -u HOME", "env FOO=1", "env -C /tmp", "/usr/bin/env", "nice", "nice -n 10", "nice -10",
    "nice --adjustment=3", "nohup", "stdbuf -o L", "stdbuf -oL -e 0", "xargs", "xargs -I {}", "xargs -n 1 -P 4",
    "sudo", "sudo -u root", "sudo -u root --", "sudo -E -H", "sudo --user=root", "doas -u root", "command",
    "exec", "exec -a name", "time", "time -p", "timeout 5", "timeout -s KILL 5", "timeout -k 1 5s",
    "ionice -c 3", "ionice -c 2 -n 7", "setsid", "chrt -f 10", "taskset -c 0-3", "taskset 0x3", "flock /tmp/l",
    "watch -n 1", "FOO=1", "builtin",
])
GIT_OPTIONS = st.sampled_from([
    "-C .", "-C/tmp", "-C sub", "-c user.name=x", "-c core.pager=cat", "--git-dir=.git", "--git-dir .git",
    "--work-tree=.", "--work-tree .", "--no-pager", "-p", "-P", "--paginate", "--bare", "--no-optional-locks",
    "--literal-pathspecs", "--namespace x", "--exec-path=/usr/lib/git-core", "--no-replace-objects",
])
GIT = st.sampled_from(["git", "/usr/bin/git", "command git"])


@given(st.lists(WRAPPERS, max_size=3), GIT, st.lists(GIT_OPTIONS, max_size=3),
       st.sampled_from(["origin", "origin main", "--force origin HEAD", ""]))
@SETTINGS
def test_a_git_deny_rule_holds_for_every_spelling(wrappers: list[str], git: str, options: list[str], args: str) -> None:
    command = " ".join([*wrappers, git, *options, "push", args]).strip()
    assert _verdict(command, allow=["bash"], deny=["bash(git push *)"]) == "deny", command
    assert _verdict(command, ask=["bash(git push *)"]) == "ask", command
    # Another subcommand is not caught by it.
    other = " ".join([*wrappers, git, *options, "status"])
    assert _verdict(other, allow=["bash"], deny=["bash(git push *)"]) == "allow", other


@given(st.lists(WRAPPERS, min_size=1, max_size=3))
@SETTINGS
def test_a_deny_rule_holds_under_any_wrapper_chain(wrappers: list[str]) -> None:
    command = " ".join([*wrappers, "curl", "-s", "http://x"])
    assert _verdict(command, allow=["bash"], deny=["bash(curl *)"]) == "deny", command


@pytest.mark.parametrize("command", [
    "git -C . push origin", "git --git-dir=.git --work-tree=. push", "git -c a=b -C x push",
    "sudo -u root git push", "stdbuf -o L git push", "timeout -s KILL 5 git push", "env -u X git push",
    "xargs -I {} git push", "git --no-pager push",
])
def test_the_fresh_user_spellings_of_git_push_are_denied(command: str) -> None:
    assert _verdict(command, allow=["bash"], deny=["bash(git push *)"]) == "deny"
