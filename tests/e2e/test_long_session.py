"""End to end: a session far longer than its model's window (issue 12, done means).

The real ``musec`` CLI and daemon against the local Anthropic (or OpenAI Responses) server
with a window: the server refuses any request over it with the provider's own overflow
error. The model behind it (``tests/support/long_session.Script``) asks for one
``read_file`` of 8 KiB after another and summarises when asked; the person speaks four
times. Checked on every request the server sees: none is over the window, the task and
every later person's message are there verbatim, every tool call is answered, roles
alternate. Then from the log: compactions logged, every call answered, ``musec replay``
re-derives every request, the chain verifies.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from musec.agents.compaction import HEAD_MARK, SUMMARY_MARK
from musec.agents.core.faults import COMPACTION_POINTS

from tests.conftest import Musec
from tests.support.anthropic_server import AnthropicServer
from tests.support.long_session import (
    PEOPLE,
    PROVIDERS,
    Script,
    check_long_session,
    events,
    key,
    run_long_session,
    workspace,
    write_catalog,
)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_session_ten_times_its_window(musec: Musec, tmp_path: Path, provider: str) -> None:
    """120 reads of 8 KiB in a 40k-token window: the quick version of the thousand."""
    script, server, sid = run_long_session(musec, tmp_path, provider, calls=120, window=40_000)
    check_long_session(musec, script, server, sid, 120)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_thousand_tool_calls_in_a_200k_window(musec: Musec, tmp_path: Path, provider: str) -> None:
    """The done-means session: 1,000 reads of 8 KiB against a 200k-token window."""
    script, server, sid = run_long_session(musec, tmp_path, provider, calls=1000, window=200_000)
    check_long_session(musec, script, server, sid, 1000)


def _first_phase(musec: Musec, tmp_path: Path, script: Script, server, env_extra: dict[str, str] | None = None):
    model, _, credentials = PROVIDERS["anthropic"]
    ws = workspace(tmp_path)
    env = {**credentials(server, key("anthropic")), **(env_extra or {})}
    proc = musec("run", "--model", model, "--approval", "auto", "--max-turns", "500", "--output-format", "json",
                 PEOPLE[0], cwd=ws, env=env, timeout=600)
    return proc, ws, credentials(server, key("anthropic"))


@pytest.mark.parametrize("point", COMPACTION_POINTS)
def test_kill_during_compaction_resumes_cleanly(musec: Musec, tmp_path: Path, point: str) -> None:
    """kill -9 with the summarising call in flight, or with compaction_finished half written:
    the resumed session compacts again (never half of one), finishes, and replays exactly."""
    write_catalog(musec, PROVIDERS["anthropic"][0], 40_000)
    script = Script(calls=40, provider="anthropic", phases=1)
    with AnthropicServer(window_tokens=40_000, keep_bodies=False, respond=script) as server:
        crashed, ws, env = _first_phase(musec, tmp_path, script, server, {"MUSEC_CRASH_AT": point})
        assert crashed.returncode == 5, crashed.stdout + crashed.stderr
        sid = crashed.stderr.split("musec run --resume ")[1].split("`")[0]
        resumed = musec("run", "--resume", sid, "--output-format", "json", cwd=ws, env=env, timeout=600)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert json.loads(resumed.stdout)["exit_reason"] == "finished"
    assert script.failures == [] and server.refused == 0 and script.made == 40
    log = events(musec, sid)
    started = [e for e in log if e["type"] == "compaction_started"]
    finished = [e for e in log if e["type"] == "compaction_finished"]
    assert len(started) == len(finished) + 1  # the one the crash cut off left no result, and was done again
    if point == "mid_compaction":
        assert script.summaries == len(finished)  # no call was made before the crash
    else:
        assert script.summaries == len(finished) + 1  # the torn result was cut off; the call was made again
        assert any(e["type"] == "log_repaired" for e in log)
    marks = [e["type"] for e in log if e["type"] in ("compaction_started", "compaction_finished", "session_resumed")]
    # each compaction_started is answered by its compaction_finished, except the one the crash cut off
    assert "compaction_started,session_resumed,compaction_started,compaction_finished" in ",".join(marks), marks
    check_long_session(musec, script, server, sid, 40, lost_summaries=0 if point == "mid_compaction" else 1)


def test_overflow_at_the_first_request_of_a_resumed_session(musec: Musec, tmp_path: Path) -> None:
    """The model's window is unknown to musec; the session grows past what the endpoint
    later takes; resumed, its first request is refused with "prompt is too long": it
    compacts once, tries again, and goes on."""
    script = Script(calls=40, provider="anthropic", phases=2)
    with AnthropicServer(keep_bodies=False, respond=script) as server:
        first, ws, env = _first_phase(musec, tmp_path, script, server)
        assert first.returncode == 0, first.stdout + first.stderr
        sid = json.loads(first.stdout)["session_id"]
        assert max(server.tokens) > 30_000
        server.window_tokens = 30_000
        script.spoken = 2
        resumed = musec("run", "--resume", sid, "--output-format", "json", PEOPLE[1], cwd=ws, env=env, timeout=600)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert json.loads(resumed.stdout)["exit_reason"] == "finished"
    assert script.failures == [] and script.made == 40
    log = events(musec, sid)
    started = [e for e in log if e["type"] == "compaction_started"]
    # the window the refusal named is held to from then on: later compactions come first
    assert [e["reason"] for e in started] == ["overflow"] + ["threshold"] * (len(started) - 1)
    assert {e["window_tokens"] for e in started} == {30_000}
    assert server.refused == 1  # one refusal, then never over the window again
    replay = json.loads(musec("replay", sid, "--json", timeout=300).stdout)
    assert replay["ok"], replay["problems"][:3]


def test_resumed_session_over_its_window_compacts_first(musec: Musec, tmp_path: Path) -> None:
    """The catalog's window shrinks between runs: the resumed session is over it, and
    compacts before its first request (the endpoint never refuses one)."""
    model = PROVIDERS["anthropic"][0]
    write_catalog(musec, model, 1_000_000)
    script = Script(calls=40, provider="anthropic", phases=2)
    with AnthropicServer(keep_bodies=False, respond=script) as server:
        first, ws, env = _first_phase(musec, tmp_path, script, server)
        assert first.returncode == 0, first.stdout + first.stderr
        sid = json.loads(first.stdout)["session_id"]
        write_catalog(musec, model, 30_000)
        server.window_tokens = 30_000
        script.spoken = 2
        musec("daemon", "stop")  # the catalog is read when an agent is built; a new daemon reads it
        resumed = musec("run", "--resume", sid, "--output-format", "json", PEOPLE[1], cwd=ws, env=env, timeout=600)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert script.failures == [] and server.refused == 0 and script.made == 40
    log = events(musec, sid)
    resumed_at = max(e["seq"] for e in log if e["type"] == "user_message")
    first_after = next(e for e in log if e["seq"] > resumed_at and e["type"] in ("model_request", "compaction_started"))
    assert first_after["type"] == "compaction_started" and first_after["reason"] == "threshold"


def test_musec_compact_summarises_with_a_focus_and_the_session_goes_on(musec: Musec, tmp_path: Path) -> None:
    """``musec compact ID FOCUS`` on a session that is not live: resumed for it, compacted
    with the focus in the summary instructions, ended; the next run starts from the head."""
    model = PROVIDERS["anthropic"][0]
    write_catalog(musec, model, 1_000_000)
    script = Script(calls=20, provider="anthropic", phases=2)
    with AnthropicServer(keep_bodies=True, respond=script) as server:
        first, ws, env = _first_phase(musec, tmp_path, script, server)
        assert first.returncode == 0, first.stdout + first.stderr
        sid = json.loads(first.stdout)["session_id"]
        proc = musec("compact", sid, "the count of reads", "--json", cwd=ws, env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        done = json.loads(proc.stdout)
        assert done["done"] and 0 < done["tokens_after"] < done["tokens_before"], done["message"]
        asked = server.requests[-1].raw_body.decode()
        assert SUMMARY_MARK in asked and "the count of reads" in asked
        script.spoken = 2
        resumed = musec("run", "--resume", sid, "--output-format", "json", PEOPLE[1], cwd=ws, env=env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        after = server.requests[-1].body["messages"]
        assert after[0]["content"][0]["text"].startswith(HEAD_MARK)
    assert script.failures == [] and script.made == 20
    log = events(musec, sid)
    [started] = [e for e in log if e["type"] == "compaction_started"]
    assert (started["reason"], started["focus"]) == ("manual", "the count of reads")
    assert json.loads(musec("replay", sid, "--json").stdout)["ok"]
    missing = musec("compact", "no-such-session", cwd=ws, env=env)
    assert missing.returncode != 0 and "Traceback" not in missing.stderr


def test_compaction_hooks_add_instructions_and_context(musec: Musec, tmp_path: Path) -> None:
    """PreCompact's output reaches the summary's instructions (the recorded focus stays the
    person's); PostCompact gets the token counts and its context follows the new head."""
    model = PROVIDERS["anthropic"][0]
    write_catalog(musec, model, 1_000_000)
    seen = tmp_path / "post.json"
    with (musec.home / "config" / "config.toml").open("a") as config:
        config.write(
            '[[hooks.PreCompact]]\ncommand = "echo keep-every-file-name"\n'
            f'[[hooks.PostCompact]]\ncommand = "tee {seen} >/dev/null; echo compacted-note"\nsandbox = false\n')
    script = Script(calls=20, provider="anthropic", phases=2)
    with AnthropicServer(keep_bodies=True, respond=script) as server:
        first, ws, env = _first_phase(musec, tmp_path, script, server)
        assert first.returncode == 0, first.stdout + first.stderr
        sid = json.loads(first.stdout)["session_id"]
        proc = musec("compact", sid, "the count of reads", "--json", cwd=ws, env=env)
        assert proc.returncode == 0 and json.loads(proc.stdout)["done"], proc.stdout + proc.stderr
        asked = server.requests[-1].raw_body.decode()
        assert "the count of reads" in asked and "keep-every-file-name" in asked
        script.spoken = 2
        resumed = musec("run", "--resume", sid, "--output-format", "json", PEOPLE[1], cwd=ws, env=env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        after = json.dumps(server.requests[-1].body["messages"])
        assert "[PostCompact hook: compacted-note]" in after
    log = events(musec, sid)
    [started] = [e for e in log if e["type"] == "compaction_started"]
    assert (started["reason"], started["focus"]) == ("manual", "the count of reads")
    ran = {e["hook_event"]: e["decision"] for e in log if e["type"] == "hook_ran"}
    assert ran == {"PreCompact": "allow", "PostCompact": "allow"}
    post = json.loads(seen.read_text())
    assert post["trigger"] == "manual" and 0 < post["tokens_after"] < post["tokens_before"] and post["summary"]
    assert json.loads(musec("replay", sid, "--json").stdout)["ok"]
