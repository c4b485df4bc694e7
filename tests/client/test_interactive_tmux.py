"""The interactive client in a real terminal: tmux send-keys and capture-pane."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import BIN, Musec, fix_turns, run_library_tests

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")


class Tmux:
    """One private tmux server with one window running a command."""

    def __init__(self, command: str, env: dict[str, str], cwd: Path) -> None:
        self.server = f"musec-test-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items() if k.startswith(("MUSEC_", "GIT_", "PATH")))
        self._tmux("new-session", "-d", "-x", "160", "-y", "50", "-c", str(cwd), f"env {exports} {command}; echo EXITED=$?; sleep 30")

    def _tmux(self, *args: str) -> str:
        proc = subprocess.run(["tmux", "-L", self.server, *args], capture_output=True, text=True, timeout=20)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    def send(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "0", *keys)

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-S", "-200", "-t", "0")

    def wait_for(self, predicate: Callable[[str], bool], what: str, timeout_s: float = 30) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.screen()
            if predicate(text):
                return text
            time.sleep(0.05)  # polling a terminal: there is no event to wait on
        raise AssertionError(f"timed out waiting for {what}; the screen shows:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.server, "kill-server"], capture_output=True, timeout=20)


@pytest.fixture
def tmux_factory() -> Iterator[Callable[..., Tmux]]:
    made: list[Tmux] = []

    def make(command: str, env: dict[str, str], cwd: Path) -> Tmux:
        t = Tmux(command, env, cwd)
        made.append(t)
        return t

    yield make
    for t in made:
        t.close()


def test_interactive_fix_with_approvals(musec: Musec, buggy_repo: Path, tmp_path: Path, tmux_factory) -> None:
    script = tmp_path / "fix.json"
    script.write_text(json.dumps({"turns": fix_turns()}))
    term = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval ask", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("make the tests pass", "Enter")
    term.wait_for(lambda s: "Allow bash(" in s, "the first approval")
    term.send("y", "Enter")
    term.wait_for(lambda s: "Allow edit_file(pager.py)" in s, "the edit approval")
    term.send("a", "Enter")
    term.wait_for(lambda s: s.count("Allow bash(") >= 2, "the second bash approval")
    term.send("y", "Enter")
    screen = term.wait_for(lambda s: "Fixed; tests pass." in s, "the final answer")
    assert "✎ pager.py (+1 -1)" in screen
    term.send("/exit", "Enter")
    term.wait_for(lambda s: "EXITED=0" in s, "the client to exit")
    assert run_library_tests(buggy_repo).returncode == 0

    sessions = musec.json("sessions", "--workspace", str(buggy_repo), "--json")
    assert len(sessions) == 1 and sessions[0]["title"] == "make the tests pass"
    events = [json.loads(x) for x in musec("log", sessions[0]["id"], "--json").stdout.splitlines()]
    resolved = [e for e in events if e["type"] == "approval_resolved"]
    assert [e["decision"] for e in resolved] == ["allow", "always", "allow"]
    assert all(e["by"].startswith("client:") for e in resolved)
    assert musec("log", "verify", sessions[0]["id"]).returncode == 0


def test_ctrl_c_interrupts_the_turn(musec: Musec, buggy_repo: Path, tmp_path: Path, tmux_factory) -> None:
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"turns": [
        [{"tool": "bash", "input": {"command": "echo started; sleep 60"}}],
        [{"expect_result": "interrupted"}, {"text": "Stopped as asked."}],
    ]}))
    term = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval auto", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("run something slow", "Enter")
    term.wait_for(lambda s: "● bash(echo started; sleep 60)" in s, "the tool call")
    term.send("C-c")
    term.wait_for(lambda s: "interrupted" in s and s.rstrip().endswith("›"), "the interrupted turn and a new prompt", timeout_s=20)
    term.send("/exit", "Enter")
    term.wait_for(lambda s: "EXITED=0" in s, "the client to exit")
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    types = [json.loads(x)["type"] for x in musec("log", sid, "--json").stdout.splitlines()]
    assert "tool_interrupted" in types and types[-1] == "session_ended"


def test_attach_from_a_second_terminal_answers_the_approval(musec: Musec, buggy_repo: Path, tmp_path: Path, tmux_factory) -> None:
    script = tmp_path / "fix.json"
    script.write_text(json.dumps({"turns": fix_turns()}))
    first = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval ask", musec.env, buggy_repo)
    first.wait_for(lambda s: "›" in s, "the prompt")
    first.send("make the tests pass", "Enter")
    first.wait_for(lambda s: "Allow bash(" in s, "the approval in the first terminal")
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    second = tmux_factory(f"{BIN / 'musec'} attach {sid}", musec.env, buggy_repo)
    second.wait_for(lambda s: "Allow bash(" in s, "the pending approval in the second terminal")
    second.send("y", "Enter")  # the second terminal answers first: the session goes on
    second.wait_for(lambda s: "Allow edit_file(pager.py)" in s, "the next approval in the second terminal")
    # The first terminal's question is withdrawn, and it shows who answered.
    first.wait_for(lambda s: "(answered in another terminal)" in s and "approval allow by client:" in s,
                   "the first terminal to see the approval resolved by the other client")
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    resolved = [e for e in events if e["type"] == "approval_resolved"]
    assert resolved[0]["decision"] == "allow" and len({e["call_id"] for e in resolved}) == len(resolved)
