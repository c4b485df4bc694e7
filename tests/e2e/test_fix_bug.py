"""End to end: ``musec run`` fixes a real failing test through the daemon."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import FIXED, Musec, run_library_tests
from tests.support.anthropic_server import AnthropicServer, check_tool_pairing, message

REQUIRED_EVENTS = {"session_started", "user_message", "model_request", "model_response", "tool_started",
                   "tool_finished", "file_edited", "session_ended"}


def _events(musec: Musec, session_id: str) -> list[dict]:
    proc = musec("log", session_id, "--json")
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _check_fixed(musec: Musec, repo: Path, result: dict) -> list[dict]:
    assert result["exit_reason"] == "finished", result
    assert run_library_tests(repo).returncode == 0
    assert FIXED in (repo / "pager.py").read_text()
    events = _events(musec, result["session_id"])
    assert REQUIRED_EVENTS <= {e["type"] for e in events}
    assert [e["seq"] for e in events] == list(range(len(events)))
    verify = musec("log", "verify", result["session_id"])
    assert verify.returncode == 0, verify.stdout
    return events


def test_scripted_run_fixes_the_bug(musec: Musec, buggy_repo: Path, fix_script: Path) -> None:
    proc = musec("run", "--model", f"scripted:{fix_script}", "--approval", "auto", "--output-format", "json",
                 "make the tests pass", cwd=buggy_repo)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    events = _check_fixed(musec, buggy_repo, result)
    edit = next(e for e in events if e["type"] == "file_edited")
    assert edit["path"] == "pager.py" and "+    start = (number - 1) * size" in edit["diff"]
    started = events[0]
    assert started["workspace"] == str(buggy_repo.resolve()) and len(started["git"]["base_commit"]) == 40


def _anthropic_turns() -> list:

    test = "python3 -m unittest -q 2>&1"
    return [
        message([{"type": "text", "text": "Let me run the tests."},
                 {"type": "tool_use", "id": "toolu_01RunTestsA1b2C3", "name": "bash", "input": {"command": test}}]),
        message([{"type": "tool_use", "id": "toolu_01ReadPager4d5E6", "name": "read_file", "input": {"path": "pager.py"}}]),
        message([{"type": "text", "text": "Pages count from 1."},
                 {"type": "tool_use", "id": "toolu_01EditPager7f8G9", "name": "edit_file",
                  "input": {"path": "pager.py", "old_string": "start = number * size", "new_string": "start = (number - 1) * size"}}]),
        message([{"type": "tool_use", "id": "toolu_01RunAgainH0i1J2", "name": "bash", "input": {"command": test}}]),
        message([{"type": "text", "text": "Fixed the off-by-one; all tests pass."}]),
    ]


def test_anthropic_run_fixes_the_bug(musec: Musec, buggy_repo: Path) -> None:
    key = "sk-ant-" + "api03-e2eTestKeyNeverReal-0123456789abcdef"  # fake; split so no key-shaped literal is committed
    with AnthropicServer() as server:
        server.enqueue(*_anthropic_turns())
        proc = musec("run", "--model", "anthropic/claude-sonnet-4-6", "--approval", "auto",
                     "--output-format", "json", "make the tests pass", cwd=buggy_repo,
                     env={"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": server.base_url})
        requests = list(server.requests)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    _check_fixed(musec, buggy_repo, result)
    assert len(requests) == 5
    check_tool_pairing(requests)
    assert all(r.headers["x-api-key"] == key for r in requests)
    last_user = requests[-1].body["messages"][-1]
    assert last_user["role"] == "user" and last_user["content"][0]["tool_use_id"] == "toolu_01RunAgainH0i1J2"
    assert "OK" in str(last_user["content"][0]["content"])


def test_headless_ask_needs_approval_exit_3(musec: Musec, buggy_repo: Path, fix_script: Path) -> None:
    proc = musec("run", "--model", f"scripted:{fix_script}", "--approval", "ask", "make the tests pass", cwd=buggy_repo)
    assert proc.returncode == 3, proc.stderr
    assert "bash(" in proc.stderr and "needs approval" in proc.stderr
    assert run_library_tests(buggy_repo).returncode != 0


def test_max_turns_exit_4(musec: Musec, buggy_repo: Path, fix_script: Path) -> None:
    proc = musec("run", "--model", f"scripted:{fix_script}", "--approval", "auto", "--max-turns", "2",
                 "--output-format", "json", "make the tests pass", cwd=buggy_repo)
    assert proc.returncode == 4, proc.stderr
    assert json.loads(proc.stdout)["exit_reason"] == "max_turns"


def test_read_only_refuses_edits(musec: Musec, buggy_repo: Path, fix_script: Path) -> None:
    proc = musec("run", "--model", f"scripted:{fix_script}", "--approval", "read-only", "make the tests pass", cwd=buggy_repo)
    # The edit is refused, so the script's expect_result "OK" fails: the run reports an error.
    assert proc.returncode == 1, proc.stderr
    assert run_library_tests(buggy_repo).returncode != 0
    assert "expect" in proc.stderr.lower()


def test_stream_json_prints_each_logged_event(musec: Musec, buggy_repo: Path, fix_script: Path) -> None:
    proc = musec("run", "--model", f"scripted:{fix_script}", "--approval", "auto", "--output-format", "stream-json",
                 "make the tests pass", cwd=buggy_repo)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    logged, result = lines[:-1], lines[-1]
    assert [e["seq"] for e in logged] == list(range(len(logged)))
    assert result["type"] == "result" and result["exit_code"] == 0


def test_missing_key_is_a_clear_usage_error(musec: Musec, buggy_repo: Path) -> None:
    proc = musec("run", "--model", "anthropic/claude-sonnet-4-6", "fix it", cwd=buggy_repo)
    assert proc.returncode == 2
    assert "ANTHROPIC_API_KEY" in proc.stderr and "Traceback" not in proc.stderr


def test_script_drift_fails_loudly(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "drift.json"
    script.write_text(json.dumps({"turns": [[{"tool": "bash", "input": {"command": "echo hello"}}],
                                            [{"expect_result": "goodbye"}, {"text": "done"}]]}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "go", cwd=buggy_repo)
    assert proc.returncode == 1
    assert "goodbye" in proc.stderr and "Traceback" not in proc.stderr


def test_demo_fixes_the_bundled_example(musec: Musec) -> None:
    proc = musec("demo")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "tests after: pass" in proc.stdout and "+    return [list(items[i : i + size]) for i in range(len(items) - size + 1)]" in proc.stdout
    assert "musec log verify" in proc.stdout


def test_costs_retries_and_budget(musec: Musec, buggy_repo: Path) -> None:
    from tests.support.anthropic_server import error_response

    key = "sk-ant-" + "api03-costTestKeyNeverReal-0123456789abcdef"  # fake
    env_base = {"ANTHROPIC_API_KEY": key}
    with AnthropicServer() as server:
        server.enqueue(error_response(529, "overloaded_error", "Overloaded"), *_anthropic_turns())
        proc = musec("run", "--model", "sonnet", "--approval", "auto", "--output-format", "json", "fix it",
                     cwd=buggy_repo, env={**env_base, "ANTHROPIC_BASE_URL": server.base_url})
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["cost_usd"] > 0
    events = _events(musec, result["session_id"])
    retries = [e for e in events if e["type"] == "model_retry"]
    assert len(retries) == 1 and retries[0]["status"] == 529
    responses = [e for e in events if e["type"] == "model_response"]
    assert abs(sum(e["cost_usd"] for e in responses) - result["cost_usd"]) < 1e-6
    assert events[-1]["type"] == "session_ended" and events[-1]["cost_usd"] == result["cost_usd"]

    with AnthropicServer() as server:
        server.enqueue(*_anthropic_turns())
        capped = musec("run", "--model", "anthropic/claude-sonnet-4-6", "--approval", "auto", "--output-format", "json",
                       "--budget-usd", "0.000001", "fix it", cwd=buggy_repo,
                       env={**env_base, "ANTHROPIC_BASE_URL": server.base_url})
    assert capped.returncode == 4, capped.stderr
    assert json.loads(capped.stdout)["exit_reason"] == "budget"


def test_models_lists_the_catalog(musec: Musec) -> None:
    proc = musec("models", "--json")
    assert proc.returncode == 0, proc.stderr
    models = {m["id"]: m for m in json.loads(proc.stdout)}
    assert "sonnet" in models["anthropic/claude-sonnet-4-6"]["aliases"]
    assert models["anthropic/claude-sonnet-4-6"]["output_per_mtok"] > 0


def test_retries_are_survived_logged_and_costed(musec: Musec, buggy_repo: Path) -> None:
    from tests.support.anthropic_server import error_response

    key = "sk-ant-" + "api03-retryTestKeyNeverReal-0123456789"
    turns = _anthropic_turns()
    with AnthropicServer() as server:
        server.enqueue(
            error_response(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit",
                           headers={"retry-after": "1"}),
            error_response(529, "overloaded_error", "Overloaded"),
            message([{"type": "text", "text": "Let me"}], error="overloaded_error"),
            *turns,
        )
        proc = musec("run", "--model", "anthropic/claude-sonnet-4-6", "--approval", "auto", "--output-format", "json",
                     "fix it", cwd=buggy_repo, env={"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": server.base_url})
    assert proc.returncode == 0, proc.stderr
    sid = json.loads(proc.stdout)["session_id"]
    events = _events(musec, sid)
    retries = [e for e in events if e["type"] == "model_retry"]
    assert [r["status"] for r in retries][:2] == [429, 529] and len(retries) == 3
    assert retries[0]["retry_after_s"] == 1 and retries[0]["delay_s"] >= 1
    assert run_library_tests(buggy_repo).returncode == 0
    cost = musec.json("cost", sid, "--json")
    assert cost["retries"] == 3 and cost["total_usd"] > 0
    # The model column is the model that served each call, as the provider reported it.
    assert [(r["agent"], r["model"], r["calls"]) for r in cost["rows"]] == [("main", "claude-test", 5)]
    text = musec("cost", sid).stdout
    assert "main" in text and "claude-test" in text and "total $" in text


def test_unknown_tool_input_is_refused_not_ignored(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "typo.json"
    script.write_text(json.dumps({"turns": [[{"tool": "bash", "input": {"command": "sleep 30", "timeout": 1}}],
                                            [{"expect_result": "unknown input timeout"}, {"text": "ok"}]]}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "go", cwd=buggy_repo, timeout=20)
    assert proc.returncode == 0, proc.stderr


def test_ctrl_c_during_the_demo_deletes_its_example(musec: Musec) -> None:
    """Ctrl-C while the demo runs: its temporary example folder is removed and a line says
    so (it was left behind), exit 130."""
    import signal
    import subprocess

    from tests.conftest import BIN

    proc = subprocess.Popen([str(BIN / "musec"), "demo"], env=musec.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline()  # "example repository: PATH": the folder exists from here on
    assert first.startswith("example repository: "), first
    folder = Path(first.split(": ", 1)[1].strip()).parent
    assert folder.exists()
    proc.send_signal(signal.SIGINT)
    out, errors = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + errors
    assert not folder.exists() and "demo was interrupted" in errors
