"""Matching approval rules against bash command lines (the ``bash(...)`` kind).

``command_segments`` gives the simple commands of a line as bash parses it
(``shellsplit``); ``deny_candidates`` every text a deny or ask rule is tried on;
``command_regex`` compiles a command pattern; ``allowing_command`` decides which allow
rules let a command through; ``always_for_command`` what "always" saves; ``other_names``
finds a hard-linked file's other names (file identity, for the path kinds). Used by
``permissions``.

What a command writes and runs is read by ``commandeffects`` (with ``gitrules`` and
``sedrules``): ``cp``, ``mv``, ``rm``, ``touch``, ``tar -x``, ``unzip``, ``patch``, ``git
checkout -- f``, ``git apply``... write files; ``find -exec``, ``git -c alias.p=push p``,
``git -c core.sshCommand=...``, ``sed 's/x/y/e'`` run programs their arguments name. A
rule with a wildcard never covers the latter (only the very command or a bare ``bash``
does), and deny rules see the commands they run. Formatters that fix (``ruff check
--fix``, ``prettier --write``: ``toolrules``) write the files they are given; what a runner
runs (``uv run cp a b``) is read too; variables that change what runs (``PATH=``,
``LD_PRELOAD=``, ``GIT_CONFIG_*=``: ``RISKY_ENV``) make a command one that runs others.

Hand-written rules. A rule for a program that writes (``bash(cp *)``, ``bash(git
checkout *)``, ``bash(tar *)``: "always" never saves one) is the person's choice: it
covers that program's writes inside the workspace, but not outside it, not into
``.git``, ``.musec`` or ``.agents`` (``PROTECTED``: what runs code later), and not where
the target cannot be told (``tar -xf a.tar`` into the workspace's top, ``patch -p1 <d``,
``cp a $D``): those are asked unless ``edit`` rules cover them. Writes by redirection or
as a side job (``echo x > f``, ``sed -i``) always need ``edit`` rules. A rule for an
interpreter (``bash(python *)``, ``bash(make *)``) allows what the program does, since
running code is what it is for: the sandbox, not the rule, keeps its writes inside the
workspace and the private /tmp (it can still write ``.git`` from there: not covered).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from .commandeffects import Effects, Write, effects, program_key
from .shellsplit import ShellSplit, SimpleCommand, split_commands
from .wrappers import EXACT_RUNNERS, core_words, runner_prefix, unwrapped

__all__ = ["MAX_LINK_SCAN", "allowing_command", "allowing_line", "always_for_command", "command_regex", "command_segments", "changes_directory", "core_words", "may_link", "deny_candidates", "pattern_problem", "unsure_reason", "PROTECTED",
           "normalize", "other_names"]

_REDIRECTION = re.compile(r"^(?:[0-9]+|\{\w+\})?(?:&>>|<<<|<<-|<<|<>|<&|>>|>&|>\||&>|<|>)")


def command_regex(pattern: str) -> re.Pattern[str]:
    pat = " ".join(pattern.split())
    tail = pat.endswith(" *") and not pat.endswith("\\ *")
    if tail:
        pat = pat[:-2]
    out, i = [], 0
    while i < len(pat):
        c = pat[i]
        if c == "\\" and i + 1 < len(pat):
            out.append(re.escape(pat[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "*" else "." if c == "?" else re.escape(c))
        i += 1
    return re.compile("".join(out) + ("(?: .*)?" if tail else ""), re.DOTALL)


def normalize(text: str) -> str:
    return " ".join(text.split())

def pattern_problem(pattern: str) -> str | None:
    """What is wrong with a ``bash`` rule's pattern, as the end of a sentence that starts
    with the rule, or ``None``: it must be one simple command (each command of a line is
    matched on its own, so ``npm test && rm *`` would never match) and parse (quotes
    closed)."""
    split = split_commands(pattern)
    if not split.parsed:
        why = (split.unsure or "").split("(", 1)[-1].rstrip(")")
        return f"does not parse as a command ({why}); close its quotes or escape them with \\, like bash(echo \\'x *)"
    commands = [c for c in split.top_level if c.text]
    if len(commands) > 1:
        names = ", ".join(f"bash({c.text})" for c in commands[:3])
        return (f"names {len(commands)} commands but a bash rule matches one command at a time; "
                f"write one rule for each: {names}")
    return None


def command_segments(command: str) -> list[str] | None:
    """The simple commands of a command line as bash parses it (``shellsplit``), each
    with its words joined by one space; redirections stay with their command; heredoc
    bodies, comments and structure words (``if``, ``do``, ``{``) are not commands.
    ``None`` when the line does not parse (an unclosed quote)."""
    split = split_commands(command)
    if not split.parsed:
        return None
    return [c.text for c in split.top_level if c.text]


def deny_candidates(command: str, split: ShellSplit, depth: int = 0) -> set[str]:
    """Every text a deny or ask rule is tried on: the whole line, every simple command
    bash would run (those in substitutions, ``eval`` and ``sh -c`` strings too, with and
    without redirections), the pieces between any shell punctuation or quote outside
    heredoc bodies (so text inside quotes is seen too), and the commands that commands
    run (``find -exec``'s, a git alias's expansion: ``Effects.inner``), each also without
    its wrappers and runners (``uv run``, ``npx``)."""
    found = {normalize(command)}
    for c in split.commands:
        found.add(c.text)
        found.add(normalize(" ".join(w for w in c.words if not _REDIRECTION.match(w))))
    visible, last = [], 0
    for start, end in split.heredoc_bodies:
        visible.append(command[last:start])
        last = end
    visible.append(command[last:])
    text = "\n".join(visible)
    found.update(normalize(piece) for piece in re.split(r"[;&|()\n`\"'$<>{}]", text))
    found.discard("")
    found |= {u for c in found for u in unwrapped(c)}
    if depth < 4:
        for c in split.commands:
            for inner in command_effects(c).inner:
                found |= deny_candidates(inner, split_commands(inner), depth + 1)
    return found


def unsure_reason(command: str, split: ShellSplit | None = None, depth: int = 0) -> str | None:
    """Why the commands ``command`` runs cannot all be told before it runs: the line's
    (``ShellSplit.unsure``) or a command's (``git -c core.hooksPath=d``, ``sed -f f``:
    ``Effects.unsure``), in the commands they run too; ``None`` when all can be."""
    split = split if split is not None else split_commands(command)
    if split.unsure or depth >= 4:
        return split.unsure or "commands run commands too deeply"
    for c in split.commands:
        eff = command_effects(c)
        if eff.unsure:
            return eff.unsure
        for inner in eff.inner:
            why = unsure_reason(inner, None, depth + 1)
            if why:
                return why
    return None


#: Variables that change which program a named command runs, or make one that runs none
#: run one (``PATH=./bin git status``, ``LD_PRELOAD``, ``GIT_CONFIG_COUNT``, ``PAGER``,
#: ``HOME`` for git's global config, ``BASH_ENV``): set on a command line, what runs
#: cannot be told.
RISKY_ENV = re.compile(r"^(?:PATH|LD_PRELOAD|LD_LIBRARY_PATH|LD_AUDIT|DYLD_[A-Z_]+|BASH_ENV|ENV|HOME|XDG_CONFIG_HOME"
                       r"|PAGER|MANPAGER|EDITOR|VISUAL|LESSOPEN|LESSCLOSE|SSH_ASKPASS|PROMPT_COMMAND|SHELLOPTS"
                       r"|BASHOPTS|GLOBIGNORE|CDPATH|GIT_(?:CONFIG[A-Z0-9_]*|SSH|SSH_COMMAND|PAGER|EDITOR"
                       r"|SEQUENCE_EDITOR|EXTERNAL_DIFF|ASKPASS|PROXY_COMMAND|EXEC_PATH|DIR|WORK_TREE|TEMPLATE_DIR))\+?=")
_DECLARES = frozenset({"export", "declare", "typeset", "readonly", "local"})


#: Programs that can make links or replace folders (``ln -s``, ``cp -a``, ``tar -x``, a git
#: checkout of a tracked link): after one, a path in another command of the line may
#: lead elsewhere than it does now.
_LINKERS = frozenset({"ln", "cp", "mv", "tar", "unzip", "cpio", "rsync", "7z", "git", "patch"})


def may_link(command: SimpleCommand) -> bool:
    """Whether ``command`` may create a link or replace a folder (``_LINKERS`` writing)."""
    core = core_words(command.argv)
    if core and runner_prefix(core):
        core = core[runner_prefix(core):]
    if core and core[0] == "cp" and not any(re.fullmatch(r"-[A-Za-z]*[saRrPdl][A-Za-z]*", w) or w in (
            "--archive", "--recursive", "--symbolic-link", "--no-dereference", "--link") for w in core[1:]):
        return False  # a plain copy makes files, not links
    return bool(core) and core[0] in _LINKERS and bool(command_effects(command).writes)


def changes_directory(command: SimpleCommand) -> bool:
    """Whether ``command`` runs somewhere else than where it starts, so the files later
    commands (or it) write by a relative name are not known: ``cd``, ``pushd``, ``popd``,
    or a wrapper's ``-C``/``--chdir`` (``env -C /etc tee passwd``, ``sudo -D dir``)."""
    core = core_words(command.argv)
    if core and core[0] in ("cd", "pushd", "popd"):
        return True
    wrappers = command.argv[: len(command.argv) - len(core)]
    return any(w in ("-C", "-D", "--chdir") or w.startswith("--chdir=") or re.fullmatch(r"-[A-Za-z]*C.*", w)
               for w in wrappers if w.startswith("-"))


