"""The wire protocol (DESIGN §4): frames, the tagged unions, the incremental splitter."""

from __future__ import annotations

import struct
import typing
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from musec.daemon import protocol as p

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

CLIENT_MSGS = [
    p.Hello(protocol_version=p.PROTOCOL_VERSION, version="1.2.3", role="client", pid=42),
    p.Hello(protocol_version=7, version=""),
    p.StartSession(id=1, workspace="/w", model="m", task="fix it", approval="ask", max_turns=3,
                   credentials={"ANTHROPIC_API_KEY": "k" * 20}, interactive=True,
                   end_when_idle=False, sandbox="off", title="t"),
    p.StartSession(id=2, workspace="/w", model="m"),
    p.Attach(id=3, session_id="abc", since_seq=5),
    p.Attach(id=4, session_id="abc"),
    p.UserInput(id=5, session_id="abc", text="héllo\n\x00", credentials={"X": "y"}),
    p.ApprovalAnswer(id=6, session_id="abc", call_id="c1", decision="allow"),
    p.Interrupt(id=7, session_id="abc"),
    p.EndSession(id=8, session_id="abc"),
    p.SetApproval(id=8, session_id="abc", approval="auto"),
    p.ListSessions(id=9, workspace="/w"),
    p.ListSessions(id=10),
    p.ReadLog(id=11, session_id="ab"),
    p.VerifyLog(id=12, session_id="ab"),
    p.Status(id=13),
    p.Shutdown(id=14),
    p.ResumeSession(id=15, session_id="abc", task="go on", credentials={"K": "v"}, backlog=True),
    p.ResumeSession(id=16, workspace="/w"),
    p.Replay(id=17, session_id="abc"),
    p.CollectSessions(id=18, older_than_s=86400.0, dry_run=True),
    p.UserInput(id=19, session_id="abc", text="again", client_msg_id="m-1"),
    p.SwitchModel(id=20, session_id="abc", model="openai/gpt-5", credentials={"OPENAI_API_KEY": "k"}),
    p.ResumeSession(id=21, session_id="abc", model="sonnet"),
    p.ListModels(id=20),
    p.InspectWorkspace(id=21, workspace="/w", environment={"T": "v"}, start_mcp=True),
    p.ListWorkers(id=21, session_id="abc"),
    p.Compact(id=31, session_id="abc", focus="the parser", credentials={"ANTHROPIC_API_KEY": "k"}),
    p.ListAgents(id=23, session_id="abc"),
    p.Cost(id=24, session_id="abc"),
    p.Cost(id=25, workspace="/w"),
    p.ApplyIntegration(id=22, session_id="abc"),
    p.StartSession(id=23, workspace="/w", model="m", trust=True),
    p.StartSession(id=24, workspace="/w", model="m", interactive=True, ask_trust=True),
    p.StartSession(id=25, workspace="/w", model="m", max_wall_s=90.0,
                   goal=p.GoalRequest(condition="tests pass", check="pytest -q", max_turns=5, max_wall_s=600.0)),
    p.ResumeSession(id=26, session_id="abc", max_wall_s=30.0),
    p.GoalCommand(id=27, session_id="abc", text='all green --check "pytest -q"'),
    p.GoalCommand(id=28, session_id="abc"),
    p.StartSession(id=35, workspace="/w", model="m", plan=True, plan_only=True, approve_plan=True),
    p.ApprovalAnswer(id=36, session_id="abc", call_id="plan-1", decision="allow", plan_action="edit", text="# Plan\n"),
    p.ResumeSession(id=37, session_id="abc", approve_plan=True),
    p.ShowPlan(id=38, session_id="ab"),
]

