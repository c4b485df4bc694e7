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
             "bash(curl *)", "bash(wget *)", "bash(env *)", "bash(sudo *)"]
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


# --- every way to write a file or run another program (session 5: the kind, not the case) --------

#: Commands that only read: their "always" rules and hand-written rules like them.
READERS = ["ls -la", "cat f", "echo hi", "grep -n x f", "git status", "git log --oneline", "git diff HEAD",
           "git show HEAD", "git grep x", "git fetch origin", "sed -n 1p f", "find . -name x", "sort f", "head f",
           "wc -l f", "python3 -m pytest -q", "npm test", "uv run pytest -x", "awk '{print $1}' f",
           "curl -s http://x", "jq . f", "make test", "git config --get user.name", "git commit -m x",
           "git add calc.py", "black --check .", "ruff check .", "ruff format --check", "npx prettier --check .",
           "cargo fmt --check", "gofmt -l .", "eslint src", "isort --check-only ."]
READER_RULES = ["bash(echo *)", "bash(ls *)", "bash(cat *)", "bash(grep *)", "bash(git status *)", "bash(git log *)",
                "bash(git diff *)", "bash(git show *)", "bash(git grep *)", "bash(git fetch *)", "bash(sed *)",
                "bash(find *)", "bash(sort *)", "bash(awk *)", "bash(curl *)", "bash(wget *)", "bash(jq *)",
                "bash(env *)", "bash(sudo *)", "bash(xargs *)", "bash(git config --get *)", "bash(git commit *)"]
#: Writes, each with ``{t}`` for its target; and commands that run a program their arguments name.
WRITES = st.sampled_from([
    "cp x {t}", "cp -r x {t}", "mv {t} y", "mv y {t}", "rm -rf {t}", "touch {t}", "truncate -s0 {t}", "tee {t}",
    "tar xf a.tar -C {t}", "tar -xzf a.tgz", "unzip a.zip -d {t}", "cpio -i -D {t}", "patch {t} d.diff",
    "patch -p1", "git apply d.diff", "git checkout -- {t}", "git restore {t}", "git reset --hard", "rsync -a s/ {t}",
    "install x {t}", "ln -s a {t}", "ln a {t}", "sed -i s/a/b/ {t}", "sed -n 'w {t}' f", "find . -delete",
    "find . -fprint {t}", "curl -o {t} http://x", "git log --output={t}", "git diff --output {t}", "echo x > {t}",
    "sort -o {t} f", "dd if=x of={t}", "git config user.name x", "gzip {t}", "mkdir {t}", "chmod 777 {t}",
    "wget http://x/{t}", "awk '{{print > \"{t}\"}}' f", "git stash", "git clean -fd", "git -C sub checkout -- {t}",
    "black {t}", "ruff format {t}", "ruff check --fix {t}", "npx prettier --write {t}", "eslint --fix {t}",
    "gofmt -w {t}", "cargo fmt", "go mod tidy", "uv run cp x {t}", "isort {t}", "clang-format -i {t}",
])
RUNS = st.sampled_from([
    "find . -exec rm {t} \\;", "find . -execdir sh -c x \\;", "git -c 'alias.s=!rm {t}' s", "git -c alias.l=push l",
    "sed 's/x/rm {t}/e' f", "sed -n '1e rm {t}' f", "git grep -Orm x", "git fetch --upload-pack='rm {t}' .",
    "tar cf a.tar -I 'rm {t}' src", "awk 'BEGIN{{system(\"rm {t}\")}}'", "git -c core.pager='rm {t}' log",
    "git -c core.sshCommand='rm {t}' fetch", "git -c core.hooksPath=h commit -m x", "git -c core.fsmonitor=x status",
    "rsync -e 'rm {t}' a h:b", "sort --compress-program=rm f", "make --eval='x:;rm {t}' x",
    "git -c include.path=/tmp/c status", "git rebase -x 'rm {t}' main",
])
TARGETS = st.sampled_from(["calc.py", "src/new.py", ".git/hooks/pre-commit", ".git/config", "/etc/passwd",
                           "~/.bashrc", "../up.txt", ".musec/config.toml", "build", "'a b.py'", "$D", "*.py"])
