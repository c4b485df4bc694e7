"""The session index and collection in-process, over real log files in a temporary state
directory: resolving ids, listing with statuses, and ``gc`` removing only what it may.

The logs are written as JSON lines directly (the index reads only their first and last
lines), so these tests do not depend on how the event log writes them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from musec.daemon.collect import collect
from musec.daemon.errors import SessionNotFound
from musec.daemon.index import SessionIndex, new_session_id

DAY_S = 86_400.0


class Live:
    """A live session as the index sees one: something with a status."""

    def __init__(self, status: str) -> None:
        self.status = status


def _log(directory: Path, sid: str, *events: dict[str, Any], torn: bytes = b"") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{sid}.jsonl"
    lines = [json.dumps({"seq": n, "agent": "main", **ev}, separators=(",", ":")) + "\n" for n, ev in enumerate(events)]
    path.write_bytes("".join(lines).encode() + torn)
    return path


def _started(ts: float, workspace: str = "/w", title: str = "") -> dict[str, Any]:
    return {"ts": ts, "type": "session_started", "workspace": workspace, "title": title}


def _ended(ts: float, reason: str = "finished") -> dict[str, Any]:
    return {"ts": ts, "type": "session_ended", "exit_reason": reason}


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


def test_ids_resolve_by_unique_prefix_only(state: Path) -> None:
    sessions = state / "sessions"
    for sid in ("18f0a-aaaaaa", "18f0b-bbbbbb", "18f0b-cccccc"):
        _log(sessions, sid, _started(1.0))
    index = SessionIndex(sessions, {})
    assert index.resolve_id("18f0a-aaaaaa") == "18f0a-aaaaaa"
    assert index.resolve_id("18f0a") == "18f0a-aaaaaa"
    with pytest.raises(SessionNotFound, match="names 2 sessions; give more of the id"):
        index.resolve_id("18f0b")
    for bad in ("18f0c", "", "../sessions/18f0a-aaaaaa", "*", "18f0?-aaaaaa", "[1]"):  # no globbing
        with pytest.raises(SessionNotFound):
            index.resolve_id(bad)
    assert index.log_path("x") == sessions / "x.jsonl"


def test_listing_is_newest_first_with_each_status(state: Path) -> None:
    sessions = state / "sessions"
    _log(sessions, "a", _started(100.0, title="first"), _ended(150.0, "budget"))
    _log(sessions, "b", _started(200.0), {"ts": 210.0, "type": "user_message", "text": "fix the bug\nplease"})
    _log(sessions, "c", _started(300.0, workspace="/other"), torn=b'{"seq": 1, "ty')
    _log(sessions, "d")  # empty: damaged
    index = SessionIndex(sessions, {"c": Live("idle")})
    listed = index.list_sessions()
    assert [s.id for s in listed] == ["d", "c", "b", "a"]  # the damaged one by its file's time: now
    by_id = {s.id: s for s in listed}
    assert by_id["a"].status == "budget" and by_id["a"].title == "first" and by_id["a"].updated_at == 150.0
    assert by_id["b"].status == "interrupted" and by_id["b"].title == "fix the bug"  # its first task's line
    assert by_id["c"].status == "idle"  # live: the host's word, not the log's
    assert by_id["d"].status == "broken"
    assert [s.id for s in index.list_sessions("/other")] == ["c"]
    assert index.latest("/w") == "b" and index.latest("/nowhere") is None


def test_collect_removes_old_ended_sessions_and_unreferenced_blobs(state: Path) -> None:
    sessions, blobs = state / "sessions", state / "blobs"
    kept_blob, lost_blob = "ab" + "1" * 62, "cd" + "2" * 62
    for name in (kept_blob, lost_blob):
        (blobs / name[:2]).mkdir(parents=True, exist_ok=True)
        (blobs / name[:2] / name[2:]).write_bytes(b"x" * 100)
    old = _log(sessions, "old", _started(1.0), {"ts": 2.0, "type": "tool_finished", "blob": lost_blob},
               torn=b"{")
    old.with_name("old.jsonl.torn").write_bytes(b"{\"half")
    _log(sessions, "live", _started(1.0))
    _log(sessions, "keeps", _started(1.0), {"ts": 2.0, "type": "tool_finished", "blob": kept_blob})
    _log(sessions, "new", _started(9e12))  # updated in the future: never old enough
    index = SessionIndex(sessions, {"live": Live("running"), "keeps": Live("idle")})

    (blobs / "ef").mkdir()
    (blobs / "ef" / ("3" * 62 + ".tmp4242")).write_bytes(b"y" * 1000)  # a part a crash left
    size = old.stat().st_size + old.with_name("old.jsonl.torn").stat().st_size
    # The dry run counts the blobs that would go too (fresh-user s8 J4: it said 6 KB, the run freed 2 MB).
    assert collect(index, state, blobs, DAY_S, dry_run=True) == (["old"], size + 1100, [], [size], [], [[]])
    assert old.exists() and (blobs / lost_blob[:2] / lost_blob[2:]).exists()  # a dry run removes nothing

    removed, freed, kept, _sizes, _notes, _items = collect(index, state, blobs, DAY_S, dry_run=False)
    assert (removed, kept) == (["old"], [])
    assert not old.exists() and not old.with_name("old.jsonl.torn").exists()
    assert {p.stem for p in sessions.glob("*.jsonl")} == {"live", "keeps", "new"}
    assert (blobs / kept_blob[:2] / kept_blob[2:]).exists()  # a remaining log refers to it
    assert not (blobs / lost_blob[:2] / lost_blob[2:]).exists()
    assert freed == size + 1100  # what the dry run said


def test_new_session_ids_sort_by_time_and_name_one_log() -> None:
    first, second = new_session_id(), new_session_id()
    assert first != second and "/" not in first
    assert first.split("-")[0] <= second.split("-")[0]


def test_listing_rereads_only_the_logs_that_changed(state: Path) -> None:
    sessions = state / "sessions"
    a = _log(sessions, "a", _started(100.0, title="first"))
    b = _log(sessions, "b", _started(200.0, title="second"))
    index = SessionIndex(sessions, {})
    assert {s.id: s.title for s in index.list_sessions()} == {"a": "first", "b": "second"}
    # Same size, same mtime: the daemon's index keeps what it read (the file is not reopened).
    st = a.stat()
    a.write_bytes(a.read_bytes().replace(b"first", b"FIRST"))
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns))
    # A log that grew is read again.
    _log(sessions, "b", _started(200.0, title="second"), _ended(250.0, "budget"))
    by_id = {s.id: s for s in index.list_sessions()}
    assert by_id["a"].title == "first"
    assert by_id["b"].status == "budget" and by_id["b"].updated_at == 250.0
    b.unlink()  # collected: gone from the listing and from the index
    assert [s.id for s in index.list_sessions()] == ["a"]
    assert set(index._cache) == {"a.jsonl"}


def test_the_last_line_is_read_whole_however_long(state: Path) -> None:
    # Fresh-user s8 J8: the index read the last 64 KiB only; a session whose end event held
    # a 5 MB answer (as logs before the fix do) was listed as interrupted, its updated_at
    # its start. A torn tail after it changes nothing; a huge last answer with no end after
    # it is an interrupted session that was active then.
    sessions = state / "sessions"
    huge = "x" * 5_000_000
    _log(sessions, "a", _started(100.0), {**_ended(150.0), "result": huge})
    _log(sessions, "b", _started(200.0), {**_ended(250.0, "budget"), "result": huge}, torn=b'{"seq": 2, "ty')
    _log(sessions, "c", _started(300.0), {"ts": 360.0, "type": "model_response", "content": [{"type": "text", "text": huge}]})
    _log(sessions, "d", {**_started(400.0), "title": "y" * 100_000}, _ended(450.0))  # a long first line too
    by_id = {s.id: s for s in SessionIndex(sessions, {}).list_sessions()}
    assert (by_id["a"].status, by_id["a"].updated_at) == ("finished", 150.0)
    assert (by_id["b"].status, by_id["b"].updated_at) == ("budget", 250.0)
    assert (by_id["c"].status, by_id["c"].updated_at) == ("interrupted", 360.0)
    assert (by_id["d"].status, by_id["d"].updated_at) == ("finished", 450.0)
