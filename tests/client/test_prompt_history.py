"""The interactive client's prompt history keeps no key in clear (fresh-user finding 23:
a pasted API key was ``[REDACTED]`` in the session log but verbatim in ``prompt_history``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from musec.client.prompt import history_line, prompt_history
from musec.daemon.redaction import Redactor

_KEY = "sk-ant-api03-" + "AbCd1234" * 6
_OPENAI = "sk-proj-" + "Xy9" * 14
_PIECES = st.sampled_from([_KEY, _OPENAI, "my key is ", " ", "\n", "sk-", "task-scheduler-2", "é", "-"])


def test_a_pasted_key_is_redacted_in_the_history_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUSEC_HOME", str(tmp_path))
    monkeypatch.setenv("MY_SERVICE_TOKEN", "hunter2-is-not-a-key-shape")
    history = prompt_history()
    history.append_string(f"my key is {_KEY}, use it")
    history.append_string("and the token hunter2-is-not-a-key-shape too")
    history.append_string("fix the task-scheduler-2 bug")
    stored = (tmp_path / "state" / "prompt_history").read_text()
    assert _KEY not in stored and "hunter2-is-not-a-key-shape" not in stored
    assert "my key is [REDACTED], use it" in stored and "the token [REDACTED] too" in stored
    assert "task-scheduler-2" in stored  # no key shape: kept
    assert (tmp_path / "state" / "prompt_history").stat().st_mode & 0o777 == 0o600
    # A later client reads the redacted text back; no key.
    assert not any(_KEY in s for s in prompt_history().load_history_strings())


@settings(max_examples=200, deadline=None)
@given(text=st.lists(_PIECES | st.text(max_size=6), max_size=10).map("".join))
def test_the_history_redacts_key_shapes_as_the_session_log_does(text: str) -> None:
    # The same predicate (protocol.KEY_SHAPES): what the log hides, the history hides.
    logged = Redactor().text(text.replace("[REDACTED:", ""))
    assert history_line(text.replace("[REDACTED:", "")) == logged
