"""Text-file helpers shared by the file tools: sniffing, decoding, editing, diffs, writes.

Everything here is synchronous and pure except ``atomic_write``; the tools call it from
a worker thread.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import heapq
import os
import re
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..core.faults import NO_FAULTS, Faults
from ..core.words import counted
from .errors import BinaryFile, EditNotFound, EditNotUnique

__all__ = [
    "BINARY_SNIFF_BYTES",
    "UTF8_BOM",
    "DecodedText",
    "EditResult",
    "apply_edit",
    "atomic_write",
    "closest_lines",
    "decode_text",
    "looks_binary",
    "number_lines",
    "sha256_hex",
    "unified_diff",
]

BINARY_SNIFF_BYTES = 8 * 1024
"""A file with a NUL byte in its first this-many bytes is binary."""

UTF8_BOM = b"\xef\xbb\xbf"

MAX_DIFF_BYTES = 256 * 1024
"""Diffs longer than this are cut, with a note."""

MAX_DIFF_LINES = 40_000
"""Above this many lines (before + after) no diff is computed, only a summary."""

MAX_CLOSEST_CANDIDATES = 8
"""``closest_lines`` scores at most this many windows of the file."""

CHAR_RANKED_WINDOWS = 2
"""``closest_lines`` compares characters only in this many best windows by lines."""

MIN_ANCHOR_CHARS = 4
"""Lines shorter than this (``}``, blank) do not anchor a ``closest_lines`` window."""

MAX_CLOSEST_CHARS = 2_000
"""Above this many characters ``closest_lines`` compares by lines, not by characters."""

MAX_LISTED_MATCHES = 20


def sha256_hex(data: bytes) -> str:
    """SHA-256 of ``data`` as 64 hex digits."""
    return hashlib.sha256(data).hexdigest()


def looks_binary(data: bytes) -> bool:
    """Whether ``data`` has a NUL byte in its first ``BINARY_SNIFF_BYTES`` bytes."""
    return b"\0" in data[:BINARY_SNIFF_BYTES]


@dataclass(frozen=True)
class DecodedText:
    """A text file's content without its BOM, and whether it had one."""

    text: str
    bom: bool

    def encode(self, text: str) -> bytes:
        """``text`` encoded as UTF-8, with the BOM put back if the file had one."""
        return (UTF8_BOM if self.bom else b"") + text.encode("utf-8")


def decode_text(data: bytes, name: str) -> DecodedText:
    """Decode a file's bytes as UTF-8 text, keeping track of a leading BOM.

    Raises:
        BinaryFile: NUL bytes in the first 8 KiB, or invalid UTF-8.
    """
    if looks_binary(data):
        raise BinaryFile(
            f"{name} is a binary file (NUL bytes in its first 8 KiB); tools edit text files only"
        )
    bom = data.startswith(UTF8_BOM)
    try:
        text = data[len(UTF8_BOM) if bom else 0 :].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BinaryFile(
            f"{name} is not valid UTF-8 (byte {exc.start}); edit it with a command in bash instead"
        ) from exc
    return DecodedText(text=text, bom=bom)


def number_lines(lines: list[str], first_line: int) -> str:
    """Lines numbered like ``cat -n``: a 6-wide number, a tab, the line (no terminator)."""
    return "".join(f"{n:>6}\t{line}\n" for n, line in enumerate(lines, start=first_line))


@dataclass(frozen=True)
class EditResult:
    """The text after an edit, how many occurrences were replaced, at which lines (1-based)."""

    text: str
    count: int
    lines: list[int]


def _is_crlf(text: str) -> bool:
    crlf = text.count("\r\n")
    return crlf > 0 and crlf >= text.count("\n") - crlf


def _to_crlf(s: str) -> str:
    return re.sub(r"(?<!\r)\n", "\r\n", s)


def _starts(text: str, needle: str, limit: int) -> list[int]:
    """The first ``limit`` start offsets of ``needle`` in ``text``, overlapping ones included."""
    found, i = [], text.find(needle)
    while i != -1 and len(found) < limit:
        found.append(i)
        i = text.find(needle, i + 1)
    return found


def _lines_of(text: str, offsets: list[int]) -> list[int]:
    """The 1-based line of each offset (ascending), counting newlines once: O(len(text))."""
    lines, line, prev = [], 1, 0
    for offset in offsets:
        line += text.count("\n", prev, offset)
        prev = offset
        lines.append(line)
    return lines


