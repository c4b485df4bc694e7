"""``@path`` mentions attach the file's content (issue 18 item 4), end to end: the real CLI
and daemon, a real local Anthropic-format server that records each request, real files.

The daemon reads each mentioned file once, under the read rules, when it records the
person's message; the ``user_message`` event keeps what it read, so the model sees the file
in that very request, a replay of the log is exact, and a resume after the file changed
sends the history with the content it had (the file is not read again). A key-shaped text
in the file reaches the model as it is and is stored redacted.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Musec
from tests.support.anthropic_server import AnthropicServer, message

KEY = "sk-ant-" + "test-0000-attached-secret"  # key-shaped on purpose: the log must not hold it
MODEL = "anthropic/claude-sonnet-4-6"


def _user_texts(body: dict, index: int = 0) -> list[str]:
    content = body["messages"][index]["content"]
    return [b["text"] for b in content if b.get("type") == "text"] if isinstance(content, list) else [content]


def _events(musec: Musec, sid: str) -> list[dict]:
    return [json.loads(line) for line in musec("log", sid, "--json").stdout.splitlines()]


def test_a_mentioned_file_is_in_the_request_and_a_denied_one_is_not(musec: Musec, buggy_repo: Path) -> None:
    config = musec.home / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[permissions]\ndeny = ["read(secrets.env)"]\n')
    (buggy_repo / "secrets.env").write_text("PASSWORD=hunter2-do-not-send\n")
    (buggy_repo / "my notes.txt").write_text(f"remember the key {KEY}\n")
    original = (buggy_repo / "pager.py").read_text()
    with AnthropicServer() as server:
        server.enqueue(message([{"type": "text", "text": "It pages from 0."}]),
                       message([{"type": "text", "text": "Still the same file."}]))
        env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": server.base_url}
        run = musec("run", "--model", MODEL, "--approval", "auto",
                    'explain @pager.py with @"my notes.txt", not @secrets.env or mail@example.com', cwd=buggy_repo, env=env)
        assert run.returncode == 0, run.stdout + run.stderr
        # The person is told what was attached (path and size, never the content) and why not.
        assert f"⎘ @pager.py attached ({len(original.encode())} bytes)" in run.stdout
        assert "⎘ @secrets.env not attached: the user rule deny read(secrets.env) forbids reading it" in run.stdout
        assert "start = number * size" not in run.stdout and "mail@example.com not attached" not in run.stdout

        # The model got the message, then one block per attached file, in that very request.
        texts = _user_texts(server.requests[0].body)
        assert texts[0].startswith("explain @pager.py") and len(texts) == 3
        assert 'source="attached file pager.py (' in texts[1] and original in texts[1]
        assert 'source="attached file my notes.txt (' in texts[2] and KEY in texts[2]  # the exact bytes
        assert "hunter2" not in json.dumps(server.requests[0].body)

        sid = musec.json("sessions", "--workspace", str(buggy_repo), "--json")[0]["id"]
        log = musec.home / "state" / "sessions" / f"{sid}.jsonl"
        assert KEY.encode() not in log.read_bytes() and b"[REDACTED:ANTHROPIC_API_KEY]" in log.read_bytes()
        [said] = [e for e in _events(musec, sid) if e["type"] == "user_message"]
        assert [(a["path"], a.get("kind", "file")) for a in said["attachments"]] == [
            ("pager.py", "file"), ("my notes.txt", "file"), ("secrets.env", "refused")]
        assert json.loads(musec("replay", sid, "--json").stdout)["ok"]

        # The file changes after the turn; a resume sends the history with what was attached.
        (buggy_repo / "pager.py").write_text("CHANGED AFTER THE TURN\n")
        again = musec("run", "--resume", sid, "and now?", cwd=buggy_repo, env=env)
        assert again.returncode == 0, again.stdout + again.stderr
        assert _user_texts(server.requests[1].body) == texts  # byte for byte, the key filled in again
        assert "CHANGED AFTER THE TURN" not in json.dumps(server.requests[1].body)
    replay = json.loads(musec("replay", sid, "--json").stdout)
    assert replay["ok"] and replay["model_requests"] == 2, replay


def test_a_headless_run_with_only_a_missing_mention_still_runs(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [[{"text": "Nothing was attached."}]]}))
    run = musec("run", "--model", f"scripted:{script}", "--output-format", "stream-json", "look at @nope.py", cwd=buggy_repo)
    assert run.returncode == 0, run.stdout + run.stderr
    said = next(json.loads(line) for line in run.stdout.splitlines() if json.loads(line).get("type") == "user_message")
    assert said["text"] == "look at @nope.py"
    assert said["attachments"] == [{"path": "nope.py", "kind": "refused", "refused": "no such file or directory"}]


def test_another_terminal_sees_the_attachment_not_its_content(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [[{"text": "Seen."}]]}))
    run = musec("run", "--model", f"scripted:{script}", "--output-format", "json", "explain @pager.py", cwd=buggy_repo)
    assert run.returncode == 0, run.stdout + run.stderr
    sid = json.loads(run.stdout)["session_id"]
    attached = musec("attach", sid, cwd=buggy_repo)  # a session that is not live: its log, as a terminal shows it
    size = (buggy_repo / "pager.py").stat().st_size
    assert f"⎘ @pager.py attached ({size} bytes)" in attached.stdout, attached.stdout + attached.stderr
    assert "start = number * size" not in attached.stdout
