"""``@path`` mentions (agents/attachments.py): the parser (Hypothesis), reading under the
read rules with real files, a real policy and real symlinks, and the user turn the history
folds from a ``user_message`` (issue 18 item 4)."""

from __future__ import annotations

import os
import string
from pathlib import Path

import msgspec
from hypothesis import given
from hypothesis import strategies as st
from musec.agents.attachments import (
    MAX_ATTACHMENTS,
    find_mentions,
    quote_mention,
    read_attachments,
    user_turn,
)
from musec.agents.core import events as ev
from musec.agents.core.conversation import TextBlock
from musec.agents.history import History
from musec.agents.permissions import Policy, parse_rule
from musec.agents.tools.base import ToolContext

# --- the parser ------------------------------------------------------------------------

_PATH_CHARS = string.ascii_letters + string.digits + "_-./~ ()[]é"
paths = st.text(alphabet=_PATH_CHARS, min_size=1, max_size=30).filter(lambda p: p.strip(" ") and p.strip("."))
words = st.text(alphabet=string.ascii_letters + string.digits + "_-.", min_size=1, max_size=12)


@given(st.text(max_size=200))
def test_the_parser_never_fails_and_finds_only_plain_paths(text: str) -> None:
    found = find_mentions(text)
    assert len(found) == len(set(found))
    for path in found:
        assert path and "\n" not in path and '"' not in path


@given(st.lists(paths, min_size=1, max_size=4), words, words)
def test_a_quoted_or_bare_mention_is_read_back_as_its_path(chosen: list[str], before: str, after: str) -> None:
    text = f"{before} " + " and ".join(quote_mention(p) for p in chosen) + f", {after}."
    assert find_mentions(text) == list(dict.fromkeys(chosen))


@given(words, words, st.sampled_from(["com", "org", "example.invalid"]))
def test_an_email_is_no_mention(user: str, host: str, tld: str) -> None:
    assert find_mentions(f"mail {user}@{host}.{tld} or write to ({user}@{host}.{tld})") == []


@given(words)
def test_nothing_in_code_is_a_mention(name: str) -> None:
    assert find_mentions(f"see `@{name}` and\n```python\n@{name}\ndef f(): pass\n```\nbut @{name}x") == [f"{name}x"]


def test_the_forms_of_a_mention() -> None:
    text = '@a.py, (see @src/b.py) @~/n.md @/etc/hosts @"my notes.txt" @dir/ @a.py again: @x.py. @f(1).txt'
    assert find_mentions(text) == ["a.py", "src/b.py", "~/n.md", "/etc/hosts", "my notes.txt", "dir/", "x.py", "f(1).txt"]
    assert find_mentions("a@b.com @ alone @@x") == []


# --- reading under the rules --------------------------------------------------------------


def _read(ws: Path, text: str, *, deny: tuple[str, ...] = (), budget: int = 10_000) -> list[ev.Attachment]:
    policy = Policy(rules=[parse_rule(r, "deny") for r in deny], workspace=ws)
    return read_attachments(text, ToolContext(workspace=ws, env={"HOME": str(ws.parent)}), policy, "auto", budget)


def test_files_directories_and_refusals(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "x.py").write_text("print('hi')\n")
    (ws / "my notes.txt").write_text("a note\n")
    (ws / ".env").write_text("TOKEN=1\n")
    (ws / "img.png").write_bytes(b"\x89PNG\0\0\0rest")
    (tmp_path / "outside.txt").write_text("not yours\n")
    os.symlink(tmp_path / "outside.txt", ws / "link.txt")
    found = _read(ws, 'explain @src/x.py and @"my notes.txt", @src, @.env @img.png @nope.py @../outside.txt @link.txt @~/outside.txt',
                  deny=("read(.env)",))
    by = {a.path: a for a in found}
    assert by["src/x.py"] == ev.Attachment(path="src/x.py", size_bytes=12, content="print('hi')\n")
    assert by["my notes.txt"].content == "a note\n"
    assert by["src/"].kind == "directory" and by["src/"].content == "src/x.py"
    assert by[".env"].kind == "refused" and "deny read(.env)" in by[".env"].refused and not by[".env"].content
    assert by["img.png"].kind == "binary" and "not inlined" in by["img.png"].content and "PNG" not in by["img.png"].content
    assert by["nope.py"].refused == "no such file or directory"
    assert "outside the workspace" in by["../outside.txt"].refused
    assert "symlink" in by["link.txt"].refused
    assert "outside the workspace" in by["~/outside.txt"].refused
    assert [a.path for a in found][:2] == ["src/x.py", "my notes.txt"]


