"""The session event log (DESIGN §5): hash chain, verify, torn tails, locks, redaction."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from musec.agents.core.conversation import TextBlock, ToolCallBlock
from musec.agents.core.events import (
    ModelResponse,
    SessionEnded,
    SessionStarted,
    ToolFinished,
    ToolStarted,
    UserMessage,
    decode_event,
)
from musec.daemon.errors import LogCorrupt, SessionLocked
from musec.daemon.eventlog import (
    EventLog,
    chain_hash,
    first_and_last,
    iter_events,
    read_events,
    read_lines,
    split_line,
    verify,
    verify_bytes,
)

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
FAKE_KEY = "sk-ant-api03-" + "A1b2C3d4" * 6


def _write_log(path: Path, n: int = 5) -> list[bytes]:
    elog = EventLog.create(path)
    try:
        elog.append(SessionStarted(workspace="/w", model="m"))
        for i in range(1, n):
            elog.append(ToolStarted(call_id=f"c{i}", input={"n": i, "text": "é\n\"x\""}))
    finally:
        elog.close()
    return read_lines(path)


@pytest.fixture(scope="module")
def log_bytes() -> bytes:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s.jsonl"
        _write_log(path, 4)
        return path.read_bytes()


def _scratch(data: bytes) -> Path:
    fd, name = tempfile.mkstemp(suffix=".jsonl")
    os.write(fd, data)
    os.close(fd)
    return Path(name)


# --- writing and the chain ------------------------------------------------------------


def test_seq_counts_from_zero_and_the_chain_verifies(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    lines = _write_log(path, 6)
    assert [json.loads(line)["seq"] for line in lines] == list(range(6))
    prev = ""
    for line in lines:
        body, h = split_line(line)
        assert h == chain_hash(prev, body) == json.loads(line)["h"]
        assert line.endswith(f',"h":"{h}"}}'.encode())  # h is the last member
        prev = h
    report = verify(path)
    assert report.ok and report.events == 6 and report.last_h == prev
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.read_bytes().endswith(b"\n")


def test_line_format(tmp_path: Path) -> None:
    elog = EventLog.create(tmp_path / "s.jsonl")
    written, line = elog.append(UserMessage(agent="worker:a", text="hi"))
    elog.close()
    event = json.loads(line)
    assert written.seq == 0
    assert list(event) == ["seq", "ts", "agent", "type", "text", "h"]
    assert event["agent"] == "worker:a" and event["type"] == "user_message" and event["text"] == "hi"
    assert isinstance(event["ts"], float) and event["ts"] == written.ts
    assert read_events(tmp_path / "s.jsonl") == [written]


def test_create_refuses_an_existing_file(tmp_path: Path) -> None:
    _write_log(tmp_path / "s.jsonl", 1)
    with pytest.raises(FileExistsError):
        EventLog.create(tmp_path / "s.jsonl")


def test_reopen_continues_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _write_log(path, 3)
    elog, report = EventLog.open(path)
    assert report.events == 3 and report.torn_bytes == 0 and report.torn_path is None
    assert elog.append(SessionEnded(exit_reason="finished"))[0].seq == 3
    elog.close()
    elog.close()  # idempotent
    assert verify(path).ok and verify(path).events == 4


def test_open_an_empty_log(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    EventLog.create(path).close()
    report = verify(path)
    assert not report.ok and any("empty" in problem for problem in report.problems)
    elog, opened = EventLog.open(path)
    assert opened.events == 0
    elog.append(SessionStarted())
    elog.close()
    assert verify(path).ok


# --- tampering is detected ------------------------------------------------------------


@SETTINGS
@given(st.data())
def test_flipping_any_bit_is_detected(log_bytes: bytes, data: st.DataObject) -> None:
    pos = data.draw(st.integers(0, len(log_bytes) - 1), label="pos")
    bit = data.draw(st.integers(0, 7), label="bit")
    damaged = bytearray(log_bytes)
    damaged[pos] ^= 1 << bit
    report = verify_bytes(bytes(damaged))
    assert not report.ok
    if pos == len(log_bytes) - 1:  # the last newline: a torn tail, not a damaged line
        assert report.torn_bytes and not report.problems
    else:
        assert report.problems


def test_deleting_swapping_and_truncating_are_detected(log_bytes: bytes) -> None:
    lines = log_bytes.split(b"\n")[:-1]
    n = len(lines)
    for i in range(n - 1):  # deleting any line but the last
        report = verify_bytes(b"".join(line + b"\n" for j, line in enumerate(lines) if j != i))
        assert report.problems, i
    for i in range(n - 1):
        swapped = list(lines)
        swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
        assert verify_bytes(b"".join(line + b"\n" for line in swapped)).problems
    duplicated = [*lines[:2], lines[1], *lines[2:]]
    assert verify_bytes(b"".join(line + b"\n" for line in duplicated)).problems
    for cut in range(1, len(log_bytes)):
        report = verify_bytes(log_bytes[:cut])
        if log_bytes[cut - 1 : cut] == b"\n":
            # Whole lines dropped from the end leave a valid, shorter chain: the chain alone
            # cannot see it (the last ``h`` would have to be kept elsewhere).
            assert report.ok and report.events < n
        else:
            assert not report.ok and report.torn_bytes


@SETTINGS
@given(st.data())
def test_reading_events_stops_where_verify_does(log_bytes: bytes, data: st.DataObject) -> None:
    """Every view reads the log through ``iter_events``: a changed line (one bit, or two
    lines swapped) is a ``LogCorrupt`` at the seq ``verify`` names, never an event that
    was not logged (fresh-user trial s7: ``musec log``/``replay`` showed forged lines)."""
    damaged = bytearray(log_bytes)
    if data.draw(st.booleans(), label="swap"):
        lines = log_bytes.split(b"\n")[:-1]
        i = data.draw(st.integers(0, len(lines) - 2), label="i")
        lines[i], lines[i + 1] = lines[i + 1], lines[i]
        damaged = bytearray(b"".join(line + b"\n" for line in lines))
    else:
        damaged[data.draw(st.integers(0, len(log_bytes) - 2), label="pos")] ^= 1 << data.draw(st.integers(0, 7))
    report = verify_bytes(bytes(damaged))
    path = _scratch(bytes(damaged))
    try:
        read: list[object] = []
        with pytest.raises(LogCorrupt) as caught:
            read.extend(iter_events(path))
        assert len(read) == report.events and f"seq {report.events}" in str(caught.value)
        assert read == read_events(_scratch(log_bytes))[: report.events]
    finally:
        path.unlink()


def test_editing_a_line_and_rehashing_only_it_is_detected(log_bytes: bytes) -> None:
    lines = log_bytes.split(b"\n")[:-1]
    event = json.loads(lines[1])
    event["call_id"] = "evil"
    prev_h = json.loads(lines[0])["h"]
    del event["h"]
    body = msgspec.json.encode(event)
    event["h"] = chain_hash(prev_h, body)
    lines[1] = msgspec.json.encode(event)
    report = verify_bytes(b"".join(line + b"\n" for line in lines))
    assert report.problems and "seq 2" in report.problems[0]


def test_a_line_without_a_hash_is_damaged() -> None:
    assert verify_bytes(b'{"seq":0}\n').problems
    assert verify_bytes(b"[1]\n").problems
    assert verify_bytes(b"\n").problems
    with pytest.raises(LogCorrupt):
        split_line(b'{"seq":0}')


# --- torn tails -------------------------------------------------------------------------


@SETTINGS
@given(cut=st.integers(1, 10_000))
def test_a_torn_tail_is_cut_kept_and_appending_goes_on(log_bytes: bytes, cut: int) -> None:
    lines = log_bytes.split(b"\n")[:-1]
    whole = b"".join(line + b"\n" for line in lines[:-1])
    last = lines[-1] + b"\n"
    cut = cut % len(last)
    if cut == 0:
        cut = 1
    torn = last[:cut]  # never ends in its newline: a partial last line
    path = _scratch(whole + torn)
    torn_path = path.with_name(path.name + ".torn")
    try:
        assert verify(path).torn_bytes == len(torn)
        elog, report = EventLog.open(path)
        assert report.torn_bytes == len(torn) and report.torn_path == str(torn_path)
        assert report.events == len(lines) - 1
        assert torn_path.read_bytes() == torn + b"\n"
        assert path.read_bytes() == whole
        written, _ = elog.append(UserMessage(text="after the crash"))
        elog.close()
        assert written.seq == len(lines) - 1
        report = verify(path)
        assert report.ok and report.events == len(lines)
        assert read_events(path)[-1] == written
    finally:
        path.unlink()
        torn_path.unlink(missing_ok=True)


def test_a_log_that_is_only_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"seq":0,"ts":1')
    elog, report = EventLog.open(path)
    assert report.events == 0 and report.torn_bytes == 15
    elog.append(SessionStarted())
    elog.close()
    assert verify(path).ok


def test_torn_tails_accumulate_in_the_torn_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _write_log(path, 2)
    for junk in (b"first", b"second"):
        with open(path, "ab") as f:
            f.write(junk)
        EventLog.open(path)[0].close()
    assert (tmp_path / "s.jsonl.torn").read_bytes() == b"first\nsecond\n"
    assert verify(path).ok


@pytest.mark.parametrize("victim", [0, 1, 2])
def test_a_corrupt_line_before_the_last_makes_open_raise(tmp_path: Path, victim: int) -> None:
    path = tmp_path / "s.jsonl"
    lines = _write_log(path, 4)
    lines[victim] = lines[victim].replace(b'"seq"', b'"SEQ"', 1)
    original = b"".join(line + b"\n" for line in lines)
    path.write_bytes(original)
    with pytest.raises(LogCorrupt, match=rf"(seq|expected) {victim}\b"):
        EventLog.open(path)
    assert path.read_bytes() == original  # not appended to
    with pytest.raises(LogCorrupt):
        EventLog.open(path)


def test_read_events_names_the_damaged_seq(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    lines = _write_log(path, 3)
    path.write_bytes(lines[0] + b"\n" + b"{oops\n" + lines[2] + b"\n")
    with pytest.raises(LogCorrupt, match="seq 1"):
        read_events(path)


def test_first_and_last(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    lines = _write_log(path, 3)
    with open(path, "ab") as f:
        f.write(b'{"seq":3,"to')
    first, last = first_and_last(path)
    assert first == decode_event(lines[0]) and last == decode_event(lines[-1])
    with open(path, "ab") as f:  # a line of a type a newer musec may write: no event
        f.write(b'"}\n{"seq":4,"ts":1.0,"agent":"main","type":"from_the_future"}\n')
    assert first_and_last(path)[1] is None
    path.write_bytes(b"")
    assert first_and_last(path) == (None, None)


# --- the lock ---------------------------------------------------------------------------


def test_a_second_open_in_this_process_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    elog = EventLog.create(path)
    elog.append(SessionStarted())
    try:
        for _ in range(3):  # and refusing does not leak or double-close descriptors
            with pytest.raises(SessionLocked):
                EventLog.open(path)
        assert os.fstat(elog._fd)  # our descriptor is still ours
        elog.append(UserMessage(text="still writing"))
    finally:
        elog.close()
    EventLog.open(path)[0].close()  # free again
    assert verify(path).events == 2


_HOLDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from musec.daemon.eventlog import EventLog
    from musec.daemon.errors import SessionLocked
    path = Path(sys.argv[1])
    if sys.argv[2] == "hold":
        elog, _ = EventLog.open(path)
        print("held", flush=True)
        sys.stdin.read()
        elog.close()
    else:
        try:
            EventLog.open(path)
        except SessionLocked as exc:
            print("locked", exc)
        else:
            print("opened")
""")


