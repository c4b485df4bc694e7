"""Hooks as real subprocesses in the real bubblewrap sandbox: answers, matchers, timeouts, trust."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest
from musec.agents.core.errors import ConfigError
from musec.agents.core.events import UNSET, line_fields
from musec.agents.hooks import HookResult, Hooks, HookSpec, parse_hooks
from musec.agents.tools.base import SandboxPolicy
from musec.agents.trust import check_trust

BWRAP = shutil.which("bwrap")
pytestmark = pytest.mark.skipif(BWRAP is None, reason="needs bubblewrap (apt-get install bubblewrap)")

BLOCK_RM = """import json, sys
data = json.load(sys.stdin)
if data["tool_name"] == "bash" and data["tool_input"]["command"].split()[0] == "rm":
    print("rm is not allowed here; move files to trash/ instead", file=sys.stderr)
    sys.exit(2)
"""
REWRITE = """import json, sys
data = json.load(sys.stdin)
cmd = data["tool_input"]["command"]
print(json.dumps({"updated_input": {**data["tool_input"], "command": cmd.replace("pytest", "pytest -q")},
                  "additional_context": "ran with -q"}))
"""


def make_hooks(ws: Path, specs: list[HookSpec], *, verify: bool = True, mode: str = "bwrap") -> tuple[Hooks, list[HookResult]]:
    ran: list[HookResult] = []
    hooks = Hooks(specs, workspace=ws, env={"PATH": "/usr/bin:/bin", "GITHUB_TOKEN": "ghp_secretsecret"},
                  sandbox=SandboxPolicy(mode=mode), session_id="s1", verify_project=lambda: verify,
                  on_ran=lambda r, agent: ran.append(r), bwrap=BWRAP)
    return hooks, ran


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    d = (tmp_path / "ws").resolve()
    (d / ".musec" / "hooks").mkdir(parents=True)
    (d / ".musec" / "hooks" / "block_rm.py").write_text(BLOCK_RM)
    (d / ".musec" / "hooks" / "rewrite.py").write_text(REWRITE)
    return d


def py(script: str) -> str:
    # python3 from PATH: the sandbox's private /tmp hides a venv (sys.executable) under /tmp.
    return f"python3 .musec/hooks/{script}"


def test_parse_hooks_and_errors() -> None:
    specs = parse_hooks({"PreToolUse": [{"command": "x", "matcher": "bash|mcp__gh__*", "timeout_s": 5, "sandbox": False}]},
                        source="project", origin="p.toml")
    assert specs == [HookSpec("PreToolUse", "x", "bash|mcp__gh__*", 5.0, "project", "p.toml", True)]
    assert specs[0].matches("bash") and specs[0].matches("mcp__gh__issue") and not specs[0].matches("read_file")
    assert parse_hooks({"Stop": [{"command": "y", "sandbox": False}]}, source="user", origin="u")[0].sandbox is False
    for bad, msg in [({"PreTool": []}, "unknown hook point"), ({"Stop": [{"cmd": "x"}]}, "unknown key"),
                     ({"Stop": [{"command": ""}]}, "needs `command"), ({"Stop": [{"command": "x", "timeout_s": 0}]}, "timeout_s"),
                     ({"Stop": {"command": "x"}}, "list of tables")]:
        with pytest.raises(ConfigError, match=msg):
            parse_hooks(bad, source="user", origin="u")


def test_block_rm_and_rewrite_a_command(ws: Path) -> None:
    specs = [HookSpec("PreToolUse", py("block_rm.py"), "bash", source="project"),
             HookSpec("PreToolUse", py("rewrite.py"), "bash", source="project"),
             HookSpec("PreToolUse", "exit 1", "read_file", source="project")]
    hooks, ran = make_hooks(ws, specs)

    async def go() -> None:
        out = await hooks.run("PreToolUse", {"tool_name": "bash", "tool_input": {"command": "rm -rf src"}}, tool="bash")
        assert out.blocked and out.reason == "rm is not allowed here; move files to trash/ instead"
        assert [r.decision for r in ran] == ["block"] and ran[0].exit_status == 2
        out = await hooks.run("PreToolUse", {"tool_name": "bash", "tool_input": {"command": "pytest tests"}}, tool="bash")
        assert not out.blocked and out.updated_input == {"command": "pytest -q tests"} and out.context == ["ran with -q"]
        assert [r.decision for r in ran[1:]] == ["allow", "allow"]
        out = await hooks.run("PreToolUse", {"tool_name": "glob", "tool_input": {}}, tool="glob")
        assert out.results == []

    anyio.run(go)


def test_stdin_payload_env_and_sandbox(ws: Path) -> None:
    (ws / ".musec" / "hooks" / "dump.sh").write_text(
        'cat > /tmp/in.json; echo "{\\"additional_context\\": \\"$MUSEC_HOOK_EVENT $GITHUB_TOKEN\\"}";'
        ' touch /etc/hook-was-here 2>/dev/null && echo escaped >&2; exit 0\n')
    hooks, ran = make_hooks(ws, [HookSpec("SessionStart", "sh .musec/hooks/dump.sh", source="user")])
    out = anyio.run(hooks.run, "SessionStart", {"source": "startup"})
    assert out.context == ["SessionStart "]  # the credential was scrubbed
    assert ran[0].decision == "allow" and not Path("/etc/hook-was-here").exists()


def test_plain_stdout_is_context_at_prompt_time_and_errors_block_nothing(ws: Path) -> None:
    specs = [HookSpec("UserPromptSubmit", "echo remember the style guide"),
             HookSpec("UserPromptSubmit", "echo broken >&2; exit 3")]
    hooks, ran = make_hooks(ws, specs)
    out = anyio.run(hooks.run, "UserPromptSubmit", {"prompt": "hi"})
    assert not out.blocked and out.context == ["remember the style guide"]
    assert ran[1].decision == "error" and "broken" in ran[1].reason


def test_timeout_kills_the_hook(ws: Path) -> None:
    hooks, ran = make_hooks(ws, [HookSpec("Stop", "sleep 30", timeout_s=0.5)])
    out = anyio.run(hooks.run, "Stop", {"stop_hook_active": False})
    assert not out.blocked and ran[0].decision == "timeout" and ran[0].duration_s < 20


def test_a_guard_that_times_out_or_answers_garbage_blocks_the_call_elsewhere_nothing(ws: Path) -> None:
    specs = [HookSpec("PreToolUse", "sleep 30", "bash", timeout_s=0.5),
             HookSpec("PreToolUse", "echo '{not json'", "read_file"),
             HookSpec("PreToolUse", """echo '{"decision": "maybe"}'""", "glob"),
             HookSpec("PostToolUse", "echo '{not json'"),
             HookSpec("UserPromptSubmit", """echo '{"decision": "maybe", "updated_input": {"x": 1}}'""")]
    hooks, ran = make_hooks(ws, specs)

    async def go() -> None:
        out = await hooks.run("PreToolUse", {"tool_name": "bash", "tool_input": {"command": "echo ran"}}, tool="bash")
        assert out.blocked and ran[-1].decision == "timeout" and ran[-1].duration_s < 20
        assert out.reason == ("the PreToolUse hook `sleep 30` failed (timeout: no answer within 0.5 s; killed), "
                              "and a guard that cannot answer blocks the call")
        out = await hooks.run("PreToolUse", {"tool_name": "read_file", "tool_input": {}}, tool="read_file")
        assert out.blocked and ran[-1].decision == "error" and "not valid JSON" in ran[-1].reason
        out = await hooks.run("PreToolUse", {"tool_name": "glob", "tool_input": {}}, tool="glob")
        assert out.blocked and ran[-1].reason == "unknown decision 'maybe'; answer \"block\" or leave it out"
        out = await hooks.run("PostToolUse", {"tool_name": "bash", "tool_input": {}}, tool="bash")
        assert not out.blocked and ran[-1].decision == "error" and "not valid JSON" in ran[-1].reason
        out = await hooks.run("UserPromptSubmit", {"prompt": "orig"})
        assert not out.blocked and out.updated_input is None and ran[-1].decision == "error"

    anyio.run(go)


def test_stop_hook_sends_the_agent_back_once(ws: Path) -> None:
    (ws / ".musec" / "hooks" / "once.py").write_text(
        "import json, sys\nd = json.load(sys.stdin)\n"
        "print(json.dumps({} if d['stop_hook_active'] else {'decision': 'block', 'reason': 'run the tests first'}))\n")
    hooks, _ = make_hooks(ws, [HookSpec("Stop", py("once.py"), source="project")])
    first = anyio.run(hooks.run, "Stop", {"stop_hook_active": False})
    second = anyio.run(hooks.run, "Stop", {"stop_hook_active": True})
    assert (first.blocked, first.reason, second.blocked) == (True, "run the tests first", False)


def test_project_hooks_edited_after_trust_do_not_run(ws: Path, tmp_path: Path) -> None:
    (ws / ".musec" / "config.toml").write_text(f'[[hooks.PreToolUse]]\ncommand = "{py("block_rm.py")}"\n')
    status = check_trust(ws, tmp_path / "state", trust_now=True)
    hooks, ran = make_hooks(ws, [HookSpec("PreToolUse", py("block_rm.py"), source="project")])
    hooks.verify_project = status.still_holds
    payload = {"tool_name": "bash", "tool_input": {"command": "rm x"}}
    assert anyio.run(hooks.run, "PreToolUse", payload).blocked
    (ws / ".musec" / "hooks" / "block_rm.py").write_text("import os; os.system('touch pwned')\n")
    out = anyio.run(hooks.run, "PreToolUse", payload)  # a guard that may not run blocks the call
    assert out.blocked and ran[-1].decision == "untrusted" and not (ws / "pwned").exists()
    assert "changed since you trusted them" in out.reason
    status = check_trust(ws, tmp_path / "state", trust_now=True)
    hooks.verify_project = status.still_holds
    anyio.run(hooks.run, "PreToolUse", payload)
    assert (ws / "pwned").exists()  # trusted again: it runs, and its writes stay in the workspace


def test_result_fields_are_the_event(ws: Path) -> None:
    hooks, ran = make_hooks(ws, [HookSpec("PostToolUse", 'echo \'{"decision": "block", "reason": "no"}\'', "bash")])
    anyio.run(lambda: hooks.run("PostToolUse", {"tool_name": "bash"}, tool="bash"))
    event = ran[0].event("main")
    assert event.decision == "block" and event.reason == "no" and event.hook_event == "PostToolUse"
    assert event.context is UNSET and event.updated_input is UNSET  # left out of the line
    json.dumps(line_fields(event))


def test_claude_code_matchers_fire_and_one_that_names_no_tool_is_said(ws: Path) -> None:
    # fresh-user s8 K7: `Bash`, `Edit|Write`, `Write`, `Bash(*)` matched nothing, silently
    from musec.agents.hooks import matcher_problem
    from musec.agents.permissions import Call

    for matcher, tools in [("Bash", {"bash"}), ("BASH", {"bash"}), ("Bash(*)", {"bash"}), ("Write", {"write_file"}),
                           ("Edit|Write", {"edit_file", "write_file"}), ("MultiEdit", {"edit_file"}), ("Read", {"read_file"}),
                           ("Grep|GLOB", {"grep", "glob"}), ("bash|edit_file", {"bash", "edit_file"}), ("*_FILE", {"read_file", "write_file", "edit_file"})]:
        spec = HookSpec("PreToolUse", "x", matcher)
        assert {t for t in ("bash", "read_file", "write_file", "edit_file", "glob", "grep") if spec.matches(t)} == tools, matcher
        assert matcher_problem(spec) is None, matcher
    for matcher in ("WebFetch", "Foo|Bar", "bsah"):
        problem = matcher_problem(HookSpec("PreToolUse", "guard.sh", matcher, origin="u.toml"))
        assert problem is not None and problem.startswith(f"u.toml: the PreToolUse hook `guard.sh` never runs: its matcher {matcher!r}")
    assert matcher_problem(HookSpec("PreToolUse", "x", "mcp__gh__*")) is None  # a server's tools are known only later
    assert matcher_problem(HookSpec("Stop", "x", "anything")) is None  # no matcher applies there
    with pytest.raises(ConfigError, match=r"hooks.PreToolUse\[0\]: matcher 'WebFetch\(domain:x\)': .*unknown tool kind"):
        parse_hooks({"PreToolUse": [{"command": "x", "matcher": "WebFetch(domain:x)"}]}, source="user", origin="u")

    # Tool(pattern): the calls the permission rule of that text covers
    hooks, ran = make_hooks(ws, [HookSpec("PreToolUse", "exit 2", "Bash(rm *)|Edit(secret/**)")])

    async def go() -> None:
        for tool, call, blocked in [("bash", Call("bash", "execute", command="ls; rm -rf x"), True),
                                    ("bash", Call("bash", "execute", command="ls -l"), False),
                                    ("write_file", Call("write_file", "write", paths=((str(ws / "secret/a"), "secret/a"),)), True),
                                    ("write_file", Call("write_file", "write", paths=((str(ws / "a.py"), "a.py"),)), False)]:
            out = await hooks.run("PreToolUse", {"tool_name": tool, "tool_input": {}}, tool=tool, call=call)
            assert out.blocked is blocked, (tool, call)

    anyio.run(go)
    assert len(ran) == 2


def test_permission_request_hooks_approve_in_either_form_and_a_projects_cannot(ws: Path) -> None:
    # fresh-user s8 K8: {"decision": "allow"} was silently taken as "no opinion"
    allow, claude_allow = """echo '{"decision": "allow"}'""", """echo '{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}'"""
    deny = """echo '{"hookSpecificOutput": {"decision": {"behavior": "deny", "message": "not on Fridays"}}}'"""
    payload = {"tool_name": "bash", "tool_input": {"command": "ls"}}

    async def outcome(*specs: HookSpec):
        hooks, ran = make_hooks(ws, list(specs))
        return await hooks.run("PermissionRequest", payload, tool="bash"), ran

    async def go() -> None:
        for command in (allow, claude_allow):
            out, ran = await outcome(HookSpec("PermissionRequest", command))
            assert out.approved and not out.blocked and ran[0].decision == "approve", command
        out, ran = await outcome(HookSpec("PermissionRequest", allow), HookSpec("PermissionRequest", deny))
        assert out.blocked and not out.approved and out.reason == "not on Fridays"
        out, ran = await outcome(HookSpec("PermissionRequest", allow, source="project"))
        assert not out.approved and not out.blocked and ran[0].decision == "error"
        assert ran[0].reason == "a project's PermissionRequest hook cannot approve a call; the person is asked"
        out, ran = await outcome(HookSpec("PermissionRequest", """echo '{"decision": "maybe"}'"""))
        assert ran[0].reason == 'unknown decision \'maybe\'; answer "allow" (approve the call), "block" or leave it out'
        hooks, ran = make_hooks(ws, [HookSpec("PreToolUse", """echo '{"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "no"}}'""")])
        out = await hooks.run("PreToolUse", payload, tool="bash")
        assert out.blocked and out.reason == "no"  # Claude Code's PreToolUse deny is a block
        hooks, ran = make_hooks(ws, [HookSpec("PreToolUse", allow)])
        out = await hooks.run("PreToolUse", payload, tool="bash")
        assert not out.blocked and not out.approved and ran[0].decision == "allow"  # a PreToolUse hook approves nothing

    anyio.run(go)
