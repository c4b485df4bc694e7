"""One exit-code table (DESIGN §3): each set of conditions is covered, and commands that
fail the same way exit the same way."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from musec.client import exitcodes
from musec.client.exitcodes import Condition, Exit
from musec.daemon import protocol as p

from tests.conftest import REPO_ROOT, Musec


def test_every_exit_reason_has_a_code() -> None:
    assert set(exitcodes.FOR_REASON) == set(typing.get_args(p.ExitReason))


def test_every_error_code_has_a_code() -> None:
    assert set(exitcodes.FOR_ERROR) == set(typing.get_args(p.ErrorCode))


def test_every_condition_has_a_code() -> None:
    assert set(exitcodes.FOR_CONDITION) == set(Condition)


def _subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    return found.union(*(_subclasses(c) for c in found)) if found else found


def test_every_code_the_daemon_sends_is_on_the_wire_list() -> None:
    import musec.daemon.agent_setup  # noqa: F401 - defines TrustRequired
    import musec.daemon.server  # noqa: F401
    from musec.daemon.errors import DaemonError

    codes = {c.code for c in _subclasses(DaemonError) | {DaemonError}}
    for path in (REPO_ROOT / "daemon").rglob("*.py"):
        codes |= set(re.findall(r'\bcode="([a-z_]+)"', path.read_text()))
    assert codes <= set(typing.get_args(p.ErrorCode)), codes - set(typing.get_args(p.ErrorCode))


def test_the_codes_are_the_contract() -> None:
    assert [int(e) for e in Exit] == [0, 1, 2, 3, 4, 5, 129, 130, 143]
    assert exitcodes.for_reason("finished") == 0 and exitcodes.for_reason("needs_approval") == 3
    assert exitcodes.for_reason("a reason from the future") == Exit.GOAL_UNMET


def test_an_unknown_session_is_a_usage_error_everywhere(musec: Musec, buggy_repo: Path) -> None:
    for args in (("log", "nope"), ("log", "verify", "nope"), ("run", "--resume", "nope", "more"),
                 ("cost", "nope"), ("agents", "nope"), ("workers", "nope"), ("replay", "nope"),
                 ("attach", "nope")):
        proc = musec(*args, cwd=buggy_repo)
        assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
        assert "no session 'nope'" in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, (args, proc.stderr)


def test_no_daemon_is_unreachable(musec: Musec) -> None:
    proc = musec("daemon", "status")
    assert proc.returncode == 5 and "not running" in proc.stdout
    proc = musec("daemon", "status", "--json")
    assert proc.returncode == 5 and '"running": false' in proc.stdout


def test_nothing_to_resume_is_a_usage_error(musec: Musec, buggy_repo: Path) -> None:
    proc = musec("resume", "--last", cwd=buggy_repo)
    assert proc.returncode == 2 and "no session to resume" in proc.stderr
