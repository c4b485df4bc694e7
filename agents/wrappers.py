"""Seeing through the words that run another command: wrappers (``sudo -u root``, ``env``,
``timeout 5``, ``xargs -I {}``), git's global options (``git -C . push``) and runners
(``uv run``, ``npx``, ``bundle exec``).

``core_words`` gives the command a wrapper chain runs; ``unwrapped`` every stage of the
unwrapping (what deny rules are tried on); ``runner_prefix`` how many words of a line are
a runner. Pure; imports nothing of musec. Options are those of the programs' manuals
(GNU coreutils, sudo(8), util-linux, git(1)).
"""

from __future__ import annotations

import re

__all__ = ["EXACT_RUNNERS", "RUNNERS", "core_words", "runner_prefix", "unwrapped"]


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


#: Commands that run the program named after them (and its arguments): deny rules see
#: every later word that could be that program; "always" names the program.
RUNNERS: dict[str, tuple[str, ...]] = {
    "npx": (), "bunx": (), "uvx": (), "pnpx": (), "pipx": ("run",), "uv": ("run", "tool run"),
    "poetry": ("run",), "pipenv": ("run",), "pdm": ("run",), "hatch": ("run",), "conda": ("run",),
    "mamba": ("run",), "bundle": ("exec",), "npm": ("exec", "x"), "pnpm": ("exec", "dlx"), "yarn": ("exec", "dlx"),
    "bun": ("x",), "nix": ("run", "shell", "develop"), "direnv": ("exec",), "rye": ("run",),
    "pixi": ("run", "exec"), "composer": ("exec",),
    # Programs that run the command after their options: tracers, sandboxes, schedulers, multi-call binaries.
    **dict.fromkeys(("strace", "ltrace", "valgrind", "gdb", "perf", "chroot", "unshare", "nsenter", "runuser",
                     "faketime", "proxychains", "proxychains4", "torsocks", "catchsegv", "dbus-launch",
                     "dbus-run-session", "xvfb-run", "mpirun", "mpiexec", "srun", "entr", "parallel", "numactl",
                     "cgexec", "systemd-run", "firejail", "bwrap", "fakeroot", "sg", "pkexec", "busybox", "toybox",
                     "ssh-agent", "script", "expect", "tmux", "screen", "su", "fish", "nohup"), ()),
}
#: Runners whose options or a folder come before the program: "always" saves the very command.
EXACT_RUNNERS = frozenset({"nix", "direnv", "conda", "mamba"})


def runner_prefix(words: list[str]) -> int:
    """How many words of ``words`` are a runner (``uv run`` -> 2, ``npx`` -> 1), or 0."""
    subs = RUNNERS.get(words[0]) if words else None
    if subs is None:
        return 0
    if not subs:
        return 1
    for sub in subs:
        n = len(sub.split(" "))
        if words[1:1 + n] == sub.split(" "):
            return 1 + n
    return 0


def unwrapped(text: str) -> set[str]:
    """``text`` without leading assignments, wrapper commands and their options, with the
    command's path reduced to its name (``/usr/bin/curl x`` -> ``curl x``) and git's
    global options left out (``git -C . push`` -> ``git push``): every stage is kept.
    After a runner (``uv run --with x git push``), every later stretch that starts with a
    plain word is kept too (``x git push``, ``git push``): its options are not known."""
    out = {" ".join(stage) for stage in _stages(text.split(" ")) if stage}
    for stage in [text, *out]:
        words = stage.split(" ")
        skip = runner_prefix(words)
        if skip:
            out |= {" ".join(u) for k in range(skip, len(words)) if not words[k].startswith("-")
                    for u in [words[k:], *_stages(words[k:])]}
    return out


def _stages(words: list[str], *, keep_git: bool = False) -> list[list[str]]:
    """What ``unwrapped`` finds, in order (the last is the command that runs)."""
    out: list[list[str]] = []
    words = list(words)
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
        if words and words[0] == "git" and not keep_git and _git_global_options(words):
            changed = True
        if not changed:
            break
        out.append(list(words))
    return out


def core_words(words: list[str], *, keep_git: bool = False) -> list[str]:
    """The command a wrapper chain runs, with its arguments: ``words`` without leading
    assignments, wrappers and their options, the name's path, and git's global options
    unless ``keep_git`` (``sudo -u root /usr/bin/git -C . push`` -> ``git push``). Each
    word is kept whole (``'a b'`` stays one word)."""
    stages = _stages(words, keep_git=keep_git) if words else []
    return stages[-1] if stages else list(words)
