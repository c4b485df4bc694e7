"""The interactive client in a real terminal: tmux send-keys and capture-pane."""

from __future__ import annotations

import json
import re
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
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()
                           if k.startswith(("MUSEC_", "GIT_", "PATH", "ANTHROPIC_", "PYTHON_KEYRING")))
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


def prompt_after(screen: str, text: str) -> bool:
    """Whether an empty prompt line comes after the last ``text`` on the screen (the status
    line sits below the prompt)."""
    tail = screen.rpartition(text)[2]
    return any(line.rstrip() == "›" for line in tail.splitlines())


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
    term.wait_for(lambda s: "interrupted" in s and prompt_after(s, "interrupted"), "the interrupted turn and a new prompt", timeout_s=20)
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
    screen = second.wait_for(lambda s: "Allow edit_file(pager.py)" in s, "the next approval in the second terminal")
    assert "approval: allowed by you" in screen
    # The first terminal's question is withdrawn, and it shows who answered.
    first.wait_for(lambda s: "(answered in another terminal)" in s and "approval: allowed in another terminal" in s,
                   "the first terminal to see the approval resolved by the other client")
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    resolved = [e for e in events if e["type"] == "approval_resolved"]
    assert resolved[0]["decision"] == "allow" and len({e["call_id"] for e in resolved}) == len(resolved)


def test_attach_sends_messages_to_a_session_whose_client_was_killed(
    musec: Musec, buggy_repo: Path, tmp_path: Path, tmux_factory,
) -> None:
    # Issue 13 case 6: attach in a terminal gives the prompt when the agent is idle, and
    # leaving it leaves the session running.
    from tests.e2e.test_takeover import _live_status, _orphan

    script = tmp_path / "two.json"
    script.write_text(json.dumps({"turns": [[{"text": "first answer"}], [{"text": "second answer"}]]}))
    sid = _orphan(musec, buggy_repo, f"scripted:{script}")
    term = tmux_factory(f"{BIN / 'musec'} attach {sid}", musec.env, buggy_repo)
    term.wait_for(lambda s: "first answer" in s and prompt_after(s, "first answer"), "the backlog, then the prompt")
    term.send("go on", "Enter")
    term.wait_for(lambda s: "second answer" in s and prompt_after(s, "second answer"), "the answer, then the prompt")
    term.send("/exit", "Enter")
    term.wait_for(lambda s: "EXITED=0" in s, "the client to exit")
    assert _live_status(musec, sid) == "idle"
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    assert [e["text"] for e in events if e["type"] == "user_message"] == ["hello", "go on"]


# --- issue 18: rendering, input, status line, slash commands, approvals ------------------


