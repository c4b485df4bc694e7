"""The interactive client's parts without a terminal: what an approval shows, the status
line's fold, who answered in words, ``@path`` mentions."""

from __future__ import annotations

import io

from musec.client.approvals import describe_call
from musec.client.prompt import mention
from musec.client.render import Renderer, log_line_summary
from musec.client.status import SessionStatus
from musec.daemon.protocol import ModelInfo


def test_a_multi_line_command_is_shown_line_by_line_not_joined() -> None:
    head, lines = describe_call({"tool": "bash", "input": {"command": "git status\nrm -rf ~/x"}})
    assert head == "bash with this command (2 lines)" and lines == ["git status", "rm -rf ~/x"]
    long = "echo " + "y" * 200
    assert describe_call({"tool": "bash", "input": {"command": long}})[1] == [long]
    assert describe_call({"tool": "bash", "input": {"command": "ls"}}) == ("bash(ls)", [])
    # Control characters are removed, never passed to the terminal.
    assert describe_call({"tool": "bash", "input": {"command": "ls\x1b]0;x\x07"}})[1] == ["ls]0;x"]


def test_the_status_line_folds_usage_cost_and_workers() -> None:
    status = SessionStatus("anthropic/claude-sonnet-4-6", "ask")
    status.learn_catalog([ModelInfo(id="anthropic/claude-sonnet-4-6", provider="anthropic", context_window_tokens=200_000)])
    assert "ctx 0% of 200k" in status.text()
    status.fold({"type": "model_response", "agent": "main", "cost_usd": 0.5,
                 "usage": {"input_tokens": 40_000, "output_tokens": 10_000}})
    status.fold({"type": "model_response", "agent": "scout", "cost_usd": 0.25, "usage": {"input_tokens": 190_000}})
    status.fold({"type": "worker_spawned", "worker": "a"})
    assert status.text() == "anthropic/claude-sonnet-4-6 · ctx 25% of 200k · $0.7500 · workers: 1 live · approval ask"
    status.fold({"type": "worker_finished", "worker": "a"})
    assert "workers" not in status.text()
    assert SessionStatus("openai-compat/x").context_text() == "ctx 0 tokens"
    # a compaction's summarising call costs like any call (as `/cost` and `musec cost` count it)
    status.fold({"type": "compaction_finished", "agent": "main", "cost_usd": 0.125, "tokens_after": 1000})
    assert "$0.8750" in status.text()


def test_the_status_line_takes_the_context_of_each_request_and_a_model_switch() -> None:
    status = SessionStatus("scripted:/x/s.json", "auto")
    status.fold({"type": "model_request", "agent": "main", "context_tokens": 3_000, "context_window_tokens": 100_000})
    assert "ctx 3% of 100k" in status.text()
    status.fold({"type": "model_response", "agent": "main", "usage": {"input_tokens": 0}})  # no report: kept
    status.fold({"type": "model_request", "agent": "worker:a", "context_tokens": 90_000, "context_window_tokens": 100_000})
    assert "ctx 3% of 100k" in status.text()
    status.fold({"type": "model_switched", "agent": "main", "model": "openai/gpt-5", "context_tokens": 3_500,
                 "context_window_tokens": 400_000})
    assert status.text().startswith("openai/gpt-5 · ctx 1% of 400k")


def test_who_answered_is_said_in_words() -> None:
    r = Renderer(io.StringIO(), color=False)
    r.answered.add("c1")
    r.event({"type": "approval_resolved", "call_id": "c1", "decision": "allow", "by": "client:abc123"})
    r.event({"type": "approval_resolved", "call_id": "c2", "decision": "deny", "by": "client:def456"})
    text = r.out.getvalue()
    assert "approval: allowed by you" in text and "approval: denied in another terminal" in text
    assert "client:" not in text


def test_an_attachment_is_shown_by_path_and_size_never_its_content() -> None:
    r = Renderer(io.StringIO(), color=False)
    r.event({"type": "user_message", "text": "explain @a.py @b.bin @src @.env", "attachments": [
        {"path": "a.py", "size_bytes": 2048, "content": "SECRET_CONTENT = 1\n"},
        {"path": "b.bin", "kind": "binary", "size_bytes": 12, "content": "(b.bin is a binary file ...)"},
        {"path": "src/", "kind": "directory", "content": "src/x.py\n"},
        {"path": ".env", "kind": "refused", "refused": "the user rule deny read(.env) forbids reading it"},
        {"path": "huge.log", "size_bytes": 90 * 2**20, "content": "head\n[...]\ntail\n", "partial": True}]})
    lines = [ln.strip() for ln in r.out.getvalue().splitlines()]
    assert lines == ["⎘ @a.py attached (2.0 KiB)", "⎘ @b.bin attached (12 bytes, binary: not inlined)",
                     "⎘ @src/ attached (directory listing)",
                     "⎘ @.env not attached: the user rule deny read(.env) forbids reading it",
                     "⎘ @huge.log attached (90.0 MiB; its head and tail only: over the budget)"]
    r.event({"type": "user_message", "text": "no mention"})  # nothing shown for a plain message
    assert "SECRET_CONTENT" not in r.out.getvalue() and len(r.out.getvalue().splitlines()) == 5


