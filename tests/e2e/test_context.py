"""End to end: the tool-output budget (issue 12 part 2) through the daemon and a local
Anthropic server."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.conftest import Musec
from tests.support.anthropic_server import AnthropicServer, check_tool_pairing, message

KEY = "sk-ant-" + "api03-e2eTestKeyNeverReal-0123456789abcdef"  # fake; split so no key-shaped literal is committed


def _events(musec: Musec, session_id: str) -> list[dict]:
    proc = musec("log", session_id, "--json")
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _result_text(request_body: dict) -> str:
    block = request_body["messages"][-1]["content"][0]
    content = block["content"]
    return content if isinstance(content, str) else "".join(c.get("text", "") for c in content)


def test_a_result_over_its_budget_is_cut_and_the_rest_read_from_its_blob(musec: Musec, buggy_repo: Path) -> None:
    (musec.home / "config").mkdir(parents=True, exist_ok=True)
    (musec.home / "config" / "config.toml").write_text("[context]\ntool_output_tokens = 500\n")
    whole = "".join(f"{i}\n" for i in range(1, 20_001)).encode()
    digest = hashlib.sha256(whole).hexdigest()
    blob = musec.home / "state" / "blobs" / digest[:2] / digest[2:]
    with AnthropicServer() as server:
        server.enqueue(
            message([{"type": "tool_use", "id": "toolu_01Seq", "name": "bash", "input": {"command": "seq 1 20000"}}]),
            message([{"type": "tool_use", "id": "toolu_01ReadBlob", "name": "read_file",
                      "input": {"path": str(blob), "offset": 12_345, "limit": 2}}]),
            message([{"type": "tool_use", "id": "toolu_01GrepBlob", "name": "grep",
                      "input": {"pattern": "^1999[0-9]$", "path": str(blob)}}]),
            message([{"type": "text", "text": "done"}]),
        )
        proc = musec("run", "--model", "anthropic/claude-sonnet-4-6", "--approval", "auto", "--output-format", "json",
                     "count", cwd=buggy_repo, env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": server.base_url})
        requests = list(server.requests)
    assert proc.returncode == 0, proc.stderr
    check_tool_pairing(requests)
    cut = _result_text(requests[1].body)
    assert len(cut) < 1500 + 800, len(cut)
    assert "1\n2\n3\n" in cut and "19999\n20000\n" in cut
    assert "500-token budget" in cut and str(blob) in cut and "read_file(path=" in cut and "grep(" in cut
    assert f"of {20_000:,}." in cut  # the whole output's lines, not those of the capped text
    assert "12345\n12346\n" not in cut
    assert "12345\t12345\n" in _result_text(requests[2].body) and "12346\t12346\n" in _result_text(requests[2].body)
    assert _result_text(requests[3].body).count("\n") >= 10
    assert blob.read_bytes() == whole
    session_id = json.loads(proc.stdout)["session_id"]
    finished = [e for e in _events(musec, session_id) if e["type"] == "tool_finished"]
    assert finished[0]["blob"] == digest and finished[0]["full_bytes"] == len(whole)
    assert finished[0]["content"] in cut  # the log holds what the model saw (replay stays exact)
    assert musec("replay", session_id).returncode == 0


def test_old_tool_results_are_cleared_past_the_threshold_logged_and_replayed(musec: Musec, buggy_repo: Path) -> None:
    """Past [context].clear_at of the window, the results of all but the most recent calls
    become one-line stubs naming the call and the blob that keeps the whole result."""
    (musec.home / "config").mkdir(parents=True, exist_ok=True)
    (musec.home / "config" / "config.toml").write_text("[context]\nclear_at = 0.05\nkeep_tool_results = 1\n")
    for name in ("a.txt", "b.txt", "c.txt"):
        (buggy_repo / name).write_text("".join(f"{name} line {i}\n" for i in range(600)))
    read = [{"type": "tool_use", "id": f"toolu_0{n}Read", "name": "read_file", "input": {"path": name}}
            for n, name in enumerate(("a.txt", "b.txt", "c.txt"))]
    with AnthropicServer() as server:
        server.enqueue(
            message([read[0]], input_tokens=3_000),
            message([read[1]], input_tokens=15_000),  # 7.5% of the 200k window: past clear_at
            message([read[2]], input_tokens=4_000),  # after the clearing
            message([{"type": "text", "text": "read them all"}], input_tokens=5_000),
        )
        proc = musec("run", "--model", "anthropic/claude-sonnet-4-6", "--approval", "auto", "--output-format", "json",
                     "read the three files", cwd=buggy_repo,
                     env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": server.base_url})
        requests = list(server.requests)
    assert proc.returncode == 0, proc.stderr
    check_tool_pairing(requests)

    def result(request: int, call: str) -> str:
        for m in requests[request].body["messages"]:
            for b in m["content"] if isinstance(m["content"], list) else []:
                if b.get("type") == "tool_result" and b["tool_use_id"] == call:
                    c = b["content"]
                    return c if isinstance(c, str) else "".join(x.get("text", "") for x in c)
        raise AssertionError(f"no result for {call} in request {request}")

    assert "a.txt line 599" in result(1, "toolu_00Read")
    stub = result(2, "toolu_00Read")
    assert stub.startswith('[result of read_file {"path":"a.txt"} (call toolu_00Read') and "\n" not in stub
    assert "b.txt line 599" in result(2, "toolu_01Read")  # the most recent result is kept
    assert result(3, "toolu_00Read") == stub and "b.txt line 599" in result(3, "toolu_01Read")  # once, not per request
    session_id = json.loads(proc.stdout)["session_id"]
    events = _events(musec, session_id)
    cleared = [e for e in events if e["type"] == "tool_results_cleared"]
    assert len(cleared) == 1 and list(cleared[0]["where"]) == ["toolu_00Read"]
    kept = Path(cleared[0]["where"]["toolu_00Read"])
    assert kept.as_posix() in stub and "a.txt line 599" in kept.read_text()
    model_requests = [e for e in events if e["type"] == "model_request"]
    assert all(e["context_window_tokens"] == 200_000 and e["context_tokens"] > 0 for e in model_requests)
    # the estimate follows the clearing: the request sent is smaller than before it
    assert model_requests[2]["context_tokens"] < cleared[0]["tokens_before"] - 2_000
    assert musec.json("replay", session_id, "--json")["ok"]


def test_context_is_shown_in_stream_json_and_musec_agents(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [[{"tool": "read_file", "input": {"path": "pager.py"}}], [{"text": "read"}]]}))
    (musec.home / "config").mkdir(parents=True, exist_ok=True)
    (musec.home / "config" / "models.toml").write_text(f'[models."scripted:{script}"]\ncontext_window_tokens = 8000\n')
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "stream-json", "go",
                 cwd=buggy_repo)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    requests = [e for e in lines if e.get("type") == "model_request"]
    assert len(requests) == 2 and all(e["context_window_tokens"] == 8000 for e in requests)
    first, second = requests[0]["context_tokens"], requests[1]["context_tokens"]
    assert 0 < first < second  # the read's result was added (estimated: a script reports no usage)
    assert requests[1]["context_percent"] == round(100 * second / 8000, 1)
    sid = lines[-1].get("session_id") or next(e["session_id"] for e in lines if e.get("type") == "session_started")
    agents = {a["agent"]: a for a in musec.json("agents", sid, "--json")}
    assert agents["main"]["context_tokens"] == second and agents["main"]["context_window_tokens"] == 8000
    assert agents["main"]["context_percent"] == requests[1]["context_percent"]
    text = musec("agents", sid)
    assert f"({requests[1]['context_percent']:.0f}% of 8k)" in text.stdout
