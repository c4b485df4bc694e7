"""Matching approval rules against bash command lines (the ``bash(...)`` kind).

``command_segments`` gives the simple commands of a line as bash parses it
(``shellsplit``); ``deny_candidates`` every text a deny or ask rule is tried on;
``command_regex`` compiles a command pattern; ``other_names`` finds a hard-linked file's
other names (file identity, for the path kinds). Used by ``permissions``.
"""

from __future__ import annotations

import os
import re

from .shellsplit import ShellSplit, split_commands

__all__ = ["MAX_LINK_SCAN", "command_regex", "command_segments", "deny_candidates", "normalize", "other_names"]

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
    out: set[str] = set()
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
        out.add(" ".join(words))
    out.discard("")
    return out


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
