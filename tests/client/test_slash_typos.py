"""A mistyped slash command (fresh-user s8 K11): ``/compcat keep notes`` was sent to the
model as a message (a paid turn that may act) while a bare ``/exti`` was refused. Any
``/NAME`` that is no command, skill or custom command is refused the same way, with the
nearest name; a line that starts with a path is a message."""

from __future__ import annotations

import pytest
from musec.client.slash import Context, run_command
from musec.client.status import SessionStatus


def _ctx(names: set[str]) -> Context:
    # the connection is never used by a refusal or a line that is sent
    return Context(conn=None, session_id="s", status=SessionStatus(), workspace="/tmp", names=names)  # type: ignore[arg-type]


@pytest.mark.parametrize(("line", "said"), [
    ("/compcat keep the api notes", "unknown command /compcat; did you mean /compact?"),
    ("/exti", "unknown command /exti; did you mean /exit?"),
    ("/gaol make the tests pass", "unknown command /gaol; did you mean /goal?"),
    ("/greeet the team", "unknown command /greeet; did you mean /greet?"),
    ("/nosuch foo", "unknown command /nosuch; /help lists the commands"),
])
def test_an_unknown_command_is_refused_with_or_without_arguments(line: str, said: str, capsys: pytest.CaptureFixture[str]) -> None:
    outcome = run_command(line, _ctx({"greet", "hi"}))
    assert outcome.action == "stay"
    assert capsys.readouterr().out.strip() == said


@pytest.mark.parametrize("line", ["/usr/bin/foo is broken", "/etc/hosts: what is in it?", "/greet the team", "/hi"])
def test_a_path_a_skill_and_a_custom_command_go_to_the_session(line: str, capsys: pytest.CaptureFixture[str]) -> None:
    outcome = run_command(line, _ctx({"greet", "hi"}))
    assert (outcome.action, outcome.text) == ("send", line)
    assert capsys.readouterr().out == ""
