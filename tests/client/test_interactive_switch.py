"""Switching sessions in the interactive client (``/clear``, ``/resume``, the picker) and
``musec resume``'s exit codes, in a real terminal (tmux) and without one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from musec.client.picker import PICKER_HINT, picker_rows
from musec.daemon import protocol as p

from tests.client.test_interactive_tmux import (
    Tmux,
    prompt_after,
    tmux_factory,  # noqa: F401 - the fixture
)
from tests.conftest import BIN, Musec

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")]


@pytest.fixture
def terms(tmux_factory):  # noqa: F811 - the fixture imported above
    """Terminals (each its own tmux server), closed after the test."""
    return tmux_factory


def _script(tmp_path: Path, *texts: str, name: str = "s.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"turns": [[{"text": t}] for t in texts]}))
    return path


def _events(musec: Musec, sid: str) -> list[dict]:
    return [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]


def _leave(term: Tmux, code: int = 0) -> None:
    term.send("/exit", "Enter")
    term.wait_for(lambda s: f"EXITED={code}" in s, "the client to exit")


def test_clear_after_resume_keeps_the_sessions_model_and_options(musec: Musec, buggy_repo: Path, tmp_path: Path,
                                                                 terms) -> None:
    script = _script(tmp_path, "First answer.", "Second answer.")
    done = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--max-turns", "7",
                 "--output-format", "json", "first task", cwd=buggy_repo)
    assert done.returncode == 0, done.stderr
    old = json.loads(done.stdout)["session_id"]
    # Resumed from another directory with no options: the session's own options count.
    term = terms(f"{BIN / 'musec'} resume {old}", musec.env, tmp_path)
    term.wait_for(lambda s: "First answer." in s and prompt_after(s, "First answer."), "the resumed session")
    term.send("/clear", "Enter")
    screen = term.wait_for(lambda s: "(a new session)" in s and prompt_after(s, "(a new session)"), "the new session")
    assert "approval auto" in screen.rpartition("(a new session)")[2]
    assert "needs an Anthropic API key" not in screen
    term.send("hello again", "Enter")
    term.wait_for(lambda s: "First answer." in s.rpartition("hello again")[2]
                  and prompt_after(s.rpartition("hello again")[2], "First answer."), "the new session's answer")
    _leave(term)
    new = [s["id"] for s in musec.json("sessions", "--workspace", str(buggy_repo), "--json") if s["id"] != old]
    assert len(new) == 1
    started = _events(musec, new[0])[0]
    assert started["model"] == f"scripted:{script}" and started["approval"] == "auto"
    assert started["max_turns"] == 7 and started["workspace"] == str(buggy_repo) and started["background"] == []


def test_the_picker_is_cancelled_by_esc_q_and_ctrl_c_and_lists_other_sessions(musec: Musec, buggy_repo: Path,
                                                                              tmp_path: Path, terms) -> None:
    other = musec("run", "--model", f"scripted:{_script(tmp_path, 'Other.', name='o.json')}", "--approval", "auto",
                  "--output-format", "json", "an older task", cwd=buggy_repo)
    other_id = json.loads(other.stdout)["session_id"]
    script = _script(tmp_path, "One.", "Two.", "Three.")
    term = terms(f"{BIN / 'musec'} --model scripted:{script} --approval auto", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("the current task", "Enter")
    term.wait_for(lambda s: "One." in s and prompt_after(s, "One."), "the first answer")
    for n, key in enumerate(("Escape", "q", "C-c"), start=1):
        term.send("/resume", "Enter")
        screen = term.wait_for(lambda s: PICKER_HINT in s and "an older task" in s.rpartition(PICKER_HINT)[2], "the picker")
        picker = screen.rpartition("Resume which session?")[2]
        assert "the current task" not in picker  # the session you are in is not offered
        term.send(key)
        # the list is erased (issue 18: it stayed on the screen): the prompt comes back under `› /resume`
        term.wait_for(lambda s, n=n: PICKER_HINT not in s and "an older task" not in s and s.count("› /resume") == n
                      and prompt_after(s, "› /resume"), f"the picker gone and the prompt again after {key}")
    # Text typed after a cancel goes to the prompt, never picks an entry.
    term.send("/resume", "Enter")
    term.wait_for(lambda s: PICKER_HINT in s, "the picker once more")
    term.send("Escape")
    term.send("/resume nosuch", "Enter")
    term.wait_for(lambda s: "no other session named 'nosuch'" in s, "the refusal of an unknown id")
    term.send("go on", "Enter")
    term.wait_for(lambda s: "Two." in s and prompt_after(s, "Two."), "the current session's next answer")
    assert not [e for e in _events(musec, other_id) if e["type"] == "session_resumed"]
    # A choice erases the list too, leaving one line that names the session chosen.
    term.send("/resume", "Enter")
    term.wait_for(lambda s: PICKER_HINT in s, "the picker for a choice")
    term.send("Enter")
    screen = term.wait_for(lambda s: f"(resuming session {other_id}: an older task)" in s and "Other." in s
                           and prompt_after(s, "Other."), "the chosen session")
    assert PICKER_HINT not in screen
    _leave(term)
    assert [e for e in _events(musec, other_id) if e["type"] == "session_resumed"]


def test_picker_columns_stay_aligned_with_a_long_state() -> None:
    sessions = [p.SessionInfo(id="a", workspace="/w/a", started_at=0, updated_at=0, status="finished", title="short"),
                p.SessionInfo(id="b", workspace="/w/b", started_at=0, updated_at=0, status="provider_unreachable",
                              title="a longer title here")]
    rows = [row for _, row in picker_rows(sessions)]
    assert len({row.index("/w/") for row in rows}) == 1, rows  # the workspace column starts at one place
    assert rows[0].index("finished") == rows[1].index("provider_unreachable")


def test_resume_without_a_terminal_says_so_and_changes_nothing(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    done = musec("run", "--model", f"scripted:{_script(tmp_path, 'Done.')}", "--approval", "auto",
                 "--output-format", "json", "a task", cwd=buggy_repo)
    sid = json.loads(done.stdout)["session_id"]
    before = _events(musec, sid)
    for args, named in ((("resume", "--last"), sid), (("resume",), "ID"), (("resume", sid), sid)):
        proc = musec(*args, cwd=buggy_repo)
        assert proc.returncode == 2, proc
        assert proc.stderr.strip().splitlines() == [  # the session's id when it is known, not a placeholder
            f"musec: musec resume needs a terminal; use `musec run --resume {named}` (or --continue) without one"]
    assert _events(musec, sid) == before
    assert musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["status"] == "finished"


def test_resume_exit_codes_match_run_resume(musec: Musec, buggy_repo: Path, tmp_path: Path, terms) -> None:
    term = terms(f"{BIN / 'musec'} resume nosuch", musec.env, buggy_repo)
    term.wait_for(lambda s: "EXITED=2" in s, "exit 2 for an unknown id")
    live = terms(f"{BIN / 'musec'} --model scripted:{_script(tmp_path, 'Hi.')} --approval auto",
                        musec.env, buggy_repo)
    live.wait_for(lambda s: "›" in s, "the prompt")
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    headless = musec("run", "--resume", sid, "more")
    second = terms(f"{BIN / 'musec'} resume --last", musec.env, buggy_repo)
    second.wait_for(lambda s: f"EXITED={headless.returncode}" in s, "the same exit code as run --resume")
    assert headless.returncode == 2
    _leave(live)


def test_leaving_a_session_that_ended_in_error_exits_as_attach_does(musec: Musec, buggy_repo: Path, tmp_path: Path,
                                                                    terms) -> None:
    script = tmp_path / "bad.json"
    script.write_text(json.dumps({"turns": [[{"tool": "bash", "input": {"command": "echo hi"}}],
                                            [{"expect_result": "NOT THERE"}, {"text": "never"}]]}))
    term = terms(f"{BIN / 'musec'} --model scripted:{script} --approval auto", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("go", "Enter")
    term.wait_for(lambda s: "[error]" in s and prompt_after(s, "[error]"), "the error and the prompt")
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    _leave(term, code=1)
    assert musec("attach", sid).returncode == 1


def test_an_attached_terminal_withdraws_its_question_when_another_interrupts(musec: Musec, buggy_repo: Path,
                                                                             tmp_path: Path, terms) -> None:
    script = tmp_path / "ask.json"
    script.write_text(json.dumps({"turns": [[{"tool": "bash", "input": {"command": "touch ran.txt"}}],
                                            [{"text": "After."}]]}))
    first = terms(f"{BIN / 'musec'} --model scripted:{script} --approval ask", musec.env, buggy_repo)
    first.wait_for(lambda s: "›" in s, "the prompt")
    first.send("make a file", "Enter")
    first.wait_for(lambda s: "Allow bash(touch ran.txt)?" in s, "the approval in the first terminal")
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    second = terms(f"{BIN / 'musec'} attach {sid}", musec.env, buggy_repo)
    second.wait_for(lambda s: "Allow bash(touch ran.txt)?" in s, "the approval in the second terminal")
    first.send("C-c")
    first.wait_for(lambda s: "[interrupting…]" in s, "the interrupt in the first terminal")
    # The second terminal withdraws its question at once, with nothing typed there.
    screen = second.wait_for(lambda s: "the question is withdrawn" in s, "the withdrawn question")
    tail = screen.rpartition("the question is withdrawn")[2]
    second.wait_for(lambda s: "interrupted" in s.rpartition("the question is withdrawn")[2], "the turn's end shown")
    assert "Allow" not in tail
    assert not (buggy_repo / "ran.txt").exists()
    _leave(first)


def test_an_edit_approval_shows_the_diff_before_the_question(musec: Musec, buggy_repo: Path, fix_script: Path,
                                                             terms) -> None:
    def shown_before_the_question(screen: str) -> list[str]:
        before = screen.rpartition("Allow edit_file(pager.py)?")[0].rpartition("Allow bash(")[2]
        return [ln.strip() for ln in before.splitlines()]

    term = terms(f"{BIN / 'musec'} --model scripted:{fix_script} --approval ask", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("fix it", "Enter")
    term.wait_for(lambda s: "Allow bash(" in s, "the first approval")
    term.send("y", "Enter")
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    second = terms(f"{BIN / 'musec'} attach {sid}", musec.env, buggy_repo)  # attach shows it the same way
    for screen in (term.wait_for(lambda s: "Allow edit_file(pager.py)?" in s, "the edit approval"),
                   second.wait_for(lambda s: "Allow edit_file(pager.py)?" in s, "the edit approval, attached")):
        lines = shown_before_the_question(screen)
        assert "edit_file(pager.py) would change:" in lines
        assert "-    start = number * size" in lines and "+    start = (number - 1) * size" in lines
    term.send("n", "Enter")
    second.wait_for(lambda s: "approval: denied" in s, "the answer seen in the attached terminal")
    # the script goes on to run the tests again: interrupt at that question (a Ctrl-C sent
    # while the client moved between the turn's parts was taken as leaving: EXITED=130)
    term.wait_for(lambda s: "Allow bash(" in s.rpartition("approval: denied")[2], "the next question")
    term.send("C-c")
    term.wait_for(lambda s: prompt_after(s, "interrupt"), "the prompt")
    _leave(term)


def test_slash_approval_switches_the_live_sessions_mode(musec: Musec, buggy_repo: Path, tmp_path: Path, terms) -> None:
    script = tmp_path / "two.json"
    script.write_text(json.dumps({"turns": [[{"tool": "bash", "input": {"command": "touch one.txt"}}],
                                            [{"text": "One."}],
                                            [{"tool": "bash", "input": {"command": "touch two.txt"}}],
                                            [{"text": "Two."}]]}))
    term = terms(f"{BIN / 'musec'} --model scripted:{script} --approval ask", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("first", "Enter")
    term.wait_for(lambda s: "Allow bash(touch one.txt)?" in s, "the approval in ask mode")
    term.send("y", "Enter")
    term.wait_for(lambda s: "One." in s and prompt_after(s, "One."), "the first answer")
    term.send("/approval auto", "Enter")
    term.wait_for(lambda s: "approval is auto from the next tool call on" in s and "approval auto" in s.splitlines()[-1]
                  + s.rstrip().splitlines()[-1], "the switch, and the status line")
    term.send("second", "Enter")
    screen = term.wait_for(lambda s: "Two." in s and prompt_after(s, "Two."), "the second answer, asked nothing")
    assert "Allow bash(touch two.txt)" not in screen and (buggy_repo / "two.txt").exists()
    term.send("/approval sometimes", "Enter")
    term.wait_for(lambda s: "/approval MODE takes ask, auto, read-only or never" in s, "the refusal of an unknown mode")
    _leave(term)
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    changed = [e for e in _events(musec, sid) if e["type"] == "approval_mode_changed"]
    assert [(e["approval"], e["previous"]) for e in changed] == [("auto", "ask")] and changed[0]["by"].startswith("client:")
    assert musec("log", "verify", sid).returncode == 0 and musec("replay", sid).returncode == 0


def test_slash_optimize_starts_a_kernel_campaign_session(musec: Musec, tmp_path: Path, terms) -> None:
    """Issue 16 part 2: `/optimize SPEC` inside a session starts the campaign there, with the
    session's model and options, and runs it at once."""
    pytest.importorskip("torch")
    from tests.agents.kernel_opt.candidates import FASTER, one_commit_repo

    repo = one_commit_repo(tmp_path / "proj")
    script = tmp_path / "campaign.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "write_file", "input": {"path": "candidate.py", "content": FASTER}}],
        [{"tool": "evaluate_kernel", "input": {}}],
        [{"text": "The campaign's best is kept."}]]}))
    term = terms(f"{BIN / 'musec'} --model scripted:{script} --approval auto", musec.env, repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("/optimize", "Enter")
    term.wait_for(lambda s: "/optimize SPEC starts a kernel campaign" in s, "the usage line")
    term.send("/optimize cpu-example", "Enter")
    screen = term.wait_for(lambda s: "The campaign's best is kept." in s and prompt_after(s, "The campaign's best is kept."),
                           "the campaign's first turn", timeout_s=240)
    _leave(term)
    sessions = musec.json("sessions", "--workspace", str(repo), "--json")
    campaign = next(s for s in sessions if s["title"] == "optimize cpu-example")
    # where its leaderboard is, with the session's real id (not a placeholder)
    assert f"`musec kernels {campaign['id']}` shows the campaign's leaderboard" in screen and "kernels ID" not in screen
    events = _events(musec, campaign["id"])
    assert events[0]["kernel_spec"] == "cpu-example" and events[0]["approval"] == "auto"
    evaluated = [e for e in events if e["type"] == "kernel_evaluated"]
    assert [e["status"] for e in evaluated] == ["correct"] and evaluated[0]["commit"]