DAEMON_MSGS = [
    p.Hello(protocol_version=p.PROTOCOL_VERSION, version="1", role="daemon", pid=1),
    p.Error(id=1, code="bad_frame", message="nope"),
    p.Ok(id=2),
    p.SessionStarted(id=3, session_id="s", log_path="/l"),
    p.Event(id=4, session_id="s", seq=0, line=b'{"seq":0}'),
    p.Event(id=4, session_id="s", seq=1, line=b'0}', backlog=True, backlog_end=True, parts=2),
    p.EventPart(id=4, session_id="s", seq=1, data=b'{"seq":1,"x":"'),
    p.Delta(id=5, session_id="s", agent="main", text="hi", kind="thinking"),
    p.Delta(id=5, session_id="s", agent="main", text="hi"),
    p.Idle(id=6, session_id="s", exit_reason="finished", result="done"),
    p.Busy(id=6, session_id="s"),
    p.Busy(id=6, session_id="s", activity="compacting the context"),
    p.Idle(id=6, session_id="s", exit_reason="finished", note="compacted: about 9 tokens to 3"),
    p.SessionEnded(id=7, session_id="s", exit_reason="error", result="r", turns=3,
                   usage={"input_tokens": 5}, cost_usd=0.25, message="m", log_path="/l"),
    p.SessionEnded(id=7, session_id="s", exit_reason="finished"),
    p.Resync(id=8, session_id="s", last_seq=9),
    p.Sessions(id=9, sessions=[p.SessionInfo("s", "/w", 1.5, 2.5, "live", "t", "/l"),
                               p.SessionInfo("t", "", 0.0, 0.0, "broken", "")]),
    p.Sessions(id=9, sessions=[]),
    p.LogLines(id=10, session_id="s", lines=[b"a", b"", b"\n"], log_path="/l"),
    p.LogLines(id=10, session_id="s", lines=[], log_path="/l", events=7),
    p.VerifyResult(id=11, session_id="s", ok=False, events=2, problems=["x"]),
    p.SessionStarted(id=3, session_id="s", log_path="/l", resumed=True, interrupted_calls=["c1"]),
    p.ReplayResult(id=13, session_id="s", ok=True, events=9, model_requests=2, turns=2, next_request_digest="ab"),
    p.ReplayResult(id=13, session_id="s", ok=False, events=9, model_requests=2, turns=2, problems=["seq 3"]),
    p.Collected(id=14, sessions=["s"], bytes_freed=10),
    p.Compacted(id=31, session_id="s", done=True, tokens_before=170_000, tokens_after=41_000),
    p.Compacted(id=31, session_id="s", done=True, tokens_before=170_000, tokens_after=41_000, ran=True),
    p.Workers(id=16, session_id="s", workers=[p.WorkerInfo("a", "musec/s/a", "finished", 1, "/w", 5, 6, 0.1, "do")],
              integration="ok"),
    p.CostReport(id=19, session_id="s", rows=[p.CostRow("main", "m", 2, 10, 5, 3, 1, 0.25)], total_usd=0.25, retries=1),
    p.Agents(id=18, session_id="s", agents=[p.AgentInfo("verifier", "verifier", "watching", 1.5, 1, 2, 0.5, 9)]),
    p.Applied(id=17, session_id="s", branch="main", old_head="a" * 40, new_head="b" * 40, how="fast-forward"),
    p.Models(id=15, models=[p.ModelInfo("anthropic/x", "anthropic", ["x"], 200000, 64000, 3.0, 0.3, 3.75, 15.0, False)]),
    p.WorkspaceReport(id=16, workspace="/w", trust="trusted", rows=[p.ExtensionRow("skill", "lint", "active", "user")],
                      mcp=[p.McpServerInfo("gh", "stdio", "user", "running", tools=["search"])], warnings=["w"]),
    p.StatusReply(id=12, pid=3, socket="/s", version="1", sessions=["a", "b"], home="/h", log_file="/f"),
    p.GoalReply(id=20, session_id="s", lines=["goal g1: active", "  condition: tests pass"]),
    p.PlanReport(id=20, session_id="s", status="approved", path="/p.md", text="# Plan\n", sha256="ab", by="client:1",
                 files={"a.py": True}, checks={"pytest -q": 0, "ruff check .": None}),
]


def test_every_message_type_is_covered() -> None:
    assert {type(m) for m in CLIENT_MSGS} == set(p.ClientMsg.__args__)
    assert {type(m) for m in DAEMON_MSGS} == set(p.DaemonMsg.__args__)


