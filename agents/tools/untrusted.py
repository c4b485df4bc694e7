"""How text from outside musec (files, command output, other agents' findings) is marked
in the prompt: an ``untrusted-data`` element naming its source (DESIGN §11).

The system prompt (``agents/prompt.py``) tells the model that such text is data, never
instructions. Used for tool results (``agents/history.py``) and for repository text that a
background agent quotes in its messages (``agents/roles/verifier.py``).
"""

from __future__ import annotations

import hashlib

__all__ = ["mark_untrusted"]


def mark_untrusted(source: str, content: str, stored: str | None = None) -> str:
    """Wrap ``content`` in an ``untrusted-data`` element naming ``source`` (a tool's name).

    The element's id is a digest of the content as the log stores it (``stored``: the
    content redacted; ``content`` itself when not given), so text inside cannot forge the
    closing tag (it would have to contain its own digest), and the live run and a replay
    of its redacted log wrap a result holding a secret alike.
    """
    tag = hashlib.sha256((content if stored is None else stored).encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f'<untrusted-data id="{tag}" source="{source}">\n{content}\n</untrusted-data id="{tag}">'
