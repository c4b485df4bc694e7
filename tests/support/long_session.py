"""A long scripted session against the local provider servers (issue 12's done means and bench).

``Script`` is the model behind ``AnthropicServer``/``OpenAIServer`` (their ``respond``):
one ``read_file`` of 8 KiB after another, split evenly over the person's messages
(``PEOPLE``), and a summary for each summarising call (recognised by
``compaction.SUMMARY_MARK``). It checks every request as the server sees it: the task and
every later person's message are there verbatim, every tool call is answered, roles
alternate (failures collected in ``Script.failures``). ``run_long_session`` drives the real
``musec`` CLI through it: the task, then each later message with ``musec run --resume``.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from musec.agents.compaction import SUMMARY_MARK

from tests.support.anthropic_server import (
    Answer,
    AnthropicServer,
    RecordedRequest,
    check_tool_pairing,
    message,
)
from tests.support.openai_server import OpenAIServer, check_responses_pairing, responses_stream

__all__ = ["PEOPLE", "key", "PROVIDERS", "RESULT_BYTES", "Script", "check_long_session", "events", "run_long_session", "workspace",
           "write_catalog"]

RESULT_BYTES = 8 * 1024
PEOPLE = [
    "TASK-0: read chunk.txt once per step until told to stop; keep count of the reads.",
    "MESSAGE-1: go on reading, and also note the first line of each read.",
    "MESSAGE-2: go on reading; the count matters more than the notes now.",
    "MESSAGE-3: finish the reads, then say how many you made.",
]


def key(name: str) -> str:
    return "sk-" + f"e2e-{name}-NeverReal-0123456789abcdef"  # fake; no key-shaped literal committed


@dataclass
class Script:
    """The model behind the server: ``calls`` tool calls split evenly over the person's
    messages, a summary for each summarising call, and the checks of every request."""

    calls: int
    provider: str  # "anthropic" or "openai"
    phases: int = len(PEOPLE)  # the person's messages the calls are split over
    made: int = 0
    summaries: int = 0
    spoken: int = 1  # person's messages sent so far
    failures: list[str] = field(default_factory=list)
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def phase_end(self) -> int:
        return self.calls * self.spoken // self.phases

    def __call__(self, request: RecordedRequest, tokens: int, cached: int) -> Answer:
        with self.lock:
            self.requests += 1
            self._check(request)
            usage = {"input_tokens": tokens - cached, "cached": cached}
            if self._asks_summary(request):
                self.summaries += 1
                text = (f"## Goal and plan\nRead chunk.txt repeatedly; {self.made} reads so far.\n"
                        f"## Now and next\nNext: read {self.made + 1}.")
                return self._text(text, usage)
            if self.made >= self.phase_end():
                return self._text(f"Stopped after {self.made} reads.", usage)
            self.made += 1
            return self._call(f"call_{self.made:05d}", usage)

    def _asks_summary(self, request: RecordedRequest) -> bool:
        return SUMMARY_MARK in request.raw_body.decode()

    def _check(self, request: RecordedRequest) -> None:
        raw = request.raw_body.decode()
        for text in PEOPLE[: self.spoken]:
            if json.dumps(text)[1:-1] not in raw:
                self.failures.append(f"request {self.requests}: person's message {text[:12]!r} is missing")
        try:
            (check_tool_pairing if self.provider == "anthropic" else check_responses_pairing)([request])
        except AssertionError as exc:
            self.failures.append(f"request {self.requests}: {exc}")

    def _text(self, text: str, usage: dict[str, int]) -> Answer:
        if self.provider == "anthropic":
            return message([{"type": "text", "text": text}], input_tokens=usage["input_tokens"],
                           cache_read_tokens=usage["cached"], output_tokens=len(text) // 4)
        return responses_stream([{"type": "message", "text": text}], input_tokens=usage["input_tokens"] + usage["cached"],
                                cached_tokens=usage["cached"], output_tokens=len(text) // 4)

    def _call(self, call_id: str, usage: dict[str, int]) -> Answer:
        args = {"path": "chunk.txt"}
        if self.provider == "anthropic":
            return message([{"type": "tool_use", "id": call_id, "name": "read_file", "input": args}],
                           input_tokens=usage["input_tokens"], cache_read_tokens=usage["cached"], output_tokens=20)
        return responses_stream([{"type": "function_call", "call_id": call_id, "name": "read_file",
                                  "arguments": json.dumps(args)}],
                                input_tokens=usage["input_tokens"] + usage["cached"], cached_tokens=usage["cached"],
                                output_tokens=20)


PROVIDERS: dict[str, Any] = {
    "anthropic": ("anthropic/claude-window", AnthropicServer,
                  lambda s, k: {"ANTHROPIC_API_KEY": k, "ANTHROPIC_BASE_URL": s.base_url}),
    "openai": ("openai/gpt-window", OpenAIServer,
               lambda s, k: {"OPENAI_API_KEY": k, "OPENAI_BASE_URL": s.base_url}),
}


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    line = "0123456789abcdef" * 4 + "\n"
    (ws / "chunk.txt").write_text(line * (RESULT_BYTES // len(line)))
    return ws


def write_catalog(musec: Any, model: str, window: int) -> None:
    config = musec.home / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "models.toml").write_text(f'[models."{model}"]\ncontext_window_tokens = {window}\n')
    # Compaction itself: old tool results are not cleared first (the cheaper step, which
    # would keep a session of reads under the threshold for long).
    (config / "config.toml").write_text("[context]\nclear_at = 0\n")


def events(musec: Any, sid: str) -> list[dict]:
    proc = musec("log", sid, "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def run_long_session(musec: Any, tmp_path: Path, provider: str, *, calls: int, window: int) -> tuple[Script, Any, str]:
    model, server_class, credentials = PROVIDERS[provider]
    ws = workspace(tmp_path)
    write_catalog(musec, model, window)
    script = Script(calls=calls, provider=provider)
    env = None
    with server_class(window_tokens=window, keep_bodies=False, respond=script) as server:
        env = credentials(server, key(provider))
        first = musec("run", "--model", model, "--approval", "auto", "--max-turns", str(calls + 10),
                      "--output-format", "json", PEOPLE[0], cwd=ws, env=env, timeout=900)
        assert first.returncode == 0, first.stdout + first.stderr
        sid = json.loads(first.stdout)["session_id"]
        for text in PEOPLE[1:]:
            script.spoken += 1
            proc = musec("run", "--resume", sid, "--output-format", "json", text, cwd=ws, env=env, timeout=900)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            assert json.loads(proc.stdout)["exit_reason"] == "finished"
    assert not server.errors, server.errors
    return script, server, sid


def check_long_session(musec: Any, script: Script, server: Any, sid: str, calls: int, *, lost_summaries: int = 0) -> list[dict]:
    """The checks of a finished long session (``lost_summaries``: summarising calls whose
    result a crash lost, so they were made again)."""
    assert script.failures == [], script.failures[:5]
    assert server.refused == 0, f"{server.refused} requests were over the window"
    assert script.made == calls
    assert script.summaries >= 1
    log = events(musec, sid)
    finished = [e for e in log if e["type"] == "compaction_finished"]
    assert len(finished) == script.summaries - lost_summaries
    assert all(e["tokens_after"] < e["tokens_before"] for e in finished)
    calls_made = [b["id"] for e in log if e["type"] == "model_response" for b in e["content"] if b["type"] == "tool_call"]
    answered = [e["call_id"] for e in log if e["type"] in ("tool_finished", "tool_interrupted")]
    assert sorted(calls_made) == sorted(answered) and len(calls_made) == calls
    replay = json.loads(musec("replay", sid, "--json", timeout=600).stdout)
    assert replay["ok"], replay["problems"][:3]
    assert replay["model_requests"] == sum(1 for e in log if e["type"] == "model_request")
    assert musec("log", "verify", sid, timeout=300).returncode == 0
    return log