PREFIXES = st.sampled_from(["", "sudo ", "env ", "timeout 5 ", "nice -n 5 ", "xargs ", "FOO=1 "])


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> str:
    ws = tmp_path_factory.mktemp("ws")
    for folder in (".git/hooks", ".musec", "src", "build", "sub"):
        (ws / folder).mkdir(parents=True)
    return str(ws)


def _rules_for(readers: list[str], workspace: str) -> list[str]:
    saved = [t for r in readers for t in rules_for_call(Call("bash", "execute", command=r, workdir=workspace),
                                                       workspace)]
    return [*saved, *READER_RULES]


@given(st.one_of(WRITES, RUNS), TARGETS, PREFIXES, st.lists(st.sampled_from(READERS), max_size=6))
@SETTINGS
def test_a_command_that_writes_or_runs_another_is_never_allowed_by_rules_for_reading_commands(
    workspace: str, shape: str, target: str, prefix: str, readers: list[str],
) -> None:
    command = prefix + shape.format(t=target)
    rules = [parse_rule(t, "allow") for t in _rules_for(readers, workspace)]
    call = Call("bash", "execute", command=command, workdir=workspace)
    verdict = decide_call("ask", call, rules)
    assert verdict.decision == "ask", (command, verdict.rule)
    # Nor by what "always" on it saves, for another target.
    saved = [parse_rule(t, "allow") for t in rules_for_call(call, workspace)]
    other = prefix + shape.format(t="other.py")
    if other != command:
        again = decide_call("ask", Call("bash", "execute", command=other, workdir=workspace), saved + rules)
        assert again.decision == "ask", (other, [r.text for r in saved])


@given(WRITES, st.sampled_from([".git/hooks/pre-commit", ".git/config", ".git", "/etc/passwd", "~/.bashrc",
                                "../up.txt", ".musec/config.toml", "$D", ".*", "src/../.git/x"]))
@SETTINGS
def test_a_hand_written_rule_for_a_writing_program_stays_out_of_protected_paths(
    workspace: str, shape: str, target: str,
) -> None:
    command = shape.format(t=target)
    words = command.split()
    names = [f"bash({' '.join(words[:n])} *)" for n in (1, 2)]
    rules = [parse_rule(t, "allow") for t in names if "'" not in t and "{" not in t]
    if "{t}" not in shape:
        return  # the target is not the generated one
    verdict = decide_call("ask", Call("bash", "execute", command=command, workdir=workspace), rules)
    assert verdict.decision == "ask", (command, verdict.rule)


@pytest.mark.parametrize("command, rule", [
    ("cp a.py src/b.py", "bash(cp *)"), ("cp -r src build/copy", "bash(cp *)"), ("mv build/x build/y", "bash(mv *)"),
    ("rm -rf build", "bash(rm *)"), ("rm -f src/*.pyc", "bash(rm *)"), ("touch src/new.py", "bash(touch *)"),
    ("tar xzf a.tgz -C build", "bash(tar *)"), ("tar czf build/a.tgz src", "bash(tar *)"),
    ("unzip -o a.zip -d build", "bash(unzip *)"), ("git checkout -- calc.py", "bash(git checkout *)"),
    ("git restore src/a.py", "bash(git *)"), ("tee build/log", "bash(tee *)"), ("ln -s ../calc.py src/c.py", "bash(ln *)"),
    ("patch calc.py fix.diff", "bash(patch *)"), ("mkdir -p build/x", "bash(mkdir *)"),
])
def test_a_hand_written_rule_for_a_writing_program_covers_it_in_the_workspace(
    workspace: str, command: str, rule: str,
) -> None:
    verdict = decide_call("ask", Call("bash", "execute", command=command, workdir=workspace), [parse_rule(rule, "allow")])
    assert verdict.decision == "allow", command
    # Without a known working folder (after a cd), it is asked.
    moved = f"cd /etc && {command}"
    rules = [parse_rule(rule, "allow"), parse_rule("bash(cd *)", "allow")]
    assert decide_call("ask", Call("bash", "execute", command=moved, workdir=workspace), rules).decision == "ask"


@pytest.mark.parametrize("command", [
    "python3 -c 'open(\"x\", \"w\")'", "python3 tools/gen.py", "make build", "node -e 'x'", "bash build.sh",
])
def test_a_hand_written_interpreter_rule_allows_what_the_interpreter_runs(workspace: str, command: str) -> None:
    """Running code is what these are for: the person chose it; the sandbox holds the writes."""
    name = command.split()[0]
    verdict = decide_call("ask", Call("bash", "execute", command=command, workdir=workspace),
                          [parse_rule(f"bash({name} *)", "allow")])
    assert verdict.decision == "allow"


