"""The approval question says what "always" would save before the person answers, and the
answer's line says what it saved (fresh-user finding 1)."""

from __future__ import annotations

import io

import pytest
from musec.client.approvals import ask_approval
from musec.client.render import Renderer


def _ask(ev: dict, answer: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(answer + "\n"))
    decision = ask_approval(ev)
    return str(decision), capsys.readouterr().out


def test_the_question_names_the_rule_always_saves(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    ev = {"type": "approval_requested", "call_id": "c1", "tool": "bash", "input": {"command": "rm -rf build"},
          "source": "mode", "always": ["bash(rm -rf build)"]}
    decision, shown = _ask(ev, "a", monkeypatch, capsys)
    assert decision == "always"
    assert "[a]lways saves the allow rule bash(rm -rf build)" in shown
    assert shown.index("bash(rm -rf build)") < shown.index("[y]es")  # before the answer


def test_the_question_says_when_always_saves_nothing(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    ev = {"type": "approval_requested", "call_id": "c1", "tool": "bash", "input": {"command": "rm -rf $B"},
          "source": "mode", "always": []}
    _, shown = _ask(ev, "n", monkeypatch, capsys)
    assert "[a]lways allows this call only" in shown
    # An event from an older daemon (no field) is asked as before, without the line.
    _, shown = _ask({**ev, "always": None}, "n", monkeypatch, capsys)
    assert "[a]lways saves" not in shown and "[a]lways allows" not in shown


def test_a_workers_question_names_the_worker(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """Two workers asking the same command were told apart only by the line before (s8 J12)."""
    ev = {"type": "approval_requested", "call_id": "c1", "agent": "worker:w1", "tool": "bash",
          "input": {"command": "echo hi > wfile.txt"}, "source": "mode"}
    _, shown = _ask(ev, "n", monkeypatch, capsys)
    assert "Allow bash(echo hi > wfile.txt) for worker w1? [y]es" in shown, shown
    _, shown = _ask({**ev, "agent": "main"}, "n", monkeypatch, capsys)
    assert "for worker" not in shown and "Allow bash(echo hi > wfile.txt)? [y]es" in shown, shown


def test_the_answer_line_names_the_saved_rules() -> None:
    words = Renderer(io.StringIO()).resolved_words(
        {"type": "approval_resolved", "call_id": "c1", "decision": "always", "by": "person",
         "saved_rules": ["bash(rm -rf build)"]})
    assert words == "approval: always allowed by the person (saved bash(rm -rf build))"


def test_the_answer_line_never_says_saved_when_nothing_was_saved() -> None:
    # fresh-user trial s7: config.toml broken while the question was up; the terminal said
    # "(saved bash(ls *))" and the save_error in the event was shown nowhere
    ev = {"type": "approval_resolved", "call_id": "c1", "decision": "always", "by": "person",
          "saved_rules": ["bash(ls *)"], "saved_to": "",
          "save_error": "/h/config.toml is not valid TOML (line 1); fix it or move it away"}
    words = Renderer(io.StringIO()).resolved_words(ev)
    assert "saved bash" not in words and "not saved: /h/config.toml is not valid TOML" in words
    assert "for this session only" in words
    words = Renderer(io.StringIO()).resolved_words({**ev, "save_error": None, "saved_to": ""})
    assert words == "approval: always allowed by the person (bash(ls *) for this session only)"
    words = Renderer(io.StringIO()).resolved_words({**ev, "save_error": None, "saved_to": "/h/config.toml"})
    assert words == "approval: always allowed by the person (saved bash(ls *))"
