"""What a git command line writes and runs, for the approval rules (``commandeffects``).

- Global config given on the line (``-c KEY=VALUE``, ``--config-env KEY=VAR``) can run
  programs or rename subcommands (git-config(1)): ``alias.p=push`` makes ``git p`` a
  push, ``alias.x=!cmd`` and ``core.pager``, ``core.sshCommand``, ``core.editor``,
  ``credential.helper``, ``core.fsmonitor``, ``diff.external``, ``gpg.program``... run
  their value as a shell command; ``core.hooksPath``, ``include.path``,
  ``help.autocorrect``, ``filter.*`` run what another file or a guess says. An alias in use
  is expanded and a command value is handed on (``inner``), so deny rules see what
  runs; keys whose effect cannot be told make the line unsure; only a short list of keys
  that run nothing (``user.name``, ``color.ui``, ``core.quotepath``...) is harmless.
  ``--exec-path=DIR`` runs ``git-<subcommand>`` from DIR: unsure unless DIR is a system folder.
- Subcommand options that run programs: ``--upload-pack``, ``--receive-pack``,
  ``--exec`` (fetch, pull, clone, ls-remote, push, archive), ``clone -u``, ``grep -O``,
  ``rebase -x``, ``bisect run``, ``submodule foreach``, ``difftool -x``,
  ``filter-branch``, ``config --edit``.
- Subcommands that write the work tree: ``checkout``/``restore`` their paths (a branch
  switch rewrites only what git can restore, unless forced), ``reset --hard``,
  ``clean``, ``stash``, ``merge``, ``pull``, ``rebase``, ``cherry-pick``, ``revert``,
  ``am``, ``apply`` the whole tree; ``rm``/``mv`` their paths; ``config`` writes
  ``.git/config`` (or ``--global``'s ``~/.gitconfig``, ``--file F``); ``diff``/``log``
  ``--output=F`` and ``format-patch`` their files.

Pure; imports nothing of musec (``found`` is ``commandeffects``' collector).
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["git_effects"]

_VALUE_OPTIONS = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env",
                            "--super-prefix", "--attr-source", "--list-cmds"})
#: Where git's own programs live on systems we know (read-only to commands).
_SYSTEM_DIRS = ("/usr/lib/", "/usr/libexec/", "/usr/local/libexec/", "/opt/homebrew/", "/Library/Developer/",
                "/Applications/Xcode")
_HARMLESS_KEYS = ("user.", "color.", "advice.", "i18n.", "column.", "status.", "log.", "pretty.", "blame.",
                  "grep.", "init.defaultbranch", "safe.directory", "core.quotepath", "core.autocrlf",
                  "core.safecrlf", "core.abbrev", "core.filemode", "core.ignorecase", "core.longpaths",
                  "core.precomposeunicode", "core.eol", "diff.noprefix", "diff.mnemonicprefix", "diff.renames",
                  "diff.algorithm", "diff.context", "diff.colormoved", "diff.indentheuristic", "diff.relative",
                  "merge.conflictstyle", "merge.ff", "pull.rebase", "pull.ff", "commit.gpgsign", "tag.gpgsign",
                  "gc.auto", "maintenance.auto", "fetch.prune", "protocol.version", "push.default",
                  "format.pretty", "branch.sort", "tag.sort", "versionsort.", "rerere.enabled", "pack.threads",
                  "index.threads", "checkout.workers", "feature.manyfiles", "core.untrackedcache",
                  "fetch.parallel", "submodule.recurse")
#: Keys whose value is a shell command (or a program) that git runs.
_COMMAND_KEYS = ("core.pager", "pager.", "core.sshcommand", "core.editor", "sequence.editor", "core.fsmonitor",
                 "core.askpass", "diff.external", "gpg.program", "gpg.", "credential.helper", "credential.",
                 "core.gitproxy", "web.browser", "man.", "uploadpack.packobjectshook", "remote.", "diff.",
                 "merge.", "filter.", "difftool.", "mergetool.", "interactive.difffilter", "sendemail.",
                 "ssh.variant", "browser.")
_RUN_OPTIONS = {
    "fetch": ("--upload-pack",), "pull": ("--upload-pack",), "ls-remote": ("--upload-pack",),
    "clone": ("--upload-pack", "-u"), "push": ("--receive-pack", "--exec"), "archive": ("--exec",),
    "grep": ("-O", "--open-files-in-pager"), "rebase": ("-x", "--exec"), "difftool": ("-x", "--extcmd"),
}
_TREE_WRITERS = frozenset({"merge", "pull", "rebase", "cherry-pick", "revert", "am", "stash", "clean",
                           "filter-branch", "bisect", "sparse-checkout", "read-tree", "checkout-index"})
#: git's own commands (git(1), ``git help -a``) and common extensions; any other name is
#: an alias (or a ``git-NAME`` program) whose meaning git's config decides.
_KNOWN = frozenset("""add am annotate apply archive bisect blame branch bugreport bundle cat-file check-attr
check-ignore check-mailmap check-ref-format checkout checkout-index cherry cherry-pick citool clean clone column
commit commit-graph commit-tree config count-objects credential describe diff diff-files diff-index diff-tree
difftool fast-export fast-import fetch fetch-pack filter-branch fmt-merge-msg for-each-ref for-each-repo
format-patch fsck gc get-tar-commit-id grep gui hash-object help index-pack init instaweb interpret-trailers log
ls-files ls-remote ls-tree mailinfo mailsplit maintenance merge merge-base merge-file merge-index merge-tree
mergetool mktag mktree multi-pack-index mv name-rev notes pack-objects pack-refs patch-id prune prune-packed pull
push range-diff read-tree rebase reflog remote repack replace request-pull rerere reset restore rev-list rev-parse
revert rm send-email send-pack shortlog show show-branch show-index show-ref sparse-checkout stage stash status
stripspace submodule switch symbolic-ref tag unpack-file unpack-objects update-index update-ref update-server-info
var verify-commit verify-pack verify-tag version whatchanged worktree write-tree lfs flow annex crypt filter-repo
absorb branchless machete town""".split())
_READ_ONLY_CONFIG = frozenset({"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l",
                               "--get-color", "--get-colorbool", "get", "list"})


def git_effects(args: list[str], found: Any) -> None:
    """Record in ``found`` what ``git ARGS`` writes and runs (module docstring).

    Args:
        args: the words after ``git``, global options included.
        found: ``commandeffects``' collector (``write(path, purpose=, tree=, git=)``,
            ``run(why, inner, unsure=)``).
    """
    i, config, globals_ = 0, [], []
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        a = args[i]
        value = args[i + 1] if a in _VALUE_OPTIONS and i + 1 < len(args) else None
        if a == "-c" and value is not None:
            config.append(value)
        elif a == "--config-env" and value is not None or a.startswith("--config-env="):
            key = (value or a.split("=", 1)[1]).split("=", 1)[0]
            config.append(key + "=$" + key)  # the value comes from the environment
        elif a.startswith("--exec-path=") and not a[12:].startswith(_SYSTEM_DIRS):
            found.run("git --exec-path runs git's commands from another folder", unsure=True)
        globals_ += [a] if value is None else [a, value]
        i += 2 if value is not None else 1
    sub, rest = (args[i], args[i + 1:]) if i < len(args) else ("", [])
    chdirs = [globals_[k + 1] for k in range(len(globals_) - 1) if globals_[k] == "-C"]
    elsewhere = any(g.startswith(("--work-tree", "--git-dir")) for g in globals_)
    if chdirs or elsewhere:
        found = _Moved(found, os.path.join(*chdirs) if chdirs else "", elsewhere)
    for pair in config:
        _config_pair(pair, sub, rest, globals_, found)
    if sub and sub not in _KNOWN and not any(p.lower().startswith(f"alias.{sub.lower()}=") for p in config):
        why = f"`git {sub}` is no git command: an alias from git's config may run anything"
        if any(p.lower().startswith("alias.") for p in config):  # the line makes aliases: not the person's own
            found.run(why, unsure=True)
        else:
            found.doubt(why)
    _run_options(sub, rest, found)
    _writes(sub, rest, found)


class _Moved:
    """``found`` for a git run in another folder (``-C DIR``): relative paths are DIR's;
    with ``--work-tree``/``--git-dir`` where they land cannot be told."""

    def __init__(self, found: Any, base: str, unknown: bool) -> None:
        self.found, self.base, self.unknown = found, base, unknown

    def write(self, path: str, **how: bool) -> None:
        if self.unknown:
            path = ""
        elif path and not path.startswith(("/", "~")):
            path = os.path.join(self.base, path)
        self.found.write(path, **how)

    def run(self, why: str, inner: str | None = None, *, unsure: bool = False) -> None:
        self.found.run(why, inner, unsure=unsure)

    def doubt(self, why: str) -> None:
        self.found.doubt(why)


def _config_pair(pair: str, sub: str, rest: list[str], globals_: list[str], found: Any) -> None:
    key, _, value = pair.partition("=")
    lower = key.lower()
    if lower.startswith(_HARMLESS_KEYS):
        return
    if lower.startswith("alias."):
        if key.split(".", 1)[1].lower() != sub.lower():
            return  # defined, not used on this line
        tail = " ".join(rest)
        if value.startswith("!"):
            found.run(f"git -c {key} runs a shell command", f"{value[1:]} {tail}".strip())
        else:
            found.run(f"git -c {key} renames a subcommand", " ".join(["git", *globals_, value, tail]).strip())
        return
    if lower.startswith(_COMMAND_KEYS) and value and value.lower() not in ("true", "false", "0", "1", "cat", "less"):
        found.run(f"git -c {key} runs a program", value[1:] if value.startswith("!") else value)
        return
    if lower.startswith(_COMMAND_KEYS) and value:
        return  # a boolean or a plain pager
    found.run(f"git -c {key} may run programs git's config names", unsure=True)


def _run_options(sub: str, rest: list[str], found: Any) -> None:
    for option in _RUN_OPTIONS.get(sub, ()):
        for j, a in enumerate(rest):
            if a == option or (a.startswith(option + "=") and option.startswith("--")) or (
                    not option.startswith("--") and a.startswith(option) and len(a) > len(option)):
                value = a[len(option) + 1:] if a.startswith(option + "=") else a[len(option):] or (
                    rest[j + 1] if j + 1 < len(rest) else "")
                found.run(f"git {sub} {option} runs a program", value)
    if sub == "bisect" and rest[:1] == ["run"]:
        found.run("git bisect run runs a command", " ".join(rest[1:]))
    elif sub == "submodule" and "foreach" in rest:
        found.run("git submodule foreach runs a command", " ".join(rest[rest.index("foreach") + 1:]))
    elif sub in ("filter-branch", "filter-repo"):
        found.run(f"git {sub} runs its filters", unsure=True)
    elif sub == "config" and any(a in ("-e", "--edit", "edit") for a in rest):
        found.run("git config --edit runs an editor", unsure=True)


def _paths(rest: list[str], values: frozenset[str] = frozenset()) -> list[str]:
    out, i = [], 0
    while i < len(rest):
        a = rest[i]
        if a == "--":
            return out + rest[i + 1:]
        if a.startswith("-"):
            i += 2 if a in values else 1
            continue
        out.append(a)
        i += 1
    return out


def _writes(sub: str, rest: list[str], found: Any) -> None:
    for j, a in enumerate(rest):
        if sub == "archive" and a == "-o":
            found.write(rest[j + 1] if j + 1 < len(rest) else "")
        if a == "--output" or a.startswith("--output="):
            found.write(a[9:] if "=" in a else (rest[j + 1] if j + 1 < len(rest) else ""), purpose=sub == "archive")
    if sub in ("checkout", "switch", "restore"):
        _checkout(sub, rest, found)
    elif sub == "reset":
        if any(a in ("--hard", "--merge", "--keep") for a in rest):
            found.write(".", tree=True, git=True)
    elif sub in _TREE_WRITERS:
        if not (sub == "stash" and rest[:1] in (["list"], ["show"])) and "-n" not in rest and "--dry-run" not in rest:
            found.write(".", tree=True, git=True)
    elif sub in ("rm", "mv"):
        for p in _paths(rest, frozenset({"--pathspec-from-file"})):
            found.write(p, tree=True, git=True)
    elif sub == "apply":
        if not any(a in ("--check", "--stat", "--numstat", "--summary", "--cached") for a in rest) or "--apply" in rest:
            under = next((a.split("=", 1)[1] for a in rest if a.startswith("--directory=")), None)
            found.write(under or ".", tree=True, git=under is None)
    elif sub == "format-patch" and "--stdout" not in rest:
        out = next((rest[j + 1] for j, a in enumerate(rest[:-1]) if a in ("-o", "--output-directory")), None)
        out = out or next((a.split("=", 1)[1] for a in rest if a.startswith("--output-directory=")), None)
        found.write(out or ".", tree=True, git=out is None)
    elif sub == "config":
        _config(rest, found)
    elif sub in ("worktree", "init", "clone", "bundle"):
        operands = _paths(rest, frozenset({"-b", "-B", "--template", "--separate-git-dir", "-o", "--origin",
                                           "--depth", "--branch", "--reference", "-c", "--config"}))
        if sub == "worktree":
            found.write(operands[1] if operands[:1] == ["add"] and len(operands) > 1 else "", tree=True)
        elif sub == "init":
            found.write(operands[0] if operands else ".", tree=True, git=not operands)
        elif sub == "clone":
            found.write(operands[1] if len(operands) > 1 else "", tree=True)
        elif operands[:1] == ["create"]:
            found.write(operands[1] if len(operands) > 1 else "")


def _checkout(sub: str, rest: list[str], found: Any) -> None:
    if any(a in ("-f", "--force", "--discard-changes", "-m", "--merge") for a in rest):
        found.write(".", tree=True, git=True)
    values = frozenset({"-b", "-B", "--orphan", "-c", "-C", "-s", "--source", "--conflict", "--pathspec-from-file"})
    if sub == "restore" and "--staged" in rest and not any(a in ("-W", "--worktree") for a in rest):
        return
    if sub == "switch":
        return
    for p in _paths(rest, values):
        found.write(p, tree=True, git=True)  # a path (or a branch: its name is then harmless)


def _config(rest: list[str], found: Any) -> None:
    if any(a in _READ_ONLY_CONFIG for a in rest):
        return
    operands = _paths(rest, frozenset({"-f", "--file", "--blob", "--type", "--default", "--comment"}))
    if len(operands) <= 1 and not any(a in ("--unset", "--unset-all", "--remove-section", "--rename-section",
                                            "--add", "--replace-all", "set", "unset") for a in rest):
        return  # `git config KEY` reads
    target = next((rest[j + 1] for j, a in enumerate(rest[:-1]) if a in ("-f", "--file")), None)
    if "--global" in rest:
        target = "~/.gitconfig"
    elif "--system" in rest:
        target = "/etc/gitconfig"
    found.write(target or ".git/config")