def _scripted(tmp_path: Path, turns: list, name: str = "script.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"turns": turns}))
    return path


def _leave(term: Tmux) -> None:
    term.send("/exit", "Enter")
    term.wait_for(lambda s: "EXITED=0" in s, "the client to exit")


def test_markdown_answer_with_a_code_block(musec: Musec, buggy_repo: Path, tmp_path: Path, tmux_factory) -> None:
    answer = "# The plan\n\nUse **this** helper:\n\n```python\ndef first_page(items):\n    return items[:3]\n```\n\nThat is all."
    script = _scripted(tmp_path, [[{"text": answer}]])
    term = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval auto", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("show me", "Enter")
    screen = term.wait_for(lambda s: "That is all." in s and prompt_after(s, "That is all."), "the answer")
    assert "def first_page(items):" in screen and "return items[:3]" in screen
    assert "```" not in screen and "**this**" not in screen and "# The plan" not in screen  # rendered, not raw
    assert "The plan" in screen and "Use this helper:" in screen
    _leave(term)


def test_an_edit_is_shown_as_a_diff(musec: Musec, buggy_repo: Path, tmp_path: Path, tmux_factory, fix_script: Path) -> None:
    term = tmux_factory(f"{BIN / 'musec'} --model scripted:{fix_script} --approval auto", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("fix it", "Enter")
    screen = term.wait_for(lambda s: "Fixed; tests pass." in s, "the final answer")
    lines = [ln.strip() for ln in screen.splitlines()]
    assert "✎ pager.py (+1 -1)" in screen
    assert "-    start = number * size" in lines and "+    start = (number - 1) * size" in lines
    _leave(term)


def test_an_at_file_mention_is_completed_and_attached(musec: Musec, buggy_repo: Path, tmp_path: Path, tmux_factory) -> None:
    script = _scripted(tmp_path, [[{"text": "Read it."}]])
    term = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval auto", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("explain @pag")
    term.wait_for(lambda s: "@pager.py" in s.partition("explain @pag")[2], "the completion menu")
    term.send("Tab")
    term.wait_for(lambda s: "explain @pager.py" in s, "the completed mention")
    term.send(" and @nope.md", "Enter")
    size = (buggy_repo / "pager.py").stat().st_size
    screen = term.wait_for(lambda s: "Read it." in s, "the answer")
    # The attachment is shown by path and size, never its content; a missing one says why.
    assert f"⎘ @pager.py attached ({size} bytes)" in screen and "⎘ @nope.md not attached: no such file or directory" in screen
    assert "start = number * size" not in screen
    _leave(term)
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    said = next(e for e in events if e["type"] == "user_message")
    assert said["text"] == "explain @pager.py and @nope.md"  # the message as typed; the file rides beside it
    assert said["attachments"][0] == {"path": "pager.py", "size_bytes": size, "content": (buggy_repo / "pager.py").read_text()}


def test_slash_model_and_cost(musec: Musec, buggy_repo: Path, tmp_path: Path, tmux_factory) -> None:
    script = _scripted(tmp_path, [[{"text": "Hello."}]])
    term = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval auto", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("hi", "Enter")
    term.wait_for(lambda s: "Hello." in s and prompt_after(s, "Hello."), "the answer")
    term.send("/model", "Enter")
    term.wait_for(lambda s: f"model: scripted:{script}" in s and re.search(r"ctx [0-9.]+k? tokens used", s), "/model's answer")
    other = _scripted(tmp_path, [[{"text": "never asked"}], [{"text": "From the other model."}]], name="other.json")
    term.send(f"/model scripted:{other}", "Enter")
    term.wait_for(lambda s: f"goes on with scripted:{other}" in s, "/model M's answer")
    term.send("/model nosuch/model", "Enter")
    term.wait_for(lambda s: "the model stays" in s and "nosuch" in s, "a refused switch")
    term.send("again", "Enter")
    term.wait_for(lambda s: "From the other model." in s and prompt_after(s, "From the other model.")
                  and "scripted:other.json · ctx" in s.rpartition("From the other model.")[2],  # the status line
                  "the other model's answer and the status line naming it")
    term.send("/cost", "Enter")
    screen = term.wait_for(lambda s: "total $0.0000" in s, "/cost's answer")
    assert "main" in screen.rpartition("/cost")[2]
    term.send("/help", "Enter")
    term.wait_for(lambda s: "/approval" in s and "/workers" in s, "/help's list")
    _leave(term)
    history = musec.home / "state" / "prompt_history"  # kept across sessions, for the person only
    assert history.stat().st_mode & 0o777 == 0o600 and "+hi" in history.read_text().splitlines()


def test_a_long_multi_line_command_is_shown_whole_at_the_approval(musec: Musec, buggy_repo: Path, tmp_path: Path,
                                                                    tmux_factory) -> None:
    long_line = "echo " + "x" * 150
    command = f"git status\nrm -rf ~/x\n{long_line}"
    script = _scripted(tmp_path, [[{"tool": "bash", "input": {"command": command}}], [{"text": "Not run."}]])
    term = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval ask", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("tidy up", "Enter")
    screen = term.wait_for(lambda s: "Allow it?" in s, "the approval")
    lines = [ln.strip() for ln in screen.splitlines()]
    assert "Allow bash with this command (3 lines)?" in lines
    assert "│ git status" in lines and "│ rm -rf ~/x" in lines
    assert "x" * 150 in screen.replace("\n", "")  # the long line whole (the terminal may wrap it)
    assert "(asked by the" in screen
    term.send("n", "Enter")
    screen = term.wait_for(lambda s: "Not run." in s, "the answer after the refusal")
    assert "approval: denied by you" in screen and "client:" not in screen
    _leave(term)


def test_ctrl_c_at_an_approval_interrupts_the_turn(musec: Musec, buggy_repo: Path, tmp_path: Path, tmux_factory) -> None:
    script = _scripted(tmp_path, [[{"tool": "bash", "input": {"command": "touch ran.txt"}}], [{"text": "After."}]])
    term = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval ask", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("make a file", "Enter")
    term.wait_for(lambda s: "Allow bash(touch ran.txt)?" in s, "the approval")
    term.send("C-c")
    term.wait_for(lambda s: "[interrupting…]" in s and prompt_after(s, "interrupt"), "the interrupted turn and a new prompt",
                  timeout_s=20)
    _leave(term)
    assert not (buggy_repo / "ran.txt").exists()
    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    assert not [e for e in events if e["type"] == "tool_started"]
    assert any(e["type"] == "turn_ended" and e.get("exit_reason") == "interrupted" for e in events)


def test_the_status_line_context_percent_moves(musec: Musec, buggy_repo: Path, tmux_factory) -> None:
    from tests.support.anthropic_server import AnthropicServer, message

    with AnthropicServer() as server:
        server.enqueue(message([{"type": "text", "text": "First."}], input_tokens=20_000),
                       message([{"type": "text", "text": "Second."}], input_tokens=100_000))
        env = {**musec.env, "ANTHROPIC_API_KEY": "test-key-not-real", "ANTHROPIC_BASE_URL": server.base_url}
        term = tmux_factory(f"{BIN / 'musec'} --model anthropic/claude-sonnet-4-6 --approval auto", env, buggy_repo)
        term.wait_for(lambda s: "›" in s, "the prompt")
        term.wait_for(lambda s: "ctx 0% of 200k" in s, "the status line before any call")
        term.send("one", "Enter")
        term.wait_for(lambda s: "First." in s and "ctx 10% of 200k" in s, "the status line after the first answer")
        term.send("two", "Enter")
        term.wait_for(lambda s: "Second." in s and "ctx 50% of 200k" in s, "the status line after the second answer")
        _leave(term)


def test_esc_interrupts_a_running_turn(musec: Musec, buggy_repo: Path, tmp_path: Path, tmux_factory) -> None:
    script = _scripted(tmp_path, [[{"tool": "bash", "input": {"command": "echo started; sleep 60"}}],
                                  [{"expect_result": "interrupted"}, {"text": "Stopped as asked."}]])
    term = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval auto", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("run something slow", "Enter")
    term.wait_for(lambda s: "● bash(echo started; sleep 60)" in s, "the tool call")
    term.wait_for(lambda s: re.search(r"working [1-9]\d*s · \d+ tokens? \(Esc or Ctrl-C interrupts\)", s) is not None,
                  "the spinner with the elapsed seconds and tokens")
    term.send("Escape")
    term.wait_for(lambda s: "interrupted by the person" in s and prompt_after(s, "interrupted"),
                  "the interrupted turn and a new prompt", timeout_s=20)
    _leave(term)


def test_a_retry_is_shown_with_its_reason_and_wait(musec: Musec, buggy_repo: Path, tmux_factory) -> None:
    from tests.support.anthropic_server import AnthropicServer, error_response, message

    with AnthropicServer() as server:
        server.enqueue(error_response(529, "overloaded_error", "Overloaded", {"retry-after": "1"}),
                       message([{"type": "text", "text": "Back."}]))
        env = {**musec.env, "ANTHROPIC_API_KEY": "test-key-not-real", "ANTHROPIC_BASE_URL": server.base_url}
        term = tmux_factory(f"{BIN / 'musec'} --model anthropic/claude-sonnet-4-6 --approval auto", env, buggy_repo)
        term.wait_for(lambda s: "›" in s, "the prompt")
        term.send("hello", "Enter")
        screen = term.wait_for(lambda s: "Back." in s, "the answer after the retry")
        assert re.search(r"retrying the model call \(1/\d+\) in [\d.]+ s: .*[Oo]verloaded", screen), screen
        _leave(term)


def test_help_lists_a_custom_command_trusted_at_the_start(musec: Musec, buggy_repo: Path, tmp_path: Path,
                                                         tmux_factory) -> None:
    """A project's custom command trusted by --trust (after the banner listed it as waiting):
    /help lists it (the fresh user's /help showed only the built-ins)."""
    (buggy_repo / ".musec" / "commands").mkdir(parents=True)
    (buggy_repo / ".musec" / "commands" / "greet.md").write_text("Say hello to $ARGUMENTS\n")
    script = _scripted(tmp_path, [[{"text": "Hello."}]])
    term = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval auto --trust", musec.env, buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("/help", "Enter")
    term.wait_for(lambda s: "skills and custom commands: /greet" in s, "/help listing /greet")
    _leave(term)


def test_a_custom_command_a_built_in_shadows_is_warned_once_and_listed_apart(musec: Musec, buggy_repo: Path, tmp_path: Path,
                                                                              tmux_factory) -> None:
    """F15b (fresh-user trial s5): commands/model.md and commands/plan.md were listed by
    /help as usable, though /model and /plan are the client's and the daemon's own."""
    commands = musec.home / "config" / "commands"
    commands.mkdir(parents=True)
    for name in ("model", "plan", "greet"):
        (commands / f"{name}.md").write_text(f"{name} $ARGUMENTS\n")
    script = _scripted(tmp_path, [[{"text": "Hello."}]])
    term = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval auto", musec.env, buggy_repo)
    screen = term.wait_for(lambda s: "›" in s, "the prompt")
    flat = " ".join(screen.split())  # a warning wraps at the terminal's width
    assert "custom command /model is shadowed by the built-in /model: rename its file to use it" in flat, screen
    assert "plan.md: custom command /plan is shadowed by the built-in /plan; rename the file to use it" in flat, screen
    term.send("/help", "Enter")
    screen = term.wait_for(lambda s: "skills and custom commands: /greet\n" in s, "/help listing /greet alone")
    assert "shadowed by the built-in of the same name (rename the file to use it): /model" in screen
    assert screen.count("is shadowed by") == 2  # said once, under the banner
    _leave(term)


def test_ctrl_c_with_text_typed_clears_the_line_and_a_second_leaves(musec: Musec, buggy_repo: Path, tmp_path: Path,
                                                                    tmux_factory) -> None:
    """The fresh user's Ctrl-C on a half-typed line quit the client and lost the text; as in
    a shell it clears the line, and Ctrl-C at an empty prompt leaves."""
    script = _scripted(tmp_path, [[{"text": "Hello."}]])
    term = tmux_factory(f"{BIN / 'musec'} --model scripted:{script} --approval auto; echo EXITED=$?", musec.env,
                        buggy_repo)
    term.wait_for(lambda s: "›" in s, "the prompt")
    term.send("partial text")
    term.wait_for(lambda s: "› partial text" in s, "the typed text")
    term.send("C-c")
    term.wait_for(lambda s: "partial text" not in s and "›" in s and "EXITED" not in s, "the line cleared, still running")
    term.send("C-c")
    term.wait_for(lambda s: "EXITED=" in s, "the client to leave")
