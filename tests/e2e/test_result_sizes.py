"""End to end: a tool result's line on the terminal and in ``musec log`` gives the real
size of what the tool produced, and how much of it the model saw, when the model saw part
of it (fresh-user s8 H4: ``seq 3000000`` showed as "5,092 lines")."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import Musec


def _run(musec: Musec, repo: Path, tmp_path: Path, calls: list[dict]) -> tuple[str, list[dict]]:
    script = tmp_path / "sizes.json"
    script.write_text(json.dumps({"turns": [[c] for c in calls] + [[{"text": "done"}]]}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json", "go", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    session_id = json.loads(proc.stdout)["session_id"]
    log = musec("log", session_id, "--json")
    assert log.returncode == 0, log.stderr
    return session_id, [json.loads(line) for line in log.stdout.splitlines()]


def _summaries(musec: Musec, session_id: str) -> list[str]:
    proc = musec("log", session_id)
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stdout.splitlines() if " tool_finished " in line]


def test_a_huge_command_output_shows_its_real_size_and_what_the_model_saw(musec: Musec, buggy_repo: Path,
                                                                           tmp_path: Path) -> None:
    sid, events = _run(musec, buggy_repo, tmp_path, [
        {"tool": "bash", "input": {"command": "seq 1 300000"}},
        {"tool": "bash", "input": {"command": "seq 1 3"}},
    ])
    big, small = [e for e in events if e["type"] == "tool_finished"]
    assert big["whole_lines"] == 300_000 and big["whole_bytes"] == len("".join(f"{i}\n" for i in range(1, 300_001)))
    assert "whole_lines_at_least" not in big
    assert "whole_lines" not in small and "whole_bytes" not in small  # the model saw it whole
    seen = len(big["content"].splitlines())
    assert seen < 10_000
    lines = _summaries(musec, sid)
    assert lines[0].endswith(f"bash exit 0 · 300,000 lines, the model saw {seen:,}"), lines[0]
    assert lines[1].endswith("bash exit 0 · 4 lines"), lines[1]  # 1 2 3 and the exit status


def test_a_result_over_the_budget_counts_the_whole_result(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    (musec.home / "config").mkdir(parents=True, exist_ok=True)
    (musec.home / "config" / "config.toml").write_text("[context]\ntool_output_tokens = 500\n")
    (buggy_repo / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 1_001)))
    sid, events = _run(musec, buggy_repo, tmp_path, [{"tool": "read_file", "input": {"path": "big.txt"}}])
    (finished,) = [e for e in events if e["type"] == "tool_finished"]
    assert finished["whole_lines"] == 1_000  # the read lines, not those of the cut text
    seen = len(finished["content"].splitlines())
    assert seen < 100
    assert _summaries(musec, sid)[0].endswith(f"read_file 1,000 lines, the model saw {seen:,}")


def test_read_file_glob_and_grep_say_what_the_model_did_not_see(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    (buggy_repo / "long.txt").write_text("".join(f"needle {i}\n" for i in range(1, 50_001)))
    many = buggy_repo / "many"
    many.mkdir()
    for i in range(250):
        (many / f"f{i}.txt").write_text("x\n")
    sid, events = _run(musec, buggy_repo, tmp_path, [
        {"tool": "read_file", "input": {"path": "long.txt", "limit": 10}},
        {"tool": "glob", "input": {"pattern": "many/*.txt"}},
        {"tool": "grep", "input": {"pattern": "needle", "path": "long.txt"}},
    ])
    read, listed, found = [e for e in events if e["type"] == "tool_finished"]
    assert read["whole_lines"] == 50_000 and listed["whole_lines"] == 250
    assert found["whole_lines_at_least"] is True and found["whole_lines"] >= len(found["content"].splitlines()) - 1
    lines = _summaries(musec, sid)
    assert lines[0].endswith(f"50,000 lines, the model saw {len(read['content'].splitlines()):,}"), lines[0]
    assert lines[1].endswith(f"250 lines, the model saw {len(listed['content'].splitlines()):,}"), lines[1]
    assert re.search(r"grep over [\d,]+ lines, the model saw [\d,]+$", lines[2]), lines[2]
