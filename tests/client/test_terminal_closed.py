"""Closing the terminal window for real (a pty hang-up, ``tmux kill-server``), not a
``kill -HUP`` with the terminal still there (fresh-user s8 J10): the client got SIGHUP,
then died on EIO writing to the gone terminal (``OSError(5)`` / ``lost sys.stderr``, exit 1)
before it sent the interrupt, and the agent worked on unwatched."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from tests.client.test_interactive_tmux import tmux_factory as tmux_factory  # the fixture
from tests.conftest import BIN, Musec

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")]


def _events(musec: Musec, sid: str) -> list[dict]:
    return [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]


def _until(predicate, what: str, timeout_s: float = 20):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (found := predicate()):
            return found
        time.sleep(0.1)  # polling files other processes write
    raise AssertionError(f"timed out waiting for {what}")


def test_closing_the_terminal_interrupts_the_turn_and_exits_129(
    musec: Musec, buggy_repo: Path, tmp_path: Path, tmux_factory,
) -> None:
    script = tmp_path / "slow.json"
    # The spinner is drawn ten times a second meanwhile: the client writes to the terminal as
    # it hangs up (such a write fails with EIO before the SIGHUP comes).
    first = [{"tool": "bash", "input": {"command": "echo started; sleep 60"}}]
    script.write_text(json.dumps({"turns": [first, [{"text": "went on unwatched"}]]}))
    rc_file, err_file = tmp_path / "rc", tmp_path / "err"
    # The shell ignores the hang-up so it can write down the client's exit status; the client
    # (in a subshell, the hang-up's default restored) is in the terminal's foreground group.
    shell = (f"sh -c 'trap \"\" HUP; (trap - HUP; exec {BIN / 'musec'} --model scripted:{script} --approval auto "
               f"2>{err_file}); echo $? >{rc_file}'")
    term = tmux_factory(shell, musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("do something long", "Enter")
    term.wait_for(lambda s: "● bash(echo started; sleep 60)" in s and "working" in s, "the tool call and the spinner")
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    term.close()  # the terminal window closes: the pty hangs up
    rc = _until(lambda: rc_file.exists() and rc_file.read_text().strip(), "the client's exit status")
    assert rc == "129", (rc, err_file.read_text())
    assert "OSError" not in err_file.read_text() and "lost sys" not in err_file.read_text()
    events = _until(lambda: (es := _events(musec, sid)) and any(e["type"] == "turn_ended" for e in es) and es,
                    "the turn to end")
    ended = [e for e in events if e["type"] == "turn_ended"]
    assert ended[0]["exit_reason"] == "interrupted", ended
