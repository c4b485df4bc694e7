"""Plan mode end to end (issue 14 /plan): a real git repository, the real daemon and CLI,
real bubblewrap, and a scripted model that tries every way to write while it plans.

Done means: nothing in the workspace changes while planning (a hash of every file, .git
included, before and after); the plan document is written (outside the workspace); the
approval from a second attached terminal starts the execution; headless runs stop at the
plan (``--plan``, exit 0), need ``--approve-plan`` (or exit 3 naming the plan file); and
the same through the Anthropic and OpenAI Responses test servers, with replay byte-exact.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from musec.client import connection
from musec.client.errors import RequestFailed
from musec.daemon import protocol as p

from tests.conftest import BUGGY, FIXED, Musec, run_library_tests
from tests.support.anthropic_server import AnthropicServer, check_tool_pairing
from tests.support.openai_server import OpenAIServer, check_responses_pairing, responses_stream

pytestmark = pytest.mark.skipif(not Path("/usr/bin/bwrap").exists() and not os.environ.get("PATH", "").count("bwrap"),
                                reason="plan mode's read-only workspace needs bubblewrap")

# Every way to write the scripted model tries while planning: (tool, input, what the
# result must say). The file tools are refused by the approval layer; the commands run, in
# the sandbox, and fail on the read-only workspace.
ATTEMPTS = [
    ("edit_file", {"path": "pager.py", "old_string": BUGGY, "new_string": FIXED}, "not run: plan mode"),
    ("write_file", {"path": "notes.txt", "content": "x"}, "not run: plan mode"),
    ("write_file", {"path": "../outside.txt", "content": "x"}, "not run: plan mode"),
    ("bash", {"command": "echo planned > redirected.txt"}, "Read-only file system"),
    ("bash", {"command": "sed -i 's/number \\* size/(number - 1) * size/' pager.py"}, "Read-only file system"),
    ("bash", {"command": "git -c user.name=t -c user.email=t@e commit --allow-empty -m sneaky 2>&1"},
     "Read-only file system"),
    ("bash", {"command": "echo teed | tee teed.txt"}, "Read-only file system"),
    ("bash", {"command": "python3 -c \"open('py.txt', 'w').write('x')\" 2>&1"}, "Read-only file system"),
    ("bash", {"command": "rm -f test_pager.py 2>&1"}, "Read-only file system"),
    ("spawn_workers", {"tasks": [{"name": "w", "instruction": "fix it"}]}, "fan-out is off"),
]
# What may be written while planning: a cache under the private /tmp.
CACHE = ("bash", {"command": "mkdir -p /tmp/cache && echo cached > /tmp/cache/x && cat /tmp/cache/x"}, "cached")
PLAN = {
    "context": "page() counts pages from 0 but the docstring says from 1; the tests fail.",
    "approach": "1. Compute the start as (number - 1) * size.\n2. Run the tests.",
    "files_to_change": ["pager.py: the start index"],
    "code_to_reuse": ["the existing tests in test_pager.py"],
    "risks": ["none beyond the off-by-one"],
    "verification": ["python3 -m unittest -q"],
}
EXECUTE = [
    ("edit_file", {"path": "pager.py", "old_string": BUGGY, "new_string": FIXED}),
    ("bash", {"command": "python3 -m unittest -q"}),
]


def workspace_hash(root: Path) -> str:
    """A digest of every file (``.git`` included): its path, mode and bytes."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            h.update(str(path.relative_to(root)).encode() + b"\0" + oct(path.stat().st_mode).encode() + b"\0")
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def scripted_turns() -> list:
    turns: list = [[{"tool": tool, "input": inp} for tool, inp, _ in ATTEMPTS]]
    expected = [[{"expect_result": why}] for _, _, why in ATTEMPTS]
    turns += [expected[-1] + [{"tool": CACHE[0], "input": CACHE[1]}]]
    turns += [[{"expect_result": CACHE[2]}, {"tool": "propose_plan", "input": PLAN}]]
    turns += [[{"tool": tool, "input": inp}] for tool, inp in EXECUTE]
    turns += [[{"text": "Fixed the off-by-one; the tests pass."}]]
    return turns


def _script(tmp_path: Path, turns: list) -> str:
    path = tmp_path / "plan-script.json"
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


def _log(musec: Musec, session_id: str) -> list[dict]:
    proc = musec("log", session_id, "--json")
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _check_attempts_refused(events: list[dict]) -> None:
    results = {e["call_id"]: e for e in events if e["type"] == "tool_finished"}
    calls = [b for e in events if e["type"] == "model_response" for b in e["content"] if b.get("type") == "tool_call"]
    for (tool, _, why), call in zip(ATTEMPTS, calls, strict=False):
        assert call["name"] == tool
        assert why in results[call["id"]]["content"], (tool, results[call["id"]]["content"])


