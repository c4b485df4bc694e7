"""Redaction: what the event log writes instead of secrets (DESIGN §5 rule 6), and how a
resume gets the text back (issue 13 case 1).

Secrets are the values of the credentials and secret-named variables a client brings, and
anything shaped like a provider key. A secret whose variable is known is written as a
placeholder naming it, ``[REDACTED:NAME]``; others as ``[REDACTED]``; outside text that
holds ``[REDACTED:`` is escaped. Only what is stored and shown is redacted: what runs,
what is written and what the model sees live are the exact bytes, and a resume folds its
log with the placeholders filled again (``Refill``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import msgspec

from .protocol import KEY_SHAPES

_json = msgspec.json.Encoder()
_REDACTED = "[REDACTED]"
T = TypeVar("T")
_MARK = "[REDACTED:"  # a named placeholder's start: [REDACTED:NAME]
_MARK_ESCAPED = "[REDACTED:[:"  # the same text found in the outside world, written escaped
_MARK_BYTES = _MARK.encode("ascii")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PLACEHOLDER_BYTES = re.compile(rb"\[REDACTED:(?:\[:|([A-Za-z_][A-Za-z0-9_]*)\])")
_KEY_PATTERNS = KEY_SHAPES  # the shapes of provider keys (daemon.protocol)
# A superset of those shapes in encoded JSON, to decide whether an event needs the walk:
# their characters are never escaped, so a key in a string is these very bytes in the
# encoding; what precedes it may be an escape (``\n``), so no boundary is asked here.
_KEY_PATTERNS_BYTES = re.compile(rb"sk-[A-Za-z0-9_\-]{16,}")


class Redactor:
    """Replaces secret values, and anything shaped like a provider key, in an event.

    A secret whose variable is known is written as a placeholder that names it,
    ``[REDACTED:ANTHROPIC_API_KEY]``, so that a resume that brings the same credentials
    fills it in again (``refill_line``) and the model's history is what it was; any other
    secret or key-shaped run is written ``[REDACTED]``. Text that already holds
    ``[REDACTED:`` is written with it escaped (``[REDACTED:[:``), so no text from the
    outside world can pass for a placeholder and be filled with a secret (issue 13 case 1).

    Strings are redacted before JSON encoding: matching the encoded bytes would miss a
    secret that JSON escapes (a quote, a control character) and could cut an escape
    sequence in two (``"\\n"`` then a secret starting with ``n``), writing invalid JSON.

    Args:
        secrets: secret values without a name.
        named: secret values by the name of the variable that holds them.
    """

    def __init__(self, secrets: Iterable[str] = (), named: Mapping[str, str] | None = None) -> None:
        self._secrets: list[str] = []
        self._encoded: list[bytes] = []
        self._placeholders: dict[str, str] = {}
        self.add(secrets, named)

    def add(self, secrets: Iterable[str] = (), named: Mapping[str, str] | None = None) -> None:
        """Redact these values too (a value keeps the first name it was given)."""
        for name, value in sorted((named or {}).items()):
            if value and len(value) >= 8 and _NAME.fullmatch(name) and value not in self._placeholders:
                self._placeholders[value] = f"{_MARK}{name}]"
        for value in secrets:
            if value and len(value) >= 8:
                self._placeholders.setdefault(value, _REDACTED)
        self._secrets = sorted(self._placeholders, key=len, reverse=True)
        # Each secret as it appears inside an encoded JSON string: msgspec escapes
        # character by character, so a string holding the secret holds these bytes.
        self._encoded = [_json.encode(s)[1:-1] for s in self._secrets]

    def encode(self, value: Any) -> bytes:
        """``value`` (builtins) as JSON with every secret redacted.

        The encoded bytes are scanned first and the value is walked (``__call__``) only
        when a secret or a key shape is in them: most events hold none, and the walk was
        60% of an append (issue 19). Equal to ``_json.encode(self(value))`` for any value.
        """
        body = _json.encode(value)
        if _KEY_PATTERNS_BYTES.search(body) or _MARK_BYTES in body or any(s in body for s in self._encoded):
            return _json.encode(self(value))
        return body

    def struct(self, value: T) -> T:
        """A msgspec Struct (a model request) with every string redacted, as its parts are
        when logged; ``value`` itself when nothing in it is redacted."""
        body = _json.encode(value)
        if not (_KEY_PATTERNS_BYTES.search(body) or _MARK_BYTES in body or any(s in body for s in self._encoded)):
            return value
        return msgspec.convert(self(msgspec.to_builtins(value)), type(value))

    def blob(self, data: bytes) -> bytes:
        """A tool's full output, as stored beside the log (``state/blobs``), redacted like
        the log; bytes that are not UTF-8 are kept as they are."""
        text = data.decode("utf-8", "surrogateescape")
        redacted = self.text(text)
        return data if redacted == text else redacted.encode("utf-8", "surrogateescape")

    def text(self, value: str) -> str:
        """``value`` with ``[REDACTED:`` escaped, then every secret and key-shaped run replaced."""
        if _MARK in value:
            value = value.replace(_MARK, _MARK_ESCAPED)
        for s in self._secrets:
            if s in value:
                value = value.replace(s, self._placeholders[s])
        # Every key shape starts with ``sk-``: without it there is nothing to replace, and
        # the pattern (a lookbehind first, so no literal prefix to search for) is tried at
        # every character: 0.2 ms per 8 KiB, half of a 100 MiB log's resume (issue 19).
        return _KEY_PATTERNS.sub(_REDACTED, value) if "sk-" in value else value

    def __call__(self, value: Any) -> Any:
        """A copy of ``value`` (builtins: dict, list, str...) with every string redacted,
        keys too, except the structure a reader decodes by: a ``type`` tag's value (an event
        or block kind, from a closed set, never outside text) and keys that are identifiers
        (field names; a key-shaped secret has a ``-``). A secret that is also such a word
        (``tool_use``) no longer cuts the line's structure so that it cannot be read back."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {(k if isinstance(k, str) and k.isidentifier() else self(k)):
                    (v if k == "type" and isinstance(v, str) else self(v)) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self(v) for v in value]
        return value


def refill_line(line: bytes, named: Mapping[str, str] | Callable[[str], str | None]) -> bytes:
    """A log line with its named placeholders filled with the values ``named`` holds for
    their names, and escaped ``[REDACTED:`` text restored: the event as it was before
    redaction, for folding a resumed session's history (never written back). A
    placeholder whose name ``named`` lacks stays as it is.

    Placeholders sit inside JSON strings and are plain ASCII, so each is replaced by the
    value's own encoding inside a string (``Redactor`` writes nothing else that looks so).
    """
    if _MARK_BYTES not in line:
        return line

    get = named.get if isinstance(named, Mapping) else named

    def fill(m: re.Match[bytes]) -> bytes:
        if m.group(1) is None:
            return _MARK_BYTES
        value = get(m.group(1).decode("ascii"))
        return m.group(0) if value is None else _json.encode(value)[1:-1]

    return _PLACEHOLDER_BYTES.sub(fill, line)


class Refill:
    """What a resume folds its log through: each named placeholder filled with the value
    the resume brings; a secret it does not bring gets a stand-in that names it (so the
    model is told it is missing), redacted to the same placeholder again by ``redactor``.

    Args:
        redactor: the resumed log's redactor.
        named: the secrets the resume brings, by variable name.
    """

    def __init__(self, redactor: Redactor, named: Mapping[str, str]) -> None:
        self.redactor = redactor
        self.named = dict(named)

    def value(self, name: str) -> str:
        """The value that fills ``[REDACTED:name]``."""
        found = self.named.get(name)
        if found is None:
            found = self.named[name] = f"\u27e6{name}: a secret this session was not given again\u27e7"
            self.redactor.add(named={name: found})
        return found

    def line(self, line: bytes) -> bytes:
        """``line`` filled (``refill_line``)."""
        return refill_line(line, self.value)
