"""Redaction is for what is stored and shown, never for what runs (issue 13 case 1).

With ``ANTHROPIC_API_KEY`` set for the client, a model that writes the key into a file
and pipes it through a command gets exactly those bytes on disk and in the command, and
sees the exact results; the log holds ``[REDACTED:ANTHROPIC_API_KEY]`` instead; a resume
that brings the key sends the model the very history it had (the placeholders filled in
again), and the log replays.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Musec
from tests.support.anthropic_server import AnthropicServer, check_tool_pairing, message

KEY = "sk-ant-" + "test-0000-live-secret-value"  # key-shaped on purpose (issue 13 case 1)
MODEL = "anthropic/claude-sonnet-4-6"


def _tool(call_id: str, name: str, input: dict) -> object:
    return message([{"type": "tool_use", "id": call_id, "name": name, "input": input}])


def _history(body: dict) -> list:
    """A request's messages without the cache breakpoints (they move to the newest message)."""
    def strip(value: object) -> object:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "cache_control"}
        return [strip(v) for v in value] if isinstance(value, list) else value

    return strip(body["messages"])  # type: ignore[return-value]


def test_the_key_is_written_and_run_exactly_and_stored_redacted(musec: Musec, buggy_repo: Path) -> None:
    with AnthropicServer() as server:
        server.enqueue(
            _tool("toolu_w", "write_file", {"path": "conf.py", "content": f"TOKEN = '{KEY}'\n"}),
            _tool("toolu_b", "bash", {"command": f"printf %s {KEY} | wc -c; grep -c {KEY} conf.py"}),
            _tool("toolu_r", "read_file", {"path": "conf.py"}),
            message([{"type": "text", "text": "done"}]),
            message([{"type": "text", "text": "still here"}]),
        )
        env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": server.base_url}
        first = musec("run", "--model", MODEL, "--approval", "auto", "--output-format", "json", "go",
                      cwd=buggy_repo, env=env)
        assert first.returncode == 0, first.stdout + first.stderr
        sid = json.loads(first.stdout)["session_id"]
        assert (buggy_repo / "conf.py").read_text() == f"TOKEN = '{KEY}'\n"  # the bytes the model sent
        # The command ran with the key (34 characters, found once in the file), and the
        # model saw the exact result.
        result = server.requests[2].body["messages"][-1]["content"][0]
        assert result["tool_use_id"] == "toolu_b" and "\n34\n1\n" in result["content"], result

        log = musec.home / "state" / "sessions" / f"{sid}.jsonl"
        data = log.read_bytes()
        assert KEY.encode() not in data and b"[REDACTED:ANTHROPIC_API_KEY]" in data
        assert musec("log", "verify", sid).returncode == 0
        assert json.loads(musec("replay", sid, "--json").stdout)["ok"]

        # A resume that brings the key: the model gets the history it had, byte for byte.
        again = musec("run", "--resume", sid, "--output-format", "json", "and now?", cwd=buggy_repo, env=env)
        assert again.returncode == 0, again.stdout + again.stderr
        assert KEY in server.requests[3].body["messages"][-1]["content"][0]["content"]  # read back exactly
        before, after = _history(server.requests[3].body), _history(server.requests[4].body)
        assert after[: len(before)] == before
        assert KEY in json.dumps(after[1])  # the write_file call, filled in again
        check_tool_pairing(server.requests)
    assert KEY.encode() not in log.read_bytes()
    replay = json.loads(musec("replay", sid, "--json").stdout)
    assert replay["ok"] and replay["model_requests"] == 5 and replay["redacted_requests"] == 0, replay


def test_a_big_output_holding_the_key_is_stored_redacted(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    # Outputs over 64 KiB go to blobs beside the log: they are stored, so redacted too
    # (the musec fixture checks that no file under MUSEC_HOME holds the key).
    (buggy_repo / "key.txt").write_text(KEY + "\n")
    command = "head -c 70000 /dev/zero | tr '\\0' a; echo; cat key.txt"
    script = tmp_path / "big.json"
    script.write_text(json.dumps({"turns": [[{"tool": "bash", "input": {"command": command}}],
                                            [{"expect_result": KEY}, {"text": "done"}]]}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json", "go",
                 cwd=buggy_repo, env={"ANTHROPIC_API_KEY": KEY})
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the model read the key in the output's tail
    blobs = [p for p in (musec.home / "state" / "blobs").rglob("*") if p.is_file()]
    assert blobs and all(KEY.encode() not in p.read_bytes() for p in blobs)
    assert any(b"[REDACTED:ANTHROPIC_API_KEY]" in p.read_bytes() for p in blobs)
