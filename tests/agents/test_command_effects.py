"""What a command writes and runs (agents/commandeffects.py, gitrules.py, sedrules.py): the
table the approval rules decide by. Each row is one spelling a manual documents."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from musec.agents.commandrules import command_effects, unsure_reason
from musec.agents.shellsplit import split_commands


def _effects(command: str, workdir: str | None = None):
    return command_effects(split_commands(command).commands[0], workdir)


def _written(command: str, workdir: str | None = None) -> list[tuple[str, bool, bool]]:
    """(path, purpose, tree) of every write."""
    return [(w.path, w.purpose, w.tree) for w in _effects(command, workdir).writes]


@pytest.mark.parametrize("command, written", [
    ("cp a b", [("b", True, False)]),
    ("cp -r src dst", [("dst", True, True)]),
    ("cp a b dir", [("dir/a", True, False), ("dir/b", True, False)]),
    ("cp -t out a b", [("out/a", True, False), ("out/b", True, False)]),
    ("cp --target-directory=out a", [("out/a", True, False)]),
    ("cp a sub/", [("sub/a", True, False)]),
    ("mv a b", [("b", True, True), ("a", True, True)]),
    ("install -m 755 tool bin/tool", [("bin/tool", True, False)]),
    ("install -d a b", [("a", True, False), ("b", True, False)]),
    ("ln -s target link", [("link", True, False)]),
    ("ln -sf /etc/passwd", [("./passwd", True, False)]),
    ("ln a b", [("b", True, False), ("a", True, False)]),
    ("rm -rf build", [("build", True, True)]),
    ("rm a b", [("a", True, False), ("b", True, False)]),
    ("touch -d yesterday a", [("a", True, False)]),
    ("truncate -s 0 calc.py", [("calc.py", True, False)]),
    ("mkdir -p -m 700 a/b", [("a/b", True, False)]),
    ("tee -a log", [("log", True, False)]),
    ("dd if=x of=y", [("y", True, False)]),
    ("tar xzf a.tgz", [(".", True, True)]),
    ("tar -xzf a.tgz -C vendor", [("vendor", True, True)]),
    ("tar --extract --file=a.tar --directory out", [("out", True, True)]),
    ("tar xOf a.tar member", []),
    ("tar tzf a.tgz", []),
    ("tar czf out.tgz src", [("out.tgz", True, False)]),
    ("tar -c -f out.tar src", [("out.tar", True, False)]),
    ("tar -cf - src", []),
    ("unzip a.zip", [(".", True, True)]),
    ("unzip -o a.zip -d vendor", [("vendor", True, True)]),
    ("unzip -l a.zip", []),
    ("cpio -idm", [(".", True, True)]),
    ("cpio -pd dest", [("dest", True, True)]),
    ("patch -p1", [(".", True, True)]),
    ("patch calc.py fix.diff", [("calc.py", True, False)]),
    ("patch -d sub -p0", [("sub", True, True)]),
    ("patch -o out.py calc.py", [("out.py", True, False)]),
    ("patch --dry-run -p1", []),
    ("gzip big.log", [("big.log", True, False), ("big.log.*", True, False)]),
    ("gzip -c big.log", []),
    ("rsync -a src/ dst/", [("dst/", True, True)]),
    ("rsync -a src host:dst", [("", True, True)]),
    ("sed -i s/a/b/ f", [("", False, False)]),
    ("sed -ie s/a/b/ f", [("", False, False)]),
    ("sed -n 'w out.txt' f", [("out.txt", False, False)]),
    ("sed 's/a/b/w out.txt' f", [("out.txt", False, False)]),
    ("sed -n 1p f", []),
    ("sed -e 's/w/x/' f", []),
    ("sort -o out in", [("out", False, False)]),
    ("curl -o x http://h", [("x", False, False)]),
    ("wget -O - http://h", []),
    ("find . -fprint list", [("list", False, False)]),
    ("find . -delete", [("", False, False)]),
    ("git checkout -- calc.py", [("calc.py", True, True)]),
    ("git checkout main calc.py", [("main", True, True), ("calc.py", True, True)]),
    ("git checkout -f main", [(".", True, True), ("main", True, True)]),
    ("git switch main", []),
    ("git restore calc.py", [("calc.py", True, True)]),
    ("git restore --staged calc.py", []),
    ("git reset --hard", [(".", True, True)]),
    ("git reset HEAD~1", []),
    ("git clean -fdx", [(".", True, True)]),
    ("git clean -n", []),
    ("git stash list", []),
    ("git stash", [(".", True, True)]),
    ("git apply fix.diff", [(".", True, True)]),
    ("git apply --check fix.diff", []),
    ("git rm -r old", [("old", True, True)]),
    ("git config user.name me", [(".git/config", True, False)]),
    ("git config --global alias.st status", [("~/.gitconfig", True, False)]),
    ("git config user.name", []),
    ("git config --get user.name", []),
    ("git log --output=calc.py", [("calc.py", False, False)]),
    ("git diff --output out.diff", [("out.diff", False, False)]),
    ("git -C sub checkout -- a.py", [("sub/a.py", True, True)]),
    ("git --work-tree=/tmp/x checkout -- a.py", [("", True, True)]),
    ("git status", []),
    ("git format-patch -o out HEAD~2", [("out", True, True)]),
    ("git format-patch --stdout HEAD~2", []),
    ("echo x", []),
    ("echo x > f", [("f", False, False)]),
    ("sudo tee /etc/x", [("/etc/x", True, False)]),
    ("black --check .", []), ("black src", [("src", False, True)]), ("ruff check .", []),
    ("ruff check --fix src", [("src", False, True)]), ("ruff format", [(".", False, True)]),
    ("ruff format --diff", []), ("npx prettier --write a.js", [("a.js", False, True)]),
    ("prettier --check .", []), ("cargo fmt", [(".", False, True)]), ("cargo fmt --check", []),
    ("go mod tidy", [("go.mod", False, False), ("go.sum", False, False)]), ("go mod download", []),
    ("yq -i .a=1 f.yaml", [("f.yaml", False, True)]), ("uv run cp a b", [("b", True, False)]),
    ("zip -r out.zip src", [("out.zip", True, False)]), ("zip -m out.zip a", [("out.zip", True, False), ("a", True, True)]),
    ("7z x a.7z -ovendor", [("vendor", True, True)]), ("7z l a.7z", []), ("chown -R me build", [("me", True, True),
                                                                                           ("build", True, True)]),
    ("git archive -o out.tar HEAD", [("out.tar", True, False)]),
])
def test_what_a_command_writes(command: str, written: list) -> None:
    assert _written(command) == written


def test_a_destination_folder_on_disk_takes_the_source_names(tmp_path) -> None:
    (tmp_path / "out").mkdir()
    assert _written("cp a out", str(tmp_path)) == [("out/a", True, False)]
    assert _written("cp -T a out", str(tmp_path)) == [("out", True, False)]
    assert _written("cp a new", str(tmp_path)) == [("new", True, False)]


@pytest.mark.parametrize("command, inner", [
    ("find . -name '*.o' -exec rm {} +", ["rm {}"]),
    ("find . -execdir git push \\;", ["git push"]),
    ("git -c alias.p=push p origin", ["git -c alias.p=push push origin"]),
    ("git -c 'alias.x=!rm -rf ~' x", ["rm -rf ~"]),
    ("git -c core.sshCommand='ssh -i k' fetch", ["ssh -i k"]),
    ("git -c core.pager='less -R' log", ["less -R"]),
    ("git -c filter.x.smudge='sh -c y' checkout .", ["sh -c y"]),
    ("git -c core.pager='sh -c x' log", ["sh -c x"]),
    ("git -c credential.helper='!f() { cat; }; f' push", ["f() { cat; }; f"]),
    ("git fetch --upload-pack='touch x' .", ["touch x"]),
    ("git clone -u 'touch x' a b", ["touch x"]),
    ("git push --receive-pack=evil origin", ["evil"]),
    ("git grep -Ovim x", ["vim"]),
    ("git rebase -x 'make test' main", ["make test"]),
    ("git bisect run make test", ["make test"]),
    ("git submodule foreach git pull", ["git pull"]),
    ("tar -xf a.tar --to-command='sh -c x'", ["sh -c x"]),
    ("tar -cf a.tar -I 'zstd -19' src", ["zstd -19"]),
    ("tar --checkpoint-action=exec=touch\\ x -cf a.tar s", ["touch x"]),
    ("rsync -e 'ssh -p 2' a h:b", ["ssh -p 2"]),
    ("sort --compress-program=gzip big", ["gzip"]),
])
def test_what_a_command_runs(command: str, inner: list[str]) -> None:
    effects = _effects(command)
    assert effects.runs or not inner, command
    assert list(effects.inner) == inner


@pytest.mark.parametrize("command", [
    "git -c core.hooksPath=/tmp/h commit -m x", "git -c include.path=/tmp/c status", "git -c help.autocorrect=1 psuh",
    "git -c url.ext::sh.insteadOf=x fetch x", "git --exec-path=/tmp/bin status", "sed 's/.*/date/e' f", "sed -f s.sed f",
    "sed -n '1e date' f", "awk 'BEGIN{system(\"x\")}'", "awk '{print | \"sh\"}' f", "vim -c '!date' f",
    "make --eval='x:;date' x", "git -c alias.p='!$CMD' p", "git filter-branch --tree-filter x",
])
def test_what_runs_cannot_be_told(command: str) -> None:
    assert _effects(command).runs and unsure_reason(command), command


@pytest.mark.parametrize("command", [
    "git -c user.name=x commit -m y", "git -c color.ui=always log", "git --exec-path=/usr/lib/git-core status",
    "git -c core.pager=cat log", "git -c alias.st=status status", "sed -n 's/a/b/p' f", "awk '{print $1}' f",
    "find . -name x -print", "tar tf a.tar", "ls -la", "vim --version",
])
def test_what_runs_nothing_else(command: str) -> None:
    effects = _effects(command)
    assert not effects.inner and not effects.unsure and unsure_reason(command) is None, (command, effects)


ARGS = st.lists(st.sampled_from(["-a", "-r", "-f", "--", "-t", "x", "a b", "-C", "--file", "=", "-", "-xzf", "*",
                                 "$X", "--output=", "-o", "-e", "s/a/b/w f", "e", "-i", "{}", ";", "+", "-exec",
                                 "alias.x=y", "-c", "x:y", ".git", "~"]), max_size=8)
PROGRAMS = st.sampled_from(["cp", "mv", "ln", "install", "rm", "touch", "truncate", "mkdir", "tee", "dd", "tar",
                            "unzip", "cpio", "patch", "sed", "awk", "find", "sort", "curl", "wget", "rsync", "gzip",
                            "vim", "make", "perl", "git", "git checkout", "git config", "git -c", "git restore",
                            "git fetch", "git apply", "git log"])


@given(PROGRAMS, ARGS)
@settings(max_examples=400, deadline=None)
def test_any_arguments_are_read_without_an_error(program: str, args: list[str]) -> None:
    import shlex

    command = " ".join([program, *(shlex.quote(a) for a in args)])
    for c in split_commands(command).commands:
        effects = command_effects(c, "/w")
        assert all(isinstance(w.path, str) for w in effects.writes)
