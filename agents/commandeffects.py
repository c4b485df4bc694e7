"""What one simple command does besides printing: the files it writes and the programs it runs.

The approval rules (``commandrules``) ask this about every command a line would run:

- ``writes``: the files it writes, each a ``Write``: by a redirection (``echo x > f``), as
  a side job of a program that mostly reads (``sed -i``, ``curl -o``, ``git log
  --output``, ``sort -o``), or as the program's purpose (``cp``'s destination, ``mv``'s
  source and destination, ``rm``, ``touch``, ``tee``, ``tar -x``, ``unzip``, ``patch``,
  ``git checkout -- f``, ``git apply``...). A target that cannot be told before the
  command runs (an archive's members, a patch's files) is the folder it lands in
  (``tree``), or ``""`` when not even that can be told.
- ``runs``: why it runs a program that its options, script or config name rather than
  the program itself (``find -exec``, ``git -c alias.p=push p``, ``git -c
  core.sshCommand=...``, ``git fetch --upload-pack=...``, ``tar --to-command``,
  ``rsync -e``, ``sed``'s ``e`` command, ``awk``'s ``system()``, an editor's ``-c``).
- ``inner``: the command texts it runs that can be told (``find -exec``'s words, an
  alias's expansion, ``core.pager``'s value), so deny rules see them; ``unsure`` when
  they cannot be (``git -c core.hooksPath=d``, ``sed -f script``), and deny/ask rules ask.

A program's own options are read as its manual says (GNU coreutils, GNU tar, Info-ZIP
unzip, GNU patch, git-config(1) for the keys that run programs). Anything not listed
here is a program that writes only what its redirections say. This module is pure
(it reads the file system only to tell a folder from a file where ``workdir`` is given)
and imports nothing of musec but ``shellsplit`` and the readers ``gitrules``,
``sedrules`` and ``toolrules`` (formatters and linters that fix).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from .gitrules import git_effects
from .sedrules import awk_effects, in_place, sed_effects
from .shellsplit import SimpleCommand
from .toolrules import TOOLS, tool_effects

__all__ = ["Effects", "Write", "effects", "program_key"]


@dataclass(frozen=True)
class Write:
    """One file (or folder) a command writes.

    Attributes:
        path: as written on the command line; ``""`` when it cannot be told.
        literal: the path has no expansion or glob in it.
        purpose: writing it is what the program is for (``cp``'s destination), so a rule
            naming the program is about it; ``False`` for a redirection or a side job
            (``sed -i``), which only ``edit`` rules (or the very command) cover.
        tree: everything under ``path`` may be written or removed (``rm -r``, ``tar -x``).
        git: written by git in its work tree (``git reset --hard``): ``.git`` itself is
            git's own and not counted as written.
    """

    path: str
    literal: bool = True
    purpose: bool = False
    tree: bool = False
    git: bool = False


@dataclass(frozen=True)
class Effects:
    """What ``effects`` found (see the module docstring)."""

    writes: tuple[Write, ...] = ()
    runs: str = ""
    inner: tuple[str, ...] = ()
    unsure: str = ""


@dataclass
class _Found:
    writes: list[Write] = field(default_factory=list)
    runs: str = ""
    inner: list[str] = field(default_factory=list)
    unsure: str = ""

    def write(self, path: str, *, purpose: bool = True, tree: bool = False, git: bool = False) -> None:
        literal = bool(path) and not any(c in path for c in "$`*?[{")
        self.writes.append(Write(path, literal, purpose, tree, git))

    def doubt(self, why: str) -> None:
        """What it runs cannot be told, but a rule naming it is about it (deny rules ask)."""
        self.unsure = self.unsure or why

    def run(self, why: str, inner: str | None = None, *, unsure: bool = False) -> None:
        self.runs = self.runs or why
        if inner is not None:
            self.inner.append(inner)
        if unsure or (inner is not None and ("$" in inner or "`" in inner)):
            self.unsure = self.unsure or why


_NOT_FILES = re.compile(r"/dev/(?:null|stdout|stderr|tty|fd/[0-9]+)")
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})


def effects(command: SimpleCommand, argv: list[str], workdir: str | None = None) -> Effects:
    """The files ``command`` writes and the programs it runs (module docstring).

    Args:
        command: the simple command (its redirections are read from it).
        argv: the command it runs with its arguments, wrappers left out
            (``commandrules.core_words``).
        workdir: where relative names are, to tell whether a destination is a folder
            (``None``: not known; a destination is then taken as a file).

    Returns:
        The command's ``Effects``. Never raises.
    """
    found = _Found()
    for _fd, op, target, literal in command.redirections:
        if op not in _WRITE_OPS or _NOT_FILES.fullmatch(target):
            continue
        if op == ">&" and (target == "-" or target.isdigit()):
            continue  # a descriptor is duplicated or closed
        found.writes.append(Write(target, literal))
    if argv:
        name, args = argv[0], argv[1:]
        reader = _PROGRAMS.get(name) or (_compressor if name in _COMPRESSORS else None) or (
            _tool if name in TOOLS else None)
        if reader is not None:
            try:
                reader(name, args, found, workdir)
            except (ValueError, IndexError, AttributeError):  # a shape not foreseen: assume the worst
                found.write("", purpose=False)
                found.run(f"{name}'s arguments could not be read", unsure=True)
    return Effects(tuple(found.writes), found.runs, tuple(found.inner), found.unsure)


def program_key(argv: list[str]) -> list[str]:
    """The words that name what runs: ``["git", "checkout"]`` for git and the package
    managers run by subcommand, ``["cp"]`` otherwise (``argv`` without wrappers)."""
    if not argv:
        return []
    if argv[0] in ("git", "npm", "pnpm", "yarn", "uv", "poetry", "pip", "cargo", "go") and len(argv) > 1:
        return argv[:2]
    return argv[:1]


# --- argument helpers ------------------------------------------------------------------


def _operands(args: list[str], value_options: frozenset[str] = frozenset()) -> list[str]:
    """The non-option words of ``args``: options (and the next word after one of
    ``value_options``) left out; every word after ``--`` is an operand."""
    out, i = [], 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return out + args[i + 1:]
        if a.startswith("-") and len(a) > 1:
            i += 2 if a in value_options else 1
            continue
        out.append(a)
        i += 1
    return out


def _value(args: list[str], *names: str) -> str | None:
    """The value of the first of ``names`` (``-t DIR``, ``-tDIR``, ``--target=DIR``)."""
    for i, a in enumerate(args):
        for n in names:
            if a == n:
                return args[i + 1] if i + 1 < len(args) else ""
            if n.startswith("--") and a.startswith(n + "="):
                return a[len(n) + 1:]
            if not n.startswith("--") and a.startswith(n) and len(a) > len(n):
                return a[len(n):]
    return None


def _has(args: list[str], *flags: str, letters: str = "") -> bool:
    """Whether ``args`` hold one of ``flags`` (or a bundle ``-xzf`` with one of ``letters``)."""
    for a in args:
        if a == "--":
            return False
        if a in flags or any(f.startswith("--") and a.startswith(f + "=") for f in flags):
            return True
        if letters and re.fullmatch(r"-[A-Za-z0-9]+", a) and any(c in a[1:] for c in letters):
            return True
    return False


def _is_dir(path: str, workdir: str | None) -> bool:
    if path.endswith("/") or path in (".", "..", "~"):
        return True
    if workdir is None:
        return False
    return os.path.isdir(os.path.join(workdir, os.path.expanduser(path)))


# --- the programs ------------------------------------------------------------------------

_COPY_VALUES = frozenset({"-t", "--target-directory", "-S", "--suffix", "-m", "--mode", "-o", "--owner", "-g",
                          "--group", "--backup", "--reflink", "--sparse", "--preserve", "--no-preserve",
                          "--strip-program", "-Z", "--context", "--sort"})


def _copy(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
    """``cp``/``mv``/``ln``/``install``: the destination (``-t DIR`` or the last operand);
    ``mv`` (and a hard ``ln``) also changes what its sources are."""
    operands = _operands(args, _COPY_VALUES)
    target_dir = _value(args, "-t", "--target-directory")
    recursive = name == "mv" or _has(args, "--recursive", "--archive", letters="rRa" if name == "cp" else "")
    if name == "install" and _has(args, "--directory", letters="d"):
        for o in operands:
            found.write(o)
        return
    if target_dir is None and name == "ln" and len(operands) == 1:
        operands = [*operands, "."]
    if target_dir is not None:
        sources, dest = operands, target_dir
    elif len(operands) >= 2:
        sources, dest = operands[:-1], operands[-1]
    else:
        sources, dest = [], (operands[0] if operands and name != "ln" else "")
        if not operands:
            return
    into = target_dir is not None or len(sources) > 1 or _is_dir(dest, workdir) and not _has(
        args, "--no-target-directory", letters="T")
    if into and sources:
        for s in sources:
            found.write(os.path.join(dest, os.path.basename(s.rstrip("/")) or s), tree=recursive)
    else:
        found.write(dest, tree=recursive)
    if name == "mv" or (name == "ln" and not _has(args, "--symbolic", letters="s")):
        for s in sources:
            found.write(s, tree=name == "mv")


def _operands_written(values: frozenset[str], *, tree_letters: str = "", tree_flags: tuple[str, ...] = ()):
    def read(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
        tree = bool(tree_letters or tree_flags) and _has(args, *tree_flags, letters=tree_letters)
        for o in _operands(args, values):
            found.write(o, tree=tree)
    return read


def _tee(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
    for o in _operands(args, frozenset({"--output-error"})):
        found.write(o)


def _dd(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
    for a in args:
        if a.startswith("of="):
            found.write(a[3:])


_COMPRESSORS = frozenset({"gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "zstd", "unzstd", "lzma", "unlzma",
                          "lz4", "brotli", "compress", "uncompress"})


def _compressor(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
    """``gzip f`` replaces ``f`` by ``f.gz`` (and ``gunzip`` back): both names are written."""
    if _has(args, "--stdout", "--to-stdout", "--list", "--test", letters="clt"):
        return
    out = _value(args, "-o", "--output")
    for o in _operands(args, frozenset({"-S", "--suffix", "-o", "--output", "-T", "--threads", "-b"})):
        found.write(o)
        found.write(o + ".*" if o else "")
    if out:
        found.write(out)


def _tar(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
    """GNU tar: ``-x`` writes the archive's members under ``-C DIR`` (or here); ``-c``,
    ``-r``, ``-u``, ``-A``, ``--delete`` write the archive (``-f FILE``)."""
    modes: set[str] = set()
    archive, directory, i = None, None, 0
    words = list(args)
    if words and re.fullmatch(r"[A-Za-z]+", words[0]):
        words[0] = "-" + words[0]  # old style: `tar xzf a.tar`
    while i < len(words):
        a = words[i]
        if a.startswith("--"):
            key, eq, val = a.partition("=")
            modes.update(_TAR_LONG_MODES.get(key, ""))
            if key in _TAR_RUNS:
                found.run(f"tar {key} runs a program", val.split("=", 1)[-1] if key == "--checkpoint-action" else val)
            elif key == "--remove-files":
                found.write("", tree=True)
            if key in ("--file", "--directory") and not eq and i + 1 < len(words):
                val, i = words[i + 1], i + 1
            if key == "--file":
                archive = val
            elif key == "--directory":
                directory = val
        elif a.startswith("-") and len(a) > 1:
            for j, c in enumerate(a[1:], 1):
                modes.update(c if c in "xtdcruAO" else "")
                if c in "fCIFgKNTVXbHL":  # options with a value: the rest of the word or the next one
                    val = a[j + 1:]
                    if not val and i + 1 < len(words):
                        val, i = words[i + 1], i + 1
                    if c == "f":
                        archive = val
                    elif c == "C":
                        directory = val
                    elif c in "IF":
                        found.run(f"tar -{c} runs a program", val)
                    break
        i += 1
    if "x" in modes and "O" not in modes:
        found.write(directory or ".", tree=True)
    elif modes & set("cruA+") and archive not in (None, "-"):
        found.write(archive or "")


_TAR_LONG_MODES = {"--extract": "x", "--get": "x", "--create": "c", "--append": "r", "--update": "u",
                   "--catenate": "A", "--concatenate": "A", "--delete": "+", "--list": "t", "--diff": "d",
                   "--compare": "d", "--to-stdout": "O"}
_TAR_RUNS = frozenset({"--to-command", "--use-compress-program", "--checkpoint-action", "--info-script",
                       "--new-volume-script", "--rsh-command", "--rmt-command"})


def _archive_and_moved(args: list[str], found: _Found, letters: str, flags: tuple[str, ...]) -> None:
    """``zip ARCHIVE FILES``: the archive; with ``-m`` its files are removed too."""
    operands = _operands(args, frozenset({"-b", "-n", "-t", "-tt", "-x", "-i", "-P", "-O", "--out", "-Z"}))
    if operands:
        found.write(operands[0])
    if _has(args, *flags, letters=letters):
        for o in operands[1:]:
            found.write(o, tree=True)
    out = _value(args, "-O", "--out")
    if out:
        found.write(out)


def _seven_zip(args: list[str], found: _Found) -> None:
    """``7z x|e ARCHIVE [-oDIR]`` extracts into DIR (or here); ``7z a|u|d ARCHIVE`` writes it."""
    operands = [a for a in args if not a.startswith("-")]
    if not operands:
        return
    if operands[0] in ("x", "e"):
        found.write(_value(args, "-o") or ".", tree=True)
    elif operands[0] in ("a", "u", "d", "rn") and len(operands) > 1:
        found.write(operands[1])


def _unzip(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
    if _has(args, letters="lvtpcZz") or "-Z" in args:
        return
    found.write(_value(args, "-d") or ".", tree=True)


def _cpio(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
    if _has(args, "--extract", letters="i"):
        found.write(_value(args, "-D", "--directory") or ".", tree=True)
    elif _has(args, "--pass-through", letters="p"):
        operands = _operands(args, frozenset({"-D", "--directory", "-F", "-O", "-I", "-E", "-H", "-M", "-R"}))
        found.write(operands[-1] if operands else "", tree=True)
    archive = _value(args, "-O", "-F", "--file")
    if archive:
        found.write(archive)
    if _has(args, "--rsh-command"):
        found.run("cpio --rsh-command runs a program", _value(args, "--rsh-command") or "")


def _patch(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
    if _has(args, "--dry-run"):
        return
    out = _value(args, "-o", "--output")
    operands = _operands(args, frozenset({"-p", "-d", "--directory", "-i", "--input", "-o", "--output", "-B",
                                          "-V", "-Y", "-z", "-r", "-D", "-F", "--fuzz", "--strip",
                                          "--reject-file", "--suffix", "--prefix", "--basename-prefix"}))
    if out and out != "-":
        found.write(out)
    elif operands:
        found.write(operands[0])
    else:
        found.write(_value(args, "-d", "--directory") or ".", tree=True)


def _sed(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
    sed_effects(args, found)


def _awk(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
    awk_effects(name, args, found)


_FIND_RUNS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_FIND_WRITES = frozenset({"-fprint", "-fprint0", "-fprintf", "-fls"})


def _find(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
    for i, a in enumerate(args):
        if a in _FIND_RUNS:
            end = next((j for j in range(i + 1, len(args)) if args[j] in (";", "+")), len(args))
            found.run(f"find {a} runs a command", " ".join(args[i + 1:end]))
        elif a in _FIND_WRITES:
            found.write(args[i + 1] if i + 1 < len(args) else "", purpose=False)
        elif a == "-delete":
            found.write("", purpose=False)


def _sort(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
    out = _value(args, "-o", "--output")
    if out is not None:
        found.write(out, purpose=False)
    program = _value(args, "--compress-program")
    if program is not None:
        found.run("sort --compress-program runs a program", program)


def _curl(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
    for a, nxt in zip(args, [*args[1:], ""], strict=False):
        cluster = re.fullmatch(r"-([a-zA-Z]*?)([oO])(.*)", a)
        if a == "--output":
            found.write(nxt, purpose=False)
        elif a.startswith("--output="):
            found.write(a.split("=", 1)[1], purpose=False)
        elif a.startswith("--remote-name") or a == "--output-dir" or a.startswith("--output-dir="):
            found.write("", purpose=False)
        elif cluster and cluster.group(2) == "o":
            found.write(cluster.group(3) or nxt, purpose=False)
        elif cluster:
            found.write("", purpose=False)


def _wget(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
    document = _value(args, "-O", "--output-document")
    if document != "-":
        found.write(document or "", purpose=False)


def _rsync(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
    for option in ("-e", "--rsh", "--rsync-path"):
        value = _value(args, option)
        if value is not None:
            found.run(f"rsync {option} runs a program", value)
    operands = _operands(args, frozenset({"-e", "--rsh", "--rsync-path", "--exclude", "--include", "--filter",
                                          "-f", "--files-from", "--exclude-from", "--include-from", "-T",
                                          "--temp-dir", "--backup-dir", "--suffix", "--chmod", "--log-file",
                                          "--password-file", "--port", "--timeout", "--bwlimit"}))
    if len(operands) >= 2:
        dest = operands[-1]
        remote = re.match(r"[^/]*:", dest) is not None
        found.write("" if remote else dest, tree=True)
        if _has(args, "--remove-source-files"):
            for source in operands[:-1]:
                found.write(source, tree=True)


def _editor(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
    found.run(f"{name} runs its own commands", unsure=any(a.startswith(("-c", "+", "--cmd", "-S", "--eval", "-x"))
                                                         for a in args))
    found.write("", purpose=False)


def _make(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
    if _has(args, "--eval", "-E"):
        found.run("make --eval runs a recipe from the command line", unsure=True)


_PROGRAMS = {
    "cp": _copy, "mv": _copy, "ln": _copy, "install": _copy,
    "rm": _operands_written(frozenset(), tree_letters="rR", tree_flags=("--recursive",)),
    "rmdir": _operands_written(frozenset()), "unlink": _operands_written(frozenset()),
    "shred": _operands_written(frozenset({"-n", "--iterations", "-s", "--size", "--random-source"})),
    "touch": _operands_written(frozenset({"-r", "--reference", "-d", "--date", "-t"})),
    "truncate": _operands_written(frozenset({"-s", "--size", "-r", "--reference"})),
    "mkdir": _operands_written(frozenset({"-m", "--mode", "--context"})),
    "mkfifo": _operands_written(frozenset({"-m", "--mode"})),
    **dict.fromkeys(("chmod", "chown", "chgrp"), _operands_written(frozenset({"--reference", "--from"}),
                                                                  tree_letters="R", tree_flags=("--recursive",))),
    "zip": lambda name, args, found, workdir: _archive_and_moved(args, found, "m", ("--move",)),
    "7z": lambda name, args, found, workdir: _seven_zip(args, found),
    "sponge": _tee, "tee": _tee, "dd": _dd, "tar": _tar, "unzip": _unzip, "cpio": _cpio, "patch": _patch,
    "sed": _sed, "gsed": _sed, "awk": _awk, "gawk": _awk, "mawk": _awk, "nawk": _awk, "find": _find,
    "sort": _sort, "curl": _curl, "wget": _wget, "rsync": _rsync, "make": _make, "gmake": _make,
    **dict.fromkeys(("vi", "vim", "nvim", "ex", "ed", "emacs", "nano", "view"), _editor),
}


def _perl_like(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
    if any(in_place(a) for a in args):
        found.write("", purpose=False)


_PROGRAMS["perl"] = _perl_like
_PROGRAMS["ruby"] = _perl_like


def _tool(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
    tool_effects(name, args, found)


def _git(name: str, args: list[str], found: _Found, workdir: str | None) -> None:
    """git's global options and its subcommands' writes (``gitrules``)."""
    git_effects(args, found)


_PROGRAMS["git"] = _git
