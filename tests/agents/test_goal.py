"""The goal's parts in process (issue 14 /goal): ``/goal`` parsing, the fold of the goal
events and its counters, what the agents are told, the verdict, the workspace's state."""

from __future__ import annotations

import shlex
from pathlib import Path

import pygit2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from musec.agents.core import events as ev
from musec.agents.core.conversation import TextBlock, ToolCallBlock
from musec.agents.goal import GoalState, GoalUsageError, parse_goal_command
from musec.agents.goal.judge import blocker_of_check, parse_verdict, workspace_state
from musec.agents.history import History

# --- /goal ------------------------------------------------------------------------------


def test_goal_command_keeps_the_condition_verbatim_and_splits_the_options() -> None:
    cmd = parse_goal_command("""make "page()" count from 1, don't break the API --check 'python -m pytest -q' """
                             """--budget-usd 2.5 --max-turns=12 --max-wall 1h""")
    assert cmd.action == "set" and cmd.spec is not None
    assert cmd.spec.condition == """make "page()" count from 1, don't break the API"""
    assert (cmd.spec.check, cmd.spec.budget_usd, cmd.spec.max_turns, cmd.spec.max_wall_s) == ("python -m pytest -q", 2.5, 12, 3600.0)
    assert parse_goal_command('"the build is green"').spec.condition == "the build is green"
    assert [parse_goal_command(t).action for t in ("", "status", "pause", "resume", "clear")] == [
        "status", "status", "pause", "resume", "clear"]


@pytest.mark.parametrize(("text", "says"), [
    ("--check pytest", "give the goal's condition first"),
    ("green --check", "--check needs a value"),
    ("green --max-turns 0", "--max-turns '0'"),
    ("green --budget-usd free", "--budget-usd 'free'"),
    ("green --max-wall soon", "--max-wall 'soon'"),
    ("green --check 'unclosed", "quote the command"),
])
def test_goal_command_errors_say_what_to_do(text: str, says: str) -> None:
    with pytest.raises(GoalUsageError, match=None) as info:
        parse_goal_command(text)
    assert says in str(info.value) and "\n" not in str(info.value)


_WORDS = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40)


@given(condition=_WORDS, check=_WORDS)
def test_goal_command_round_trips_any_condition_and_check(condition: str, check: str) -> None:
    condition, check = condition.strip(), check.strip()
    if (not condition or not check or condition in ("status", "pause", "resume", "clear") or "--" in condition
            or (len(condition) >= 2 and condition[0] == condition[-1] and condition[0] in "\"'")):
        return
    cmd = parse_goal_command(f"{condition} --check {shlex.quote(check)}")
    assert cmd.spec is not None and (cmd.spec.condition, cmd.spec.check) == (condition, check)


@given(st.text(max_size=200))
def test_goal_command_never_fails_but_with_a_usage_error(text: str) -> None:
    try:
        parse_goal_command(text)
    except GoalUsageError:
        pass


# --- the verdict ------------------------------------------------------------------------


def test_verdict_is_the_last_json_object_with_a_known_verdict() -> None:
    v = parse_verdict('I looked. {"note": 1} Then: {"verdict": "Not Met", "reason": "test_b fails", "blocker": "  Test_B  fails "}')
    assert (v.verdict, v.reason, v.blocker) == ("not_met", "test_b fails", "test_b fails")
    assert parse_verdict('{"verdict": "met", "summary": "done"}').summary == "done"
    assert parse_verdict('{"verdict": "impossible", "reason": "no network"}').verdict == "impossible"


@given(st.text(max_size=300))
def test_an_answer_without_a_verdict_is_never_met(text: str) -> None:
    v = parse_verdict(text)
    assert v.verdict in ("met", "not_met", "impossible")
    if '"verdict"' not in text:
        assert v.verdict == "not_met" and v.blocker == "no verdict"


def test_a_check_failing_the_same_way_has_the_same_blocker() -> None:
    a = blocker_of_check("pytest -q", 1, "FAILED test_x - assert 1 == 2\n1 failed in 0.03s")
    b = blocker_of_check("pytest -q", 1, "FAILED test_x - assert 1 == 2\n1 failed in 0.71s")
    c = blocker_of_check("pytest -q", 1, "FAILED test_y - assert 1 == 2\n1 failed in 0.03s")
    assert a == b != c


# --- the fold -----------------------------------------------------------------------------


def _events() -> list[ev.Event]:
    text = [TextBlock("done")]
    return [
        ev.SessionStarted(ts=0.0),
        ev.GoalSet(ts=10.0, goal_id="g1", condition="tests pass", check="pytest -q", max_turns=5, budget_usd=1.0,
                   diff_hash="d0", by="run"),
        ev.ModelResponse(ts=20.0, content=text, cost_usd=0.1),
        ev.GoalChecked(ts=30.0, goal_id="g1", n=1, by="check", verdict="not_met", blocker="b1", diff_hash="d0",
                       instruct=True, reason="exit 1"),
        ev.ModelResponse(ts=40.0, content=[ToolCallBlock("c", "bash", {})], cost_usd=0.1),
        ev.ModelResponse(ts=45.0, agent="scout", content=[TextBlock("x")], cost_usd=0.05),
        ev.SessionResumed(ts=1000.0),
        ev.ModelResponse(ts=1005.0, content=[TextBlock("done again")], cost_usd=0.1),
        ev.GoalChecked(ts=1010.0, goal_id="g1", n=2, by="check", verdict="met", output="3 passed", diff_hash="d1"),
        ev.UserMessage(ts=1011.0, agent="evaluator", text="evidence"),
        ev.ModelResponse(ts=1012.0, agent="evaluator", content=[TextBlock('{"verdict": "met"}')], cost_usd=0.01),
    ]