def command_effects(command: SimpleCommand, workdir: str | None = None) -> Effects:
    """``commandeffects.effects`` of ``command`` with its wrappers left out (git's global
    options kept: they are git's business); under ``xargs``, a program that writes its
    operands writes files that cannot be told."""
    core = core_words(command.argv, keep_git=True)
    found = effects(command, core, workdir)
    runner = runner_prefix(core)
    if runner and runner < len(core):  # `uv run cp a b`, `npx prettier --write .`: what the runner runs
        ran = effects(SimpleCommand([]), core_words(core[runner:], keep_git=True), workdir)
        found = Effects((*found.writes, *ran.writes), found.runs or ran.runs, (*found.inner, *ran.inner),
                        found.unsure or ran.unsure)
    risky = [w for w in command.argv[: len(command.argv) - len(core)] if RISKY_ENV.match(w)]
    if risky or (core and core[0] in _DECLARES and any(RISKY_ENV.match(w) for w in core[1:])):
        why = f"`{(risky or core)[0].split('=', 1)[0]}=` changes what the command runs"
        found = Effects(found.writes, found.runs or why, found.inner, found.unsure or why)
    if core and "xargs" in command.argv[: len(command.argv) - len(core)]:
        # xargs adds operands read from its input: what they name cannot be told.
        probe = effects(SimpleCommand([]), [*core, "a", "b"], workdir)
        if probe.writes or probe.runs:
            found = Effects((*found.writes, Write("", False)), found.runs, found.inner, found.unsure)
    return found