@pytest.mark.parametrize("msg", CLIENT_MSGS, ids=lambda m: type(m).__name__)
def test_client_message_round_trips(msg: msgspec.Struct) -> None:
    frame = p.encode(msg)
    (n,) = struct.unpack(">I", frame[:4])
    assert n == len(frame) - 4
    buf = p.FrameBuffer()
    bodies = buf.feed(frame)
    assert len(bodies) == 1 and buf.pending == 0
    assert p.decode_client(bodies[0]) == msg


@pytest.mark.parametrize("msg", DAEMON_MSGS, ids=lambda m: type(m).__name__)
def test_daemon_message_round_trips(msg: msgspec.Struct) -> None:
    (body,) = p.FrameBuffer().feed(p.encode(msg))
    assert p.decode_daemon(body) == msg


def test_a_message_of_the_other_direction_is_a_frame_error() -> None:
    (body,) = p.FrameBuffer().feed(p.encode(p.Ok(id=1)))
    with pytest.raises(p.FrameError):
        p.decode_client(body)
    (body,) = p.FrameBuffer().feed(p.encode(p.Status(id=1)))
    with pytest.raises(p.FrameError):
        p.decode_daemon(body)


def _stream(msgs: list[msgspec.Struct]) -> bytes:
    return b"".join(p.encode(m) for m in msgs)


@SETTINGS
@given(st.lists(st.sampled_from(DAEMON_MSGS), min_size=1, max_size=8), st.data())
def test_any_split_points_yield_the_same_messages(msgs: list[msgspec.Struct], data: st.DataObject) -> None:
    stream = _stream(msgs)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    buf = p.FrameBuffer()
    got = []
    prev = 0
    for cut in [*cuts, len(stream)]:
        got += [p.decode_daemon(b) for b in buf.feed(stream[prev:cut])]
        prev = cut
    assert got == msgs
    assert buf.pending == 0


def test_split_at_every_byte_position() -> None:
    msgs = CLIENT_MSGS
    stream = _stream(msgs)
    for cut in range(len(stream) + 1):
        buf = p.FrameBuffer()
        bodies = buf.feed(stream[:cut]) + buf.feed(stream[cut:])
        assert [p.decode_client(b) for b in bodies] == msgs
    # one byte at a time
    buf = p.FrameBuffer()
    bodies = []
    for i in range(len(stream)):
        bodies += buf.feed(stream[i : i + 1])
    assert [p.decode_client(b) for b in bodies] == msgs


def test_several_frames_in_one_read() -> None:
    buf = p.FrameBuffer()
    bodies = buf.feed(_stream(DAEMON_MSGS) + p.encode(p.Ok(id=99))[:3])
    assert [p.decode_daemon(b) for b in bodies] == DAEMON_MSGS
    assert buf.pending == 3
    assert [p.decode_daemon(b) for b in buf.feed(p.encode(p.Ok(id=99))[3:])] == [p.Ok(id=99)]


def test_empty_feed_and_partial_header_yield_nothing() -> None:
    buf = p.FrameBuffer()
    assert buf.feed(b"") == []
    assert buf.feed(b"\x00\x00") == []
    assert buf.pending == 2


@pytest.mark.parametrize("n", [p.MAX_FRAME_BYTES + 1, 2**32 - 1])
def test_length_over_the_maximum_raises_before_the_body_arrives(n: int) -> None:
    buf = p.FrameBuffer()
    with pytest.raises(p.FrameError, match="over"):
        buf.feed(struct.pack(">I", n))
    # the header alone was enough: nothing of the body had to be sent
    assert buf.pending == 4


def test_length_over_the_maximum_split_header() -> None:
    buf = p.FrameBuffer()
    header = struct.pack(">I", p.MAX_FRAME_BYTES + 1)
    assert buf.feed(header[:3]) == []
    with pytest.raises(p.FrameError):
        buf.feed(header[3:])


def test_length_at_the_maximum_is_accepted_and_buffered() -> None:
    buf = p.FrameBuffer(max_frame_bytes=10)
    assert buf.feed(struct.pack(">I", 10) + b"x" * 9) == []
    assert buf.feed(b"y") == [b"x" * 9 + b"y"]
    with pytest.raises(p.FrameError):
        p.FrameBuffer(max_frame_bytes=10).feed(struct.pack(">I", 11))


def test_encode_refuses_an_oversized_body() -> None:
    with pytest.raises(p.FrameError):
        p.encode(p.UserInput(id=1, session_id="s", text="x" * (p.MAX_FRAME_BYTES + 1)))


