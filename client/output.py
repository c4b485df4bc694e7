"""Everything the client prints goes through here, cleaned by one sanitiser.

Text from a session (the task, the model, files, command output, paths, the daemon's
messages that quote them) is untrusted: it must not drive the terminal. ``safe`` removes
the C0 and C1 control characters (ESC, CSI, OSC, BEL, NUL, CR...) and DEL, keeping tab
and newline. JSON output (``--json``, ``stream-json``) stays byte-faithful JSON: ``safe_json``
writes the control characters JSON allows raw (DEL and C1) as ``\\u`` escapes, which
decode to the same value.
"""

from __future__ import annotations

import sys
from functools import cache

TYPE_CHECKING = False  # not typing's: importing typing costs a quick command's start
if TYPE_CHECKING:
    import re
    from typing import Any, TextIO

_CONTROL = {c: None for c in range(32) if c not in (9, 10)} | {127: None} | {c: None for c in range(0x80, 0xA0)}
_JSON_RAW = {c: f"\\u{c:04x}" for c in (127, *range(0x80, 0xA0))}


# Whether there is anything to clean: a search in C, so the usual clean text (a log of
# 100 MiB) is not walked character by character by ``translate``. Compiled on first use:
# ``re`` is not imported by a command whose lines are all printable (``musec sessions``).
@cache
def _has_control() -> re.Pattern[str]:
    import re

    return re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@cache
def _has_json_raw() -> re.Pattern[str]:
    import re

    return re.compile("[\x7f-\x9f]")


def safe(text: str) -> str:
    """``text`` without terminal control characters (tab and newline kept)."""
    if text.isprintable():  # no control character (every one is unprintable): the usual line
        return text
    return text.translate(_CONTROL) if _has_control().search(text) else text


def safe_json(line: bytes | str) -> str:
    """A JSON text with the control characters JSON lets through raw (DEL, C1) escaped.

    Only string contents can hold them, so the result decodes to the same value. Bytes
    that are not UTF-8 become U+FFFD.
    """
    if isinstance(line, bytes):
        clean = b"\x7f" not in line and b"\xc2" not in line  # DEL; C1 is \xc2\x80-\x9f in UTF-8
        text = line.decode("utf-8", "replace")
        if clean:
            return text
    else:
        text = line
    return text.translate(_JSON_RAW) if _has_json_raw().search(text) else text


def counted(n: int, noun: str, plural: str = "") -> str:
    """``n`` with its noun in the number it needs: ``1 turn``, ``0 turns``, ``2 turns``
    (``plural`` for a noun that does not just take an s: ``counted(n, "entry", "entries")``).

    The client's copy of ``musec.agents.core.words.counted`` (the client may not import
    the agents); tests/test_counted.py holds them to the same answers.
    """
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


class Column:
    """One column of ``table``: its ``header``, alignment (``"<"`` or ``">"``), the most
    characters it takes (``width``; 0: as wide as its widest cell), and what a longer cell
    does: ``wrap`` onto more lines inside the column (a sentence such as an agent's state),
    else it is cut with ``…`` (an id, a model name).
    """

    __slots__ = ("align", "header", "width", "wrap")

    def __init__(self, header: str = "", *, width: int = 0, align: str = "<", wrap: bool = False) -> None:
        self.header, self.width, self.align, self.wrap = header, width, align, wrap


def table(rows: list[list[str]], columns: list[Column], *, indent: str = "", gap: str = "  ") -> list[str]:
    """``rows`` (one string per column) as lines of aligned columns, each cell kept inside
    its column: cut or wrapped at the column's width (``Column``), so a long cell never
    pushes the rest of its row out of line. The last column is not padded, and not cut
    unless it has a width. A header line comes first when any column has a header.

    Raises:
        ValueError: a row has not one cell per column.
    """
    cells = [[c.header for c in columns]] if any(c.header for c in columns) else []
    for row in rows:
        if len(row) != len(columns):
            raise ValueError(f"a row of {len(row)} cells for {len(columns)} columns")
        cells.append([" ".join(str(cell).split()) for cell in row])  # a cell is one line of text
    widths = []
    for i, col in enumerate(columns):
        widest = max((len(r[i]) for r in cells), default=0)
        widths.append(min(widest, col.width) if col.width else widest)
    if not any(col.wrap for col in columns):  # one line a row: the common case, kept fast
        return _single_lines(cells, columns, widths, indent, gap)
    lines = []
    for row in cells:
        parts = [(_wrap(cell, w) if col.wrap else [cut(cell, w)]) if w else [cell]
                 for cell, col, w in zip(row, columns, widths, strict=True)]
        for k in range(max(len(part) for part in parts)):
            line = gap.join(f"{part[k] if k < len(part) else '':{col.align}{w}}" if n < len(columns) - 1 or col.align == ">"
                            else (part[k] if k < len(part) else "")
                            for n, (part, col, w) in enumerate(zip(parts, columns, widths, strict=True)))
            lines.append((indent + line).rstrip())
    return lines


def _single_lines(cells: list[list[str]], columns: list[Column], widths: list[int], indent: str,
                  gap: str) -> list[str]:
    """``table``'s lines when no column wraps (the same text, in a fifth of the time: a
    thousand sessions' rows in 3 ms, not 15)."""
    last = len(columns) - 1
    pads = []
    for n, (col, w) in enumerate(zip(columns, widths, strict=True)):
        if n == last and col.align != ">":
            pads.append(None)  # the last column is not padded
        else:
            pads.append(str.rjust if col.align == ">" else str.ljust)
    lines = []
    for row in cells:
        parts = []
        for cell, pad, w in zip(row, pads, widths, strict=True):
            if w and len(cell) > w:
                cell = cut(cell, w)
            parts.append(cell if pad is None else pad(cell, w))
        lines.append((indent + gap.join(parts)).rstrip())
    return lines


def cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters: a longer one ends with ``…``."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken at spaces (a longer word
    is broken inside)."""
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        while len(word) > width:
            if line:
                lines.append(line)
                line = ""
            lines.append(word[:width])
            word = word[width:]
        if not line:
            line = word
        elif len(line) + 1 + len(word) <= width:
            line += " " + word
        else:
            lines.append(line)
            line = word
    return [*lines, line] if line or not lines else lines


def out(text: str = "", *, stream: TextIO | None = None, end: str = "\n") -> None:
    """Print ``text`` (sanitised) to stdout, or to ``stream``."""
    s = stream or sys.stdout
    s.write(safe(text) + end)
    s.flush()


def err(text: str) -> None:
    """Print one line (sanitised) to stderr."""
    out(text, stream=sys.stderr)


def out_json(value: Any) -> None:
    """Print ``value`` as one JSON line on stdout."""
    import json

    sys.stdout.write(safe_json(json.dumps(value, ensure_ascii=False)) + "\n")
    sys.stdout.flush()


def out_json_line(line: bytes) -> None:
    """Print a JSON text as it is (a logged event line), with ``safe_json``."""
    sys.stdout.write(safe_json(line) + "\n")
    sys.stdout.flush()