ALIAS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=6).filter(
    lambda a: a not in ("push", "status", "log", "diff"))


@given(st.lists(WRAPPERS, max_size=2), ALIAS, st.sampled_from(["push", "'!git push'", "'!f() { git push; }; f'",
                                                             "\"push --force\""]),
       st.lists(GIT_OPTIONS, max_size=2), st.sampled_from(["", "origin", "origin main"]))
@SETTINGS
def test_a_git_alias_on_the_line_does_not_get_past_a_deny_rule(
    wrappers: list[str], alias: str, value: str, options: list[str], args: str,
) -> None:
    command = " ".join([*wrappers, "git", *options, "-c", f"alias.{alias}={value}", alias, args]).strip()
    assert _verdict(command, allow=["bash"], deny=["bash(git push *)"]) == "deny", command
    assert _verdict(command, "ask", allow=["bash(git *)"]) == "ask", command


@pytest.mark.parametrize("command", [
    "find . -exec git push \\;", "find . -name x -execdir git push origin {} +", "uv run git push",
    "uv run --with x git push", "npx -y git push", "poetry run git push", "bundle exec git push origin",
    "git -c core.sshCommand='git push' fetch", "git -c core.pager='sh -c \"git push\"' log",
    "git fetch --upload-pack='git push' .", "git rebase --exec 'git push' main", "git bisect run git push",
    "git submodule foreach git push", "tar -xf a.tar --to-command='git push'",
])
def test_commands_that_commands_run_are_seen_by_deny_rules(command: str) -> None:
    assert _verdict(command, allow=["bash"], deny=["bash(git push *)"]) == "deny", command


@pytest.mark.parametrize("command", [
    "git -c core.hooksPath=h commit -m x", "sed 's/.*/x/e' f", "git -c include.path=c status", "sed -f s.sed f",
])
def test_a_command_whose_programs_cannot_be_told_is_asked_when_a_deny_rule_exists(command: str) -> None:
    assert _verdict(command, "ask", allow=["bash"], deny=["bash(git push *)"]) == "ask", command
    assert _verdict(command, "never", allow=["bash"], deny=["bash(git push *)"]) == "deny", command
    assert _verdict(command, "ask", allow=["bash"]) == "allow", command  # no deny rule: nothing to miss


@pytest.mark.parametrize("command, saved", [
    ("uv run pytest -x", ["bash(uv run pytest *)"]), ("npx eslint .", ["bash(npx eslint *)"]),
    ("npx -y x", ["bash(npx -y x)"]), ("cp a b", ["bash(cp a b)"]), ("tar xzf a.tgz", ["bash(tar xzf a.tgz)"]),
    ("git log --output=x", ["bash(git log --output=x)"]), ("sed -n 1p f", ["bash(sed *)"]),
    ("sed 's/a/b/w out' f", ["bash(sed 's/a/b/w out' f)"]), ("find . -exec rm {} +", ["bash(find . -exec rm '{}' +)"]),
    ("git -c alias.p=push p", ["bash(git -c alias.p=push p)"]), ("touch x", ["bash(touch x)"]),
])
def test_always_names_the_very_command_that_writes_or_runs_another(command: str, saved: list[str]) -> None:
    assert rules_for_call(Call("bash", "execute", command=command), "/w") == saved


@pytest.mark.parametrize("text, says", [
    ("bash(npm test && rm *)", "write one rule for each: bash(npm test), bash(rm *)"),
    ("bash(ls | grep x)", "names 2 commands"),
    ("bash(echo 'x *)", "does not parse"),
    ("bash(pytest *), edit(src/**)", "holds several rules"),
])
def test_a_bad_command_rule_says_what_is_wrong_in_one_line(text: str, says: str) -> None:
    from musec.agents.permissions import RuleError

    with pytest.raises(RuleError) as info:
        parse_rule(text, "allow")
    assert says in str(info.value) and "\n" not in str(info.value) and "bash(" in str(info.value)


