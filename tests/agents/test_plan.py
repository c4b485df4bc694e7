"""agents/plan.py: the plan document's sections, the planning profile's decisions (through
the approval layer), and the plan's state and progress as folds."""

from __future__ import annotations

from pathlib import Path

import msgspec
from hypothesis import given
from hypothesis import strategies as st
from musec.agents.core import events as ev
from musec.agents.core.conversation import TextBlock
from musec.agents.history import History
from musec.agents.permissions import Policy, parse_rule
from musec.agents.plan import (
    SECTIONS,
    PlanProgress,
    PlanState,
    missing_sections,
    parse_plan,
    plan_sha256,
    render_plan,
    section_items,
)

_line = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=30).map(str.strip).filter(
    lambda s: s and not s.startswith(("#", "-", "*", "`")) and not s.endswith("`") and s != "(none)")


@given(st.fixed_dictionaries({key: st.lists(_line, min_size=1, max_size=4) for key, _, _ in SECTIONS}))
def test_rendered_sections_parse_back(sections: dict[str, list[str]]) -> None:
    text = render_plan(sections)
    assert missing_sections(text) == []
    for key in ("files_to_change", "code_to_reuse", "risks", "verification"):
        assert section_items(text, key) == sections[key]
    assert [h for _, h, _ in SECTIONS] == [line[3:] for line in text.splitlines() if line.startswith("## ")]


def test_parse_ignores_case_keeps_deeper_headings_and_stops_at_others() -> None:
    text = "# P\n## context\nwhy\n### detail\nmore\n##  Approach ##\n1. a\n## Decisions\n- x: y\n"
    assert parse_plan(text) == {"context": "why\n### detail\nmore", "approach": "1. a"}
    assert missing_sections(text) == ["Files to change", "Code to reuse", "Risks", "Verification"]


def test_the_plan_profile_refuses_writes_fanout_and_mcp(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    doc = str(tmp_path / "plans" / "s.md")
    policy = Policy(rules=[parse_rule("edit(**)", "allow"), parse_rule("bash(rm *)", "deny")], workspace=ws,
                    plan_document=doc)

    def decide(tool: str, access: str, inp: dict, paths: list[str]) -> tuple[str, str]:
        verdict = policy.decide("plan", policy.call(tool, access, inp, paths))
        return verdict.decision, verdict.refusal("plan", access) if verdict.decision == "deny" else verdict.source

    assert decide("edit_file", "write", {}, ["a.py"])[0] == "deny"  # an allow rule does not open it
    assert "only the plan document" in decide("write_file", "write", {}, ["a.py"])[1]
    assert decide("write_file", "write", {}, [doc]) == ("allow", "plan")
    assert "fan-out is off" in decide("spawn_workers", "execute", {}, [])[1]
    assert "MCP tools" in decide("mcp__gh__create_issue", "write", {}, [])[1]
    assert decide("read_file", "read", {}, ["a.py"]) == ("allow", "mode")
    assert decide("bash", "execute", {"command": "sed -i s/a/b/ a.py"}, []) == ("allow", "mode")  # the sandbox stops it
    assert decide("bash", "execute", {"command": "rm -rf ."}, [])[0] == "deny"  # the rules still apply
    assert policy.decide("auto", policy.call("edit_file", "write", {}, ["a.py"])).decision == "allow"


def _events(text: str) -> list:
    sha = plan_sha256(text)
    return [
        ev.PlanStarted(task="t", path="/p.md"),
        ev.PlanProposed(sha256=sha, text=text),
        ev.UserMessage(text="[the person did not approve the plan; keep planning] more"),
        ev.PlanProposed(sha256=sha, text=text),
        ev.PlanApproved(sha256=sha, text=text, by="client:2", action="approve", approval="auto"),
    ]


def test_plan_state_folds_proposals_feedback_and_approval() -> None:
    text = render_plan({"context": "c"})
    state = PlanState()
    seen = []
    for event in _events(text):
        state.apply(event)
        seen.append((state.planning, state.awaiting_approval))
    assert seen == [(True, False), (True, True), (True, False), (True, True), (False, False)]
    assert (state.proposals, state.approved_by, state.approval, state.approved) == (2, "client:2", "auto", text)


def test_progress_counts_files_edited_and_checks_run() -> None:
    text = render_plan({"files_to_change": ["pkg/a.py: fix", "`b.py`"], "verification": ["pytest -q", "ruff check ."]})
    progress = PlanProgress.of(text)
    assert progress.summary() == "files 0/2 · checks 0/2 passed"
    for event in [
        ev.FileEdited(path="pkg/a.py"),
        ev.ToolStarted(tool="bash", call_id="c1", input={"command": "pytest -q"}),
        ev.ToolFinished(call_id="c1", exit_status=0),
        ev.ToolStarted(tool="bash", call_id="c2", input={"command": "ruff check ."}),
        ev.ToolFinished(call_id="c2", exit_status=1),
        ev.ToolStarted(tool="bash", call_id="c3", input={"command": "pytest -q"}, agent="worker:w"),
    ]:
        progress.apply(event)
    assert progress.files == {"pkg/a.py": True, "b.py": False}
    assert progress.checks == {"pytest -q": 0, "ruff check .": 1}
    assert progress.summary() == "files 1/2 · checks 1/2 passed"


def test_history_gets_the_instructions_the_approval_and_a_fresh_start() -> None:
    text = render_plan({"context": "c"})
    events = _events(text)
    history = History("main")
    history.apply(events[0])
    history.apply(ev.UserMessage(text="fix it"))
    assert "[plan mode]" in history.messages[0].content[0].text and "/p.md" in history.messages[0].content[0].text
    history.apply(ev.ModelResponse(content=[TextBlock("planned")]))
    history.apply(events[4])
    assert history.turns_since_user == 0 and "the person approved the plan" in history.messages[-1].content[0].text
    fresh = History("main")
    for event in [events[0], ev.UserMessage(text="fix it"), msgspec.structs.replace(events[4], action="fresh")]:
        fresh.apply(event)
    assert len(fresh.messages) == 1 and fresh.messages[0].content[0].text.endswith(text)
