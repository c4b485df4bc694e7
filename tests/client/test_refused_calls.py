"""Every tool call shows its header (``● tool(args)``) before its outcome, also a call that
never ran (issue 18: a call refused by a rule, the person, a hook or the approval mode had
only ``⎿ error: ...``, so one could not tell which call it was): live, on an attach or
resume's replay of the log, and in ``musec log``."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from musec.client.calls import CallHeads
from musec.client.render import Renderer, log_line_summary

from tests.conftest import Musec


def _response(*calls: tuple[str, str, dict]) -> dict:
    return {"type": "model_response", "agent": "main", "content": [
        {"type": "tool_call", "id": cid, "name": tool, "input": inp} for cid, tool, inp in calls]}


REFUSED_BY_THE_PERSON = [
    _response(("c1", "bash", {"command": "rm -rf src"}), ("c2", "bash", {"command": "echo fine"})),
    {"type": "approval_requested", "call_id": "c1", "tool": "bash", "input": {"command": "rm -rf src"}},
    {"type": "approval_resolved", "call_id": "c1", "decision": "deny", "by": "client:1"},
    {"type": "tool_finished", "call_id": "c1", "tool": "bash", "is_error": True,
     "content": "not run: the person refused it", "source": "person"},
    {"type": "tool_started", "call_id": "c2", "tool": "bash", "input": {"command": "echo fine"}},
    {"type": "tool_finished", "call_id": "c2", "tool": "bash", "content": "fine\n", "exit_status": 0},
]


@pytest.mark.parametrize("backlog", [False, True], ids=["live", "replayed"])
def test_a_refused_call_has_its_header_before_its_outcome(backlog: bool) -> None:
    out = io.StringIO()
    renderer = Renderer(out, color=False)
    for ev in REFUSED_BY_THE_PERSON:
        renderer.event(ev, backlog=backlog)
    lines = [ln.strip() for ln in out.getvalue().splitlines()]
    refused = lines.index("⎿ error: not run: the person refused it")
    assert lines[refused - 1] == "● bash(rm -rf src)", lines
    assert lines[refused + 1:] == ["● bash(echo fine)", "⎿ exit 0 · 1 line"]
    assert sum(ln.startswith("●") for ln in lines) == 2  # one header per call, the started one not twice


def test_musec_log_names_a_refused_call() -> None:
    calls = CallHeads()
    lines = [log_line_summary({"seq": n, "ts": 0, **ev}, calls) for n, ev in enumerate(REFUSED_BY_THE_PERSON)]
    assert "bash(rm -rf src) error: not run: the person refused it" in lines[3]
    assert lines[5].endswith("tool_finished         bash exit 0 · 1 line")  # one that ran: its start line named it
    # the columns stay in line whatever the agent and the type (a worker's id, the longest type)
    other = log_line_summary({"seq": 7, "ts": 0, "agent": "worker:a-long-worker-name", "type": "mcp_server_restarting"})
    assert other.index("mcp_server_restarting") == lines[5].index("tool_finished")


def _script(tmp_path: Path, turns: list) -> str:
    path = tmp_path / "calls.json"
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


@pytest.mark.slow
def test_every_kind_of_refusal_shows_the_call_in_a_run_and_in_the_log(musec: Musec, buggy_repo: Path,
                                                                      tmp_path: Path) -> None:
    """Through the real CLI: a deny rule, a blocking hook, the approval mode, an unknown
    tool; then ``musec log`` of the same session."""
    config = musec.home / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[permissions]\ndeny = ["bash(curl *)"]\n')
    hooks = buggy_repo / ".musec" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "block.py").write_text('import json, sys\nd = json.load(sys.stdin)\n'
                                    'if "victim" in d["tool_input"].get("command", ""):\n'
                                    '    print(json.dumps({"decision": "block", "reason": "not the victim"}))\n')
    (buggy_repo / ".musec" / "config.toml").write_text(
        '[[hooks.PreToolUse]]\nmatcher = "bash"\ncommand = "python3 .musec/hooks/block.py"\n')
    script = _script(tmp_path, [
        [{"tool": "bash", "input": {"command": "curl -s example.invalid"}}],
        [{"tool": "bash", "input": {"command": "rm victim.txt"}}],
        [{"tool": "write_file", "input": {"path": "new.txt", "content": "x\n"}}],
        [{"tool": "no_such_tool", "input": {"path": "x"}}],
        [{"tool": "bash", "input": {"command": "echo fine"}}],
        [{"text": "done"}],
    ])
    proc = musec("run", "--model", script, "--approval", "read-only", "--trust", "go", cwd=buggy_repo)
    assert proc.returncode == 0, proc.stderr
    lines = [ln.strip() for ln in proc.stdout.splitlines()]
    outcomes = [n for n, ln in enumerate(lines) if ln.startswith("⎿")]
    heads = [lines[n - 1] for n in outcomes]
    assert heads == ["● bash(curl -s example.invalid)", "● bash(rm victim.txt)", "● write_file(new.txt)",
                     "● no_such_tool(x)", "● bash(echo fine)"], proc.stdout
    assert all(lines[n].startswith("⎿ error:") for n in outcomes[:4])

    sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
    log = musec("log", sid).stdout
    finished = [ln.split("tool_finished", 1)[1].strip() for ln in log.splitlines() if "tool_finished" in ln]
    assert [f.split(" error:")[0] for f in finished[:4]] == [
        "bash(curl -s example.invalid)", "bash(rm victim.txt)", "write_file(new.txt)", "no_such_tool(x)"], log
    assert finished[4].startswith("bash exit 0")