@pytest.mark.parametrize("command, decision", [
    ("ls | xargs rm -rf", "ask"), ("find . -name '*.o' | xargs rm", "ask"), ("ls | xargs -I {} cp {} /etc",  "ask"),
    ("ls | xargs grep -n x", "allow"), ("ls | xargs wc -l", "allow"),
])
def test_xargs_operands_are_not_known(workspace: str, command: str, decision: str) -> None:
    rules = [parse_rule(t, "allow") for t in ("bash(xargs *)", "bash(ls *)", "bash(find *)", "bash(rm *)", "bash(cp *)")]
    assert decide_call("ask", Call("bash", "execute", command=command, workdir=workspace), rules).decision == decision


@pytest.mark.parametrize("command", [
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.p GIT_CONFIG_VALUE_0=push git p", "env PATH=./bin:$PATH git status",
    "export PATH=./bin:$PATH; git status", "PATH=./bin; git status", "LD_PRELOAD=./x.so git status",
    "HOME=/tmp/h git fetch", "GIT_SSH_COMMAND='sh x' git fetch", "sudo GIT_EXEC_PATH=/tmp git status",
])
def test_variables_that_change_what_runs_make_a_line_unsure(command: str) -> None:
    assert _verdict(command, "ask", allow=["bash"], deny=["bash(git push *)"]) == "ask", command
    rules = ["bash(env *)", "bash(git *)", "bash(export *)", "bash(sudo *)", "bash(PATH=*)", "bash(LD_PRELOAD=* *)",
             "bash(HOME=* *)", "bash(GIT_* *)", "bash(GIT_*)"]
    assert _decide(command, rules) == "ask", command


@pytest.mark.parametrize("command, saved", [
    ("npm install left-pad", ["bash(npm install left-pad)"]), ("pip install -e .", ["bash(pip install -e .)"]),
    ("go get x", ["bash(go get x)"]), ("strace -f ls", ["bash(strace -f ls)"]), ("strace ls", ["bash(strace ls)"]), ("uv run ruff check .", ["bash(uv run ruff *)"]),
])
def test_always_on_an_install_or_a_runner_names_what_it_runs(command: str, saved: list[str]) -> None:
    assert rules_for_call(Call("bash", "execute", command=command), "/w") == saved


@pytest.mark.parametrize("command", ["strace -f git push", "busybox sh -c 'git push'", "parallel git push ::: a",
                                     "chroot / git push", "unshare -r git push", "xvfb-run -a git push"])
def test_deny_rules_see_through_tracers_and_sandboxes(command: str) -> None:
    assert _verdict(command, allow=["bash"], deny=["bash(git push *)"]) == "deny", command


@pytest.mark.parametrize("command, allowed", [
    ("ln -s .git/hooks h && cp evil h/pre-commit", False), ("cp evil h/pre-commit & ln -s .git/hooks h", False),
    ("cp -a x h; cp evil h/pre-commit", False), ("tar xf a.tar -C build && cp evil build/l/x", False),
    ("mkdir -p build/x && cp a build/x/", True), ("cp a build/a && cp b build/b", True),
    ("cp a .GIT/config", False), ("git apply --directory=.git p.diff", False), ("touch .Musec/x", False),
])
def test_a_path_is_not_trusted_after_a_command_that_may_make_it_a_link(
    workspace: str, command: str, allowed: bool,
) -> None:
    rules = [parse_rule(t, "allow") for t in ("bash(ln *)", "bash(cp *)", "bash(mkdir *)", "bash(tar *)", "bash(git *)",
                                              "bash(touch *)")]
    verdict = decide_call("ask", Call("bash", "execute", command=command, workdir=workspace), rules)
    assert verdict.decision == ("allow" if allowed else "ask"), command


@pytest.mark.parametrize("command, verdict", [
    ("git st", "ask"), ("git p origin", "ask"), ("git status", "allow"), ("git lfs pull", "allow"),
    ("git -c alias.st=status st", "allow"),
])
def test_a_git_name_that_may_be_an_alias_from_the_config_is_asked_when_a_deny_rule_exists(
    command: str, verdict: str,
) -> None:
    """An alias in .git/config (which a command the rules allow could have written) is not
    on the line: a name git does not know is asked about, not taken for harmless."""
    assert _verdict(command, "ask", allow=["bash"], deny=["bash(git push *)"]) == verdict, command
    if "-c" not in command:  # an alias on the line runs what it says: only the very command covers it
        assert _verdict(command, "ask", allow=["bash(git *)"]) == "allow"  # no deny rule: the rule decides