def test_a_completed_path_is_quoted_when_it_holds_a_space() -> None:
    assert mention("src/x.py") == "@src/x.py"
    assert mention("my notes.txt") == '@"my notes.txt"'
    assert mention("my docs/") == '@"my docs/'  # a folder's quote stays open for the next part
    assert mention("ends.") == '@"ends."'  # a bare trailing dot would be read as the sentence's


def test_what_musec_told_another_agent_is_never_shown_as_the_persons_message() -> None:
    # F15 (fresh-user trial s5): a worker's task and the goal evaluator's prompt were shown
    # under the person's `›`, as if the person had typed them (live, attach, resume, log).
    r = Renderer(io.StringIO(), color=False)
    r.messages = True
    r.event({"type": "user_message", "agent": "main", "text": "fix the pager"}, backlog=True)
    r.event({"type": "user_message", "agent": "worker:a", "text": "Change pager.py only.\nRun the tests."})
    r.event({"type": "user_message", "agent": "evaluator", "text": "\n\n".join(f"evidence {i}" for i in range(9))},
            backlog=True)
    lines = r.out.getvalue().splitlines()
    assert [ln for ln in lines if ln.startswith("›")] == ["› fix the pager"]
    assert "[worker:a] musec's instructions: Change pager.py only." in lines and "[worker:a]   Run the tests." in lines
    assert "[evaluator] musec's instructions: evidence 0" in lines
    assert "[evaluator]   evidence 2 … 6 more lines" in lines and not any("evidence 3" in ln for ln in lines)
    # `musec log ID` says whose words they are too
    assert "musec's instructions: Change pager.py only." in log_line_summary(
        {"type": "user_message", "agent": "worker:a", "text": "Change pager.py only.", "seq": 4, "ts": 0})
    assert "musec's" not in log_line_summary({"type": "user_message", "agent": "main", "text": "fix it", "seq": 1, "ts": 0})


def test_a_plans_answer_says_what_the_person_chose_not_allowed_or_denied() -> None:
    # F19 (fresh-user trial s5): keeping planning (k) or grilling (g) was reported as "denied by you"
    r = Renderer(io.StringIO(), color=False)
    r.answered.update({"plan-1", "grill-1"})
    said = [r.resolved_words({"type": "approval_resolved", **ev}) for ev in (
        {"call_id": "plan-1", "decision": "deny", "by": "client:a", "plan_action": "feedback"},
        {"call_id": "plan-2", "decision": "deny", "by": "client:b", "plan_action": "grill"},
        {"call_id": "plan-3", "decision": "deny", "by": "client:b"},  # a log older than plan_action
        {"call_id": "plan-4", "decision": "allow", "by": "client:b", "plan_action": "approve_auto"},
        {"call_id": "grill-1", "decision": "allow", "by": "client:a"},
        {"call_id": "grill-2", "decision": "deny", "by": "client:b"},
    )]
    assert said == ["plan: not approved yet: keep planning, with feedback (answered by you)",
                    "plan: not approved yet: grill it first (answered in another terminal)",
                    "plan: not approved yet (answered in another terminal)",
                    "plan: approved, with auto edits (answered in another terminal)",
                    "grill: answered by you", "grill: ended in another terminal"]


def test_plan_feedback_is_shown_as_the_persons_words_without_musecs_wrapping() -> None:
    # F15, the rest of the kind: musec's "[the person did not approve the plan...]" came under the person's `›`
    r = Renderer(io.StringIO(), color=False)
    r.messages = True
    r.event({"type": "user_message", "agent": "main",
             "text": "[the person did not approve the plan; keep planning] check the docs too"}, backlog=True)
    assert r.out.getvalue().splitlines() == ["› check the docs too  (your feedback on the plan)"]


def test_a_retry_says_streamed_text_is_dropped_only_where_it_was_shown() -> None:
    # fresh-user s8 J12: `musec run` into a pipe shows no partial text, so nothing "above" is dropped.
    retry = {"type": "model_retry", "agent": "main", "attempt": 1, "max_attempts": 4, "delay_s": 0.5,
             "error": "the stream ended before finish_reason", "discarded_output_chars": 120}
    piped = Renderer(io.StringIO(), color=False)
    piped.delta("partial answer")
    piped.event(retry)
    assert "partial answer" not in piped.out.getvalue() and "retrying the model call (1/4)" in piped.out.getvalue()
    assert "dropped" not in piped.out.getvalue()
    live = Renderer(io.StringIO(), color=False)
    live.live_text = True  # a terminal: the text streams as it comes
    live.delta("partial answer")
    live.event(retry)
    assert "partial answer" in live.out.getvalue() and "(the text streamed above is dropped)" in live.out.getvalue()
