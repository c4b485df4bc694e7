"""``Redactor.text`` skips the key-shape pattern when the text cannot hold a key, and is
still exactly the full redaction (issue 19: the pattern, tried at every character, was
half of a 100 MiB log's resume)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from musec.daemon.protocol import KEY_SHAPES
from musec.daemon.redaction import Redactor

SECRET = "hunter2-secret-value"
KEY = "sk-ant-" + "aB3" * 8
PARTS = st.sampled_from(["sk-", "sk-ant-", "sk-proj-", "a", "B", "7", "_", "-", " ", "\n", "[REDACTED:", "[REDACTED:X]",
                         SECRET, KEY, "Ab1" * 12, "é"])
TEXT = st.lists(st.one_of(PARTS, st.text(max_size=6)), max_size=40).map("".join)


def _full(redactor: Redactor, value: str) -> str:
    """The redaction as written before the shortcut: escape, secrets, then every key shape."""
    value = value.replace("[REDACTED:", "[REDACTED:[:")
    for s in sorted(redactor._placeholders, key=len, reverse=True):
        value = value.replace(s, redactor._placeholders[s])
    return KEY_SHAPES.sub("[REDACTED]", value)


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_text_equals_the_full_redaction(value: str) -> None:
    redactor = Redactor([SECRET], {"API_KEY": "named-secret-1234"})
    assert redactor.text(value) == _full(redactor, value)


def test_a_key_is_still_redacted_and_plain_text_kept() -> None:
    redactor = Redactor()
    assert redactor.text(f"key {KEY} end") == "key [REDACTED] end"
    assert redactor.text("no key here, just sk and - apart") == "no key here, just sk and - apart"
