"""Work that is no turn is shown like a turn in every terminal on the session (issue 18):
a ``/compact`` typed in one terminal left the others at an idle prompt (no spinner, typed
input not queued, no outcome). Two real terminals (tmux) on one session; the compaction is
held by a PreCompact hook waiting for a file, so the other terminal is surely looked at
while it runs."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.client.test_interactive_tmux import Tmux, prompt_after
from tests.client.test_interactive_tmux import tmux_factory as tmux_factory  # the fixture
from tests.conftest import BIN, Musec

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")]

OUTCOME = re.compile(r"compacted: about \d+ tokens to \d+")


def _hold_compaction(musec: Musec, gate: Path) -> None:
    config = musec.home / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(
        f'[[hooks.PreCompact]]\ncommand = "while [ ! -e {gate} ]; do sleep 0.05; done"\nsandbox = false\n')


def _three_answers_in_two_terminals(musec: Musec, repo: Path, script: Path, tmux_factory) -> tuple[Tmux, Tmux, str]:
    """A session with three long answers (something to compact) in one terminal, and a second
    terminal attached to it, both at the prompt; the session's id."""
    first = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval auto", musec.env, repo)
    first.wait_for(lambda s: "›" in s, "the prompt")
    for n in (1, 2, 3):
        first.send(f"question {n}", "Enter")
        first.wait_for(lambda s, n=n: prompt_after(s, f"End of answer {n}."), f"answer {n}", timeout_s=60)
    sid = musec.json("sessions", "--workspace", str(repo), "--json")[0]["id"]
    second: Tmux = tmux_factory(f"{BIN / 'musec'} attach {sid}", musec.env, repo)
    second.wait_for(lambda s: prompt_after(s, "End of answer 3."), "the attached terminal's prompt")
    return first, second, sid


def test_a_compact_from_one_terminal_is_shown_in_every_terminal(musec: Musec, buggy_repo: Path, tmp_path: Path,
                                                                 tmux_factory) -> None:
    gate = tmp_path / "gate"
    _hold_compaction(musec, gate)
    long = " ".join(f"line {i} of the answer about the pager." for i in range(150))
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [
        *([{"text": f"{long} End of answer {n}."}] for n in (1, 2, 3)),
        [{"text": "Summary: three questions about the pager, answered."}],
        [{"text": "Answer to the queued message."}],
    ]}))
    first, second, sid = _three_answers_in_two_terminals(musec, buggy_repo, script, tmux_factory)
    first.send("/compact", "Enter")
    for term in (first, second):
        term.wait_for(lambda s: "compacting the context…" in s, "the compaction shown as work in progress")
    # The attached terminal is busy: what is typed there is queued, not sent as the
    # compaction runs (and no prompt stands under the compaction's line).
    assert not prompt_after(second.screen(), "compacting the context…")
    second.send("typed meanwhile", "Enter")
    second.wait_for(lambda s: "queued: typed meanwhile" in s, "the line queued")
    # A terminal attaching now is told the compaction runs (it was told the session waits).
    third: Tmux = tmux_factory(f"{BIN / 'musec'} attach {sid}", musec.env, buggy_repo)
    third.wait_for(lambda s: "compacting the context…" in s, "the compaction, in a terminal attached while it runs")
    assert not prompt_after(third.screen(), "End of answer 3.")
    gate.write_text("")
    for term in (first, second, third):
        term.wait_for(lambda s: OUTCOME.search(s.rpartition("compacting the context…")[2]) is not None,
                      "the outcome shown in each terminal")
    # Then the queued line goes as the next message, and both terminals show its answer.
    for term in (first, second, third):
        term.wait_for(lambda s: prompt_after(s, "Answer to the queued message."), "the queued message's answer",
                      timeout_s=60)
    first.send("/exit", "Enter")
    first.wait_for(lambda s: "EXITED=0" in s, "the client to exit")
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    assert [e["type"] for e in events].count("compaction_finished") == 1
    assert [e["text"] for e in events if e["type"] == "user_message"][-1] == "typed meanwhile"


def test_a_compaction_is_interrupted_from_another_terminal(musec: Musec, buggy_repo: Path, tmp_path: Path,
                                                           tmux_factory) -> None:
    gate = tmp_path / "gate"  # never made: only the interrupt ends the compaction
    _hold_compaction(musec, gate)
    long = " ".join(f"line {i} of the answer about the pager." for i in range(150))
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [*([{"text": f"{long} End of answer {n}."}] for n in (1, 2, 3)),
                                            [{"text": "After the interrupted compaction."}]]}))
    first, second, sid = _three_answers_in_two_terminals(musec, buggy_repo, script, tmux_factory)
    first.send("/compact", "Enter")
    second.wait_for(lambda s: "compacting the context…" in s, "the compaction in the other terminal")
    second.send("C-c")  # the spinner's hint: Ctrl-C interrupts the work, here too
    for term in (first, second):
        term.wait_for(lambda s: prompt_after(s, "the compaction was interrupted"), "the compaction stopped")
    first.send("one more", "Enter")  # the session goes on
    first.wait_for(lambda s: prompt_after(s, "After the interrupted compaction."), "the next answer", timeout_s=60)
    first.send("/exit", "Enter")
    first.wait_for(lambda s: "EXITED=0" in s, "the client to exit")
    types = [json.loads(x)["type"] for x in musec("log", sid, "--json").stdout.splitlines()]
    assert "compaction_finished" not in types