def test_another_process_cannot_open_a_held_log(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _write_log(path, 2)
    elog, _ = EventLog.open(path)
    try:
        out = subprocess.run([sys.executable, "-c", _HOLDER, str(path), "try"],
                             capture_output=True, text=True, timeout=60)
        assert out.stdout.startswith("locked"), out.stderr
    finally:
        elog.close()
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path), "hold"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(SessionLocked):
            EventLog.open(path)
    finally:
        holder.communicate("", timeout=60)
    EventLog.open(path)[0].close()  # released when the holder closed


# --- redaction --------------------------------------------------------------------------


def test_secrets_and_key_shapes_never_reach_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    secret = "hunter2-hunter2-very-secret"
    elog = EventLog.create(path, secrets=[secret, "short"])
    elog.redact.add(["added-later-secret"])
    elog.append(ToolFinished(call_id="c1", content=f"key={secret} and {FAKE_KEY}"))
    elog.append(ToolStarted(call_id="c2", input={"nested": {"k": [secret]}, secret: "as a key"}))
    elog.append(UserMessage(text="openai sk-proj-" + "Ab1x" * 10))
    elog.append(UserMessage(text="added-later-secret; short stays"))
    elog.close()
    data = path.read_bytes()
    for needle in (secret, FAKE_KEY, "sk-proj-", "added-later-secret", "sk-ant-"):
        assert needle.encode() not in data
    assert b"short stays" in data and data.count(b"[REDACTED]") == 6
    assert verify(path).ok


