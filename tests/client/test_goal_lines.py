"""``/goal`` in a real terminal (fresh-user s8 J3): setting a goal printed its line twice,
the daemon's reply (``goal g1 set: ...``) and its ``goal_set`` event (``◎ goal g1 set: ...``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.client.test_interactive_tmux import prompt_after
from tests.client.test_interactive_tmux import tmux_factory as tmux_factory  # the fixture
from tests.conftest import BIN, Musec
from tests.e2e.test_goal import FIX, MET

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")]


def test_setting_a_goal_says_so_once(musec: Musec, buggy_repo: Path, tmp_path: Path, tmux_factory) -> None:
    script = tmp_path / "goal.json"
    script.write_text(json.dumps({"turns": [[FIX], [{"text": "Fixed."}]],
                                  "agents": {"evaluator": {"turns": [[{"text": json.dumps(MET)}]]}}}))
    term = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval auto", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("/goal the tests pass", "Enter")
    screen = term.wait_for(lambda s: "Fixed." in s and prompt_after(s, "Fixed."), "the goal's work and the prompt")
    assert screen.count("goal g1 set: the tests pass") == 1, screen