#: Programs that destroy, overwrite, publish, reach other machines or run other commands:
#: "always" saves the very command (``bash(rm -rf build)``), never ``bash(rm *)``.
_EXACT_PROGRAMS = frozenset({
    "rm", "rmdir", "unlink", "shred", "srm", "wipe", "mv", "cp", "dd", "install", "ln", "truncate", "fallocate",
    "mke2fs", "mkswap", "fdisk", "sfdisk", "parted", "wipefs", "losetup", "mount", "umount", "chmod", "chown",
    "chgrp", "chattr", "setfacl", "kill", "pkill", "killall", "reboot", "shutdown", "halt", "poweroff", "systemctl",
    "service", "crontab", "at", "su", "pkexec", "find", "rsync", "scp", "sftp", "ssh", "curl", "wget", "nc", "ncat",
    "socat", "ftp", "telnet", "eval", "source", ".", "sh", "bash", "dash", "zsh", "ksh", "fish", "ash", "csh", "tcsh",
    "twine", "tee", "patch", "gh", "glab", "hub", "aws", "gcloud", "az", "heroku", "vercel", "netlify", "flyctl",
    "terraform", "tofu", "pulumi", "ansible", "ansible-playbook", "helm", "iptables", "nft", "ufw", "useradd",
    "userdel", "usermod", "passwd", "git-lfs", "docker-compose", "exec", "trap", "alias", "export", "unset",
    "touch", "mkdir", "mkfifo", "tar", "unzip", "cpio", "zip", "7z", "ar", "sponge", "split", "csplit", "gzip",
    "gunzip", "bzip2", "bunzip2", "xz", "unxz", "zstd", "unzstd", "vi", "vim", "nvim", "ex", "ed", "emacs", "nano",
    "shopt", "set", "declare", "typeset", "readonly", "local", "builtin", "command", "enable", "hash", "ulimit",
    "umask", "chroot", "unshare", "nsenter", "runuser", "script", "expect", "parallel", "tmux", "screen",
    "strace", "ltrace", "gdb", "valgrind", "git-shell", "bwrap",
    "firejail", "systemd-run", "osascript", "open", "xdg-open", "launchctl", "sudoedit", "visudo",
})
#: Programs run by subcommand: "always" saves ``git status *`` for the subcommands named
#: here (reading, building, testing); any other (``git push``, ``npm publish``) exactly,
#: installs too (``npm install x``, ``pip install x``: new code that runs its own scripts).
_SAFE_SUBCOMMANDS: dict[str, frozenset[str]] = {
    "git": frozenset({"status", "log", "diff", "show", "blame", "grep", "ls-files", "ls-tree", "rev-parse",
                      "describe", "shortlog", "fetch", "add", "commit", "cat-file", "rev-list", "show-ref",
                      "version", "help", "check-ignore", "for-each-ref", "name-rev", "merge-base", "range-diff",
                      "whatchanged", "count-objects", "var"}),
    **dict.fromkeys(("npm", "pnpm", "yarn", "bun"), frozenset({
        "test", "t", "run", "run-script", "ls", "list", "outdated", "view", "info",
        "audit", "why", "explain", "pack", "start", "build", "lint", "fund", "doctor"})),
    "cargo": frozenset({"build", "b", "check", "c", "test", "t", "run", "r", "bench", "clippy", "fmt", "doc",
                        "tree", "metadata", "fetch", "search", "nextest", "expand"}),
    "go": frozenset({"build", "test", "vet", "run", "fmt", "list", "version", "env", "doc", "generate", "tool"}),
    **dict.fromkeys(("docker", "podman"), frozenset({"ps", "images", "build", "logs", "inspect", "version", "info",
                                                      "pull", "stats", "top", "diff", "history", "search"})),
    "kubectl": frozenset({"get", "describe", "logs", "explain", "version", "top", "api-resources", "api-versions",
                          "diff"}),
    **dict.fromkeys(("pip", "pip3", "uv", "poetry", "conda", "pipenv", "pdm", "hatch"), frozenset({
        "list", "show", "freeze", "check", "lock", "run", "tree", "build", "search", "info", "venv", "env", "test",
        "shell", "compile", "inspect", "debug"})),
    **dict.fromkeys(("dotnet", "mvn", "gradle", "./gradlew", "./mvnw", "bazel", "nix", "brew", "apt", "apt-get",
                     "apt-cache", "dnf", "yum", "gem", "bundle", "composer", "mix", "stack", "cabal", "deno",
                     "swift", "rustup", "cmake"), frozenset({
        "build", "test", "run", "restore", "check", "list", "info", "search", "show", "compile", "package", "verify",
        "clean", "doc", "fmt", "lint", "policy", "version", "--build", "outdated"})),
}
_INTERPRETER = re.compile(r"(?:python|pypy|ruby|perl|php|lua|node|Rscript|julia|tclsh|ipython)[0-9.]*")