def _until_event(conn: connection.Connection, kind: str) -> list[dict]:
    seen = []
    while True:
        msg = conn.recv(60)
        assert not isinstance(msg, (p.Error, p.SessionEnded)), msg
        if isinstance(msg, p.Event):
            seen.append(json.loads(msg.line))
            if seen[-1]["type"] == kind:
                return seen


def test_planning_changes_nothing_and_a_second_terminal_approves(
    musec: Musec, connect, buggy_repo: Path, tmp_path: Path,
) -> None:
    before = workspace_hash(buggy_repo)
    a = connect()
    a.send(p.StartSession(id=1, workspace=str(buggy_repo), model=_script(tmp_path, scripted_turns()), task="fix the pager",
                          approval="auto", interactive=True, end_when_idle=True, plan=True))
    started = a.recv(30)
    assert isinstance(started, p.SessionStarted), started
    sid = started.session_id
    asked = _until_event(a, "approval_requested")[-1]
    assert asked["tool"] == "propose_plan"
    # Planning is over and nothing in the workspace changed, .git included.
    assert workspace_hash(buggy_repo) == before
    assert not (buggy_repo.parent / "outside.txt").exists()
    plan_file = Path(asked["input"]["path"])
    assert plan_file.is_file() and not plan_file.is_relative_to(buggy_repo)
    text = plan_file.read_text()
    for heading in ("Context", "Approach", "Files to change", "Code to reuse", "Risks", "Verification"):
        assert f"## {heading}" in text
    assert hashlib.sha256(text.encode()).hexdigest() == asked["input"]["sha256"]

    # A second terminal attaches and approves; the first one's answer comes too late.
    b = connect()
    b.send(p.Attach(id=5, session_id=sid, since_seq=-1))
    _until_event(b, "approval_requested")
    ok = b.request(p.ApprovalAnswer(id=6, session_id=sid, call_id=asked["call_id"], decision="allow",
                                    plan_action="approve"))
    assert isinstance(ok, p.Ok), ok
    with pytest.raises(RequestFailed, match="already answered"):
        a.request(p.ApprovalAnswer(id=7, session_id=sid, call_id=asked["call_id"], decision="deny",
                                   plan_action="feedback", text="no"))
    while not isinstance(msg := a.recv(60), p.SessionEnded):
        pass
    assert msg.exit_reason == "finished", msg
    assert run_library_tests(buggy_repo).returncode == 0  # the approval started the execution

    events = _log(musec, sid)
    _check_attempts_refused(events)
    proposed = next(e for e in events if e["type"] == "plan_proposed")
    approved = next(e for e in events if e["type"] == "plan_approved")
    assert proposed["sha256"] == approved["sha256"] == asked["input"]["sha256"]
    assert approved["by"].startswith("client:") and approved["approval"] == "auto"
    resolved = next(e for e in events if e["type"] == "approval_resolved")
    assert resolved["call_id"] == asked["call_id"] and resolved["decision"] == "allow"
    assert [e["seq"] for e in events if e["type"] == "file_edited"] > [approved["seq"]]

    report = musec("plan", sid, "--json")
    assert report.returncode == 0, report.stderr
    shown = json.loads(report.stdout)
    assert shown["status"] == "approved" and shown["files"] == {"pager.py": True}
    assert shown["checks"] == {"python3 -m unittest -q": 0}
    replay = musec("replay", sid, "--json")
    assert replay.returncode == 0, replay.stdout + replay.stderr


