"""Messages typed while the interactive client starts or resumes a session, before the
session is ready, are sent once it is (fresh-user finding G18: they were shown as queued,
then dropped). A real terminal (tmux); the session's start is held by a SessionStart hook
waiting for a file, so the keys surely come before it is ready."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.client.test_interactive_tmux import Tmux, prompt_after
from tests.client.test_interactive_tmux import tmux_factory as tmux_factory  # the fixture
from tests.conftest import BIN, Musec

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")]


def _hold_start(musec: Musec, gate: Path) -> None:
    config = musec.home / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(
        f'[[hooks.SessionStart]]\ncommand = "while [ ! -e {gate} ]; do sleep 0.05; done"\nsandbox = false\n')


def _messages(musec: Musec, sid: str) -> list[str]:
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    return [e["text"] for e in events if e["type"] == "user_message"]


@pytest.mark.parametrize("how", ["start", "resume"])
def test_a_message_typed_before_the_session_is_ready_is_sent_when_it_is(
    musec: Musec, buggy_repo: Path, tmp_path: Path, tmux_factory, how: str,
) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [[{"text": "Answer one."}], [{"text": "Answer two."}]]}))
    gate = tmp_path / "gate"
    command = f"{BIN / 'musec'} --model scripted:{script} --approval auto"
    if how == "resume":
        assert musec("run", "--model", f"scripted:{script}", "first", cwd=buggy_repo).returncode == 0
        sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
        command = f"{BIN / 'musec'} resume {sid}"
    _hold_start(musec, gate)
    term: Tmux = tmux_factory(command, musec.env, buggy_repo)
    term.wait_for(lambda s: "Type a task" in s or "Answer one." in s, "the client starting (or its backlog)")
    term.send("typed while starting", "Enter")
    term.wait_for(lambda s: "typed while starting" in s, "the typed line shown")
    gate.write_text("")
    answer = "Answer one." if how == "start" else "Answer two."
    term.wait_for(lambda s: prompt_after(s, answer) and s.count(answer) == 1, "the typed message answered", timeout_s=60)
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    assert _messages(musec, sid)[-1] == "typed while starting"
    term.send("/exit", "Enter")
    term.wait_for(lambda s: "EXITED=0" in s, "the client to exit")
