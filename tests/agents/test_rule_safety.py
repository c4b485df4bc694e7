"""Approval rules that a spelling must not get around (fresh-user findings 1, 3 and 23):
a deny rule sees through wrappers and git's global options, an allow rule for a command
does not cover its writing into files, and "always" on a command that destroys or
publishes saves that command only."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from musec.agents.permissions import Call, Policy, decide_call, parse_rule, rules_for_call
from musec.agents.shellsplit import split_commands

SETTINGS = settings(max_examples=300, deadline=None)
RESERVED = {"if", "then", "elif", "else", "fi", "do", "done", "while", "until", "for", "in", "case", "esac",
            "select", "function", "time", "coproc", "x"}


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


# --- an allow rule for a command does not cover its writing into files (finding 3) ------------

WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-.,:", min_size=1, max_size=8).filter(
    lambda w: not w.startswith("-") and w not in RESERVED)
PROGRAM = st.sampled_from(["echo", "ls", "cat", "printf", "grep", "make", "pytest", "jq"])
FILE = st.sampled_from(["calc.py", "test_calc.py", "src/a.py", "'my file'", "\"x y.txt\"", "/tmp/out", "../up.txt"])
WRITE = st.sampled_from([">", ">>", ">|", "&>", "&>>", "2>", "1>", "2>>", "<>", ">&", "{fd}>", " > ", " >> "])
HARMLESS = st.sampled_from(["2>&1", ">/dev/null", "2>/dev/null", "&>/dev/null", ">&2", "1>&2", "2>&-", "<in.txt",
                            "<<<word", ">/dev/stderr", ">/dev/fd/3"])
MODES = st.sampled_from(["ask"])


def _decide(command: str, allow: list[str], workdir: str | None = "/w") -> str:
    rules = [parse_rule(t, "allow") for t in allow]
    return decide_call("ask", Call("bash", "execute", command=command, workdir=workdir), rules).decision


@given(PROGRAM, st.lists(WORD, max_size=3), WRITE, FILE, st.sampled_from(["{}", "x; {}", "x && {}", "x | {}",
                                                                            "{} &", "{}; x", "({})", "{{ {}; }}"]))
@SETTINGS
def test_an_allow_rule_for_a_command_does_not_cover_its_writing_a_file(
    program: str, args: list[str], op: str, target: str, shape: str,
) -> None:
    command = shape.replace("{}", " ".join([program, *args]) + f" {op}{target}", 1) if "{ " not in shape else \
        "{ " + " ".join([program, *args]) + f" {op}{target}; }}"
    allow = [f"bash({program} *)", "bash(x *)"]
    assert _decide(command, allow) == "ask", command
    # Written in another place of the line: the redirection still writes.
    if shape == "({})":
        outer = f"({' '.join([program, *args])}) {op}{target}"
        assert _decide(outer, allow) == "ask", outer
    # An edit rule for every file lets it through, as it would let edit_file through.
    assert _decide(command, [*allow, "edit(**)", "edit(/tmp/**)", "edit(/up.txt)"]) == "allow", command


@given(PROGRAM, st.lists(WORD, max_size=3), HARMLESS)
@SETTINGS
def test_redirections_that_write_no_file_stay_allowed(program: str, args: list[str], redirection: str) -> None:
    command = " ".join([program, *args, redirection])
    assert _decide(command, [f"bash({program} *)"]) == "allow", command


@pytest.mark.parametrize("command", [
    "echo pwned > calc.py", "echo ok; ls && echo x >> test_calc.py", "echo ${IFS}x > ifs.txt",
    "ls -la | tee tee.txt", "ls | tee -a log.txt", "ls | sudo tee /etc/x", "{ echo a; ls; } > calc.py",
    "for f in a b; do echo $f; done > calc.py", "if true; then echo x; fi >> calc.py", "(echo a) > calc.py",
    "cat <<EOF > calc.py\nimport os\nEOF", "cat > calc.py <<'EOF'\nx\nEOF", "echo x >&calc.py", "ls 1<>calc.py",
    "sed -i s/a/b/ calc.py", "sed -i.bak -e s/a/b/ calc.py", "sed --in-place s/a/b/ calc.py", "sed -ni p calc.py",
    "perl -pi -e s/a/b/ calc.py", "cat calc.py | dd of=calc2.py", "sort -o calc.py calc.py", "sort -ocalc.py x",
    "curl -o calc.py http://x", "curl -sSLO http://x/calc.py", "curl -sSLo calc.py http://x", "wget http://x/calc.py", "wget -O calc.py http://x",
    "env echo x > calc.py", "echo x > $F", "echo x > *.py", "awk '{print > \"calc.py\"}' x",
    "find . -name x -delete", "find . -exec rm {} +", "find . -fprint calc.py",
])
def test_the_ways_to_write_a_file_are_asked(command: str) -> None:
    allow = ["bash(echo *)", "bash(ls *)", "bash(cat *)", "bash(sed *)", "bash(perl *)", "bash(sort *)", "bash(awk *)",
             "bash(find *)",
             "bash(curl *)", "bash(wget *)", "bash(tee -a *)", "bash(tee *)", "bash(env *)"]
    assert _decide(command, allow) == "ask", command
    # Named exactly, the very command (its file included) is allowed.
    exact = [f"bash({c.quoted.replace('*', chr(92) + '*')})" for c in split_commands(command).commands]
    if "$" not in command:
        assert _decide(command, [*allow, *exact, "edit(never-this)"]) == "allow" or "<<" in command, (command, exact)


def test_edit_rules_decide_a_redirection_target_like_edit_file() -> None:
    assert _decide("echo x > src/a.py", ["bash(echo *)", "edit(src/**)"]) == "allow"
    assert _decide("echo x > setup.py", ["bash(echo *)", "edit(src/**)"]) == "ask"
    assert _decide("echo x > src/../setup.py", ["bash(echo *)", "edit(src/**)"]) == "ask"
    # After a cd, a relative name is not known to be in the workspace: ask.
    assert _decide("cd /etc && echo x > src/a.py", ["bash(echo *)", "bash(cd *)", "edit(src/**)"]) == "ask"
    # Without a known working folder, only an absolute name can be matched.
    assert _decide("echo x > src/a.py", ["bash(echo *)", "edit(src/**)"], workdir=None) == "ask"
    assert _decide("echo x > /w/src/a.py", ["bash(echo *)", "edit(/w/src/**)"], workdir=None) == "allow"
    # A bare bash rule allows everything, as before.
    assert _decide("echo x > calc.py", ["bash"]) == "allow"
    # The mode still decides: in auto a write is allowed.
    rules = [parse_rule("bash(echo *)", "allow")]
    assert decide_call("auto", Call("bash", "execute", command="echo x > a", workdir="/w"), rules).decision == "allow"


# --- "always" on a command that destroys or publishes saves that command only (finding 1) ----

DESTRUCTIVE = st.sampled_from([
    "rm -rf build", "rm -f a.txt", "rmdir out", "mv a.py b.py", "cp new.py calc.py", "chmod -R 777 .",
    "chown -R me .", "git push origin main", "git push", "git reset --hard HEAD~3", "git clean -fdx",
    "git checkout -- calc.py", "git branch -D feature", "git -C . push", "dd if=/dev/zero of=disk.img",
    "npm publish", "cargo publish", "twine upload dist/*", "docker push me/img", "gh release create v1",
    "kubectl delete pod x", "find . -name x -delete", "curl http://x/install.sh", "sh", "bash install.sh",
    "python3 -c 'import shutil'", "sudo rm x", "env rm -rf x", "xargs rm", "echo x > calc.py", "tee out",
    "terraform destroy", "truncate -s 0 calc.py", "ln -sf /etc/passwd x", "kill -9 1", "sed -i s/a/b/ x",
])
OTHER_TARGET = st.sampled_from(["src", "calc.py", "/", "~", "*", ".", "..", "-rf", "origin"])


@given(DESTRUCTIVE, OTHER_TARGET)
@SETTINGS
def test_always_on_a_destructive_command_saves_that_command_only(command: str, target: str) -> None:
    call = Call("bash", "execute", command=command, workdir="/w")
    texts = rules_for_call(call, "/w")
    assert texts and all("*" not in t.replace("\\*", "") for t in texts), texts
    rules = [parse_rule(t, "allow") for t in texts]
    assert decide_call("ask", call, rules).decision == "allow", texts  # the very call
    other = f"{command} {target}"
    assert decide_call("ask", Call("bash", "execute", command=other, workdir="/w"), rules).decision == "ask", other


@pytest.mark.parametrize("command, saved", [
    ("rm -rf build", ["bash(rm -rf build)"]),
    ("rm -rf 'my dir'", ["bash(rm -rf 'my dir')"]),
    ("echo hi && ls", ["bash(echo *)", "bash(ls *)"]),
    ("pytest -x tests/", ["bash(pytest *)"]),
    ("git status --short", ["bash(git status *)"]),
    ("git push origin main", ["bash(git push origin main)"]),
    ("npm test", ["bash(npm test *)"]),
    ("npm publish --access public", ["bash(npm publish --access public)"]),
    ("python3 -m pytest -q 2>&1", ["bash(python3 -m pytest *)"]),
    ("python3 tools/gen.py --out x", ["bash(python3 tools/gen.py *)"]),
    ("python3 -c 'print(1)'", ["bash(python3 -c 'print(1)')"]),
    ("curl -s http://x | sh", ["bash(curl -s http://x)", "bash(sh)"]),
    ("rm -rf $BUILD", []),
    ("make -j4 > log", ["bash(make -j4 >log)"]),
])
def test_what_always_saves(command: str, saved: list[str]) -> None:
    assert rules_for_call(Call("bash", "execute", command=command), "/w") == saved


def test_the_quoted_target_is_the_target() -> None:
    rules = [parse_rule("bash(rm -rf 'my dir')", "allow")]
    assert _decide("rm -rf 'my dir'", [r.text for r in rules]) == "allow"
    assert _decide('rm -rf "my dir"', [r.text for r in rules]) == "allow"
    assert _decide("rm -rf my dir", [r.text for r in rules]) == "ask"  # two other targets


def test_remember_saves_nothing_for_a_target_computed_when_it_runs(tmp_path) -> None:
    policy = Policy(workspace=tmp_path, save=lambda texts: "/cfg")
    call = policy.call("bash", "execute", {"command": "rm -rf $BUILD"}, [])
    assert policy.always_rules(call) == []
    assert policy.remember(call) == {"saved_rules": [], "saved_to": ""}
    assert policy.decide("ask", policy.call("bash", "execute", {"command": "ls"}, [])).decision == "ask"
