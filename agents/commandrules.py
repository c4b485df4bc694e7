"""Matching approval rules against bash command lines (the ``bash(...)`` kind).

``command_segments`` gives the simple commands of a line as bash parses it
(``shellsplit``); ``deny_candidates`` every text a deny or ask rule is tried on;
``command_regex`` compiles a command pattern; ``other_names`` finds a hard-linked file's
other names (file identity, for the path kinds). Used by ``permissions``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from .shellsplit import ShellSplit, SimpleCommand, split_commands

__all__ = ["MAX_LINK_SCAN", "allowing_command", "always_for_command", "command_regex", "command_segments", "core_words", "deny_candidates", "file_writes",
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

def command_segments(command: str) -> list[str] | None:
    """The simple commands of a command line as bash parses it (``shellsplit``), each
    with its words joined by one space; redirections stay with their command; heredoc
    bodies, comments and structure words (``if``, ``do``, ``{``) are not commands.
    ``None`` when the line does not parse (an unclosed quote)."""
    split = split_commands(command)
    if not split.parsed:
        return None
    return [c.text for c in split.top_level if c.text]


def deny_candidates(command: str, split: ShellSplit) -> set[str]:
    """Every text a deny or ask rule is tried on: the whole line, every simple command
    bash would run (those in substitutions, ``eval`` and ``sh -c`` strings too, with and
    without redirections), and the pieces between any shell punctuation or quote outside
    heredoc bodies (so text inside quotes is seen too)."""
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
    return found | {u for c in found for u in _unwrapped(c)}


#: Words that run the command after them: a deny rule for ``curl`` must also catch
#: ``env curl``, ``time curl``, ``sudo -u root curl``, ``if true; then curl`` ... Each maps
#: to its options that take a value as the next word, and how many plain words (a
#: duration, a priority, a CPU mask, a lock file) come before the command it runs.
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "env": (frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string", "-P"}), 0),
    "time": (frozenset({"-f", "--format", "-o", "--output"}), 0),
    "command": (frozenset(), 0), "builtin": (frozenset(), 0), "nohup": (frozenset(), 0),
    "exec": (frozenset({"-a"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "xargs": (frozenset({"-I", "-i", "-L", "-l", "-n", "--max-args", "-P", "--max-procs", "-s", "--max-chars",
                         "-d", "--delimiter", "-E", "-e", "--eof", "-a", "--arg-file", "--process-slot-var"}), 0),
    "sudo": (frozenset({"-u", "--user", "-g", "--group", "-h", "--host", "-p", "--prompt", "-C", "--close-from",
                        "-D", "--chdir", "-r", "--role", "-t", "--type", "-T", "--command-timeout", "-U",
                        "--other-user", "-R", "--chroot"}), 0),
    "doas": (frozenset({"-u", "-C"}), 0),
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "stdbuf": (frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "ionice": (frozenset({"-c", "--class", "-n", "--classdata", "-p", "--pid", "-P", "--pgid", "-u", "--uid"}), 0),
    "setsid": (frozenset(), 0),
    "chrt": (frozenset(), 1),
    "taskset": (frozenset(), 1),
    "flock": (frozenset({"-w", "--timeout", "-E", "--conflict-exit-code"}), 1),
    "watch": (frozenset({"-n", "--interval", "-d", "--differences", "-q", "--equexit"}), 0),
    "unbuffer": (frozenset(), 0), "caffeinate": (frozenset({"-t", "-w"}), 0),
    **{w: (frozenset(), 0) for w in ("then", "else", "elif", "do", "if", "while", "until", "!")},
}
#: git's options before its subcommand (``git -C dir push``), and those that take a value.
_GIT_VALUE_OPTIONS = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path",
                                "--config-env", "--super-prefix", "--attr-source"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _skip_options(words: list[str], value_options: frozenset[str], positionals: int) -> None:
    """Drop a wrapper's options (and their values) and its ``positionals`` plain words
    from the front of ``words`` (in place), up to the command it runs."""
    while words:
        word = words[0]
        if word == "--":
            words.pop(0)
            break
        if word.startswith("-") and len(word) > 1:
            words.pop(0)
            if word in value_options and words:
                words.pop(0)
            continue
        if positionals:
            words.pop(0)
            positionals -= 1
            continue
        break


def _git_global_options(words: list[str]) -> bool:
    """``git -C . -c k=v --no-pager push`` -> ``git push`` (in place); whether any went."""
    i = 1
    while i < len(words) and words[i].startswith("-") and words[i] != "--":
        i += 2 if words[i] in _GIT_VALUE_OPTIONS and i + 1 < len(words) else 1
    if i == 1:
        return False
    del words[1:i]
    return True


def _unwrapped(text: str) -> set[str]:
    """``text`` without leading assignments, wrapper commands and their options, with the
    command's path reduced to its name (``/usr/bin/curl x`` -> ``curl x``) and git's
    global options left out (``git -C . push`` -> ``git push``): every stage is kept."""
    return {stage for stage in _stages(text) if stage}


def _stages(text: str) -> list[str]:
    """What ``_unwrapped`` finds, in order (the last is the command that runs)."""
    out: list[str] = []
    words = text.split(" ")
    for _ in range(8):
        changed = False
        while words and (_ASSIGNMENT.match(words[0]) or words[0] in _WRAPPERS):
            wrapper = words.pop(0)
            changed = True
            if wrapper in _WRAPPERS:
                _skip_options(words, *_WRAPPERS[wrapper])
        if words and "/" in words[0]:
            words[0] = words[0].rsplit("/", 1)[1]
            changed = True
        if words and words[0] == "git" and _git_global_options(words):
            changed = True
        if not changed:
            break
        out.append(" ".join(words))
    return out


def core_words(words: list[str]) -> list[str]:
    """The command a wrapper chain runs, with its arguments: ``words`` without leading
    assignments, wrappers and their options, the name's path, and git's global options
    (``sudo -u root /usr/bin/git -C . push`` -> ``git push``)."""
    stages = _stages(" ".join(words)) if words else []
    return stages[-1].split(" ") if stages else list(words)


#: Where output goes that is not a file.
_NOT_FILES = re.compile(r"/dev/(?:null|stdout|stderr|tty|fd/[0-9]+)")
_FIND_WRITES = frozenset({"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"})
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})


def file_writes(command: SimpleCommand) -> list[tuple[str, bool]]:
    """The files ``command`` writes by its redirections and by the programs that write the
    files named in their arguments, as ``(path, literal)``: ``path`` as written (``""``
    when it cannot be told which file, e.g. ``sed -i``'s files among its script),
    ``literal`` when it has no expansion or glob. ``>/dev/null`` and ``2>&1`` write no file.

    Programs looked at (after wrappers, ``core_words``): ``tee FILE...``, ``sed -i``,
    ``perl -i``, ``awk`` printing into a file, ``find -delete/-exec/-fprint``, ``dd of=FILE``, ``sort -o FILE``, ``curl -o FILE``/``-O``,
    ``wget`` (it writes a file unless ``-O -``). Programs whose purpose is to change files
    (``cp``, ``mv``, ``rm``, ``touch``...) are not listed: a rule naming them says so.
    """
    out = []
    for _fd, op, target, literal in command.redirections:
        if op not in _WRITE_OPS or _NOT_FILES.fullmatch(target):
            continue
        if op == ">&" and (target == "-" or target.isdigit()):
            continue  # a descriptor is duplicated or closed
        out.append((target, literal))
    words = core_words(command.argv)
    name, args = (words[0], words[1:]) if words else ("", [])
    literal_args = not any(c in " ".join(args) for c in "$`*?[")
    if name == "tee":
        out += [(a, literal_args) for a in args if not a.startswith("-")]
    elif name in ("sed", "perl", "ruby") and any(_in_place(name, a) for a in args):
        out.append(("", False))
    elif name == "dd":
        out += [(a[3:], literal_args) for a in args if a.startswith("of=")]
    elif name == "sort":
        out += [(a[2:] or nxt, literal_args) for a, nxt in zip(args, [*args[1:], ""], strict=True) if a.startswith("-o")]
        out += [(a.split("=", 1)[1], literal_args) for a in args if a.startswith("--output=")]
    elif name == "curl":
        for a, nxt in zip(args, [*args[1:], ""], strict=True):
            cluster = re.fullmatch(r"-([a-zA-Z]*?)([oO])(.*)", a)
            if a == "--output":
                out.append((nxt, literal_args))
            elif a.startswith("--output=") or a.startswith("--remote-name") or a == "--output-dir":
                out.append((a.split("=", 1)[1], literal_args) if a.startswith("--output=") else ("", False))
            elif cluster and cluster.group(2) == "o":
                out.append((cluster.group(3) or nxt, literal_args))
            elif cluster:
                out.append(("", False))
    elif name in ("awk", "gawk", "mawk", "nawk") and any(">" in a or "system" in a for a in args):
        out.append(("", False))  # `print > "f"` or system() inside its program
    elif name == "find" and any(a in _FIND_WRITES for a in args):
        out.append(("", False))
    elif name == "wget":
        documents = [nxt for a, nxt in zip(args, [*args[1:], ""], strict=True) if a in ("-O", "--output-document")]
        documents += [a[2:] for a in args if a.startswith("-O") and len(a) > 2]
        documents += [a.split("=", 1)[1] for a in args if a.startswith("--output-document=")]
        out += [(d, literal_args) if d else ("", False) for d in documents if d != "-"] if documents else [("", False)]
    return out


def _in_place(name: str, arg: str) -> bool:
    """Whether ``arg`` asks ``sed``/``perl``/``ruby`` to edit files in place."""
    if arg.startswith("--"):
        return name == "sed" and arg.startswith("--in-place")
    return bool(re.fullmatch(r"-[A-Za-z]*i.*", arg)) if arg.startswith("-") else False


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
})
#: Programs run by subcommand: "always" saves ``git status *`` for the subcommands named
#: here (reading, building, testing); any other (``git push``, ``npm publish``) exactly.
_SAFE_SUBCOMMANDS: dict[str, frozenset[str]] = {
    "git": frozenset({"status", "log", "diff", "show", "blame", "grep", "ls-files", "ls-tree", "rev-parse",
                      "describe", "shortlog", "fetch", "add", "commit", "cat-file", "rev-list", "show-ref",
                      "version", "help", "check-ignore", "for-each-ref", "name-rev", "merge-base", "range-diff",
                      "whatchanged", "count-objects", "var"}),
    **dict.fromkeys(("npm", "pnpm", "yarn", "bun"), frozenset({
        "test", "t", "run", "run-script", "ci", "install", "i", "add", "ls", "list", "outdated", "view", "info",
        "audit", "why", "explain", "pack", "start", "build", "lint", "fund", "doctor"})),
    "cargo": frozenset({"build", "b", "check", "c", "test", "t", "run", "r", "bench", "clippy", "fmt", "doc",
                        "tree", "metadata", "update", "fetch", "search", "add", "nextest", "expand"}),
    "go": frozenset({"build", "test", "vet", "run", "fmt", "mod", "list", "version", "env", "doc", "generate", "get",
                     "tool"}),
    **dict.fromkeys(("docker", "podman"), frozenset({"ps", "images", "build", "logs", "inspect", "version", "info",
                                                      "pull", "stats", "top", "diff", "history", "search"})),
    "kubectl": frozenset({"get", "describe", "logs", "explain", "version", "top", "api-resources", "api-versions",
                          "diff"}),
    **dict.fromkeys(("pip", "pip3", "uv", "poetry", "conda", "pipenv", "pdm", "hatch"), frozenset({
        "install", "list", "show", "freeze", "check", "lock", "sync", "run", "tree", "build", "search", "add",
        "info", "download", "wheel", "venv", "env", "test", "shell", "compile", "inspect", "debug"})),
    **dict.fromkeys(("dotnet", "mvn", "gradle", "./gradlew", "./mvnw", "bazel", "nix", "brew", "apt", "apt-get",
                     "apt-cache", "dnf", "yum", "gem", "bundle", "composer", "mix", "stack", "cabal", "deno",
                     "swift", "rustup", "cmake"), frozenset({
        "build", "test", "run", "restore", "check", "list", "info", "search", "show", "compile", "package", "verify",
        "clean", "install", "exec", "doc", "fmt", "lint", "policy", "version", "--build", "outdated"})),
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
            if file_writes(part):
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
    if wrapped or file_writes(part) or name in _EXACT_PROGRAMS or name.startswith("mkfs"):
        return None if any("$" in w or "`" in w for w in words) else exact
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


def allowing_command(rules: list[Any], edits: list[Any], command: SimpleCommand, workdir: str | None,
                     path_matches: Callable[[Any, str, str | None], bool]) -> list[Any] | None:
    """The ``bash`` allow rules (``permissions.Rule``) that let one simple command through,
    with the ``edit`` allow rules ``edits`` it needs, or ``None``. A command that writes
    files (``echo x > f``, ``tee f``, ``sed -i``: ``file_writes``) is a write: a rule with
    a wildcard (``bash(echo *)``) lets it through only when ``edit``/``write`` allow rules
    cover every file it writes; a rule naming the very command (``bash(echo x > f)``)
    does. A command of redirections alone (``{ ...; } >f``) needs only the edit rules.
    ``workdir``: where relative names are (``None``: unknown); ``path_matches(rule,
    absolute, relative)`` matches an edit rule."""
    writes = file_writes(command)
    plain = "'" not in command.text and '"' not in command.text  # then its text is as clear as its quoted form
    for rule in rules:
        if rule.regex is None or not _exact(rule):
            continue
        if rule.regex.fullmatch(command.quoted) or (plain and rule.regex.fullmatch(command.text)):
            return [rule]
    if command.argv:
        matching = [r for r in rules if r.regex is not None and not _exact(r) and r.regex.fullmatch(command.text)]
        if not matching:
            return None
    else:
        matching = []
    if not writes:
        return matching[:1]
    covering = _covering_edits(edits, writes, workdir, path_matches)
    return None if covering is None else matching[:1] + covering


def _covering_edits(edits: list[Any], writes: list[tuple[str, bool]], workdir: str | None,
                    path_matches: Callable[[Any, str, str | None], bool]) -> list[Any] | None:
    """The ``edit`` allow rules that cover every file in ``writes``, or ``None``."""
    used: list[Any] = []
    for target, literal in writes:
        if not target or not literal or "\0" in target:
            return None
        target = os.path.expanduser(target) if target == "~" or target.startswith("~/") else target
        if workdir is None and not target.startswith("/"):
            return None
        root = os.path.realpath(workdir or "/")
        abs_path = os.path.realpath(os.path.join(root, target))
        inside = abs_path == root or abs_path.startswith(root.rstrip("/") + "/")
        rel = os.path.relpath(abs_path, root) if workdir is not None and inside else None
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