def always_for_command(command: str) -> list[str]:
    """The ``bash`` allow rules "always" saves for a command line, one per simple command:
    ``bash(pytest *)`` for most programs, ``bash(git status *)`` for a safe subcommand,
    ``bash(python3 -m pytest *)`` / ``bash(python3 tool.py *)`` for an interpreter, and the
    very command (``bash(rm -rf build)``) for one that destroys, publishes, writes files
    by redirection, runs another command or has an unusual shape (``_always_pattern``).
    ``[]`` when a destructive command's target is computed when it runs (``rm -rf $D``):
    no rule can name its target, so "always" allows this call only."""
    split = split_commands(command)
    if split.substitution or split.unsure or not split.parsed:
        return [f"bash({_escape(normalize(command))})"] if command.strip() else []
    out: list[str] = []
    for part in split.top_level:
        if not part.argv:
            if command_effects(part).writes:
                out.append(f"bash({_escape(part.quoted)})")
            continue
        pattern = _always_pattern(part)
        if pattern is None:
            return []
        out.append(f"bash({pattern})")
    return list(dict.fromkeys(out))


def _always_pattern(part: SimpleCommand) -> str | None:
    """One simple command's "always" pattern (see ``always_for_command``)."""
    words = part.argv
    exact = _escape(part.quoted)
    name, args = words[0], words[1:]
    wrapped = core_words(words) != words or _ASSIGNMENT_WORD.match(name) is not None
    eff = command_effects(part)
    if wrapped or eff.writes or eff.runs or name in _EXACT_PROGRAMS or name.startswith("mkfs"):
        return None if any("$" in w or "`" in w for w in words) else exact
    runner = runner_prefix(words)
    if runner:  # `uv run pytest -x` -> `uv run pytest *`: the program it runs is named
        program = words[runner] if runner < len(words) else ""
        if name in EXACT_RUNNERS or not program or program.startswith("-") or "$" in program:
            return exact
        return " ".join(_escape(w) for w in words[: runner + 1]) + " *"
    if name in _SAFE_SUBCOMMANDS:
        sub = args[0] if args else ""
        return f"{_escape(name)} {_escape(sub)} *" if sub in _SAFE_SUBCOMMANDS[name] else exact
    if _INTERPRETER.fullmatch(name):
        if len(args) >= 2 and args[0] == "-m" and not args[1].startswith("-"):
            return f"{_escape(name)} -m {_escape(args[1])} *"
        if not args or args[0].startswith("-") or "$" in args[0]:
            return exact  # -c/-e code, a REPL or stdin: the very command
        return f"{_escape(name)} {_escape(args[0])} *"
    return f"{_escape(name)} *"


