"""Words for what the agents and the daemon say to people: counts with their nouns.

The client has its own copy (``musec.client.output.counted``: the client may not import
the agents); tests/test_counted.py holds the two to the same answers.
"""

from __future__ import annotations


def counted(n: int, noun: str, plural: str = "") -> str:
    """``n`` with its noun in the number it needs: ``1 edit``, ``0 edits``, ``2 edits``
    (``plural`` for a noun that does not just take an s: ``counted(n, "entry", "entries")``)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