@SETTINGS
@given(st.binary(max_size=200))
def test_garbage_bodies_raise_frame_error_only(body: bytes) -> None:
    for decode in (p.decode_client, p.decode_daemon):
        try:
            decode(body)
        except p.FrameError:
            pass


@SETTINGS
@given(st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(max_size=10)
    | st.binary(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
))
def test_well_formed_msgpack_of_the_wrong_shape_is_a_frame_error(value: object) -> None:
    body = msgspec.msgpack.encode(value)
    for decode in (p.decode_client, p.decode_daemon):
        try:
            decode(body)
        except p.FrameError:
            pass


@pytest.mark.parametrize("body", [
    b"",
    b"\xc1",  # never used in msgpack
    msgspec.msgpack.encode({"type": "nope", "id": 1}),
    msgspec.msgpack.encode({"type": "status"}),  # missing id
    msgspec.msgpack.encode({"type": "status", "id": "one"}),  # wrong type
    msgspec.msgpack.encode({"id": 1}),  # no tag
    msgspec.msgpack.encode([1, 2, 3]),
    msgspec.msgpack.encode({"type": "status", "id": 1}) + b"\x00",  # trailing bytes
    b"\x91" * 100_000,  # deeply nested arrays
    b"\x81\xa4type" * 50_000,  # deeply nested maps
])
def test_known_bad_bodies(body: bytes) -> None:
    with pytest.raises(p.FrameError):
        p.decode_client(body)
    with pytest.raises(p.FrameError):
        p.decode_daemon(body)


def test_unknown_fields_are_ignored() -> None:
    """The wire only grows: a newer peer's extra fields do not break an older one."""
    body = msgspec.msgpack.encode({"type": "status", "id": 4, "verbose": True, "extra": [1, {"a": 2}]})
    assert p.decode_client(body) == p.Status(id=4)
    body = msgspec.msgpack.encode({"type": "hello", "protocol_version": 2, "version": "9", "role": "daemon",
                                   "pid": 1, "features": ["x"]})
    assert p.decode_daemon(body) == p.Hello(protocol_version=2, version="9", role="daemon", pid=1)
    body = msgspec.msgpack.encode({"type": "sessions", "id": 1, "sessions": [
        {"id": "s", "workspace": "/w", "started_at": 1.0, "updated_at": 2.0, "status": "x", "title": "",
         "new": 1}]})
    assert p.decode_daemon(body) == p.Sessions(id=1, sessions=[p.SessionInfo("s", "/w", 1.0, 2.0, "x", "")])


def test_defaults_are_omitted_and_filled_in() -> None:
    body = p.encode(p.Attach(id=1, session_id="s"))[4:]
    assert msgspec.msgpack.decode(body) == {"type": "attach", "id": 1, "session_id": "s"}
    assert p.decode_client(msgspec.msgpack.encode({"type": "attach", "id": 1, "session_id": "s"})).since_seq == -1


def test_messages_are_frozen() -> None:
    with pytest.raises(AttributeError):
        p.Status(id=1).id = 2  # type: ignore[misc]


def test_socket_and_state_paths_are_pure() -> None:
    assert str(p.socket_path({"MUSEC_SOCKET": "/x/s"})) == "/x/s"
    assert str(p.socket_path({"MUSEC_HOME": "/h"})) == "/h/run/musecd.sock"
    assert str(p.socket_path({"XDG_RUNTIME_DIR": "/r"})) == "/r/musec/musecd.sock"
    assert str(p.socket_path({"XDG_STATE_HOME": "/s"})) == "/s/musec/run/musecd.sock"
    assert str(p.state_home({"MUSEC_HOME": "/h"})) == "/h/state"
    assert str(p.config_home({"MUSEC_HOME": "/h"})) == "/h/config"
    assert str(p.config_home({"XDG_CONFIG_HOME": "/c"})) == "/c/musec"


# --- safe defaults, closed sets, secrets (issue 11 part 5) --------------------------------