def test_the_fold_counts_turns_dollars_and_working_time_and_a_resume_folds_the_same() -> None:
    live, resumed = GoalState(), GoalState()
    for e in _events():
        live.apply(e)
    for e in _events():  # what a restarted daemon folds from the log
        resumed.apply(e)
    for s in (live, resumed):
        assert (s.goal_id, s.status, s.checks, s.turns) == ("g1", "active", 2, 3)
        assert s.cost_usd == pytest.approx(0.36)  # every agent's dollars; only the working agent's turns
        assert s.wall_s(now=1012.0) == pytest.approx(35 + 12)  # the downtime before the resume does not count
        assert (s.evaluator_due, s.asked, s.answer) == (2, True, '{"verdict": "met"}')
        assert s.check_output == "3 passed" and s.last_text == "done again"
    assert live.describe()[0] == "goal g1: active" and live.exhausted() == ("", "")
    live.apply(ev.ModelResponse(ts=1013.0, content=[], cost_usd=0.7))
    assert live.exhausted()[0] == "budget"


def test_stuck_streaks_count_repeats_and_a_resume_by_the_person_starts_them_again() -> None:
    s = GoalState()
    s.apply(ev.GoalSet(goal_id="g1", condition="c", diff_hash="d"))
    for n in (1, 2, 3):
        s.apply(ev.GoalChecked(n=n, by="evaluator", verdict="not_met", blocker="same", diff_hash="d"))
    assert (s.same_blocker, s.same_diff) == (3, 3)
    s.apply(ev.GoalUpdated(status="paused", reason="stuck"))
    assert not s.active and s.clock.last is None
    s.apply(ev.GoalUpdated(status="active", ts=50.0))
    assert s.active and (s.same_blocker, s.same_diff) == (0, 0)
    s.apply(ev.GoalChecked(n=4, by="evaluator", verdict="not_met", blocker="other", diff_hash="e"))
    assert (s.same_blocker, s.same_diff, s.checks) == (1, 0, 4)


def test_the_working_agent_is_told_the_goal_verbatim_and_why_it_is_not_met() -> None:
    h = History("main")
    condition = "make `page()` count from 1\n(and keep the API)"
    h.apply(ev.GoalSet(seq=0, ts=0.0, condition=condition, check="pytest -q"))
    h.apply(ev.ModelResponse(seq=1, ts=1.0, content=[TextBlock("done")]))
    assert h.turns_since_user == 1
    h.apply(ev.GoalChecked(seq=2, ts=2.0, n=1, by="check", verdict="not_met", instruct=True, reason="The check exited 1."))
    h.apply(ev.GoalChecked(seq=3, ts=3.0, n=2, by="check", verdict="met"))
    h.apply(ev.GoalSet(seq=4, ts=4.0, agent="worker:a", condition="not this agent's"))
    first, _, last = h.messages
    assert first.role == last.role == "user" and h.turns_since_user == 0
    assert f"<goal>\n{condition}\n</goal>" in first.content[0].text and "`pytest -q`" in first.content[0].text
    assert last.content[0].text.startswith("[goal check 1: not met yet] The check exited 1.")
    assert f"<goal>\n{condition}\n</goal>" in last.content[0].text and len(last.content) == 1


# --- the workspace ------------------------------------------------------------------------


def test_the_workspace_digest_changes_with_the_files_git_sees(tmp_path: Path) -> None:
    repo_dir = tmp_path / "r"
    repo_dir.mkdir()
    (repo_dir / "a.py").write_text("x = 1\n")
    (repo_dir / ".gitignore").write_text("build/\n")
    repo = pygit2.init_repository(str(repo_dir))
    repo.index.add_all()
    repo.index.write()
    sig = pygit2.Signature("t", "t@example.invalid")
    repo.create_commit("HEAD", sig, sig, "one", repo.index.write_tree(), [])
    clean = workspace_state(repo_dir)
    assert workspace_state(repo_dir).digest == clean.digest and "no changes against HEAD" in clean.text
    (repo_dir / "build").mkdir()
    (repo_dir / "build" / "out.o").write_bytes(b"\0")
    assert workspace_state(repo_dir).digest == clean.digest  # ignored files are not the workspace's state
    (repo_dir / "a.py").write_text("x = 2\n")
    edited = workspace_state(repo_dir)
    assert edited.digest != clean.digest and "-x = 1" in edited.text and "+x = 2" in edited.text
    (repo_dir / "new.txt").write_text("n")
    assert workspace_state(repo_dir).digest != edited.digest and "?? new.txt" in workspace_state(repo_dir).text
    assert workspace_state(tmp_path).digest == ""
