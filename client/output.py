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
