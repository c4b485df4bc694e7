"""What a ``sed`` or ``awk`` command writes and runs, for the approval rules (``commandeffects``).

GNU sed (sed(1), "sed scripts"): ``-i[SUFFIX]`` edits its files in place (``-ie`` is the
suffix ``e``, not a script); the script is ``-e``'s, ``-f``'s (a file: not known) or the
first operand; in it ``w FILE``, ``W FILE`` and ``s///w FILE`` write, ``e`` and
``s///e`` run a command. awk: ``print > "f"`` writes, ``system()``, ``print | "cmd"``
and ``"cmd" | getline`` run commands. Pure; imports nothing of musec (``found`` is
``commandeffects``' collector).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["awk_effects", "in_place", "sed_effects"]


def sed_effects(args: list[str], found: Any) -> None:
    """GNU sed: ``-i`` edits its files in place (``-i[SUFFIX]``: ``-ie`` is a suffix
    ``e``), ``-e SCRIPT``/``-f FILE``, else the first operand is the script."""
    scripts, script_file, in_place, i = [], False, False, 0
    given = False
    while i < len(args):
        a = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else ""
        if a == "--":
            break
        if a.startswith("--"):
            key, eq, val = a.partition("=")
            if key == "--expression":
                scripts.append(val if eq else nxt)
                i += 0 if eq else 1
            elif key == "--file":
                script_file, i = True, i + (0 if eq else 1)
            elif key == "--in-place":
                in_place = True
            elif key in ("--line-length",) and not eq:
                i += 1
            given = given or key in ("--expression", "--file")
        elif a.startswith("-") and len(a) > 1:
            for j, c in enumerate(a[1:], 1):
                if c == "i":
                    in_place = True
                    break  # the rest is the backup suffix
                if c in "efl":
                    val = a[j + 1:] or nxt
                    i += 0 if a[j + 1:] else 1
                    if c == "e":
                        scripts.append(val)
                    script_file = script_file or c == "f"
                    given = given or c in "ef"
                    break
        elif not given:
            scripts.append(a)
            given = True
        i += 1
    if script_file:
        found.run("sed -f runs a script from a file", unsure=True)
    if in_place:
        found.write("", purpose=False)
    for script in scripts:
        _sed_script(script, found)


def in_place(arg: str) -> bool:
    """Whether ``arg`` asks sed, perl or ruby to edit files in place (``-i``, ``-pi``, ``--in-place``)."""
    if arg.startswith("--"):
        return arg.startswith("--in-place")
    return bool(re.fullmatch(r"-[A-Za-z]*i.*", arg)) if arg.startswith("-") else False


def _sed_script(script: str, found: Any) -> None:
    """GNU sed's commands that write (``w``, ``W``, ``s///w``) or run (``e``, ``s///e``)."""
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        if c in " \t\n;{}!,$0123456789~+":
            i += 1
        elif c == "/" or (c == "\\" and i + 1 < n):
            delim = "/" if c == "/" else script[i + 1]
            i = _skip_delimited(script, i + (1 if c == "/" else 2), delim)
            while i < n and script[i] in "IM":
                i += 1
        elif c in "sy":
            if i + 1 >= n:
                return
            delim = script[i + 1]
            i = _skip_delimited(script, _skip_delimited(script, i + 2, delim), delim)
            if i > n:
                found.run("sed's script could not be read", unsure=True)  # not closed: sed refuses it
                return
            flags = re.match(r"[0-9gpiImMe]*", script[i:]).group(0) if c == "s" else ""
            i += len(flags)
            if "e" in flags:
                found.run("sed's s///e runs the pattern space as a command", unsure=True)
            if c == "s" and i < n and script[i] == "w":
                end = script.find("\n", i)
                found.write(script[i + 1:end if end != -1 else n].strip(), purpose=False)
                i = n if end == -1 else end
            elif i < n and script[i] not in " \t\n;}#":
                found.run("sed's script could not be read", unsure=True)  # sed refuses it; or we misread
                return
        elif c in "wW":
            end = script.find("\n", i)
            found.write(script[i + 1:end if end != -1 else n].strip(), purpose=False)
            i = n if end == -1 else end
        elif c == "e":
            found.run("sed's e command runs a command", unsure=True)
            return
        elif c in "aicrRbtTv:#":
            end = script.find("\n", i) if c in "aic#rRwW" else min(
                [p for p in (script.find(";", i), script.find("\n", i)) if p != -1] or [n])
            i = n if end == -1 else end
        elif c in "dDgGhHlLnNpPqQxzF=":
            i += 1
        else:  # not a sed command: sed refuses the script, or this reading is wrong; assume the worst
            found.run("sed's script could not be read", unsure=True)
            return


def _skip_delimited(text: str, i: int, delim: str) -> int:
    while i < len(text) and text[i] != delim:
        i += 2 if text[i] == "\\" else 1
    return i + 1


def awk_effects(name: str, args: list[str], found: Any) -> None:
    program = " ".join(a for a in args if not a.startswith("-"))
    if "system" in program or "|" in program:
        found.run(f"{name}'s program runs commands", unsure=True)
    if ">" in program:
        found.write("", purpose=False)  # `print > "f"`
    if any(a == "-f" or a.startswith("--file") for a in args):
        found.run(f"{name} -f runs a program from a file", unsure=True)
