"""A campaign without a session: leaderboard fold, a commit per improvement, CSV and PNG, resume."""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import pygit2
import pytest
from musec.agents.kernel_opt.campaign import Campaign, JsonlSink, summary
from musec.agents.kernel_opt.evaluate import Evaluation, ShapeResult
from musec.agents.kernel_opt.keep import branch_name
from musec.agents.kernel_opt.leaderboard import Leaderboard
from musec.agents.kernel_opt.spec import load_spec

from tests.agents.kernel_opt.candidates import git


def scripted_evaluator(results):
    """An evaluator with the real signature that returns prepared results in order."""
    results = list(results)

    def evaluate(spec, workspace, path, *, tool_calls=0):
        src = (workspace / path).read_text()
        status, speedup = results.pop(0)
        sha = hashlib.sha256(src.encode()).hexdigest()
        shapes = [ShapeResult(shape={"n": 1}, dtype="float32", ok=status == "correct")]
        timed = {"timing": "wall_clock", "candidate_us": 10 / speedup, "baseline_us": 10.0, "speedup": speedup} if speedup else {}
        return Evaluation(path, sha, status, None if status == "correct" else "check failed", shapes,
                          tool_calls=tool_calls, **timed)

    return evaluate


def test_board_keeps_best_commits_improvements_and_survives_a_resume(repo, tmp_path):
    spec = load_spec("cpu-example")
    sink = JsonlSink(tmp_path / "state" / "evaluations.jsonl")
    results = [("correct", 1.5), ("incorrect", None), ("correct", 3.0), ("correct", 2.0), ("refused", None), ("correct", 4.5)]
    camp = Campaign(spec, repo, tmp_path / "out", sink=sink, evaluator=scripted_evaluator(results))
    cand = camp.prepare()
    assert cand.read_text() == (Path(spec.spec_dir) / "start.py").read_text()
    commits = []
    for i in range(4):
        cand.write_text(f"# version {i}\n")
        e = camp.evaluate(tool_calls=10 * (i + 1))
        commits.append(e.commit)
    assert [c is not None for c in commits] == [True, False, True, False]
    assert camp.board.best.n == 3 and camp.board.best.evaluation.speedup == 3.0
    # The person's branch, index and files are untouched; the campaign branch has two commits.
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert git(repo, "status", "--porcelain").strip() == "?? candidate.py"
    log = git(repo, "log", "--format=%s", branch_name("cpu-example")).splitlines()
    assert log == ["cpu-example: 3.000x over the baseline (was 1.500x)", "cpu-example: 1.500x over the baseline", "start"]
    shown = git(repo, "show", f"{branch_name('cpu-example')}:candidate.py")
    assert shown == "# version 2\n"
    # Outputs: CSV rows in order, a PNG.
    with open(tmp_path / "out" / "leaderboard.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["status"] for r in rows] == ["correct", "incorrect", "correct", "correct"]
    assert [r["best_speedup"] for r in rows] == ["1.5", "1.5", "3.0", "3.0"] and rows[1]["speedup"] == ""
    assert (tmp_path / "out" / "speedup.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Resume: a new campaign replays the recorded entries and goes on with the same board.
    with open(sink.path, "ab") as fh:
        fh.write(b'{"n": 5, "evaluation": {"cand')  # a torn last line from a kill -9
    again = Campaign(spec, repo, tmp_path / "out", sink=sink, evaluator=scripted_evaluator(results[4:]))
    again.replay(sink.load())
    assert again.board.render() == camp.board.render()
    cand.write_text("# version 4\n")
    assert again.evaluate(tool_calls=50).commit is None  # refused
    cand.write_text("# version 5\n")
    e = again.evaluate(tool_calls=60)
    assert e.commit and e.n == 6 and again.board.best.evaluation.speedup == 4.5
    assert "new best: kept as commit" in summary(e, again.board)
    parent = pygit2.Repository(str(repo)).get(e.commit).parents[0]
    assert str(parent.id) == commits[2]


def test_render_lists_best_first_and_says_why_failures_failed():
    board = Leaderboard()
    ok = Evaluation("c.py", "a" * 64, "correct", timing="wall_clock", speedup=2.0, candidate_us=5.0, baseline_us=10.0, tool_calls=3)
    bad = Evaluation("c.py", "b" * 64, "incorrect", "n=1 float32: output 0: relative RMS error 1e-1", tool_calls=5)
    board.add(bad)
    board.add(ok, "c" * 40)
    lines = board.render().splitlines()
    assert "2.000x" in lines[1] and "commit cccccccccccc" in lines[1]
    assert "relative RMS error" in lines[2] and "x" not in lines[2].split()[3]


@pytest.mark.parametrize("n", [0, 1, 30])
def test_plot_writes_a_png_for_any_board(tmp_path, n):
    board = Leaderboard()
    for i in range(n):
        board.add(Evaluation("c.py", f"{i:064d}", "correct" if i % 3 else "incorrect", timing="wall_clock",
                             speedup=1 + i / 10 if i % 3 else None, tool_calls=i * 4))
    png = board.plot(tmp_path / f"p{n}.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_a_speedup_within_the_noise_is_not_a_new_best():
    """The fresh user's untouched candidate, timed at 1.046x with +-6 % noise, was committed
    as a new best; a gain must beat the best so far (the baseline before any) by more than
    the measurement's noise and at least 1 %."""
    def ev(speedup, noise=None):
        return Evaluation("c.py", "a" * 64, "correct", timing="wall_clock", speedup=speedup, noise=noise)

    board = Leaderboard()
    assert not board.improves(ev(1.046, 0.06)) and not board.improves(ev(1.005)) and not board.improves(ev(0.7))
    assert board.improves(ev(1.2, 0.05))
    board.add(ev(1.2, 0.05))
    assert not board.improves(ev(1.25, 0.05)) and board.improves(ev(1.3, 0.05)) and board.improves(ev(1.22, 0.0))


def test_the_noise_is_the_spread_of_the_paired_ratios():
    from musec.agents.kernel_opt.measure import ratio_spread

    assert ratio_spread([1.0] * 8, [2.0] * 8) == 0.0
    assert ratio_spread([1.0, 1.0], [1.0, 3.0]) == 0.0  # too few rounds to tell
    wide = ratio_spread([1.0] * 8, [0.8, 1.2, 0.9, 1.1, 0.8, 1.2, 0.9, 1.1])
    assert 0.1 < wide < 0.2