def _replace_every(text: str, old: str, new: str) -> EditResult:
    """``text.replace(old, new)`` with the line of each replaced occurrence, in linear time."""
    offsets, i = [], text.find(old)
    while i != -1:  # the non-overlapping occurrences str.replace uses
        offsets.append(i)
        i = text.find(old, i + len(old))
    return EditResult(text.replace(old, new), len(offsets), _lines_of(text, offsets))


def apply_edit(text: str, old: str, new: str, *, replace_all: bool, name: str) -> EditResult:
    """Replace ``old`` by ``new`` in ``text``, exactly, keeping the file's line endings.

    In a CRLF file, bare ``\\n`` in ``old`` and ``new`` are taken as ``\\r\\n`` (models
    write LF); in an LF file, ``\\r\\n`` in them are taken as ``\\n``. The text as given
    is tried first when that does not match.

    Args:
        text: the file's text (BOM removed).
        old: the exact text to find; must be non-empty.
        new: its replacement.
        replace_all: replace every (non-overlapping) occurrence instead of requiring one.
        name: the file's name for messages.

    Returns:
        The new text, the number of replacements and the 1-based line of each.

    Raises:
        EditNotFound: ``old`` does not occur; the message shows the closest lines.
        EditNotUnique: ``old`` occurs more than once and ``replace_all`` is false.
    """
    candidates = [(old, new)]
    if _is_crlf(text):
        candidates.insert(0, (_to_crlf(old), _to_crlf(new)))
    elif "\r\n" in old:
        candidates.append((old.replace("\r\n", "\n"), new.replace("\r\n", "\n")))
    for old_form, new_form in candidates:  # noqa: B007 (the matching pair is used below)
        starts = _starts(text, old_form, MAX_LISTED_MATCHES + 1)
        if starts:
            break
    else:
        raise EditNotFound(_not_found_message(text, old, name))
    if replace_all:
        return _replace_every(text, old_form, new_form)
    if len(starts) > 1:
        lines = _lines_of(text, starts[:MAX_LISTED_MATCHES])
        total = max(len(starts), text.count(old_form))
        listed = ", ".join(map(str, lines)) + (", ..." if total > MAX_LISTED_MATCHES else "")
        raise EditNotUnique(
            f"old_string occurs {total} times in {name} (lines {listed}); include more "
            "surrounding lines to make it unique, or pass replace_all=true"
        )
    start = starts[0]
    return EditResult(
        text[:start] + new_form + text[start + len(old_form) :], 1, _lines_of(text, [start])
    )


def _norm(line: str) -> str:
    return " ".join(line.split())


def _candidate_starts(lines: list[str], want: list[str]) -> list[int]:
    """Window starts worth scoring, best first: where lines of ``want`` occur (whitespace-normalised),
    weighted by their length; failing that, near the lines most like want's longest line.

    One pass over ``lines`` plus a bounded amount of work per line, so the search stays
    linear in the file's size (scoring every window was quadratic).
    """
    wanted: dict[str, list[int]] = {}
    for j, line in enumerate(want):
        norm = _norm(line)
        if len(norm) >= MIN_ANCHOR_CHARS:
            wanted.setdefault(norm, []).append(j)
    norms = [_norm(line) for line in lines]
    votes: dict[int, int] = {}
    for i, norm in enumerate(norms):
        for j in wanted.get(norm, ())[:MAX_CLOSEST_CANDIDATES]:
            votes[i - j] = votes.get(i - j, 0) + len(norm)
    if not votes:
        j, target = max(enumerate(want), key=lambda jw: len(_norm(jw[1])))
        target = _norm(target)
        if not target:
            return []
        matcher = difflib.SequenceMatcher(None, autojunk=False)
        matcher.set_seq2(target)
        first_at: dict[str, int] = {}
        for i, norm in enumerate(norms):  # each distinct line is scored once
            first_at.setdefault(norm, i)
        chars = set(target)
        rough = (  # a cheap score (shared characters, close length) to pick lines to rank
            (len(chars.intersection(norm)) - abs(len(norm) - len(target)) / 8, i)
            for norm, i in first_at.items()
        )
        for _, i in heapq.nlargest(MAX_CLOSEST_CANDIDATES * 8, rough):
            matcher.set_seq1(norms[i])
            votes[i - j] = round(matcher.ratio() * 1000)
    last_start = max(0, len(lines) - len(want))
    best = heapq.nlargest(MAX_CLOSEST_CANDIDATES, votes.items(), key=lambda kv: (kv[1], -kv[0]))
    return list(dict.fromkeys(min(max(0, start), last_start) for start, _ in best))