_ASSIGNMENT_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _exact(rule: Any) -> bool:
    """A command rule without a wildcard: it names one command, its files included."""
    return rule.pattern is not None and re.search(r"(?<!\\)[*?]", rule.pattern) is None


#: Names at the top of a workspace whose content runs code or decides what runs (git's
#: hooks and config, musec's project config, skills): a rule for a program that writes
#: does not cover writing into them; only ``edit`` rules naming them (or the very
#: command) do.
PROTECTED = (".git", ".musec", ".agents")


def allowing_line(rules: list[Any], edits: list[Any], commands: list[SimpleCommand], workdir: str | None,
                  path_matches: Callable[[Any, str, str | None], bool]) -> list[Any]:
    """The allow rules that together let every one of ``commands`` (a line's) through, or
    ``[]`` (``allowing_command`` for each). After a ``cd`` the files written by a relative
    name are not known; after a command that may make a link (``ln -s .git/hooks h``,
    ``may_link``) neither are the other commands' (``h/pre-commit``): both are asked,
    whatever order they run in."""
    moves = any(changes_directory(c) for c in commands)
    linkers = [c for c in commands if may_link(c)]
    used: list[Any] = []
    for command in commands:
        alone = not moves and all(c is command for c in linkers)
        found = allowing_command(rules, edits, command, workdir if alone else None, path_matches)
        if found is None:
            return []
        used += [r for r in found if r not in used]
    return used


