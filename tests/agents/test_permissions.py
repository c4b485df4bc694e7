"""Approval rules: the parser, the matcher and the precedence of deny > ask > allow over modes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from musec.agents.commandrules import command_effects
from musec.agents.permissions import (
    Call,
    Policy,
    RuleError,
    command_segments,
    decide_call,
    parse_rule,
    rules_for_call,
)
from musec.agents.shellsplit import split_commands

SETTINGS = settings(max_examples=200, deadline=None)
RESERVED = {"if", "then", "elif", "else", "fi", "do", "done", "while", "until", "for", "in", "case", "esac",
            "select", "function", "time", "coproc"}  # bash's reserved words are not commands
WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-./=,:", min_size=1, max_size=10).filter(
    lambda w: not w.startswith("-") and w not in RESERVED)
SEPARATORS = st.sampled_from([";", "&&", "||", "|", "&", "\n", " ; ", " && "])


def _bash(command: str) -> Call:
    return Call("bash", "execute", command=command)


def _file(tool: str, rel: str, workspace: str = "/w") -> Call:
    access = "read" if tool in ("read_file", "glob", "grep") else "write"
    return Call(tool, access, paths=((f"{workspace}/{rel}", rel),))


def _rules(**lists: list[str]) -> list:
    return [parse_rule(text, action, home="/home/u") for action, texts in lists.items() for text in texts]


# --- parsing -----------------------------------------------------------------------------


@pytest.mark.parametrize("text, kind, pattern", [
    ("bash(pytest *)", "bash", "pytest *"),
    ("Bash(npm run test)", "bash", "npm run test"),
    ("edit(src/**)", "edit", "src/**"),
    ("write(docs/*.md)", "write", "docs/*.md"),
    ("read(~/.ssh/**)", "read", "~/.ssh/**"),
    ("read", "read", None),
    ("bash(*)", "bash", None),
    ("  edit ( src/** )  ", "edit", "src/**"),
])
def test_rules_parse(text: str, kind: str, pattern: str | None) -> None:
    rule = parse_rule(text, "allow")
    assert (rule.kind, rule.pattern, rule.action) == (kind, pattern, "allow")


@pytest.mark.parametrize("text, says", [
    ("bash(pytest *", "not closed"),
    ("shell(ls)", "unknown tool kind 'shell'"),
    ("bash()", "empty pattern"),
    ("bash(ls) extra", "malformed"),
    ("", "malformed"),
    (42, "not a string"),
])
def test_malformed_rules_say_what_is_wrong_and_show_the_syntax(text: object, says: str) -> None:
    with pytest.raises(RuleError) as info:
        parse_rule(text, "deny")
    message = str(info.value)
    assert says in message and "\n" not in message
    assert "bash(" in message  # the fix: the syntax


@given(st.text(max_size=40), st.sampled_from(["allow", "ask", "deny"]))
@SETTINGS
def test_any_text_parses_or_raises_rule_error(text: str, action: str) -> None:
    try:
        rule = parse_rule(text, action)
    except RuleError:
        return
    assert rule.action == action and rule.text == text.strip()


# --- commands ----------------------------------------------------------------------------


def test_command_segments_split_at_control_operators_and_keep_redirections() -> None:
    assert command_segments("python3 -m unittest -q 2>&1") == ["python3 -m unittest -q 2>&1"]
    assert command_segments("cd x && make -j4 | tee 'log file'; echo done\nls") == [
        "cd x", "make -j4", "tee log file", "echo done", "ls"]
    assert command_segments("(cd a; b) &") == ["cd a", "b"]
    assert command_segments("echo 'unclosed") is None


@given(WORD, st.lists(WORD, max_size=4))
@SETTINGS
def test_a_first_word_rule_allows_that_command_with_any_arguments(word: str, args: list[str]) -> None:
    rules = _rules(allow=[f"bash({word} *)"])
    command = " ".join([word, *args])
    effects = command_effects(split_commands(command).commands[0])
    assume(not effects.writes and not effects.runs)  # `vi`, `rm x`, `tee x`: test_rule_safety
    assume(len(split_commands(command).commands) == 1)  # `eval x` runs `x` too
    verdict = decide_call("ask", _bash(command), rules)
    assert verdict.decision == "allow" and verdict.rule == f"bash({word} *)" and verdict.source == "user"


@given(WORD, st.lists(WORD, max_size=3), SEPARATORS, st.lists(WORD, min_size=1, max_size=3))
@SETTINGS
def test_an_allow_rule_never_covers_a_second_command(word: str, args: list[str], sep: str, other: list[str]) -> None:
    if other[0] == word:
        return
    rules = _rules(allow=[f"bash({word} *)"])
    for command in (f"{' '.join([word, *args])}{sep}{' '.join(other)}", f"{word} $({' '.join(other)})",
                    f"{word} `{' '.join(other)}`", f"{word} <({' '.join(other)})"):
        assert decide_call("ask", _bash(command), rules).decision == "ask", command


@given(st.lists(st.lists(WORD, min_size=1, max_size=3), min_size=1, max_size=4), SEPARATORS,
       st.integers(min_value=0, max_value=4), st.sampled_from(["{}", "$({})", "`{}`", '"$({})"', "'{}'"]))
@SETTINGS
def test_a_deny_rule_catches_its_command_anywhere_in_the_line(
    commands: list[list[str]], sep: str, at: int, wrap: str,
) -> None:
    parts = [" ".join(c) for c in commands]
    parts.insert(min(at, len(parts)), wrap.format("curl -s http://x"))
    rules = _rules(allow=["bash"], deny=["bash(curl *)"])
    verdict = decide_call("auto", _bash(sep.join(parts)), rules)
    assert verdict.decision == "deny" and verdict.rule == "bash(curl *)"


@given(st.text(max_size=60))
@SETTINGS
def test_matching_any_command_never_raises(command: str) -> None:
    rules = _rules(allow=["bash(git *)", "bash(pytest)"], ask=["bash(git push *)"], deny=["bash(rm -rf *)"])
    assert decide_call("ask", _bash(command), rules).decision in ("allow", "ask", "deny")
    assert decide_call("ask", _bash(command), _rules(allow=["bash"])).decision == "allow"


def test_command_patterns() -> None:
    rules = _rules(allow=["bash(pytest *)", "bash(git status)", r"bash(echo \*)"])
    assert decide_call("ask", _bash("pytest"), rules).decision == "allow"
    assert decide_call("ask", _bash("pytest   -x  tests/"), rules).decision == "allow"
    assert decide_call("ask", _bash("pytestx"), rules).decision == "ask"
    assert decide_call("ask", _bash("git status"), rules).decision == "allow"
    assert decide_call("ask", _bash("git status --short"), rules).decision == "ask"
    assert decide_call("ask", _bash("echo *"), rules).decision == "allow"
    assert decide_call("ask", _bash("echo hi"), rules).decision == "ask"


# --- paths -------------------------------------------------------------------------------


def test_path_patterns() -> None:
    rules = _rules(allow=["edit(src/**)"], deny=["edit(*.lock)", "read(~/.ssh/**)", "read(secrets/**)"])
    assert decide_call("ask", _file("edit_file", "src/a/b.py"), rules).rule == "edit(src/**)"
    assert decide_call("ask", _file("write_file", "src/new.py"), rules).decision == "allow"
    assert decide_call("ask", _file("edit_file", "srcx/a.py"), rules).decision == "ask"
    assert decide_call("ask", _file("edit_file", "src/deep/poetry.lock"), rules).rule == "edit(*.lock)"
    assert decide_call("auto", _file("grep", "secrets/k"), rules).decision == "deny"
    ssh = Call("read_file", "read", paths=(("/home/u/.ssh/id_ed25519", None),))
    assert decide_call("auto", ssh, rules).rule == "read(~/.ssh/**)"
    # A relative pattern never matches a path outside the workspace.
    outside = Call("edit_file", "write", paths=(("/elsewhere/src/x.py", None),))
    assert decide_call("ask", outside, rules).decision == "ask"


def test_policy_resolves_symlinks_before_matching(tmp_path: Path) -> None:
    workspace = tmp_path / "w"
    (workspace / "secrets").mkdir(parents=True)
    (workspace / "secrets" / "key").write_text("k")
    os.symlink("secrets", workspace / "innocent")
    policy = Policy(rules=_rules(deny=["read(secrets/**)"]), workspace=workspace)
    call = policy.call("read_file", "read", {"path": "innocent/key"}, ["innocent/key"])
    assert call.paths[0][1] == "secrets/key"
    assert policy.decide("auto", call).decision == "deny"
    # glob and grep without a path search the workspace root.
    assert policy.call("grep", "read", {"pattern": "x"}, []).paths[0][1] == "."


# --- precedence over modes ---------------------------------------------------------------


@pytest.mark.parametrize("mode, lists, call, expected", [
    ("auto", {}, "bash", ("allow", "mode")),
    ("ask", {}, "bash", ("ask", "mode")),
    ("auto", {"deny": ["bash(make *)"]}, "bash", ("deny", "user")),
    ("never", {"deny": ["bash(make *)"]}, "bash", ("deny", "user")),
    ("auto", {"ask": ["bash(make *)"]}, "bash", ("ask", "user")),
    ("never", {"ask": ["bash(make *)"]}, "bash", ("allow", "mode")),
    ("ask", {"allow": ["bash(make *)"]}, "bash", ("allow", "user")),
    ("ask", {"allow": ["bash(make *)"], "ask": ["bash"]}, "bash", ("ask", "user")),
    ("ask", {"allow": ["bash"], "ask": ["bash"], "deny": ["bash(make *)"]}, "bash", ("deny", "user")),
    ("read-only", {"allow": ["edit"]}, "edit", ("deny", "mode")),
    ("read-only", {"deny": ["edit(src/**)"]}, "edit", ("deny", "user")),
    ("read-only", {}, "read", ("allow", "mode")),
    ("auto", {"deny": ["read"]}, "read", ("deny", "user")),
])
def test_deny_wins_over_ask_over_allow_and_rules_refine_the_mode(mode, lists, call, expected) -> None:
    calls = {"bash": _bash("make test"), "edit": _file("edit_file", "src/x.py"), "read": _file("read_file", "src/x.py")}
    verdict = decide_call(mode, calls[call], _rules(**lists))
    assert (verdict.decision, verdict.source) == expected


def test_refusals_name_the_rule_for_the_model() -> None:
    rule = parse_rule("bash(curl *)", "deny", source="project", origin="/w/.musec/config.toml [permissions]")
    verdict = decide_call("auto", _bash("curl x"), [rule])
    text = verdict.refusal("auto", "execute")
    assert "project rule deny bash(curl *)" in text and "/w/.musec/config.toml" in text
    assert decide_call("read-only", _file("edit_file", "a"), []).refusal("read-only", "write") == (
        "not run: approval mode read-only does not allow write calls")


# --- "always" ----------------------------------------------------------------------------


def test_always_derives_rules_from_the_call() -> None:
    assert rules_for_call(_bash("pytest -x tests/"), "/w") == ["bash(pytest *)"]
    assert rules_for_call(_bash("cd sub && make -j4 | tee log"), "/w") == ["bash(cd *)", "bash(make *)", "bash(tee log)"]
    assert rules_for_call(_bash("echo $(date)"), "/w") == ["bash(echo $(date))"]
    assert rules_for_call(_bash("ls *.py"), "/w") == ["bash(ls *)"]
    assert rules_for_call(_file("edit_file", "src/pkg/a.py"), "/w") == ["edit(src/pkg/**)"]
    assert rules_for_call(_file("write_file", "setup.py"), "/w") == ["edit(setup.py)"]
    assert rules_for_call(_file("read_file", "a[1].txt"), "/w") == [r"read(a\[1\].txt)"]
    assert rules_for_call(Call("todo_write", "read"), "/w") == []


@given(st.lists(st.lists(WORD, min_size=1, max_size=3), min_size=1, max_size=3), SEPARATORS)
@SETTINGS
def test_the_rules_always_derives_allow_that_call(commands: list[list[str]], sep: str) -> None:
    call = _bash(sep.join(" ".join(c) for c in commands))
    rules = [parse_rule(t, "allow") for t in rules_for_call(call, "/w")]
    assert decide_call("ask", call, rules).decision == "allow"


def test_remember_applies_at_once_and_saves(tmp_path: Path) -> None:
    saved: list[list[str]] = []
    policy = Policy(workspace=tmp_path, save=lambda texts: saved.append(texts) or "/cfg/config.toml")
    call = policy.call("bash", "execute", {"command": "make test"}, [])
    assert policy.decide("ask", call).decision == "ask"
    assert policy.remember(call) == {"saved_rules": ["bash(make *)"], "saved_to": "/cfg/config.toml"}
    assert policy.decide("ask", policy.call("bash", "execute", {"command": "make lint"}, [])).decision == "allow"
    assert saved == [["bash(make *)"]]

    def broken(texts: list[str]) -> str:
        raise PermissionError(13, "Permission denied")

    failing = Policy(workspace=tmp_path, save=broken)
    fields = failing.remember(call)
    assert "Permission denied" in fields["save_error"]
    assert failing.decide("ask", call).decision == "allow"  # still applies to this session


@pytest.mark.parametrize("command", [
    "/usr/bin/curl x", "env curl x", "FOO=1 curl x", "time curl x", "command curl x", "exec curl x",
    "nice -n 5 curl x", "xargs curl", "if true; then curl x; fi", "timeout 5 curl x", "sudo -E curl x",
])
def test_deny_sees_through_wrappers_and_paths(command: str) -> None:
    rule = parse_rule("bash(curl *)", "deny")
    verdict = decide_call("auto", Call("bash", "execute", command=command), [rule])
    assert verdict.decision == "deny", command


def test_echoing_a_denied_word_is_not_denied() -> None:
    rule = parse_rule("bash(curl *)", "deny")
    assert decide_call("auto", Call("bash", "execute", command="echo curl"), [rule]).decision == "allow"


def test_search_results_in_denied_files_are_hidden(tmp_path) -> None:
    policy = Policy(rules=[parse_rule("read(*.key)", "deny")], workspace=tmp_path)
    grep = policy.filter_listing("grep", "sub/x.key:1:secret\nsrc/a.py:3:k = 1")
    assert grep.splitlines() == ["src/a.py:3:k = 1", "[1 result line hidden by the deny rule read(*.key)]"]
    assert policy.filter_listing("glob", "sub/x.key\na.py") .splitlines()[0] == "a.py"
    assert policy.filter_listing("read_file", "sub/x.key") == "sub/x.key"


def test_mcp_rules_name_tools_by_glob() -> None:
    rules = [parse_rule("mcp__github__*", "ask"), parse_rule("mcp__github__delete_repo", "deny"),
             parse_rule("mcp__docs__*", "allow")]
    assert rules[0].kind == "mcp" and rules[0].pattern == "mcp__github__*"

    def call(tool: str) -> Call:
        return Call(tool, "write")

    assert decide_call("auto", call("mcp__github__delete_repo"), rules).decision == "deny"
    assert decide_call("auto", call("mcp__github__create_issue"), rules).decision == "ask"
    assert decide_call("ask", call("mcp__docs__search"), rules).decision == "allow"
    assert decide_call("ask", call("mcp__other__x"), rules).decision == "ask"
    assert decide_call("read-only", call("mcp__docs__search"), rules).decision == "deny"
    assert not rules[0].covers("bash") and not parse_rule("bash", "deny").covers("mcp__github__x")
    assert rules_for_call(call("mcp__docs__search"), "/ws") == ["mcp__docs__search"]


def test_net_rules_decide_by_host_and_port() -> None:
    from musec.agents.netrules import decide_host

    rules = [parse_rule("net(*.example.org)", "allow"), parse_rule("net(packages.example.com)", "allow"),
             parse_rule("net(127.0.0.1:8080)", "ask"), parse_rule("net(bad.example.org)", "deny")]
    assert decide_host("pypi.example.org", 443, rules).rule == "net(*.example.org)"
    assert decide_host("PACKAGES.example.com", 80, rules).decision == "allow"
    assert decide_host("example.org", 443, rules).decision == "deny"  # *. needs a subdomain
    assert decide_host("bad.example.org", 443, rules).rule == "net(bad.example.org)"  # deny wins
    assert decide_host("127.0.0.1", 8080, rules).decision == "ask"
    closed = decide_host("127.0.0.1", 8081, rules)
    assert (closed.decision, closed.source) == ("deny", "mode")  # no rule: the network stays closed
    assert decide_host("anything", 1, [parse_rule("net", "allow")]).decision == "allow"
    for bad in ("net(http://x.org)", "net(x.org:port)", "net(a b)"):
        with pytest.raises(RuleError, match="net\\(pypi.org\\)"):
            parse_rule(bad, "allow")


def test_a_named_tool_rule_is_one_config_accepts_and_always_saves_it(tmp_path: Path) -> None:
    """musec offered the rule "spawn_workers" (headless hint, "[a]lways") that config.toml
    then refused as an unknown kind, and "always" saved it nowhere (fresh user s5 F14)."""
    rule = parse_rule("spawn_workers", "allow")
    assert (rule.kind, rule.tools, rule.pattern) == ("tool", ("spawn_workers",), None)
    call = Call("spawn_workers", "execute")
    assert decide_call("ask", call, []).decision == "ask"
    assert decide_call("ask", call, [rule]).decision == "allow"
    assert decide_call("auto", call, [parse_rule("spawn_workers", "deny")]).decision == "deny"
    assert rules_for_call(call, "/w") == ["spawn_workers"]
    saved: list[list[str]] = []
    policy = Policy(workspace=tmp_path, save=lambda texts: saved.append(texts) or "/cfg/config.toml")
    assert policy.remember(call) == {"saved_rules": ["spawn_workers"], "saved_to": "/cfg/config.toml"}
    assert saved == [["spawn_workers"]]
    with pytest.raises(RuleError, match="one of musec's tools by name"):
        parse_rule("spawn_worker", "deny")  # a typo is an error, never a rule that matches nothing
