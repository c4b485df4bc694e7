"""The event log -> ATIF conversion (``musec.harbor.atif``) on logs with awkward events.

Runs in Harbor's venv (the module imports Harbor's models); skipped without it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.eval.test_eval_harbor import _harbor_venv

pytestmark = pytest.mark.slow

SCRIPT = """
import json, sys
from pathlib import Path
from harbor.models.trajectories import Trajectory
from musec.harbor.atif import read_events, trajectory_from_events, usage_totals
events = read_events(Path(sys.argv[1]))
t = trajectory_from_events(events, agent_version="0.1.0", model_name="anthropic/x")
Trajectory.model_validate(t.to_json_dict())   # round trip through Harbor's own validation
print(json.dumps({"trajectory": t.to_json_dict(), "totals": usage_totals(events)}))
"""


def _usage(i: int, o: int, cr: int = 0, cw: int = 0) -> dict:
    return {"input_tokens": i, "output_tokens": o, "cache_read_tokens": cr, "cache_write_tokens": cw}


def test_log_with_interrupts_reasoning_and_background_agents(tmp_path: Path) -> None:
    venv = _harbor_venv()
    events = [
        {"seq": 0, "ts": 1.0, "agent": "main", "type": "session_started", "session_id": "s1", "tools": ["bash"]},
        {"seq": 1, "ts": 2.0, "agent": "main", "type": "user_message", "text": "fix it"},
        {"seq": 2, "ts": 3.0, "agent": "main", "type": "model_response", "model": "m", "cost_usd": 0.5,
         "usage": _usage(100, 10, 50, 5),
         "content": [{"type": "thinking", "thinking": "think", "signature": "sig"},
                     {"type": "reasoning", "item": {"encrypted_content": "opaque"}, "summary": "sum"},
                     {"type": "text", "text": "Running."},
                     {"type": "tool_call", "id": "c1", "name": "bash", "input": {"command": "make"}},
                     {"type": "tool_call", "id": "c2", "name": "bash", "input": {"command": "sleep 9"}}]},
        {"seq": 3, "ts": 4.0, "agent": "main", "type": "tool_finished", "call_id": "c1", "content": "ok", "is_error": True},
        {"seq": 4, "ts": 5.0, "agent": "main", "type": "tool_interrupted", "call_id": "c2"},
        {"seq": 5, "ts": 6.0, "agent": "scout", "type": "model_response", "model": "small", "cost_usd": 0.25,
         "usage": _usage(7, 3), "content": [{"type": "text", "text": "map"}]},
        {"seq": 6, "ts": 7.0, "agent": "main", "type": "model_response", "model": "m", "cost_usd": 0.125,
         "usage": _usage(200, 20), "content": [{"type": "text", "text": "Done."}]},
        {"seq": 7, "ts": 8.0, "agent": "main", "type": "session_ended", "exit_reason": "finished", "turns": 2},
    ]
    log = tmp_path / "s1.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in events) + '{"seq": 8, "torn')
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", SCRIPT, str(log)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    t, totals = out["trajectory"], out["totals"]
    assert [s["source"] for s in t["steps"]] == ["user", "agent", "agent"]  # the scout's call is not a main step
    first = t["steps"][1]
    assert first["reasoning_content"] == "think\nsum" and first["message"] == "Running."
    assert [r["content"] for r in first["observation"]["results"]] == [
        "ERROR: ok", "interrupted (musec was stopped during the call)"]
    assert first["metrics"]["prompt_tokens"] == 155 and first["metrics"]["cached_tokens"] == 50
    fm = t["final_metrics"]
    assert (fm["total_prompt_tokens"], fm["total_completion_tokens"], fm["total_cached_tokens"]) == (362, 33, 50)
    assert fm["total_cost_usd"] == totals["cost_usd"] == 0.875
    assert totals["by_model"]["small"]["n_input_tokens"] == 7 and "scout" in t["notes"]
    (scout,) = t["subagent_trajectories"]
    assert scout["trajectory_id"] == "scout" and scout["steps"][0]["message"] == "map"
    assert scout["final_metrics"]["total_cost_usd"] == 0.25
