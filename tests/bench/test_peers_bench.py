"""The peers bench's own parts (``bench/peers_per_turn.py``): it skips a peer that is not
installed with one line, finds one that is, parses its options, and its instant model
answers each kind of agent as a run of that kind needs. The bench itself is not a test."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    return importlib.import_module("peers_per_turn")


def test_a_peer_not_installed_is_skipped_with_one_line(bench, tmp_path: Path) -> None:
    said: list[str] = []
    args = bench.parse_args(["--only", "musec,mini,aider"])
    kinds, peers = bench.contestants(args, {"PATH": str(tmp_path)}, say=said.append)
    assert kinds == ["musec"] and peers == {}
    assert said == ["mini-swe-agent not installed: pip install mini-swe-agent to compare",
                    "aider not installed: pip install aider-chat to compare"]


def test_a_peer_is_found_in_peers_bin_then_in_the_environment_then_on_path(bench, tmp_path: Path) -> None:
    for folder in ("a", "b", "c"):
        (tmp_path / folder).mkdir()
    mini = tmp_path / "b" / "mini"
    mini.write_text("#!/bin/sh\n")
    mini.chmod(0o755)
    aider = tmp_path / "c" / "aider"
    aider.write_text("#!/bin/sh\n")
    aider.chmod(0o755)
    (tmp_path / "a" / "mini").write_text("not executable")
    said: list[str] = []
    args = bench.parse_args(["--peers-bin", str(tmp_path / "a")])
    kinds, peers = bench.contestants(args, {"MUSEC_PEERS_BIN": str(tmp_path / "b"), "PATH": str(tmp_path / "c")},
                                     say=said.append)
    assert said == []
    assert kinds == ["musec", "musec-nosandbox", "mini", "aider"]
    assert peers == {"mini": mini, "aider": aider}


@pytest.mark.parametrize("argv", [["--turns", "2"], ["--only", "musec,claude"]])
def test_bad_options_are_usage_errors(bench, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        bench.parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert ("--turns must be at least 3" in err) if "--turns" in argv else ("unknown contestant claude" in err)


def test_the_instant_model_answers_each_kind_of_run(bench) -> None:
    assert bench.parse_model("openai/peerbench-musec-nosandbox-20-7") == ("musec-nosandbox", 20)
    with pytest.raises(ValueError):
        bench.parse_model("gpt-5")
    answer = bench.InstantModel.answer
    for kind in ("musec", "mini"):
        text, calls = answer(kind, 2, 2)
        assert [json.loads(c["arguments"]) for c in calls] == [{"command": "true"}]
    assert answer("musec", 2, 3) == ("done", [])
    assert json.loads(answer("mini", 2, 3)[1][0]["arguments"]) == {"command": bench.SUBMIT}
    assert answer("aider", 2, 2) == ("note.txt\n```\nturn 2\n```\n", [])
    assert [bench.InstantModel.expected(k, 5) for k in ("musec", "mini", "aider")] == [6, 6, 5]


def test_per_turn_leaves_the_first_gap_out(bench) -> None:
    assert bench.per_turn_ms([0.0, 5.0, 5.010, 5.030]) == pytest.approx(15.0)