@pytest.mark.parametrize(("secret", "text"), [
    ("nABCDEFGH", "line\nABCDEFGH"),  # a spurious match after the backslash of "\n"
    ('quote"d-secret', 'say quote"d-secret'),  # written escaped, still a secret
    ("0000000\x1f", "0000000\x1f"),  # a control character: escaped as \u001f
])
def test_redaction_respects_json_escapes(tmp_path: Path, secret: str, text: str) -> None:
    path = tmp_path / "s.jsonl"
    elog = EventLog.create(path, secrets=[secret])
    elog.append(UserMessage(text=text))
    elog.close()
    assert verify(path).ok
    (event,) = read_events(path)
    assert secret not in event.text


def test_structs_in_fields_are_encoded_and_redacted(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    elog = EventLog.create(path, secrets=["the-secret-value"])
    blocks = [TextBlock("ok the-secret-value"), ToolCallBlock("t1", "bash", {"command": "echo the-secret-value"})]
    written, line = elog.append(ModelResponse(content=blocks))
    elog.close()
    event = json.loads(line)
    assert event["content"][0] == {"type": "text", "text": "ok [REDACTED]"}
    assert event["content"][1]["input"] == {"command": "echo [REDACTED]"}
    # The event the caller keeps is not redacted: what runs is what the model asked for.
    assert written.content == blocks
    assert verify(path).ok


@SETTINGS
@given(secret=st.text(st.characters(codec="utf-8"), min_size=8, max_size=20),
       before=st.text(max_size=5), after=st.text(max_size=5))
def test_any_secret_is_redacted_and_the_log_stays_valid(tmp_path: Path, secret: str, before: str, after: str) -> None:
    assume(not set(secret) & set("[REDACTED]"))  # the replacement must not spell the secret again
    # A secret that is also part of the line's structure (``tool_fin`` in the type tag,
    # ``call_id``) stays there: the structure is never redacted, so the line reads back.
    assume(secret.encode() not in msgspec.json.encode({"type": "tool_finished", "call_id": "c", "content": "",
                                                          "is_error": False, "untrusted": True, "seq": 0, "ts": 0.0,
                                                          "agent": "main", "h": ""}))
    fd, name = tempfile.mkstemp(suffix=".jsonl", dir=tmp_path)
    os.close(fd)
    path = Path(name)
    path.unlink()
    elog = EventLog.create(path, secrets=[secret])
    elog.append(ToolFinished(call_id="c", content=before + secret + after))
    elog.close()
    data = path.read_bytes()
    assert verify(path).ok
    (event,) = read_events(path)
    assert isinstance(event, ToolFinished) and secret not in event.content
    assert secret.encode() not in data and msgspec.json.encode(secret)[1:-1] not in data


# --- a full disk ------------------------------------------------------------------------

_FULL_DISK = textwrap.dedent("""
    import errno, resource, signal, sys
    from pathlib import Path
    from musec.agents.core.events import ToolFinished, ToolStarted
    from musec.daemon.eventlog import EventLog
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    path = Path(sys.argv[1])
    elog, _ = EventLog.open(path)
    size = path.stat().st_size
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + int(sys.argv[2]), resource.RLIM_INFINITY))
    failures = 0
    for i in range(20):
        try:
            kind = ToolStarted if i % 2 == 0 else ToolFinished  # write-ahead and group-committed
            elog.append(kind(call_id=f"c{i}", content="y" * 100) if kind is ToolFinished
                        else kind(call_id=f"c{i}", input={"y": "y" * 100}))
        except OSError as exc:
            assert exc.errno in (errno.EFBIG, errno.ENOSPC), exc
            failures += 1
    print(failures, elog.next_seq)
    elog.close()
""")


@pytest.mark.parametrize("room", [0, 1, 150, 300])
def test_a_failed_write_leaves_whole_lines(tmp_path: Path, room: int) -> None:
    path = tmp_path / "s.jsonl"
    _write_log(path, 2)
    out = subprocess.run([sys.executable, "-c", _FULL_DISK, str(path), str(room)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    failures, next_seq = map(int, out.stdout.split())
    assert failures > 0
    data = path.read_bytes()
    assert data.endswith(b"\n")
    report = verify(path)
    assert report.ok and report.events == next_seq == 2 + 20 - failures
    elog, opened = EventLog.open(path)  # and the log goes on after the disk has room again
    assert opened.torn_bytes == 0
    elog.append(SessionEnded())
    elog.close()
    assert verify(path).ok


_SECRETS = ["s3cr3t-value", 'quo"te-secret\n', "sk-" + "a" * 40, "\nsk-ant-" + "api03-Ab1cdefghijklmnopq", "-sk-proj-" + "Ab1" * 12]
_TEXTS = st.text(st.characters(codec="utf-8"), max_size=8) | st.sampled_from(_SECRETS).map(lambda s: "x" + s)
_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | _TEXTS,
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXTS, inner, max_size=3),
                       max_leaves=12)


@SETTINGS
@given(value=_VALUES)
def test_scanning_the_encoding_first_redacts_exactly_as_walking_does(value: object) -> None:
    from musec.daemon.eventlog import Redactor

    redactor = Redactor(_SECRETS[:2])
    assert redactor.encode(value) == msgspec.json.encode(redactor(value))


@pytest.mark.parametrize("text", [
    "task-scheduler-configuration-option-handler-2024",  # "sk-" inside a word is no key
    "risk-assessment-framework-for-the-2025-budget-plans",
    "sk-learn-pipeline-with-tfidf-and-logistic-regression-v2",  # words, no random run
    "the disk-encryption-keys-rotation-policy-document-version-12",
])
def test_ordinary_text_with_sk_in_it_is_not_cut(text: str) -> None:
    from musec.daemon.eventlog import Redactor

    assert Redactor().text(text) == text and Redactor().encode({"t": text}) == msgspec.json.encode({"t": text})


@pytest.mark.parametrize("text", [
    "TOKEN = 'sk-ant-" + "test-0000-live-secret-value'",  # issue 13 case 1's example
    "key:\nsk-ant-api03-" + "Zx9" * 12,  # after an escaped character
    "OPENAI=sk-proj-" + "Ab1x" * 10,
])
def test_key_shaped_runs_are_redacted_whole(text: str) -> None:
    from musec.daemon.eventlog import Redactor

    out = Redactor().text(text)
    assert "sk-" not in out and out.count("[REDACTED]") == 1 and out.startswith(text.split("sk-")[0])


_KEY = "sk-ant-" + "test-0000-live-secret-value"
_PIECES = st.sampled_from([_KEY, "[REDACTED:", "[REDACTED:ANTHROPIC_API_KEY]", "[:", "]", "ANTHROPIC_API_KEY", '"', "\n", "\\", "é"])
_PIECED = st.lists(_PIECES | st.text(max_size=4), max_size=8).map("".join)


@SETTINGS
@given(text=_PIECED)
def test_named_placeholders_are_filled_again_exactly(text: str) -> None:
    # Issue 13 case 1: what is stored names the secret; a resume bringing the credential
    # gets the exact text back, and text that looked like a placeholder stays text.
    from musec.daemon.redaction import _KEY_PATTERNS, Redactor, refill_line

    assume(not _KEY_PATTERNS.search(text.replace(_KEY, "")))
    line = Redactor(named={"ANTHROPIC_API_KEY": _KEY}).encode({"t": text})
    assert _KEY.encode() not in line
    assert msgspec.json.decode(refill_line(line, {"ANTHROPIC_API_KEY": _KEY}))["t"] == text
    # Without the credential, the placeholder stays, and no outside text becomes a secret.
    assert _KEY.encode() not in refill_line(line, {})


def test_a_placeholder_in_the_outside_world_is_never_filled_with_the_secret(tmp_path: Path) -> None:
    from musec.daemon.redaction import refill_line

    path = tmp_path / "s.jsonl"
    elog = EventLog.create(path, secrets=[], named={"ANTHROPIC_API_KEY": _KEY})
    elog.append(ToolFinished(call_id="c1", content="a file says [REDACTED:ANTHROPIC_API_KEY]; the key is " + _KEY))
    elog.close()
    line = path.read_bytes().splitlines()[0]
    assert b"a file says [REDACTED:[:ANTHROPIC_API_KEY]; the key is [REDACTED:ANTHROPIC_API_KEY]" in line
    filled = msgspec.json.decode(refill_line(line, {"ANTHROPIC_API_KEY": _KEY}))["content"]
    assert filled == "a file says [REDACTED:ANTHROPIC_API_KEY]; the key is " + _KEY
    assert verify(path).ok


def test_a_secret_that_is_also_a_tag_or_field_name_leaves_the_line_readable(tmp_path: Path) -> None:
    """Found by Hypothesis: the secret ``tool_fin`` redacted the event's own ``type``."""
    path = tmp_path / "s.jsonl"
    elog = EventLog.create(path, secrets=["tool_fin", "is_error", "tool_use"])
    elog.append(ToolFinished(call_id="c", content="a tool_fin b is_error c"))
    elog.append(ModelResponse(content=[ToolCallBlock("t1", "bash", {"command": "echo tool_use"})]))
    elog.close()
    finished, response = read_events(path)
    assert isinstance(finished, ToolFinished) and finished.content == "a [REDACTED] b [REDACTED] c"
    assert isinstance(response, ModelResponse) and response.content[0].input == {"command": "echo [REDACTED]"}
    assert verify(path).ok


@SETTINGS
@given(cut=st.integers(0, 10_000))
def test_read_events_decodes_every_whole_line_and_leaves_a_torn_tail_out(log_bytes: bytes, cut: int) -> None:
    """read_events streams the file (issue 19); what it returns is every whole line decoded,
    as splitting the whole file's bytes gave, wherever the file ends."""
    data = log_bytes[: cut % (len(log_bytes) + 1)]
    path = _scratch(data)
    try:
        whole = data[: data.rfind(b"\n") + 1].split(b"\n")[:-1]
        assert read_events(path) == [decode_event(line) for line in whole]
    finally:
        path.unlink()