def allowing_command(rules: list[Any], edits: list[Any], command: SimpleCommand, workdir: str | None,
                     path_matches: Callable[[Any, str, str | None], bool]) -> list[Any] | None:
    """The ``bash`` allow rules (``permissions.Rule``) that let one simple command through,
    with the ``edit`` allow rules ``edits`` it needs, or ``None``.

    - A rule naming the very command (no wildcard: ``bash(echo x >f)``, ``bash(rm -rf
      build)``) lets it through, its files included.
    - A rule with a wildcard never covers a program that its options, script or config
      name (``find -exec``, ``git -c alias...``, ``sed 's/x/y/e'``: ``Effects.runs``).
    - Files written by a redirection or by a side job of a program that mostly reads
      (``echo x > f``, ``sed -i``, ``curl -o``, ``git log --output``) need ``edit``/``write``
      allow rules for every one of them, whatever ``bash`` rule matched.
    - Files a program is for writing (``cp``'s destination, ``rm``'s operands, ``tar
      -x``'s folder) are covered by a rule that names that program (``bash(cp *)``,
      ``bash(git checkout *)``, hand-written: "always" never saves one) when they lie in
      the workspace, outside ``PROTECTED`` and (a folder) not holding one of them; other
      ones need ``edit`` rules too. One that cannot be told (``patch`` without a file,
      ``$DEST``) is asked about.

    A command of redirections alone (``{ ...; } >f``) needs only the edit rules.
    ``workdir``: where relative names are (``None``: unknown); ``path_matches(rule,
    absolute, relative)`` matches an edit rule."""
    eff = command_effects(command, workdir)
    plain = "'" not in command.text and '"' not in command.text  # then its text is as clear as its quoted form
    for rule in rules:
        if rule.regex is None or not _exact(rule):
            continue
        if rule.regex.fullmatch(command.quoted) or (plain and rule.regex.fullmatch(command.text)):
            return [rule]
    matching = []
    if command.argv:
        matching = [r for r in rules if r.regex is not None and not _exact(r) and r.regex.fullmatch(command.text)]
        if not matching or eff.runs:
            return None
    if not eff.writes:
        return matching[:1]
    key = program_key(core_words(command.argv)) if command.argv else []
    naming = [r for r in matching if _names_program(r, key)]
    rest = [w for w in eff.writes if not (w.purpose and naming and _in_workspace(w, workdir))]
    used = naming[:1] if len(rest) < len(eff.writes) else matching[:1]
    covering = _covering_edits(edits, rest, workdir, path_matches)
    return None if covering is None else used + [r for r in covering if r not in used]


def _names_program(rule: Any, key: list[str]) -> bool:
    """Whether ``rule``'s pattern begins with the program ``key`` names (``bash(cp *)``,
    ``bash(git *)`` and ``bash(git checkout *)`` for ``git checkout``)."""
    words = (rule.pattern or "").split()
    literal = []
    for w in words:
        if re.search(r"(?<!\\)[*?]", w):
            break
        literal.append(w.replace("\\", ""))
    n = min(len(literal), len(key))
    return n > 0 and literal[:n] == key[:n]


