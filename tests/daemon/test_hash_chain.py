"""The log's hash chain against the documented rule, computed here with hashlib alone.

DESIGN §5 and daemon/eventlog.py's docstring: ``h_n = sha256(h_{n-1} || body_n)`` cut to
its first 32 hex digits, with ``h_{-1} = ""`` and ``h`` taken as ASCII; ``body_n`` is the
line with its trailing ``,"h":"…"`` member removed and the object closed with ``}``.
Nothing from eventlog.py computes a hash in this file: it only writes and verifies.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from musec.daemon.eventlog import EventLog, verify

# Two lines whose h were computed once, by hand, from the rule (the known answer).
KNOWN = [
    (b'{"seq":0,"ts":1.0,"agent":"main","type":"user_message","text":"hi"}', "6051489e432bdd742824fe7ef472b602"),
    (b'{"seq":1,"ts":2.0,"agent":"main","type":"turn_ended","exit_reason":"finished","result":"","message":""}',
     "7ea85f17c749aee73af58fe409b2b792"),
]


def rule(prev_h: str, body: bytes) -> str:
    """The documented chain rule."""
    return hashlib.sha256(prev_h.encode("ascii") + body).hexdigest()[:32]


def with_h(body: bytes, h: str) -> bytes:
    return body[:-1] + b',"h":"' + h.encode("ascii") + b'"}'


def test_the_rule_gives_the_known_answer() -> None:
    prev = ""
    for body, h in KNOWN:
        assert rule(prev, body) == h
        prev = h


def test_a_log_chained_by_hand_verifies_and_the_log_goes_on_with_it(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(with_h(body, h) + b"\n" for body, h in KNOWN))
    path.chmod(0o600)
    report = verify(path)
    assert report.ok and report.events == 2 and report.last_h == KNOWN[-1][1]
    elog, opened = EventLog.open(path)
    _, line = elog.append("user_message", text="more")
    elog.close()
    body = line[: line.rindex(b',"h":"')] + b"}"
    assert json.loads(line)["seq"] == 2 and json.loads(line)["h"] == rule(KNOWN[-1][1], body)


def test_every_h_the_log_writes_follows_the_rule(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    elog = EventLog.create(path, secrets=["a-secret-value"])
    elog.append("user_message", text="fix it; the key is a-secret-value", sync=True)
    elog.append("model_request", provider="scripted", model="m", digest="d", messages=1)
    elog.append("tool_started", call_id="c1", tool="bash", input={"command": "printf 'é\\n\"x\"'"}, sync=True)
    elog.append("turn_ended", exit_reason="finished")
    elog.close()
    prev = ""
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""  # every line ends with a newline
    for n, line in enumerate(lines[:-1]):
        head, sep, tail = line.rpartition(b',"h":"')
        assert sep and tail.endswith(b'"}') and len(tail) == 32 + 2  # h is the last member
        h = tail[:-2].decode("ascii")
        assert h == rule(prev, head + b"}"), f"line {n}"
        assert json.loads(line)["seq"] == n
        prev = h
    assert b"a-secret-value" not in path.read_bytes()  # the chain covers the redacted bytes