def test_a_listing_hides_what_a_deny_rule_covers(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    for name in ("a.toml", "secret.key", "b.toml"):
        (tmp_path / "conf" / name).write_text("x\n")
    [listing] = _read(tmp_path, "look in @conf/", deny=("read(*.key)",))
    assert listing.content.splitlines() == ["conf/a.toml", "conf/b.toml", "[1 result line hidden by the deny rule read(*.key)]"]


def test_a_file_over_the_budget_is_attached_as_head_and_tail_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "big.log").write_text("".join(f"line {n}\n" for n in range(1, 5001)))
    [a] = _read(tmp_path, "why @big.log", budget=200)
    assert a.content.startswith("line 1\n") and a.content.endswith("line 5000\n")
    assert "line 2500\n" not in a.content and len(a.content) < 1200
    assert "read_file(path='big.log', offset=" in a.content and a.size_bytes == (tmp_path / "big.log").stat().st_size
    assert a.partial  # the person is told only its ends went (fresh-user s8 J12)
    (tmp_path / "small.log").write_text("line 1\n")
    [whole] = _read(tmp_path, "why @small.log", budget=200)
    assert not whole.partial and whole.content == "line 1\n"


def test_a_file_over_read_files_cap_attaches_its_ends(tmp_path: Path) -> None:
    with open(tmp_path / "huge.txt", "w") as f:
        f.write("first\n" + "middle line\n" * 300_000 + "last\n")
    [a] = _read(tmp_path, "@huge.txt", budget=100)
    assert a.content.startswith("first\n") and a.content.endswith("last\n") and "grep(pattern=..., path='huge.txt')" in a.content
    assert a.partial


def test_too_many_mentions_are_refused_past_the_cap(tmp_path: Path) -> None:
    found = _read(tmp_path, " ".join(f"@f{n}" for n in range(MAX_ATTACHMENTS + 2)))
    assert [a.refused.startswith("more than") for a in found].count(True) == 2


# --- the user turn and the event ----------------------------------------------------------


def test_the_history_builds_the_turn_from_the_event_alone(tmp_path: Path) -> None:
    attached = [ev.Attachment(path="a.py", size_bytes=6, content="x = 1\n"),
                ev.Attachment(path=".env", kind="refused", refused="denied")]
    event = ev.UserMessage(text="explain @a.py @.env", attachments=attached, seq=0)
    line = msgspec.json.encode(ev.line_fields(event))
    again = ev.decode_event(line)
    assert again == event  # the event keeps everything the turn needs
    history = History("main")
    history.apply(again)
    [message] = history.messages
    text, block = message.content
    assert text == TextBlock("explain @a.py @.env")
    assert isinstance(block, TextBlock) and 'source="attached file a.py (6 bytes)"' in block.text and "\nx = 1\n\n" in block.text
    assert [p.text for p in history.pinned] == ["explain @a.py @.env"]  # the file is not pinned
    assert user_turn("plain", []) == ["plain"]
    old = ev.decode_event(b'{"seq":0,"ts":1.0,"agent":"main","type":"user_message","text":"go"}')
    assert old.attachments is msgspec.UNSET  # an old line decodes, and writes no new member
    assert msgspec.json.encode(ev.line_fields(old)) == b'{"seq":0,"ts":1.0,"agent":"main","type":"user_message","text":"go"}'
