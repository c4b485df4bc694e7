"""``/grill`` end to end (issue 14): a critic with three decisions against a real daemon,
a real git repository and the scout. One question is a fact the scout answers, one a
decision the person answers in their own words, one a decision whose recommended answer
is taken; the settled decisions amend the plan, which is approved again and carried out.
Headless, the decisions take the recommended answers and the plan lists them as assumptions.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from musec.daemon import protocol as p

from tests.conftest import Musec, run_library_tests
from tests.e2e.test_plan_mode import EXECUTE, PLAN, _log, workspace_hash

QUESTIONS = [
    {"decision": "where the tests are", "question": "Which file holds the tests of page?",
     "recommended": "test_pager.py", "kind": "fact"},
    {"decision": "index formula", "question": "Shift the start by one page, or change the callers?",
     "recommended": "start = (number - 1) * size", "kind": "decision"},
    {"decision": "input checks", "question": "Keep the ValueError for page numbers below 1?",
     "recommended": "keep it", "kind": "decision"},
]
PERSON = "shift the start by one page and keep the callers as they are"


def _script(tmp_path: Path, second: str = "answer (person)") -> str:
    critic = [[{"tool": "grill_question", "input": QUESTIONS[0]}],
              [{"expect_result": "test_pager.py"}, {"tool": "grill_question", "input": QUESTIONS[1]}],
              [{"expect_result": second}, {"tool": "grill_question", "input": QUESTIONS[2]}],
              [{"expect_result": "answer (recommended): keep it"}, {"text": "No further objection."}]]
    main = [[{"tool": "propose_plan", "input": PLAN}], *[[{"tool": t, "input": i}] for t, i in EXECUTE], [{"text": "done"}]]
    scout = [[{"text": "test_pager.py holds the tests of page"}]]  # the scout answers from its model
    path = tmp_path / "grill.json"
    path.write_text(json.dumps({"turns": main, "agents": {"critic": {"turns": critic}, "scout": {"turns": scout}}}))
    return f"scripted:{path}"


def test_three_decisions_scout_person_recommended_then_approved_again(
    musec: Musec, connect, buggy_repo: Path, tmp_path: Path,  # noqa: F811 - the fixture
) -> None:
    before = workspace_hash(buggy_repo)
    a = connect()
    script = _script(tmp_path)
    a.send(p.StartSession(id=1, workspace=str(buggy_repo), model=script, task="fix the pager", agents_model=script,
                          approval="auto", interactive=True, end_when_idle=True, plan=True, agents=["scout"]))
    sid = a.recv(30).session_id
    b = connect()  # the person answers from a second attached terminal
    b.send(p.Attach(id=2, session_id=sid, since_seq=-1))
    asked: list[dict] = []
    while not isinstance(msg := b.recv(60), p.SessionEnded):
        if not (isinstance(msg, p.Event) and b'"approval_requested"' in msg.line):
            continue
        ev = json.loads(msg.line)
        asked.append(ev)
        if ev["tool"] == "propose_plan" and len(asked) == 1:
            assert workspace_hash(buggy_repo) == before
            answer = p.ApprovalAnswer(id=b.next_id(), session_id=sid, call_id=ev["call_id"], decision="allow",
                                      plan_action="grill")
        elif ev["tool"] == "grill_question":
            own = PERSON if ev["input"]["decision"] == "index formula" else ""  # Enter: the recommended answer
            answer = p.ApprovalAnswer(id=b.next_id(), session_id=sid, call_id=ev["call_id"], decision="allow", text=own)
        else:
            assert "## Decisions settled by /grill" in Path(ev["input"]["path"]).read_text()
            assert workspace_hash(buggy_repo) == before  # nothing ran before the amended plan was approved
            answer = p.ApprovalAnswer(id=b.next_id(), session_id=sid, call_id=ev["call_id"], decision="allow",
                                      plan_action="approve")
        assert isinstance(b.request(answer), p.Ok)
    assert msg.exit_reason == "finished", msg
    assert [e["tool"] for e in asked] == ["propose_plan", "grill_question", "grill_question", "propose_plan"]
    assert run_library_tests(buggy_repo).returncode == 0

    events = _log(musec, sid)
    rounds = [e for e in events if e["type"] == "grill_round"]
    assert [(r["round"], r["kind"], r["answered_by"]) for r in rounds] == [
        (1, "fact", "scout"), (2, "decision", "person"), (3, "decision", "recommended")]
    assert "test_pager.py" in rounds[0]["answer"] and rounds[1]["answer"] == PERSON and rounds[2]["answer"] == "keep it"
    assert all(r["agent"] == "critic" and not r["assumption"] for r in rounds)
    proposed = [e for e in events if e["type"] == "plan_proposed"]
    assert len(proposed) == 2 and proposed[1]["seq"] > rounds[-1]["seq"]
    amended = proposed[1]["text"]
    assert amended.startswith(proposed[0]["text"].rstrip("\n"))
    assert f"- index formula: {PERSON} (person)" in amended and "- input checks: keep it (recommended)" in amended
    assert "- where the tests are: " in amended and "## Assumptions" not in amended
    approved = [e for e in events if e["type"] == "plan_approved"]
    assert len(approved) == 1 and approved[0]["sha256"] == proposed[1]["sha256"] and approved[0]["text"] == amended
    replay = musec("replay", sid, "--json")
    assert replay.returncode == 0, replay.stdout + replay.stderr


def test_headless_grill_lists_the_recommended_answers_as_assumptions(
    musec: Musec, buggy_repo: Path, tmp_path: Path,
) -> None:
    before = workspace_hash(buggy_repo)
    script = _script(tmp_path, "answer (recommended)")
    proc = musec("run", "--plan", "--grill", "--agents", "scout", "--model", script, "--agents-model", script,
                 "--output-format", "json", "fix the pager", cwd=buggy_repo)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert workspace_hash(buggy_repo) == before
    assert "## Assumptions" in result["result"]
    assert f"- index formula: {QUESTIONS[1]['recommended']} (the critic's recommendation; nobody was asked)" in result["result"]
    events = _log(musec, result["session_id"])
    rounds = [e for e in events if e["type"] == "grill_round"]
    assert [(r["answered_by"], r["assumption"]) for r in rounds] == [
        ("scout", False), ("recommended", True), ("recommended", True)]
    assert not any(e["type"] == "approval_requested" for e in events)


def test_the_person_can_end_the_grill(musec: Musec, connect, buggy_repo: Path, tmp_path: Path) -> None:  # noqa: F811
    critic = [[{"tool": "grill_question", "input": QUESTIONS[0]}],
              [{"expect_result": "no scout in this session"}, {"tool": "grill_question", "input": QUESTIONS[1]}],
              [{"expect_result": "ended the grill"}, {"tool": "grill_question", "input": QUESTIONS[2]}],
              [{"expect_result": "ended the grill"}, {"text": "Ended by the person."}]]
    script = tmp_path / "ended.json"
    script.write_text(json.dumps({"turns": [[{"tool": "propose_plan", "input": PLAN}]],
                                  "agents": {"critic": {"turns": critic}}}))
    a = connect()
    a.send(p.StartSession(id=1, workspace=str(buggy_repo), model=f"scripted:{script}", task="fix the pager", approval="auto", interactive=True, end_when_idle=True, plan=True,
                          grill=True))
    sid = a.recv(30).session_id
    while not isinstance(msg := a.recv(60), p.SessionEnded):
        if isinstance(msg, p.Event) and b'"approval_requested"' in msg.line:
            ev = json.loads(msg.line)
            if ev["tool"] == "grill_question":
                a.send(p.ApprovalAnswer(id=a.next_id(), session_id=sid, call_id=ev["call_id"], decision="deny"))
            else:
                a.send(p.ApprovalAnswer(id=a.next_id(), session_id=sid, call_id=ev["call_id"], decision="deny",
                                        plan_action="feedback", text="stop here"))
                a.send(p.EndSession(id=a.next_id(), session_id=sid))
    events = _log(musec, sid)
    rounds = [e for e in events if e["type"] == "grill_round"]
    # No scout here: the fact is left to the critic; the person ends the grill at the first decision.
    assert [r["answered_by"] for r in rounds] == ["none", "none", "none"]
    assert "ended the grill" in rounds[1]["answer"] and "ended the grill" in rounds[2]["answer"]
    assert sum(1 for e in events if e["type"] == "approval_requested" and e["tool"] == "grill_question") == 1


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_grill_through_provider_servers(musec: Musec, buggy_repo: Path, provider: str) -> None:
    """The headless grill through a real local server of each provider's API: the main
    agent's proposal and the critic's three questions are model calls of one server, in
    order; the log replays byte-exact."""
    steps = [("main", "call_Plan01", "propose_plan", PLAN)]
    steps += [("critic", f"call_Q0{n}", "grill_question", q) for n, q in enumerate(QUESTIONS, start=2)]
    done = "No further objection."
    if provider == "anthropic":
        from tests.support.anthropic_server import AnthropicServer as Server
        from tests.support.anthropic_server import check_tool_pairing as check
        from tests.support.anthropic_server import message

        turns = [message([{"type": "tool_use", "id": "toolu_" + cid, "name": name, "input": args}])
                 for _, cid, name, args in steps] + [message([{"type": "text", "text": done}])]
        env = lambda s: {"ANTHROPIC_API_KEY": "sk-" + "grill-NeverReal-0123456789", "ANTHROPIC_BASE_URL": s.base_url}  # noqa: E731
        model = "anthropic/claude-sonnet-4-6"
    else:
        from tests.support.openai_server import OpenAIServer as Server
        from tests.support.openai_server import check_responses_pairing as check
        from tests.support.openai_server import responses_stream

        turns = [responses_stream([{"type": "function_call", "call_id": cid, "name": name, "arguments": json.dumps(args)}])
                 for _, cid, name, args in steps] + [responses_stream([{"type": "message", "text": done}])]
        env = lambda s: {"OPENAI_API_KEY": "sk-" + "grill-NeverReal-0123456789", "OPENAI_BASE_URL": s.base_url}  # noqa: E731
        model = "openai/gpt-5"
    with Server() as server:
        server.enqueue(*turns)
        proc = musec("run", "--plan", "--grill", "--agents", "scout", "--model", model, "--output-format", "json",
                     "fix the pager", cwd=buggy_repo, env=env(server))
        requests = list(server.requests)
    assert proc.returncode == 0, proc.stderr
    assert len(requests) == 5
    check(requests)
    critic_system = json.dumps(requests[1].body)
    assert "You are the critic" in critic_system and "grill_question" in critic_system
    assert "You are the critic" not in json.dumps(requests[0].body)
    result = json.loads(proc.stdout)
    assert "## Assumptions" in result["result"]
    events = _log(musec, result["session_id"])
    rounds = [r for r in events if r["type"] == "grill_round"]
    # the scout has no model here: its map's word matches go to the critic as a start, and
    # settle nothing (a map dump had become a plan's settled decision: fresh user s5 F6)
    assert [r["answered_by"] for r in rounds] == ["none", "recommended", "recommended"]
    assert "no model" in rounds[0]["answer"] and "test_pager.py" in rounds[0]["answer"]
    assert "where the tests are" not in result["result"]
    replay = musec("replay", result["session_id"], "--json")
    assert replay.returncode == 0, replay.stdout + replay.stderr