def test_a_client_that_omits_a_field_gets_the_safe_choice() -> None:
    req = p.decode_client(msgspec.msgpack.encode({"type": "start_session", "id": 1, "workspace": "/w", "model": "m"}))
    assert isinstance(req, p.StartSession)
    assert req.approval == "ask" and req.sandbox == "auto" and not req.trust and req.agents == []
    assert not req.interactive and req.end_when_idle and req.budget_usd == 0.0


@pytest.mark.parametrize(("field", "value"), [
    ("approval", "yolo"), ("sandbox", "none"),
])
def test_a_string_outside_its_closed_set_is_a_bad_request_with_its_id(field: str, value: str) -> None:
    body = msgspec.msgpack.encode({"type": "start_session", "id": 9, "workspace": "/w", "model": "m", field: value})
    with pytest.raises(p.InvalidMessage) as caught:
        p.decode_client(body)
    assert caught.value.request_id == 9 and caught.value.code == "bad_request" and field in str(caught.value)


def test_decisions_and_exit_reasons_are_closed_sets() -> None:
    with pytest.raises(p.FrameError):
        p.decode_client(msgspec.msgpack.encode({"type": "approval_answer", "id": 1, "session_id": "s",
                                                "call_id": "c", "decision": "maybe"}))
    with pytest.raises(p.FrameError):
        p.decode_daemon(msgspec.msgpack.encode({"type": "session_ended", "id": 1, "session_id": "s",
                                                "exit_reason": "whatever"}))


def test_every_plain_request_names_its_reply_and_says_so() -> None:
    for request, reply in p.REPLY.items():
        assert reply.__name__ in (request.__doc__ or ""), request
    for cls in typing.get_args(p.ClientMsg):
        if cls is not p.Hello:
            assert "Repl" in (cls.__doc__ or ""), f"{cls.__name__}'s docstring does not say what reply it causes"


@pytest.mark.parametrize("name", ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN", "SOME_SECRET", "PGPASSWORD",
                                  "my_password_file", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "STRIPE_KEY",
                                  "db_passwd", "HF_TOKEN", "GPG_PASSPHRASE", "SECRETS_DIR"])
def test_secret_names(name: str) -> None:
    assert p.is_secret_name(name)


@pytest.mark.parametrize("name", ["PATH", "HOME", "KEYBOARD", "TOKENIZERS_PARALLELISM", "ANTHROPIC_BASE_URL",
                                  "MUSEC_HOME", "KEYRING_BACKEND", "LANG"])
def test_names_that_are_not_secret(name: str) -> None:
    assert not p.is_secret_name(name)


def test_secret_values_skips_short_ones() -> None:
    env = {"A_TOKEN": "0123456789", "B_KEY": "short", "PATH": "/usr/bin:/bin/long-enough"}
    assert p.secret_values(env) == ["0123456789"]


def test_a_deep_home_gets_a_short_socket_in_the_runtime_dir(tmp_path) -> None:
    deep = "/tmp/" + "d" * 120
    path = p.socket_path({"MUSEC_HOME": deep, "XDG_RUNTIME_DIR": "/run/user/1000"})
    assert str(path).startswith("/run/user/1000/musec/home-") and p.socket_path_problem(path) is None
    assert path == p.socket_path({"MUSEC_HOME": deep, "XDG_RUNTIME_DIR": "/run/user/1000"})  # stable
    assert path != p.socket_path({"MUSEC_HOME": deep + "x", "XDG_RUNTIME_DIR": "/run/user/1000"})
    lone = p.socket_path({"MUSEC_HOME": deep})
    assert "MUSEC_SOCKET" in (p.socket_path_problem(lone) or "")
    short = p.socket_path({"MUSEC_HOME": "/tmp/h", "XDG_RUNTIME_DIR": "/run/user/1000"})
    assert short == Path("/tmp/h/run/musecd.sock")


# --- events of any size (protocol 3, issue 12 part 8) -------------------------------------


def _joined(stream: bytes, cuts: list[int]) -> list[msgspec.Struct]:
    """What a client's connection hands on: frames split at ``cuts``, decoded, joined."""
    buf, joiner, got, prev = p.FrameBuffer(), p.EventJoiner(), [], 0
    for cut in [*cuts, len(stream)]:
        for body in buf.feed(stream[prev:cut]):
            msg = joiner.take(p.decode_daemon(body))
            if msg is not None:
                got.append(msg)
        prev = cut
    assert buf.pending == 0
    return got


