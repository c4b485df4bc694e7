"""End to end through the real CLI and daemon with the scripted model: nested AGENTS.md files,
a project skill with a script, hooks, and trust holding for each, headless included."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import Musec

pytestmark = pytest.mark.timeout(300)


def _script(tmp_path: Path, name: str, turns: list) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


def _run(musec: Musec, repo: Path, script: str, *args: str, task: str = "go", env: dict | None = None) -> tuple[int, dict, list[dict]]:
    proc = musec("run", "--model", script, "--output-format", "json", *args, task, cwd=repo, env=env)
    assert proc.stdout.strip(), proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    log = musec("log", result["session_id"], "--json")
    return proc.returncode, result, [json.loads(line) for line in log.stdout.splitlines()]


def test_nested_agents_md_reach_the_request_in_order_and_replay_exactly(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    (buggy_repo / "AGENTS.md").write_text("ROOT-RULE: run the unit tests\n")
    sub = buggy_repo / "lib" / "deep"
    sub.mkdir(parents=True)
    (buggy_repo / "lib" / "AGENTS.md").write_text("LIB-RULE: no new dependencies\n")
    (sub / "AGENTS.md").write_text("DEEP-RULE: keep functions pure\n")
    (sub / "util.py").write_text("def f():\n    return 1\n")
    config = musec.home / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "AGENTS.md").write_text("MY-RULE: answer briefly\n")
    script = _script(tmp_path, "read", [
        [{"tool": "read_file", "input": {"path": "pager.py"}}],
        [{"tool": "read_file", "input": {"path": "lib/deep/util.py"}}],
        [{"tool": "read_file", "input": {"path": "lib/deep/util.py"}}],
        [{"text": "read"}],
    ])
    code, result, events = _run(musec, buggy_repo, script, "--approval", "auto")
    assert code == 0, result
    prompt = events[0]["system_prompt"]
    assert prompt.index("MY-RULE") < prompt.index("ROOT-RULE") and "LIB-RULE" not in prompt
    assert '<repository_instructions path="AGENTS.md">' in prompt
    added = [e for e in events if e["type"] == "instructions_added"]
    assert [e["rel"] for e in added] == ["lib/AGENTS.md", "lib/deep/AGENTS.md"]  # once, broad first
    first_deep_read = next(e["seq"] for e in events if e["type"] == "tool_finished" and "return 1" in e["content"])
    assert all(e["seq"] > first_deep_read for e in added)
    assert "DEEP-RULE" in added[1]["text"] and "not the person" in added[1]["text"]
    assert musec.json("replay", result["session_id"], "--json")["ok"]


SKILL = """---
name: greet
description: Greets the repository by running its script.
---
Run scripts/hello.sh with bash from the workspace.
"""


def _skill_repo(repo: Path) -> None:
    d = repo / ".musec" / "skills" / "greet" / "scripts"
    d.mkdir(parents=True)
    (d.parent / "SKILL.md").write_text(SKILL)
    (d / "hello.sh").write_text("echo hello > greeted; touch /etc/greeted-outside 2>/dev/null || echo sandboxed\n")


def test_project_skill_is_listed_loaded_and_its_script_runs_in_the_sandbox(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    _skill_repo(buggy_repo)
    script = _script(tmp_path, "skill", [
        [{"tool": "skill", "input": {"name": "greet"}}],
        [{"expect_result": "Run scripts/hello.sh"},
         {"tool": "bash", "input": {"command": "sh .musec/skills/greet/scripts/hello.sh"}}],
        [{"expect_result": "sandboxed"}, {"text": "greeted"}],
    ])
    code, result, events = _run(musec, buggy_repo, script, "--approval", "auto", "--trust")
    assert code == 0, result
    started = events[0]
    assert "skill" in started["tools"] and "- greet: Greets the repository" in started["system_prompt"]
    assert (buggy_repo / "greeted").read_text() == "hello\n" and not Path("/etc/greeted-outside").exists()
    assert musec.json("replay", result["session_id"], "--json")["ok"]


def test_untrusted_project_skill_is_absent_and_never_runs_headless(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    _skill_repo(buggy_repo)
    script = _script(tmp_path, "skill", [
        [{"tool": "skill", "input": {"name": "greet"}}],
        [{"expect_result": "unknown tool"}, {"text": "no skill here"}],
    ])
    code, result, events = _run(musec, buggy_repo, script, "--approval", "auto", task="use $greet and /greet")
    assert code == 0, result
    started = events[0]
    assert "skill" not in started["tools"] and "greet" not in started["system_prompt"]
    assert started["extensions"]["waiting_for_trust"] == [".musec/skills/greet/SKILL.md", ".musec/skills/greet/scripts/hello.sh"]
    assert not [e for e in events if e["type"] == "skill_loaded"]
    assert not (buggy_repo / "greeted").exists()


def test_person_invokes_a_skill_and_a_command(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    _skill_repo(buggy_repo)
    (buggy_repo / ".musec" / "commands").mkdir()
    (buggy_repo / ".musec" / "commands" / "check.md").write_text("Check the module $ARGUMENTS carefully.\n")
    script = _script(tmp_path, "invoke", [[{"text": "ok"}]])
    code, _, events = _run(musec, buggy_repo, script, "--trust", task="/greet loudly")
    assert code == 0
    loaded = [e for e in events if e["type"] == "skill_loaded"]
    assert [e["name"] for e in loaded] == ["greet"] and "[arguments: loudly]" in loaded[0]["text"]
    code, _, events = _run(musec, buggy_repo, script, task="/check pager.py")
    assert [e["text"] for e in events if e["type"] == "user_message"] == ["Check the module pager.py carefully.\n"]


BLOCK_RM = """import json, sys
data = json.load(sys.stdin)
if data["tool_input"]["command"].split()[0] == "rm":
    print("no rm in this repository", file=sys.stderr)
    sys.exit(2)
