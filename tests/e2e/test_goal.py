"""``/goal`` end to end (issue 14): the real CLI and daemon, the scripted model for the
working agent and for the evaluator, the check run in the sandbox on ``buggy_repo``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import BUGGY, FIXED, Musec, run_library_tests
from tests.support.anthropic_server import AnthropicServer, check_tool_pairing, message
from tests.support.openai_server import OpenAIServer, check_responses_pairing, responses_stream

CHECK = "python -m pytest -q"
CONDITION = "the pager library's tests pass"
FIX = {"tool": "edit_file", "input": {"path": "pager.py", "old_string": BUGGY, "new_string": FIXED}}
MET = {"verdict": "met", "reason": "the check passes and page() counts from 1",
       "summary": "Fixed the off-by-one in page(): pages count from 1; the tests pass."}


def _script(tmp_path: Path, main: list, evaluator: list | None = None) -> Path:
    path = tmp_path / "goal.json"
    body: dict = {"turns": main}
    if evaluator is not None:
        body["agents"] = {"evaluator": {"turns": [[{"text": json.dumps(v)}] for v in evaluator]}}
    path.write_text(json.dumps(body))
    return path


def _events(musec: Musec, sid: str) -> list[dict]:
    proc = musec("log", sid, "--json")
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _goal_events(events: list[dict]) -> list[tuple]:
    out = []
    for e in events:
        if e["type"] == "goal_checked":
            out.append(("checked", e["n"], e["by"], e["verdict"]))
        elif e["type"] == "goal_updated":
            out.append(("updated", e["status"]))
        elif e["type"] == "goal_set":
            out.append(("set", e["condition"], e["check"]))
    return out


def _run_goal(musec: Musec, repo: Path, script: Path, *extra: str, env: dict | None = None):
    return musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json",
                 "--goal", CONDITION, "--check", CHECK, *extra, cwd=repo, env=env)


def _replays(musec: Musec, sid: str) -> dict:
    proc = musec("replay", sid, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    replay = json.loads(proc.stdout)
    assert replay["ok"], replay
    assert musec("log", "verify", sid).returncode == 0
    return replay


def test_the_first_done_is_rejected_by_the_check_and_the_second_passes(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    script = _script(tmp_path, [
        [{"text": "Done: the tests pass now."}],  # a claim; nothing was changed
        [{"text": "The check failed; fixing page()."}, FIX],
        [{"text": "Fixed the off-by-one; done."}],
    ], evaluator=[MET])
    proc = _run_goal(musec, buggy_repo, script)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["exit_reason"] == "finished" and result["result"] == MET["summary"], result
    assert run_library_tests(buggy_repo).returncode == 0
    events = _events(musec, result["session_id"])
    assert _goal_events(events) == [
        ("set", CONDITION, CHECK),
        ("checked", 1, "check", "not_met"),
        ("checked", 2, "check", "met"),
        ("checked", 2, "evaluator", "met"),
        ("updated", "met"),
    ]
    first = next(e for e in events if e["type"] == "goal_checked")
    assert first["exit_status"] != 0 and "failed" in first["output"] and first["instruct"]
    # The evaluator is a separate agent, asked once (only after the check passed), with the evidence.
    asked = [e for e in events if e["type"] == "user_message" and e["agent"] == "evaluator"]
    assert len(asked) == 1 and CONDITION in asked[0]["text"] and "exited 0" in asked[0]["text"]
    assert "Fixed the off-by-one; done." in asked[0]["text"] and "+    start = (number - 1) * size" in asked[0]["text"]
    spawned = next(e for e in events if e["type"] == "agent_spawned" and e["agent"] == "evaluator")
    assert spawned["tools"] == [] and "goal evaluator" in spawned["system_prompt"]
    assert [e["agent"] for e in events if e["type"] == "model_request"] == ["main", "main", "main", "evaluator"]
    replay = _replays(musec, result["session_id"])
    assert replay["model_requests"] == 4  # three of the working agent, one of the evaluator
    # A session started by its goal, with no task, is listed by it (fresh-user s8 J12: no title).
    listed = musec.json("sessions", "--json", cwd=buggy_repo)
    assert [s["title"] for s in listed if s["id"] == result["session_id"]] == [f"goal: {CONDITION}"[:80]]


def test_a_goal_whose_budget_runs_out_ends_budget_limited_with_a_summary(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    script = _script(tmp_path, [[{"text": "Done."}], [{"text": "Done, really."}], [{"text": "never asked"}]])
    proc = _run_goal(musec, buggy_repo, script, "--max-turns", "2")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["exit_reason"] == "max_turns", result
    summary = result["result"]
    assert summary.startswith("Goal g1 stopped: the goal's 2 turns (--max-turns) are spent."), summary
    assert f"Condition: {CONDITION}" in summary and "Judged 2 times" in summary and "The agent's last message: Done, really." in summary
    events = _events(musec, result["session_id"])
    assert _goal_events(events)[1:] == [("checked", 1, "check", "not_met"), ("checked", 2, "check", "not_met"),
                                        ("updated", "budget_limited")]
    ended = next(e for e in events if e["type"] == "goal_updated")
    assert ended["summary"] == summary
    assert [e["agent"] for e in events if e["type"] == "model_request"] == ["main", "main"]
    _replays(musec, result["session_id"])


def test_a_stuck_goal_pauses_and_a_resume_goes_on(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    script = _script(tmp_path, [
        [{"text": "Done."}], [{"text": "Done."}], [{"text": "Done."}],  # the same failure, no change: stuck
        [FIX], [{"text": "Fixed it for real."}],
    ], evaluator=[MET])
    proc = _run_goal(musec, buggy_repo, script)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["exit_reason"] == "goal_unmet" and "paused, stuck: the check `python -m pytest -q` failed the same way 3 judgments in a row" in result["message"]
    # s8 J3: the hint said "(or a message) goes on", but a message never resumed it (as in
    # Codex, a paused goal stays paused until resumed): the hint says so now.
    assert result["message"].endswith("/goal resume goes on (a message alone leaves it paused)"), result["message"]
    sid = result["session_id"]
    paused = [e for e in _events(musec, sid) if e["type"] == "goal_updated"]
    assert [(e["status"], e["by"]) for e in paused] == [("paused", "stuck")]

    again = musec("run", "--resume", sid, "--output-format", "json", "/goal resume", cwd=buggy_repo)
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)["result"] == MET["summary"]
    events = _events(musec, sid)
    assert _goal_events(events)[-5:] == [("updated", "paused"), ("updated", "active"), ("checked", 4, "check", "met"),
                                         ("checked", 4, "evaluator", "met"), ("updated", "met")]
    assert not any(e["type"] == "user_message" and e["text"].startswith("/goal") for e in events)
    _replays(musec, sid)


def test_a_stuck_goal_in_a_headless_run_says_how_a_headless_run_goes_on(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    # s8 J12: `musec run` said the interactive "/goal resume goes on"; it names the command now.
    script = _script(tmp_path, [[{"text": "Done."}], [{"text": "Done."}], [{"text": "Done."}]], evaluator=[])
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--goal", CONDITION, "--check", CHECK,
                 cwd=buggy_repo)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    assert f'; `musec run --resume {sid} "/goal resume"` goes on (a message alone leaves it paused)' in proc.stderr, proc.stderr


@pytest.mark.parametrize("point", ["goal_check", "goal_verdict"])
def test_kill_9_mid_goal_and_resume_keeps_the_counters(point: str, musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    if point == "goal_check":  # killed with the first check run and unlogged; the budget is 2 turns
        main = [[{"text": "Done."}], [{"text": "Done again."}], [{"text": "never asked"}]]
        script, extra = _script(tmp_path, main), ("--max-turns", "2")
    else:  # killed after the evaluator answered, before its verdict was logged
        script, extra = _script(tmp_path, [[FIX], [{"text": "Fixed."}]], evaluator=[MET]), ()
    crashed = _run_goal(musec, buggy_repo, script, *extra, env={"MUSEC_CRASH_AT": point})
    assert crashed.returncode == 5, crashed.stdout + crashed.stderr
    sid = crashed.stderr.split("musec run --resume ")[1].split("`")[0]

    resumed = musec("run", "--resume", sid, "--output-format", "json", cwd=buggy_repo)
    result = json.loads(resumed.stdout)
    events = _events(musec, sid)
    requests = [e["agent"] for e in events if e["type"] == "model_request"]
    if point == "goal_check":
        # The turn before the kill counts: the second judgment spends the 2-turn budget.
        assert resumed.returncode == 4 and result["exit_reason"] == "max_turns", resumed.stdout
        assert _goal_events(events)[1:] == [("checked", 1, "check", "not_met"), ("checked", 2, "check", "not_met"),
                                            ("updated", "budget_limited")]
        assert requests == ["main", "main"]
    else:
        assert resumed.returncode == 0 and result["result"] == MET["summary"], resumed.stdout
        assert _goal_events(events)[1:] == [("checked", 1, "check", "met"), ("checked", 1, "evaluator", "met"),
                                            ("updated", "met")]
        assert requests == ["main", "main", "evaluator"]  # the logged answer is used, never asked again
    assert any(e["type"] == "session_resumed" for e in events)
    _replays(musec, sid)


def test_goal_usage_errors_are_one_line(musec: Musec, buggy_repo: Path) -> None:
    proc = musec("run", "--check", "pytest -q", "task", cwd=buggy_repo)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        'musec: --check is the check of a goal: musec run --goal "CONDITION" --check "CMD"']
    proc = musec("run", "--goal", " ", cwd=buggy_repo)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "--goal is empty" in proc.stderr


def _anthropic() -> list:
    return [
        message([{"type": "text", "text": "Done: the tests pass now."}]),
        message([{"type": "text", "text": "Fixing page()."},
                 {"type": "tool_use", "id": "toolu_01GoalFixA1b2C3", "name": "edit_file", "input": FIX["input"]}]),
        message([{"type": "text", "text": "Fixed the off-by-one; done."}]),
        message([{"type": "text", "text": json.dumps(MET)}]),
    ]


def _responses() -> list:
    return [
        responses_stream([{"type": "message", "text": "Done: the tests pass now."}]),
        responses_stream([{"type": "function_call", "call_id": "call_GoalFix01", "name": "edit_file",
                           "arguments": json.dumps(FIX["input"])}]),
        responses_stream([{"type": "message", "text": "Fixed the off-by-one; done."}]),
        responses_stream([{"type": "message", "text": json.dumps(MET)}]),
    ]


def _anthropic_parts(body: dict) -> tuple[str, str, bool]:
    """(system prompt, the last user message's text, whether tools were offered)."""
    system = "".join(b["text"] for b in body["system"]) if isinstance(body["system"], list) else body["system"]
    last = body["messages"][-1]["content"]
    text = last if isinstance(last, str) else "".join(b.get("text", "") for b in last if b.get("type") == "text")
    return system, text, bool(body.get("tools"))


def _responses_parts(body: dict) -> tuple[str, str, bool]:
    last = [i for i in body["input"] if i.get("role") == "user"][-1]["content"]
    text = last if isinstance(last, str) else "".join(c.get("text", "") for c in last)
    return body["instructions"], text, bool(body.get("tools"))


PROVIDERS = {
    "anthropic": ("anthropic/claude-sonnet-4-6", AnthropicServer, _anthropic, check_tool_pairing, _anthropic_parts,
                  lambda s: {"ANTHROPIC_API_KEY": "sk-ant-" + "goal-e2e-NeverReal-0123456789", "ANTHROPIC_BASE_URL": s.base_url}),
    "openai": ("openai/gpt-5", OpenAIServer, _responses, check_responses_pairing, _responses_parts,
               lambda s: {"OPENAI_API_KEY": "sk-" + "goal-e2e-NeverReal-0123456789abcdef", "OPENAI_BASE_URL": s.base_url}),
}


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_a_goal_through_the_provider_servers_replays_byte_exact(provider: str, musec: Musec, buggy_repo: Path) -> None:
    model, server_class, turns, check_pairing, parts, credentials = PROVIDERS[provider]
    with server_class() as server:
        server.enqueue(*turns())
        proc = musec("run", "--model", model, "--approval", "auto", "--output-format", "json",
                     "--goal", CONDITION, "--check", CHECK, cwd=buggy_repo, env=credentials(server))
        requests = list(server.requests)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["result"] == MET["summary"] and run_library_tests(buggy_repo).returncode == 0
    assert len(requests) == 4
    check_pairing(requests[:3])
    check_pairing(requests[3:])
    (system0, first, tools0), (_, rejected, _), _, (system3, evidence, tools3) = (parts(r.body) for r in requests)
    assert f"<goal>\n{CONDITION}\n</goal>" in first and tools0  # the goal, verbatim, to the working agent
    assert "[goal check 1: not met yet] The check `python -m pytest -q` exited 1" in rejected
    assert f"<goal>\n{CONDITION}\n</goal>" in rejected
    # The evaluator: its own prompt, no tools, one message of evidence; never the working agent.
    assert "goal evaluator" in system3 and system3 != system0 and not tools3
    assert len(requests[3].body.get("messages") or requests[3].body.get("input")) == 1
    assert "exited 0" in evidence and "Fixed the off-by-one; done." in evidence
    events = _events(musec, result["session_id"])
    assert _goal_events(events)[-2:] == [("checked", 2, "evaluator", "met"), ("updated", "met")]
    assert _replays(musec, result["session_id"])["model_requests"] == 4


def test_goal_commands_in_an_interactive_session(musec: Musec, buggy_repo: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``/goal`` from an attached client (the request the interactive ``/goal`` sends): set
    while idle starts the work; status, pause and clear answer in lines or one-line errors."""
    from musec.client import connection
    from musec.daemon import protocol as p

    monkeypatch.setenv("MUSEC_HOME", str(musec.home))
    monkeypatch.delenv("MUSEC_SOCKET", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    script = _script(tmp_path, [[FIX], [{"text": "Fixed."}]], evaluator=[MET])
    assert musec("daemon", "start").returncode == 0
    conn = connection.connect(start=False)
    try:
        conn.send(p.StartSession(id=conn.next_id(), workspace=str(buggy_repo), model=f"scripted:{script}", approval="auto",
                                 interactive=True, end_when_idle=False))
        sid = ""
        while not sid:
            msg = conn.recv(60)
            sid = msg.session_id if isinstance(msg, p.SessionStarted) else ""

        def goal(text: str) -> list[str]:
            return conn.request(p.GoalCommand(id=conn.next_id(), session_id=sid, text=text)).lines

        assert goal("")[0].startswith("no goal in this session")
        with pytest.raises(connection.RequestFailed, match="no goal to pause in this session"):
            goal("pause")
        with pytest.raises(connection.RequestFailed, match="--max-turns '0'"):
            goal("green --max-turns 0")
        assert goal(f'{CONDITION} --check "{CHECK}" --max-turns 5') == [f"goal g1 set: {CONDITION} (check: {CHECK})"]
        ended = None
        while ended is None:  # the goal started a turn by itself, with no message
            msg = conn.recv(120)
            if isinstance(msg, p.Idle) and msg.exit_reason != "ready":  # "ready": the idle start, kept by request()
                ended = msg
        assert (ended.exit_reason, ended.result) == ("finished", MET["summary"])
        status = goal("status")
        assert status[:2] == ["goal g1: met (the check passes and page() counts from 1)", f"  condition: {CONDITION}"]
        assert "  judged 1 time; spent 2 turns of 5, $0.0000, " in status[3]
        with pytest.raises(connection.RequestFailed, match=r"no goal to clear in this session \(goal g1 is met\)"):
            goal("clear")
        conn.request(p.EndSession(id=conn.next_id(), session_id=sid))
    finally:
        conn.close()
    assert run_library_tests(buggy_repo).returncode == 0


def test_the_evaluators_prompt_is_shown_as_musecs_not_the_persons(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    # F15 (fresh-user trial s5): `attach` and `log` showed the evaluator's prompt under the
    # person's `›`, as if the person had typed the evidence.
    script = _script(tmp_path, [[{"text": "Fixing page()."}, FIX], [{"text": "Fixed; done."}]], evaluator=[MET])
    proc = _run_goal(musec, buggy_repo, script)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sid = json.loads(proc.stdout)["session_id"]
    attached = musec("attach", sid, timeout=30)
    persons = [ln for ln in attached.stdout.splitlines() if ln.startswith("›")]
    assert persons == [], attached.stdout  # a goal run's task is the condition, given on the command line
    assert "[evaluator] musec's instructions: " in attached.stdout, attached.stdout
    log = musec("log", sid)
    asked = [ln for ln in log.stdout.splitlines() if " evaluator " in ln and "user_message" in ln]
    assert len(asked) == 1 and "musec's instructions: " in asked[0], log.stdout