@SETTINGS
@given(st.lists(st.tuples(st.binary(max_size=60), st.booleans()), min_size=1, max_size=6),
       st.integers(1, 16), st.data())
def test_lines_of_any_length_come_whole_after_pieces(lines: list[tuple[bytes, bool]], piece: int,
                                                      data: st.DataObject) -> None:
    """Any lines, any piece size, the stream split at any points, other messages between
    events: every event comes out whole, once, in order, as if sent in one frame."""
    stream, want = b"", []
    for seq, (line, backlog) in enumerate(lines):
        stream += p.event_frames(3, "s", seq, line, backlog=backlog, backlog_end=backlog, piece_bytes=piece)
        stream += p.encode(p.Delta(id=3, session_id="s", agent="main", text="between"))
        want += [p.Event(id=3, session_id="s", seq=seq, line=line, backlog=backlog, backlog_end=backlog),
                 p.Delta(id=3, session_id="s", agent="main", text="between")]
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    assert _joined(stream, cuts) == want


def test_a_line_over_the_piece_size_is_sent_in_frames_under_the_limit() -> None:
    line = b'{"seq":5,"text":"' + b"x" * (2 * p.EVENT_PIECE_BYTES + 11) + b'"}'
    stream = p.encode_fitted(p.Event(id=1, session_id="s", seq=5, line=line))
    bodies = p.FrameBuffer().feed(stream)
    assert len(bodies) == 3 and all(len(b) <= p.MAX_FRAME_BYTES for b in bodies)
    kinds = [type(p.decode_daemon(b)).__name__ for b in bodies]
    assert kinds == ["EventPart", "EventPart", "Event"]
    assert _joined(stream, []) == [p.Event(id=1, session_id="s", seq=5, line=line)]


def test_a_long_delta_is_split_and_a_long_result_cut_with_a_note() -> None:
    text = "é" * (p.MAX_FRAME_BYTES // 2 + 1)  # 2 bytes a character: over the limit
    stream = p.encode_fitted(p.Delta(id=1, session_id="s", agent="main", text=text))
    deltas = [p.decode_daemon(b) for b in p.FrameBuffer().feed(stream)]
    assert len(deltas) > 1 and "".join(d.text for d in deltas) == text
    for end in (p.Idle(id=1, session_id="s", exit_reason="finished", result=text),
                p.SessionEnded(id=1, session_id="s", exit_reason="finished", result=text, message=text)):
        (body,) = p.FrameBuffer().feed(p.encode_fitted(end))
        got = p.decode_daemon(body)
        assert got.result.startswith(text[:1000]) and "more characters; the whole text is in the session's log" in got.result
    with pytest.raises(p.FrameError, match="over the"):  # anything else: the daemon answers too_large
        p.encode_fitted(p.Sessions(id=1, sessions=[p.SessionInfo("s", "/w", 0.0, 0.0, "x", "t" * p.MAX_FRAME_BYTES)]))


@pytest.mark.parametrize("msgs, problem", [
    ([p.EventPart(id=1, session_id="s", seq=2, data=b"a"), p.Delta(id=1, session_id="s", agent="m", text="x")],
     "cut off by another message"),
    ([p.EventPart(id=1, session_id="s", seq=2, data=b"a"), p.EventPart(id=1, session_id="s", seq=3, data=b"b")],
     "came inside event seq 2"),
    ([p.EventPart(id=1, session_id="s", seq=2, data=b"a"), p.Event(id=1, session_id="s", seq=2, line=b"b", parts=2)],
     "cut off"),
    ([p.Event(id=1, session_id="s", seq=2, line=b"b", parts=1)], "never came"),
    ([p.EventPart(id=1, session_id="s", seq=2, data=b"abc"), p.EventPart(id=1, session_id="s", seq=2, data=b"def")],
     "over the 5-byte limit"),
])
def test_pieces_out_of_order_are_a_frame_error(msgs: list[msgspec.Struct], problem: str) -> None:
    joiner = p.EventJoiner(max_event_bytes=5)
    with pytest.raises(p.FrameError, match=problem):
        for msg in msgs:
            joiner.take(msg)