def test_headless_plan_stops_at_the_plan(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    before = workspace_hash(buggy_repo)
    script = _script(tmp_path, scripted_turns())
    proc = musec("run", "--plan", "--approval", "auto", "--model", script, "fix the pager", cwd=buggy_repo)
    assert proc.returncode == 0, proc.stderr
    assert "## Approach" in proc.stdout and "(number - 1) * size" in proc.stdout
    assert workspace_hash(buggy_repo) == before

    gated = musec("run", "--approval", "plan", "--model", script, "--output-format", "json", "fix the pager",
                  cwd=buggy_repo)
    assert gated.returncode == 3, gated.stderr
    result = json.loads(gated.stdout)
    plan_file = musec.home / "state" / "plans" / f"{result['session_id']}.md"
    assert result["exit_reason"] == "needs_approval" and str(plan_file) in result["message"]
    assert plan_file.is_file() and workspace_hash(buggy_repo) == before

    # Approved from the command line, the same session carries the plan out (as --approval
    # ask would ask for each edit, the resume says auto).
    done = musec("run", "--resume", result["session_id"], "--approve-plan", "--approval", "auto",
                 "--output-format", "json", cwd=buggy_repo)
    assert done.returncode == 0, done.stderr
    assert run_library_tests(buggy_repo).returncode == 0
    events = _log(musec, result["session_id"])
    approved = [e for e in events if e["type"] == "plan_approved"]
    assert len(approved) == 1 and approved[0]["by"] == "--approve-plan"


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_plan_mode_through_provider_servers(musec: Musec, buggy_repo: Path, provider: str) -> None:
    """The same plan-then-execute run, headless with --approve-plan, through a real local
    server speaking each provider's API; the log replays byte-exact."""
    before = workspace_hash(buggy_repo)
    steps = [("call_Edit01", "edit_file", ATTEMPTS[0][1]), ("call_Sed02", "bash", ATTEMPTS[4][1]),
             ("call_Plan03", "propose_plan", PLAN)]
    steps += [(f"call_Do0{n}", tool, inp) for n, (tool, inp) in enumerate(EXECUTE, start=4)]
    done = "Fixed; the tests pass."
    if provider == "anthropic":
        from tests.support.anthropic_server import message

        turns = [message([{"type": "tool_use", "id": "toolu_" + cid, "name": name, "input": args}])
                 for cid, name, args in steps] + [message([{"type": "text", "text": done}])]
        server_class, check, env = AnthropicServer, check_tool_pairing, lambda s: {
            "ANTHROPIC_API_KEY": "sk-" + "plan-NeverReal-0123456789", "ANTHROPIC_BASE_URL": s.base_url}
        model = "anthropic/claude-sonnet-4-6"
    else:
        turns = [responses_stream([{"type": "function_call", "call_id": cid, "name": name, "arguments": json.dumps(args)}])
                 for cid, name, args in steps] + [responses_stream([{"type": "message", "text": done}])]
        server_class, check, env = OpenAIServer, check_responses_pairing, lambda s: {
            "OPENAI_API_KEY": "sk-" + "plan-NeverReal-0123456789", "OPENAI_BASE_URL": s.base_url}
        model = "openai/gpt-5"
    with server_class() as server:
        server.enqueue(*turns)
        proc = musec("run", "--plan", "--approve-plan", "--approval", "auto", "--model", model, "--output-format", "json",
                     "fix the pager", cwd=buggy_repo, env=env(server))
        requests = list(server.requests)
    assert proc.returncode == 0, proc.stderr
    check(requests)
    assert run_library_tests(buggy_repo).returncode == 0 and workspace_hash(buggy_repo) != before
    sid = json.loads(proc.stdout)["session_id"]
    events = _log(musec, sid)
    refused = [e for e in events if e["type"] == "tool_finished" and e["call_id"].endswith(("call_Edit01", "call_Sed02"))]
    assert "not run: plan mode" in refused[0]["content"] and "Read-only file system" in refused[1]["content"]
    approved = next(e for e in events if e["type"] == "plan_approved")
    assert approved["by"] == "--approve-plan"
    sent = json.dumps(requests[3].body)
    assert "the person approved the plan" in sent  # the approval reached the model as the person's word
    replay = musec("replay", sid, "--json")
    assert replay.returncode == 0, replay.stdout + replay.stderr


@pytest.mark.parametrize("last", ["edit", "fresh", "approve_auto"])
def test_feedback_then_edit_fresh_or_auto(musec: Musec, connect, buggy_repo: Path, tmp_path: Path, last: str) -> None:
    """The person first asks for more planning (the feedback reaches the model and it
    plans again), then answers with ``last``: the edited text is what is approved, a fresh
    start sends the plan alone, approve-and-auto runs the edits without asking."""
    second = {**PLAN, "risks": ["the tests may hide another off-by-one"]}
    turns = [[{"tool": "propose_plan", "input": PLAN}],
             [{"tool": "propose_plan", "input": second}],
             *[[{"tool": tool, "input": inp}] for tool, inp in EXECUTE],
             [{"text": "done"}]]
    a = connect()
    a.send(p.StartSession(id=1, workspace=str(buggy_repo), model=_script(tmp_path, turns), task="fix the pager",
                          approval="ask", interactive=True, end_when_idle=True, plan=True))
    sid = a.recv(30).session_id
    edited = "# Plan\n\nJust fix pager.py and run the tests.\n"
    answers = iter([("deny", "feedback", "say what else could break"), ("allow", last, edited if last == "edit" else "")])
    asked_tools = []
    while not isinstance(msg := a.recv(60), p.SessionEnded):
        if isinstance(msg, p.Event) and b'"approval_requested"' in msg.line:
            ev = json.loads(msg.line)
            asked_tools.append(ev["tool"])
            decision, action, text = next(answers) if ev["tool"] == "propose_plan" else ("allow", "", "")
            a.send(p.ApprovalAnswer(id=a.next_id(), session_id=sid, call_id=ev["call_id"], decision=decision,
                                    plan_action=action, text=text))  # type: ignore[arg-type]
    assert msg.exit_reason == "finished", msg
    assert run_library_tests(buggy_repo).returncode == 0
    # approve_auto: the edit and the command ran without asking; otherwise the mode is ask.
    assert asked_tools == ["propose_plan", "propose_plan"] + ([] if last == "approve_auto" else ["edit_file", "bash"])
    events = _log(musec, sid)
    proposed = [e for e in events if e["type"] == "plan_proposed"]
    assert len(proposed) == 2 and "another off-by-one" in proposed[1]["text"]
    feedback = next(e for e in events if e["type"] == "user_message" and "keep planning" in e["text"])
    assert "say what else could break" in feedback["text"] and feedback["seq"] < proposed[1]["seq"]
    approved = next(e for e in events if e["type"] == "plan_approved")
    assert approved["action"] == last and approved["approval"] == ("auto" if last == "approve_auto" else "ask")
    if last == "edit":
        assert approved["text"] == edited and approved["sha256"] == hashlib.sha256(edited.encode()).hexdigest()
        assert Path(proposed[0]["path"]).read_text() == edited
    else:
        assert approved["text"] == proposed[1]["text"]
    after = next(e for e in events if e["type"] == "model_request" and e["seq"] > approved["seq"])
    before = [e for e in events if e["type"] == "model_request" and e["seq"] < approved["seq"]][-1]
    assert (after["messages"] == 1) == (last == "fresh"), (before, after)
    replay = musec("replay", sid, "--json")
    assert replay.returncode == 0, replay.stdout + replay.stderr


def test_a_daemon_killed_while_the_plan_waits_resumes_in_plan_mode(
    musec: Musec, connect, buggy_repo: Path, tmp_path: Path,
) -> None:
    """kill -9 while the plan waits for approval: a resume without --approve-plan is still
    planning (read-only, exit 3); with it, the plan is approved and carried out."""
    import signal

    before = workspace_hash(buggy_repo)
    turns = [[{"tool": "propose_plan", "input": PLAN}],
             [{"tool": "bash", "input": {"command": "echo sneaky > sneaky.txt"}}],
             [{"expect_result": "Read-only file system"}, {"tool": "propose_plan", "input": PLAN}],
             *[[{"tool": tool, "input": inp}] for tool, inp in EXECUTE], [{"text": "done"}]]
    a = connect()
    a.send(p.StartSession(id=1, workspace=str(buggy_repo), model=_script(tmp_path, turns), task="fix the pager",
                          approval="auto", interactive=True, end_when_idle=False, plan=True))
    sid = a.recv(30).session_id
    _until_event(a, "approval_requested")
    pid = musec.daemon_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    assert musec("daemon", "start").returncode == 0

    # Resumed interactively, the plan is asked again; feedback sends the agent back to
    # planning, still read-only (its write attempt fails in the sandbox).
    b = connect()
    b.send(p.ResumeSession(id=2, session_id=sid, interactive=True, end_when_idle=False))
    asked = _until_event(b, "approval_requested")[-1]
    assert asked["tool"] == "propose_plan"
    b.request(p.ApprovalAnswer(id=3, session_id=sid, call_id=asked["call_id"], decision="deny", plan_action="feedback",
                               text="check that nothing can be written"))
    again = _until_event(b, "approval_requested")[-1]
    assert again["call_id"] != asked["call_id"] and workspace_hash(buggy_repo) == before
    b.request(p.EndSession(id=4, session_id=sid))
    while not isinstance(b.recv(30), p.SessionEnded):
        pass

    done = musec("run", "--resume", sid, "--approve-plan", "--approval", "auto", "--output-format", "json",
                 cwd=buggy_repo)
    assert done.returncode == 0, done.stderr
    assert run_library_tests(buggy_repo).returncode == 0
    events = _log(musec, sid)
    assert [e["by"] for e in events if e["type"] == "plan_approved"] == ["--approve-plan"]
    assert musec("replay", sid, "--json").returncode == 0