def _in_workspace(write: Write, workdir: str | None) -> bool:
    """Whether a program's ``write`` lies in the workspace ``workdir``, outside
    ``PROTECTED`` and, for a folder, not holding one (``.git`` counts not for git's own)."""
    if workdir is None or "\0" in write.path:
        return False
    path = write.path
    if not write.literal:
        path = _glob_base(path)
        if path is None:
            return False
    path = os.path.expanduser(path) if path == "~" or path.startswith("~/") else path
    root = os.path.realpath(workdir)
    abs_path = os.path.realpath(os.path.join(root, path))
    if not _within(abs_path, root):
        return False
    guarded = [os.path.join(root, n) for n in PROTECTED]
    if any(_within(abs_path.casefold(), os.path.realpath(g).casefold()) for g in guarded):
        return False  # casefolded: `.GIT` is `.git` where names ignore case (macOS)
    # A folder written whole must not hold one that exists (git's own work never writes
    # ``.git``'s files); a glob's matches cannot be dot files (``_glob_base``).
    held = [g for g in guarded if not (write.git and g.endswith("/.git")) and os.path.lexists(g)]
    return not (write.tree and write.literal and any(_within(g, abs_path) for g in held))


def _glob_base(path: str) -> str | None:
    """The folder a glob's matches lie in (``build/*.o`` -> ``build``), or ``None`` when
    it cannot be told: an expansion, a brace, ``..``, or a part that names dot files."""
    if any(c in path for c in "$`{") or ".." in path.split("/"):
        return None
    parts = path.split("/")
    first = next(i for i, p in enumerate(parts) if any(c in p for c in "*?["))
    if any(p.startswith(".") for p in parts[first:]):
        return None
    return "/".join(parts[:first]) or "."


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _covering_edits(edits: list[Any], writes: list[Write], workdir: str | None,
                    path_matches: Callable[[Any, str, str | None], bool]) -> list[Any] | None:
    """The ``edit`` allow rules that cover every file in ``writes``, or ``None``. A
    folder (``tree``) is covered by a bare ``edit`` rule or one ending in ``/**`` whose
    folder holds it."""
    used: list[Any] = []
    for write in writes:
        target = write.path
        if not target or not write.literal or "\0" in target:
            return None
        target = os.path.expanduser(target) if target == "~" or target.startswith("~/") else target
        if workdir is None and not target.startswith("/"):
            return None
        root = os.path.realpath(workdir or "/")
        abs_path = os.path.realpath(os.path.join(root, target))
        inside = _within(abs_path, root)
        rel = os.path.relpath(abs_path, root) if workdir is not None and inside else None
        if write.tree:
            rule = next((r for r in edits if r.regex is None or (
                (r.pattern or "").endswith("/**") and path_matches(r, abs_path + "/\0", None if rel is None else
                                                                    os.path.join(rel, "\0"))
                and not any(c in (r.pattern or "")[:-3] for c in "*?[{"))), None)
        else:
            rule = next((r for r in edits if path_matches(r, abs_path, rel)), None)
        if rule is None:
            return None
        if rule not in used:
            used.append(rule)
    return used


def _escape(text: str) -> str:
    return re.sub(r"([*?\\])", r"\\\1", text)


MAX_LINK_SCAN = 200_000
"""How many workspace entries are looked at to find a hard-linked file's other names."""


def other_names(abs_path: str, workspace: str) -> list[tuple[str, str | None]]:
    """The other names in ``workspace`` of a file with hard links (same device and
    inode), as ``(absolute, relative)`` pairs; ``[]`` for a file with one name."""
    try:
        st = os.stat(abs_path)
    except OSError:
        return []
    if st.st_nlink < 2 or not os.path.isfile(abs_path):
        return []
    found, seen = [], 0
    for root, dirs, files in os.walk(workspace):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            seen += 1
            path = os.path.join(root, name)
            if seen > MAX_LINK_SCAN:
                return found + [(workspace + "/\0unknown", None)]  # too many: no allow by name
            try:
                other = os.lstat(path)
            except OSError:
                continue
            if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino) and path != abs_path:
                found.append((path, os.path.relpath(path, workspace)))
    return found
