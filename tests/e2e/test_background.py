"""Background agents: the verifier escalates a regression on its own; the scout answers."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import BUGGY, FIXED, LIBRARY, Musec, run_library_tests
from tests.support.anthropic_server import AnthropicServer, check_tool_pairing, message


def _green_repo(repo: Path) -> Path:
    (repo / "pager.py").write_text(LIBRARY["pager.py"].replace(BUGGY, FIXED))
    assert run_library_tests(repo).returncode == 0
    return repo


def test_verifier_escalates_a_regression_before_the_main_agent_finishes(musec: Musec, buggy_repo: Path) -> None:
    repo = _green_repo(buggy_repo)
    key = "sk-ant-" + "api03-backgroundTestKeyNeverReal-0123"
    answers = [
        message([{"type": "tool_use", "id": "toolu_01Edit", "name": "edit_file",
                  "input": {"path": "pager.py", "old_string": FIXED, "new_string": BUGGY}}]),
        message([{"type": "tool_use", "id": "toolu_01Wait", "name": "bash", "input": {"command": "sleep 4"}}]),
        message([{"type": "tool_use", "id": "toolu_01Ask", "name": "ask_agent",
                  "input": {"agent": "scout", "question": "where is page defined?"}}]),
        message([{"type": "text", "text": "I broke page(); reverting is next."}]),
    ]
    with AnthropicServer() as server:
        server.enqueue(*answers)
        proc = musec("run", "--model", "anthropic/claude-sonnet-4-6", "--approval", "auto", "--agents", "scout,verifier",
                     "--output-format", "json", "refactor page", cwd=repo,
                     env={"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": server.base_url})
        requests = list(server.requests)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sid = json.loads(proc.stdout)["session_id"]
    check_tool_pairing(requests)

    # The request after the edit's follow-up carries the escalation, after the tool result.
    third = requests[2].body["messages"][-1]["content"]
    assert third[0]["type"] == "tool_result" and third[0]["tool_use_id"] == "toolu_01Wait"
    escalation = " ".join(b.get("text", "") for b in third if b["type"] == "text")
    assert "message from agent verifier" in escalation and "test_first_page" in escalation
    scout_answer = requests[3].body["messages"][-1]["content"][0]
    assert "pager.py: def page" in str(scout_answer["content"])

    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    runs = [e for e in events if e["type"] == "test_run"]
    assert runs[0]["trigger"] == "baseline" and runs[0]["passed"]
    assert any(not r["passed"] for r in runs if r["trigger"] == "edit")
    messages = [e for e in events if e["type"] == "agent_message"]
    assert len(messages) == 1 and messages[0]["agent"] == "verifier" and messages[0]["priority"] == "high"
    assert musec("log", "verify", sid).returncode == 0
    assert musec.json("replay", sid, "--json")["ok"]

    agents = {a["agent"]: a for a in musec.json("agents", sid, "--json")}
    assert {"main", "scout", "verifier"} <= set(agents)
    assert agents["verifier"]["role"] == "verifier" and agents["main"]["output_tokens"] > 0


def test_verifier_stays_quiet_when_nothing_new_fails(musec: Musec, buggy_repo: Path, fix_script: Path) -> None:
    # The tests fail before the run (baseline) and pass after the fix: nothing to escalate.
    proc = musec("run", "--model", f"scripted:{fix_script}", "--approval", "auto", "--agents", "verifier",
                 "--output-format", "json", "fix it", cwd=buggy_repo)
    assert proc.returncode == 0, proc.stderr
    sid = json.loads(proc.stdout)["session_id"]
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    assert not [e for e in events if e["type"] == "agent_message"]
    assert [e for e in events if e["type"] == "test_run"][0]["passed"] is False


def test_a_fresh_session_logs_one_baseline_snapshot(musec: Musec, buggy_repo: Path, fix_script: Path) -> None:
    # The session and the verifier's own start both prepared the copy: two copies, two events.
    proc = musec("run", "--model", f"scripted:{fix_script}", "--approval", "auto", "--agents", "verifier",
                 "--output-format", "json", "fix it", cwd=buggy_repo)
    assert proc.returncode == 0, proc.stderr
    sid = json.loads(proc.stdout)["session_id"]
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    snapshots = [e for e in events if e["type"] == "baseline_snapshot"]
    assert len(snapshots) == 1, snapshots
    assert not Path(snapshots[0]["path"]).exists()  # removed when the session ended


def test_unknown_background_role_is_a_usage_error(musec: Musec, buggy_repo: Path, fix_script: Path) -> None:
    proc = musec("run", "--model", f"scripted:{fix_script}", "--agents", "oracle", "go", cwd=buggy_repo)
    assert proc.returncode == 2 and "unknown background agent 'oracle'" in proc.stderr


def test_background_agents_come_back_after_a_crash(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    repo = _green_repo(buggy_repo)
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [
        [{"text": "Breaking it."}, {"tool": "edit_file", "input": {"path": "pager.py", "old_string": FIXED, "new_string": BUGGY}}],
        [{"tool": "bash", "input": {"command": "sleep 3"}}],
        [{"text": "done"}],
    ]}))
    crashed = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--agents", "verifier",
                    "--output-format", "json", "go", cwd=repo, env={"MUSEC_CRASH_AT": "mid_model_stream"})
    assert crashed.returncode == 5
    sid = crashed.stderr.split("musec run --resume ")[1].split("`")[0]
    resumed = musec("run", "--resume", sid, "--output-format", "json", cwd=repo)
    assert resumed.returncode == 0, resumed.stderr
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    runs = [e for e in events if e["type"] == "test_run"]
    assert [r["trigger"] for r in runs].count("baseline") == 1  # the baseline before the crash is kept
    assert any(e["type"] == "agent_message" and e["agent"] == "verifier" for e in events)
    assert musec("log", "verify", sid).returncode == 0


def test_blackboard_serves_a_file_the_scout_already_read(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "reads.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "ask_agent", "input": {"agent": "scout", "question": "where is page?"}}],  # after its map
        [{"tool": "read_file", "input": {"path": "pager.py"}}],
        [{"expect_result": "def page"}, {"tool": "read_file", "input": {"path": "test_pager.py"}}],
        [{"text": "read both"}],
    ]}))
    stats = {}
    for flags in ([], ["--no-blackboard"]):
        proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--agents", "scout", *flags,
                     "--output-format", "json", "read", cwd=buggy_repo)
        assert proc.returncode == 0, proc.stderr
        sid = json.loads(proc.stdout)["session_id"]
        ended = json.loads(musec("log", sid, "--json").stdout.splitlines()[-1])
        stats[bool(flags)] = ended.get("blackboard")
    assert stats[True] is None
    board = stats[False]
    assert board["served_to_others"] == 2 and board["disk_reads"] == 2  # the scout's two reads, nothing more


def test_reviewer_sends_a_finished_turn_back_with_findings(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "review.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "edit_file", "input": {"path": "pager.py", "old_string": BUGGY,
                                         "new_string": "    breakpoint()\n" + FIXED}}],
        [{"text": "Done, fixed."}],
        [{"tool": "edit_file", "input": {"path": "pager.py", "old_string": "    breakpoint()\n", "new_string": ""}}],
        [{"text": "Removed the breakpoint; done."}],
    ]}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--agents", "reviewer",
                 "--output-format", "json", "fix it", cwd=buggy_repo)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["result"] == "Removed the breakpoint; done."
    events = [json.loads(x) for x in musec("log", result["session_id"], "--json").stdout.splitlines()]
    sent_back = [e for e in events if e["type"] == "agent_message" and e["from"] == "reviewer"]
    assert len(sent_back) == 1 and "debugger call" in sent_back[0]["body"]
    assert [e["type"] for e in events].count("turn_ended") == 1  # one turn, sent back once, then finished
    assert "breakpoint" not in (buggy_repo / "pager.py").read_text() and run_library_tests(buggy_repo).returncode == 0


def test_verifier_tests_an_edit_the_crash_left_untested(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    repo = _green_repo(buggy_repo)
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "edit_file", "input": {"path": "pager.py", "old_string": FIXED, "new_string": BUGGY}}],
        [{"text": "edited"}, {"tool": "bash", "input": {"command": "sleep 3"}}],
        [{"text": "done"}],
    ]}))
    # The crash comes right after the edit (at the next streamed text), before the verifier can run.
    crashed = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--agents", "verifier",
                    "go", cwd=repo, env={"MUSEC_CRASH_AT": "mid_model_stream"})
    assert crashed.returncode == 5
    sid = crashed.stderr.split("musec run --resume ")[1].split("`")[0]
    assert musec("run", "--resume", sid, cwd=repo).returncode == 0
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    assert any(e["type"] == "agent_message" and e["agent"] == "verifier" for e in events)


def test_scout_with_its_own_model_answers_and_remembers(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "scout.json"
    script.write_text(json.dumps({
        "turns": [
            [{"tool": "ask_agent", "input": {"agent": "scout", "question": "Where is page() defined?"}}],
            [{"expect_result": "page() is in pager.py"},
             {"tool": "ask_agent", "input": {"agent": "scout", "question": "And its tests?"}}],
            [{"expect_result": "test_pager.py"}, {"text": "Thanks."}],
        ],
        "agents": {"scout": {"turns": [
            [{"tool": "grep", "input": {"pattern": "def page"}}],
            [{"expect_result": "pager.py"}, {"text": "page() is in pager.py, line 4."}],
            [{"text": "They are in test_pager.py (I read the tree earlier)."}],
        ]}},
    }))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--agents", "scout",
                 "--agents-model", f"scripted:{script}", "--output-format", "json", "find page", cwd=buggy_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sid = json.loads(proc.stdout)["session_id"]
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    scout = [e for e in events if e["agent"] == "scout"]
    assert [e["type"] for e in scout].count("model_response") == 3  # one conversation across both questions
    spawned = next(e for e in scout if e["type"] == "agent_spawned")
    assert set(spawned["tools"]) == {"read_file", "glob", "grep"}  # read only
    assert musec.json("replay", sid, "--json")["ok"]
    agents = {a["agent"]: a for a in musec.json("agents", sid, "--json")}
    assert agents["scout"]["events"] >= 7


def test_a_slow_suite_never_holds_the_main_agent_back(musec: Musec, tmp_path: Path) -> None:
    # Issue 20 case 2: the repository's suite takes 20 s (its test sleeps: the repository's
    # behaviour, not synchronisation); a one-turn run with the verifier on ends long before.
    import time

    repo = tmp_path / "slow"
    repo.mkdir()
    (repo / "pytest.ini").write_text("[pytest]\n")
    (repo / "app.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "test_slow.py").write_text("import time\n\n\ndef test_slow():\n    time.sleep(20)\n")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "edit_file", "input": {"path": "app.py", "old_string": "a + b", "new_string": "b + a"}}],
        [{"text": "done"}],
    ]}))
    assert musec("sessions").returncode == 0  # the daemon is up: its start is not the run's time
    started = time.monotonic()
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--agents", "verifier",
                 "--output-format", "json", "swap the operands", cwd=repo)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout + proc.stderr
    print(f"one-turn run with a 20 s suite: {elapsed:.2f} s")
    assert elapsed < 5, f"the run took {elapsed:.1f} s"
    events = [json.loads(x) for x in musec("log", json.loads(proc.stdout)["session_id"], "--json").stdout.splitlines()]
    assert not [e for e in events if e["type"] == "test_run" and not e.get("narrowed")]  # the baseline never ended
    assert events[-1]["type"] == "session_ended" and events[-1]["exit_reason"] == "finished"


def test_a_finished_turn_that_broke_the_tests_is_sent_back(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    """The fresh user's case: the turn breaks a passing test and says it is done at once.
    The reviewer judges it after the verifier's run on the edit is in, so the new failure
    sends the turn back (before, the review came first, found nothing, and the run ended
    'finished' with the tests failing)."""
    repo = _green_repo(buggy_repo)
    script = tmp_path / "break.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "edit_file", "input": {"path": "pager.py", "old_string": FIXED, "new_string": BUGGY}}],
        [{"text": "I broke it, done."}],
        [{"text": "REACTING to the review"}],
    ]}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--agents", "verifier,reviewer",
                 "--output-format", "json", "change page", cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    events = [json.loads(x) for x in musec("log", result["session_id"], "--json").stdout.splitlines()]
    sent_back = [e for e in events if e["type"] == "agent_message" and e["from"] == "reviewer"]
    assert result["result"] == "REACTING to the review", [(e["type"], e.get("trigger"), e.get("passed")) for e in events]
    assert len(sent_back) == 1 and "test_first_page" in sent_back[0]["body"]
