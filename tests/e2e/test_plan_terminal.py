"""/plan and /grill in the interactive client, in a real terminal (tmux): the person types
``/plan TASK``, answers the plan's question with ``g`` (grill it), answers one of the
critic's decisions in their own words and takes the recommended answer of another
(the scout answers the fact), then approves the amended plan, which is carried out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.client.test_interactive_tmux import tmux_factory  # noqa: F401 - the fixture
from tests.conftest import BIN, Musec, run_library_tests
from tests.e2e.test_grill import PERSON, _script
from tests.e2e.test_plan_mode import workspace_hash

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")


def test_plan_grill_and_approve_in_a_terminal(musec: Musec, buggy_repo: Path, tmp_path: Path,
                                              tmux_factory) -> None:  # noqa: F811 - the fixture
    before = workspace_hash(buggy_repo)
    script = _script(tmp_path)
    term = tmux_factory(f"{BIN / 'musec'} --model {script} --agents-model {script} --approval auto --agents scout",
                        musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("/plan fix the pager", "Enter")
    term.wait_for(lambda s: "[g] grill it first" in s and "Your answer (a/u/e/k/f/g" in s, "the plan's question")
    assert workspace_hash(buggy_repo) == before
    term.send("g", "Enter")
    screen = term.wait_for(lambda s: "The critic asks about index formula" in s, "the critic's first decision")
    # F19 (fresh-user trial s5): the person's key was reported as "approval: denied by you"
    assert "plan: not approved yet: grill it first (answered by you)" in screen and "denied" not in screen
    term.send(PERSON, "Enter")
    screen = term.wait_for(lambda s: "The critic asks about input checks" in s, "the critic's second decision")
    assert "grill: answered by you" in screen and "allowed by you" not in screen
    term.send("Enter")
    term.wait_for(lambda s: "│ ## Decisions settled by /grill" in s and s.count("Your answer (a/u/e/k/f/g") >= 2,
                  "the amended plan's question")
    assert workspace_hash(buggy_repo) == before
    term.send("a", "Enter")
    term.wait_for(lambda s: "done" in s and "plan: files 1/1, checks 1/1" in s, "the plan carried out", timeout_s=60)
    term.send("/exit", "Enter")
    term.wait_for(lambda s: "EXITED=0" in s, "the client to exit")
    assert run_library_tests(buggy_repo).returncode == 0

    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    rounds = [(e["answered_by"], e["answer"]) for e in events if e["type"] == "grill_round"]
    assert [by for by, _ in rounds] == ["scout", "person", "recommended"] and rounds[1][1] == PERSON
    approved = [e for e in events if e["type"] == "plan_approved"]
    assert len(approved) == 1 and approved[0]["by"].startswith("client:") and "(person)" in approved[0]["text"]