def _ratio(matcher: difflib.SequenceMatcher, seq: object) -> float:
    matcher.set_seq1(seq)
    return matcher.ratio()


def closest_lines(text: str, wanted: str) -> tuple[int, int, float] | None:
    """Find the run of lines in ``text`` most similar to ``wanted`` (difflib ratio).

    Only windows anchored on lines like those of ``wanted`` are scored (at most
    ``MAX_CLOSEST_CANDIDATES``), so the cost is linear in the size of ``text``.

    Returns:
        ``(first_line, last_line, ratio)`` with 1-based inclusive line numbers and ratio
        in [0, 1], or ``None`` for an empty text or when no line is alike.
    """
    lines = [line.rstrip("\r") for line in text.split("\n")]
    want = [line.rstrip("\r") for line in wanted.strip("\r\n").split("\n")]
    n = len(want)
    if not text:
        return None
    starts = _candidate_starts(lines, want)
    if not starts:
        return None
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(want)
    by_lines = sorted(  # rank whole lines first (cheap), then characters for the best few
        ((_ratio(matcher, lines[start : start + n]), start) for start in starts),
        key=lambda rs: -rs[0],
    )
    best_ratio, best_start = by_lines[0]
    if len(wanted) <= MAX_CLOSEST_CHARS:
        matcher.set_seq2("\n".join(want))
        best_ratio = 0.0
        for _, start in by_lines[:CHAR_RANKED_WINDOWS]:
            ratio = _ratio(matcher, "\n".join(lines[start : start + n]))
            if ratio > best_ratio:
                best_ratio, best_start = ratio, start
    last = min(len(lines), best_start + n)
    return best_start + 1, last, best_ratio


def _not_found_message(text: str, old: str, name: str) -> str:
    closest = closest_lines(text, old)
    if closest is None or closest[2] < 0.4:
        return (
            f"old_string was not found in {name}; read the file with read_file and copy the "
            "exact text (whitespace included)"
        )
    first, last, ratio = closest
    shown = [line.rstrip("\r") for line in text.split("\n")[first - 1 : last]]
    where = f"line {first}" if first == last else f"lines {first}-{last}"
    return (
        f"old_string was not found in {name}; the closest text is at {where} ({ratio:.0%} "
        "similar), copy it exactly (whitespace included):\n"
        + number_lines(shown, first).rstrip("\n")
    )


def unified_diff(before: str | None, after: str, name: str) -> str:
    """A unified diff (``difflib``) from ``before`` (``None``: a new file) to ``after``.

    Lines without a final newline get git's ``\\ No newline at end of file`` marker. The
    diff is cut at ``MAX_DIFF_BYTES`` with a note; above ``MAX_DIFF_LINES`` lines only a
    summary line is returned.
    """
    a = [] if before is None else before.splitlines(keepends=True)
    b = after.splitlines(keepends=True)
    if len(a) + len(b) > MAX_DIFF_LINES:
        return f"(diff of {name} omitted: {counted(len(a), 'line')} before, {counted(len(b), 'line')} after)\n"
    fromfile = "/dev/null" if before is None else f"a/{name}"
    parts, size = [], 0
    for line in difflib.unified_diff(a, b, fromfile, f"b/{name}"):
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        parts.append(line)
        size += len(line)
        if size > MAX_DIFF_BYTES:
            parts.append(f"[... diff cut at {MAX_DIFF_BYTES} bytes ...]\n")
            break
    return "".join(parts)


def _default_file_mode() -> int:
    """0o666 less the process umask, read from /proc (changing the umask is racy)."""
    umask = 0o022
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                umask = int(line.split()[1], 8)
    return 0o666 & ~umask


def atomic_write(path: Path, data: bytes, faults: Faults = NO_FAULTS,
                 before_rename: Callable[[Path], None] | None = None) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory + rename.

    An existing file's permission bits are kept; a new file gets 0o666 less the umask.
    Readers see either the old or the new content, never a mix; on failure the old file
    is untouched and the temporary file removed. ``faults`` holds the ``mid_edit`` crash
    point of the restart tests. ``before_rename`` is called with the temporary file's
    path once it holds ``data`` (on disk), before the rename: the write-ahead
    announcement that lets a restart find out whether the write landed and remove the
    temporary file (issue 13 case 4); if it raises, nothing is written.

    Raises:
        OSError: the directory is not writable, the disk is full, ...
    """
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = _default_file_mode()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".musec-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        if before_rename is not None:
            before_rename(Path(tmp))
        faults.crash_at("mid_edit")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