if data["tool_input"]["command"] == "echo one":
    print(json.dumps({"updated_input": {"command": "echo two"}}))
"""
STOP_ONCE = """import json, sys
d = json.load(sys.stdin)
print(json.dumps({} if d["stop_hook_active"] else {"decision": "block", "reason": "say DONE at the end"}))
"""


def _hook_repo(repo: Path) -> None:
    hooks = repo / ".musec" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "block_rm.py").write_text(BLOCK_RM)
    (hooks / "stop_once.py").write_text(STOP_ONCE)
    (repo / ".musec" / "config.toml").write_text(
        '[[hooks.PreToolUse]]\nmatcher = "bash"\ncommand = "python3 .musec/hooks/block_rm.py"\n'
        '[[hooks.Stop]]\ncommand = "python3 .musec/hooks/stop_once.py"\n')  # python3 from PATH: a venv under /tmp is hidden


def test_hooks_block_rewrite_and_send_back_once_then_edits_need_trust_again(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    _hook_repo(buggy_repo)
    script = _script(tmp_path, "hooks", [
        [{"tool": "bash", "input": {"command": "rm pager.py"}}],
        [{"expect_result": "no rm in this repository"}, {"tool": "bash", "input": {"command": "echo one"}}],
        [{"expect_result": "two"}, {"text": "finished"}],
        [{"text": "finished. DONE"}],
    ])
    code, result, events = _run(musec, buggy_repo, script, "--approval", "auto", "--trust")
    assert code == 0, result
    assert (buggy_repo / "pager.py").exists() and result["result"] == "finished. DONE"
    ran = [(e["hook_event"], e["decision"]) for e in events if e["type"] == "hook_ran"]
    assert ran == [("PreToolUse", "block"), ("PreToolUse", "allow"), ("Stop", "block"), ("Stop", "allow")]
    assert all(e["duration_s"] >= 0 for e in events if e["type"] == "hook_ran")
    started = [e["input"] for e in events if e["type"] == "tool_started"]
    assert started == [{"command": "echo two"}]
    assert musec.json("replay", result["session_id"], "--json")["ok"]

    (buggy_repo / ".musec" / "hooks" / "block_rm.py").write_text("import os\nos.system('touch pwned')\n")
    script = _script(tmp_path, "after", [[{"tool": "bash", "input": {"command": "rm -f nothing"}}], [{"text": "ok"}]])
    code, result, events = _run(musec, buggy_repo, script, "--approval", "auto")
    assert code == 0, result
    assert events[0]["trust"]["state"] == "changed" and not [e for e in events if e["type"] == "hook_ran"]
    assert not (buggy_repo / "pwned").exists()


MCP_SERVER = '''
import os, sys
from pathlib import Path
from mcp.server.mcpserver import MCPServer

app = MCPServer("demo")

@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

@app.tool()
def whoami() -> str:
    """Whether the server got its token."""
    return "token set" if os.environ.get("DEMO_TOKEN", "").startswith("tok-") else "no token"

@app.tool()
def wipe() -> str:
    """A tool the person denies."""
    Path(os.environ["MARK"]).write_text("wiped")
    return "wiped"

@app.tool()
def crash() -> str:
    """Exit the server at once."""
    os._exit(3)

if __name__ == "__main__":
    with open(os.environ["MARK"] + ".starts", "a") as f:
        f.write("start\\n")
    app.run()
'''


def test_mcp_server_tools_through_approvals_deny_crash_restart_and_no_secret_in_the_log(
        musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    server = tmp_path / "demo_mcp.py"
    server.write_text(MCP_SERVER)
    mark = tmp_path / "mark"
    config = musec.home / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(
        f'[mcp_servers.demo]\ncommand = "{sys.executable}"\nargs = ["{server}"]\n'
        f'env = {{ DEMO_TOKEN = "${{DEMO_TOKEN}}", MARK = "{mark}" }}\n'
        '[permissions]\nallow = ["mcp__demo__add", "mcp__demo__whoami", "mcp__demo__crash"]\ndeny = ["mcp__demo__wipe"]\n')
    script = _script(tmp_path, "mcp", [
        [{"tool": "mcp__demo__add", "input": {"a": 2, "b": 40}}],
        [{"expect_result": "42"}, {"tool": "mcp__demo__wipe", "input": {}}],
        [{"expect_result": "deny mcp__demo__wipe"}, {"tool": "mcp__demo__whoami", "input": {}}],
        [{"expect_result": "token set"}, {"tool": "mcp__demo__crash", "input": {}}],
        [{"expect_result": "stopped during the call"}, {"tool": "mcp__demo__add", "input": {"a": 1, "b": 1}}],
        [{"expect_result": "2"}, {"text": "done"}],
    ])
    secret = "tok-" + "9f8e7d6c5b4a" * 3
    code, result, events = _run(musec, buggy_repo, script, "--approval", "ask", env={"DEMO_TOKEN": secret})
    assert code == 0, result
    assert not mark.exists()  # the denied tool never ran
    assert mark.with_suffix(".starts").read_text().count("start") == 2
    kinds = [e["type"] for e in events if e["type"].startswith("mcp_")]
    assert kinds == ["mcp_server_started", "mcp_server_restarting", "mcp_server_started"]
    listed = next(e for e in events if e["type"] == "mcp_server_started")
    assert [t["name"] for t in listed["tools"]] == ["add", "whoami", "wipe", "crash"]
    assert not [e for e in events if e["type"] == "approval_requested"]
    wrapped = next(e for e in events if e["type"] == "tool_finished" and e["tool"] == "mcp__demo__add")
    assert wrapped["content"] == "42"
    assert musec.json("replay", result["session_id"], "--json")["ok"]
    # musec's fixture checks that the token is in no file under MUSEC_HOME (logs included)


def test_mcp_list_and_doctor_say_what_is_active_and_what_waits(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    server = tmp_path / "demo_mcp.py"
    server.write_text(MCP_SERVER)
    config = musec.home / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(
        f'[mcp_servers.demo]\ncommand = "{sys.executable}"\nargs = ["{server}"]\n'
        f'env = {{ DEMO_TOKEN = "${{DEMO_TOKEN}}", MARK = "{tmp_path / "m"}" }}\n'
        '[mcp_servers.broken]\ncommand = "/nonexistent/server"\nstartup_timeout_s = 5\n')
    (buggy_repo / "AGENTS.md").write_text("rules\n")
    _skill_repo(buggy_repo)
    (buggy_repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"repo": {"command": "touch", "args": ["pwned"]}}}))
    proc = musec("mcp", "list", "--json", cwd=buggy_repo, env={"DEMO_TOKEN": "tok-abcdefgh12345678"})
    assert proc.returncode == 1, proc.stderr  # a server failed (fresh2 K1)
    by = {s["server"]: s for s in json.loads(proc.stdout)}
    assert set(by) == {"demo", "broken"}  # the untrusted repository's server is not started
    assert by["demo"]["state"] == "running" and by["demo"]["tools"] == ["add", "whoami", "wipe", "crash"]
    assert by["broken"]["state"] == "failed" and "command not found: /nonexistent/server" in by["broken"]["error"]
    assert not (buggy_repo / "pwned").exists()
    text = musec("mcp", "list", cwd=buggy_repo, env={"DEMO_TOKEN": "tok-abcdefgh12345678"}).stdout
    assert "mcp__demo__add" in text and "waits for trust" in text
    doctor = musec("doctor", cwd=buggy_repo).stdout
    assert "instructions: AGENTS.md" in doctor and "mcp: demo, broken" in doctor
    assert "waiting for trust (untrusted): .mcp.json, .musec/skills/greet/SKILL.md" in doctor


def test_session_hooks_of_the_person_start_prompt_and_end(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    config = musec.home / "config"
    config.mkdir(parents=True, exist_ok=True)
    gate = tmp_path / "gate.py"
    gate.write_text("import json, sys\nif 'forbidden' in json.load(sys.stdin)['prompt']:\n"
                    "    print('not that', file=sys.stderr)\n    sys.exit(2)\n")
    (config / "config.toml").write_text(
        '[[hooks.SessionStart]]\ncommand = "echo remember-the-style-guide"\n'
        f'[[hooks.UserPromptSubmit]]\ncommand = "python3 {gate}"\nsandbox = false\n'
        '[[hooks.SessionEnd]]\ncommand = "touch ended-marker"\n')
    script = _script(tmp_path, "hi", [[{"text": "hi"}]])
    code, result, events = _run(musec, buggy_repo, script, task="hello")
    assert code == 0, json.dumps([result, *[e for e in events if e["type"] in ("hook_ran", "session_ended")]])
    context = [e["text"] for e in events if e["type"] == "hook_context"]
    assert context == ["[SessionStart hook: remember-the-style-guide]"]
    assert (buggy_repo / "ended-marker").exists()  # SessionEnd ran, in the sandbox, in the workspace
    code, result, events = _run(musec, buggy_repo, script, task="do the forbidden thing")
    assert code == 1 and "blocked" in result.get("message", "") + json.dumps(result)
    assert [e["reason"] for e in events if e["type"] == "prompt_blocked"] == ["not that"]
    assert not [e for e in events if e["type"] == "user_message"]


def test_a_guard_hook_that_hangs_or_answers_garbage_is_shown_and_a_hung_guard_blocks_the_call(
        musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    config = musec.home / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(
        '[[hooks.PreToolUse]]\nmatcher = "bash"\ncommand = "sleep 30"\ntimeout_s = 1\n'
        "[[hooks.PostToolUse]]\ncommand = \"echo '{not json'\"\n"
        '[[hooks.UserPromptSubmit]]\ncommand = """echo \'{"decision": "maybe"}\'"""\n')
    script = _script(tmp_path, "guard", [
        [{"tool": "bash", "input": {"command": "touch ran-marker"}}],
        [{"expect_result": "a guard that cannot answer blocks the call"}, {"tool": "read_file", "input": {"path": "pager.py"}}],
        [{"text": "done"}],
    ])
    proc = musec("run", "--model", script, "--approval", "auto", "--agents", "none", "go", cwd=buggy_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (buggy_repo / "ran-marker").exists()  # the hung guard blocked the call
    out = proc.stdout
    assert "⚑ PreToolUse hook `sleep 30` timed out: no answer within 1 s; killed" in out, out
    assert "⚑ PostToolUse hook `echo '{not json'` failed: the answer is not valid JSON" in out, out
    assert "⚑ UserPromptSubmit hook `echo '{\"decision\": \"maybe\"}'` failed: unknown decision 'maybe'" in out, out


def test_a_stop_hook_that_always_blocks_sends_back_three_times_then_stops_and_says_why(
        musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    config = musec.home / "config"
    config.mkdir(parents=True, exist_ok=True)
    seen = tmp_path / "stop-inputs"
    (config / "config.toml").write_text(
        f'[[hooks.Stop]]\ncommand = "cat >> {seen}; echo >> {seen}; echo keep going >&2; exit 2"\nsandbox = false\n')
    script = _script(tmp_path, "stop", [[{"text": "done"}]])
    proc = musec("run", "--model", script, "--approval", "auto", "--agents", "none", "go", cwd=buggy_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    inputs = [json.loads(line) for line in seen.read_text().splitlines() if line.strip()]
    assert [i["stop_hook_active"] for i in inputs] == [False, True, True, True]
    out = proc.stdout
    assert out.count("⚑ [a Stop hook sent you back to work") == 3 and "(3/3): keep going]" in out, out
    assert "but Stop hooks already sent you back 3 times in a row: stopped here" in out, out
    assert "max-turns" not in out + proc.stderr


PROBE_MCP = '''
import os
from pathlib import Path
from mcp.server.mcpserver import MCPServer

app = MCPServer("probe")
outcome = {}
for name, path in (("inside", "inside-marker"), ("outside", os.environ["OUTSIDE"])):
    try:
        Path(path).write_text("written")
        outcome[name] = "written"
    except OSError as exc:
        outcome[name] = type(exc).__name__

@app.tool()
def probe() -> str:
    """What the server could write."""
    return f"inside {outcome['inside']}, outside {outcome['outside']}"

if __name__ == "__main__":
    app.run()
'''


def test_a_trusted_projects_mcp_server_runs_in_the_sandbox(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    outside = tmp_path.resolve() / "outside"
    outside.mkdir()
    (buggy_repo / "mcp_probe.py").write_text(PROBE_MCP)
    (buggy_repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"probe": {
        "command": sys.executable, "args": ["mcp_probe.py"], "env": {"OUTSIDE": str(outside / "escaped")}}}}))
    config = musec.home / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text('[permissions]\nallow = ["mcp__probe__probe"]\n')
    script = _script(tmp_path, "probe", [
        [{"tool": "mcp__probe__probe", "input": {}}],
        [{"expect_result": "inside written, outside"}, {"text": "done"}],
    ])
    code, result, events = _run(musec, buggy_repo, script, "--approval", "auto", "--trust")
    assert code == 0, result
    probed = next(e for e in events if e["type"] == "tool_finished" and e["tool"] == "mcp__probe__probe")
    assert probed["content"].startswith("inside written, outside ") and "outside written" not in probed["content"]
    assert (buggy_repo / "inside-marker").exists() and not (outside / "escaped").exists()
    listed = musec.json("mcp", "list", "--json", cwd=buggy_repo)  # `musec mcp list` starts it sandboxed too
    assert [s["state"] for s in listed] == ["running"] and not (outside / "escaped").exists()


def test_a_guard_written_with_claude_codes_tool_names_fires_and_one_that_names_no_tool_is_said(
        musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    # fresh-user s8 K7: `matcher = "Bash"` matched nothing, so a failing guard let every call
    # through, and doctor showed the hook with ✓
    config = musec.home / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(
        '[[hooks.PreToolUse]]\nmatcher = "Bash"\ncommand = "exit 1"\n'  # a guard that fails: fail closed
        '[[hooks.PreToolUse]]\nmatcher = "Edit|Write"\ncommand = "echo no edits >&2; exit 2"\n'
        '[[hooks.PreToolUse]]\nmatcher = "WebFetch"\ncommand = "exit 2"\n')
    script = _script(tmp_path, "claude", [
        [{"tool": "bash", "input": {"command": "touch ran-marker"}}],
        [{"tool": "write_file", "input": {"path": "f.txt", "content": "x"}}],
        [{"text": "done"}],
    ])
    proc = musec("run", "--model", script, "--approval", "auto", "--agents", "none", "go", cwd=buggy_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (buggy_repo / "ran-marker").exists() and not (buggy_repo / "f.txt").exists(), proc.stdout
    assert "⚑ PreToolUse hook `exit 1` failed: exit status 1" in proc.stdout, proc.stdout
    assert "⚑ PreToolUse hook `echo no edits >&2; exit 2` blocked: no edits" in proc.stdout, proc.stdout
    never = ("the PreToolUse hook `exit 2` never runs: its matcher 'WebFetch' names no tool; the tools are read_file, "
             "write_file, edit_file, glob, grep, bash")
    assert never in proc.stdout.splitlines()[0], proc.stdout  # said when the session starts
    doctor = [line for line in musec("doctor", cwd=buggy_repo).stdout.splitlines() if "never runs" in line]
    assert len(doctor) == 1 and doctor[0].startswith("! extensions") and never in doctor[0], doctor


def test_a_permission_request_hook_of_the_persons_approves_the_call(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    # fresh-user s8 K8: `{"decision": "allow"}` was ignored, so the call still needed approval
    config = musec.home / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(
        '[[hooks.PermissionRequest]]\nmatcher = "Bash(touch *)"\ncommand = """echo \'{"decision": "allow"}\'"""\n'
        '[[hooks.SessionStart]]\ncommand = "echo not today >&2; exit 2"\n')
    script = _script(tmp_path, "approve", [
        [{"tool": "bash", "input": {"command": "touch ran-marker"}}],
        [{"text": "done"}],
    ])
    proc = musec("run", "--model", script, "--agents", "none", "go", cwd=buggy_repo)  # default mode: bash asks
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (buggy_repo / "ran-marker").exists()
    assert "⚑ PermissionRequest hook `echo '{\"decision\": \"allow\"}'` approved the call" in proc.stdout, proc.stdout
    # SessionStart cannot be blocked: the line says what happened, not "blocked"
    assert ("⚑ SessionStart hook `echo not today >&2; exit 2` answered block, which this point ignores: "
            "nothing was blocked: not today") in proc.stdout, proc.stdout
